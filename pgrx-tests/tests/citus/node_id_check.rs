//! One call on the Citus coordinator (`snowflake_citus_node_ids()`) checks every node's
//! `snowflake_id.node_id`: it reports them all, and names the nodes that share one or lack one.

use snowflake_id_cluster_tests::citus::{CitusCluster, COORDINATOR_NODE, WORKER_NODES};
use snowflake_id_cluster_tests::fixtures::failure;
use snowflake_id_cluster_tests::Client;

#[test]
fn node_ids_are_checked_across_the_cluster_in_one_call() {
    let mut cluster = CitusCluster::start();
    let mut coordinator = cluster.coordinator();
    coordinator
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let report = |client: &mut Client| -> Vec<(i32, i32)> {
        client
            .query(
                "SELECT nodeport, node_id FROM snowflake_citus_node_ids()",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    };
    let mut expected: Vec<(i32, i32)> = cluster
        .nodes()
        .zip([COORDINATOR_NODE].iter().chain(&WORKER_NODES))
        .map(|(node, &node_id)| (i32::from(node.port()), node_id))
        .collect();
    expected.sort();
    let mut reported = report(&mut coordinator);
    reported.sort();
    assert_eq!(reported, expected);

    // Two nodes with one id: the error names both.
    let [first, second] = [cluster.workers[0].port(), cluster.workers[1].port()];
    cluster.workers[1].stop("fast");
    cluster.workers[1].append_config(&format!("snowflake_id.node_id = {}", WORKER_NODES[0]));
    cluster.workers[1].start();
    let (code, message, hint) =
        failure(&mut coordinator, "SELECT * FROM snowflake_citus_node_ids()");
    assert_eq!(code, "55000", "{message}");
    assert!(
        message.contains(&format!(
            "snowflake_id.node_id = {} is set on more than one node",
            WORKER_NODES[0]
        )) && message.contains(&format!("127.0.0.1:{first}"))
            && message.contains(&format!("127.0.0.1:{second}")),
        "{message}"
    );
    assert!(hint.contains("its own snowflake_id.node_id"), "{hint}");

    // A node without one: named too.
    cluster.workers[1].stop("fast");
    cluster.workers[1].append_config("snowflake_id.node_id = -1");
    cluster.workers[1].start();
    let (code, message, _) = failure(&mut coordinator, "SELECT * FROM snowflake_citus_node_ids()");
    assert_eq!(code, "55000", "{message}");
    assert!(
        message.contains(&format!(
            "snowflake_id.node_id is not set on 127.0.0.1:{second}"
        )),
        "{message}"
    );
    println!("node id check: {reported:?}; a shared id and an unset one are named");
}
