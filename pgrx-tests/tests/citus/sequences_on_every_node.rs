//! Sequences made on the Citus coordinator exist on every node: created, rolled back, dropped,
//! refused on a worker, clashing with a worker's own layout, and on the worker added later.

use snowflake_id_cluster_tests::citus::{add_worker, start_node, CitusCluster, LATER_WORKER_NODE};
use snowflake_id_cluster_tests::fixtures::{column, count, failure, fingerprint};

/// The fingerprint of sequence `name` on every node, or None where the node does not have it.
fn fingerprints_everywhere(cluster: &CitusCluster, name: &str) -> Vec<Option<String>> {
    cluster
        .nodes()
        .map(|node| {
            node.connect()
                .query_opt(
                    "SELECT fingerprint FROM snowflake_sequences WHERE name = $1",
                    &[&name],
                )
                .unwrap()
                .map(|row| row.get(0))
        })
        .collect()
}

#[test]
fn sequences_made_on_the_coordinator_exist_on_every_node_also_one_added_later() {
    let mut cluster = CitusCluster::start();
    let mut coordinator = cluster.coordinator();
    // The sharding guide's setup: the extension and the sequence, on the coordinator only.
    coordinator
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('events', preset => 'sharded');",
        )
        .unwrap();
    let expected = fingerprint(&mut coordinator, "events");
    assert_eq!(
        fingerprints_everywhere(&cluster, "events"),
        vec![Some(expected.clone()); 3],
        "the coordinator's sequence on every node"
    );
    // One query on the coordinator, as the guide shows it.
    let distinct = count(
        &mut coordinator,
        "SELECT count(DISTINCT result) FROM run_command_on_all_nodes(
             $$SELECT fingerprint FROM snowflake_sequences WHERE name = 'events'$$)",
    );
    assert_eq!(distinct, 1);

    // Transactional: a rolled-back create reaches no node, a committed drop leaves none.
    coordinator
        .batch_execute(
            "BEGIN;
             SELECT snowflake_create_sequence('rolled_back', preset => 'sharded');
             ROLLBACK;
             SELECT snowflake_create_sequence('dropped', preset => 'js53');",
        )
        .unwrap();
    assert_eq!(
        fingerprints_everywhere(&cluster, "rolled_back"),
        vec![None; 3]
    );
    assert!(fingerprints_everywhere(&cluster, "dropped")
        .iter()
        .all(Option::is_some));
    coordinator
        .batch_execute("SELECT snowflake_drop_sequence('dropped')")
        .unwrap();
    assert_eq!(fingerprints_everywhere(&cluster, "dropped"), vec![None; 3]);

    // A worker takes its sequences from the coordinator: it refuses to change them itself.
    let mut worker = cluster.workers[0].connect();
    let (code, message, hint) = failure(
        &mut worker,
        "SELECT snowflake_create_sequence('local_only', preset => 'sharded')",
    );
    assert_eq!(code, "0A000", "{message}");
    assert!(
        message.contains("must run on the Citus coordinator"),
        "{message}"
    );
    assert!(hint.contains("coordinator"), "{hint}");
    let (code, message, _) = failure(&mut worker, "SELECT snowflake_drop_sequence('events')");
    assert_eq!(code, "0A000", "{message}");

    // A worker whose own sequence of that name has another layout makes the coordinator's
    // create fail on every node, the coordinator included.
    worker
        .batch_execute(
            "SELECT snowflake_citus_receive_sequence('clash', 'classic', 1735689600000000, 1000,
                                                     41, 0, 10, 12, 0)",
        )
        .unwrap();
    let (code, message, _) = failure(
        &mut coordinator,
        "SELECT snowflake_create_sequence('clash', preset => 'sharded')",
    );
    assert_eq!(code, "42710", "{message}");
    assert!(
        message.contains("another layout")
            && message.contains(&format!("127.0.0.1:{}", cluster.workers[0].port())),
        "{message}"
    );
    assert_eq!(
        count(
            &mut coordinator,
            "SELECT count(*) FROM snowflake_sequences WHERE name = 'clash'"
        ),
        0
    );
    worker
        .batch_execute("SELECT snowflake_citus_forget_sequence('clash')")
        .unwrap();

    // A worker added later gets every sequence in the transaction that adds it.
    let later = start_node(LATER_WORKER_NODE);
    add_worker(&mut coordinator, &later);
    cluster.workers.push(later);
    assert_eq!(
        fingerprints_everywhere(&cluster, "events"),
        vec![Some(expected); 4],
        "the sequence on the worker added with citus_add_node"
    );
    let later_sequences: Vec<String> = column(
        &mut cluster.workers[2].connect(),
        "SELECT name FROM snowflake_sequences ORDER BY name",
    );
    assert_eq!(later_sequences, ["default", "events"]);
    println!(
        "sequence 'events' on 4 nodes with fingerprint {}",
        fingerprint(&mut coordinator, "events")
    );
}
