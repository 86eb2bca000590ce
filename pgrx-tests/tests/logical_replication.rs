//! Bidirectional logical replication on PostgreSQL 15 between two nodes (docs/sharding.md,
//! "Recipe: bidirectional logical replication on PostgreSQL 15", whose SQL this is). Each node
//! publishes only the rows it made (a row filter on the node field), so no row loops back,
//! without PG16's `origin = none`. Both nodes insert, update and delete at the same time and
//! converge to the same rows with zero apply errors; an update made on a node that is not the
//! row's origin stays local. The test prints what it measured (`--nocapture`).

use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::{
    count, fingerprint, start_nodes_with_events_table, text,
};
use snowflake_id_cluster_tests::{wait_until, Client};

const REPLICA_NODES: [i32; 2] = [1, 2];
const ROWS_BEFORE_SUBSCRIBING: i64 = 500;
const BATCHES: i64 = 10;
const ROWS_PER_BATCH: i64 = 500;

/// Everything a node's copy of `events` holds, in one comparable value.
fn table_state(client: &mut Client) -> (i64, String) {
    let row = client
        .query_one(
            "SELECT count(*),
                    coalesce(md5(string_agg(id || ':' || origin || ':' || note, ',' ORDER BY id)), '')
             FROM events",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

#[test]
fn two_nodes_replicate_both_ways_without_loops_or_conflicts() {
    let (nodes, mut admins) = start_nodes_with_events_table(
        &REPLICA_NODES,
        &[
            "wal_level = logical",
            "max_replication_slots = 10",
            "max_wal_senders = 10",
        ],
        "origin int NOT NULL, n int NOT NULL, note text NOT NULL",
    );
    assert_eq!(
        fingerprint(&mut admins[0], "events"),
        fingerprint(&mut admins[1], "events")
    );
    // The node field sits above the worker, sequence and gene fields.
    let row = admins[0]
        .query_one(
            "SELECT worker_bits + sequence_bits + gene_bits, nodes - 1
             FROM snowflake_sequences WHERE name = 'events'",
            &[],
        )
        .unwrap();
    let (shift, mask): (i32, i64) = (row.get(0), row.get(1));
    assert_eq!(
        (shift, mask),
        (18, 63),
        "the guide's row filter assumes 'sharded'"
    );

    // Rows made before the subscriptions exist: the initial copy must respect the filters.
    for (admin, node) in admins.iter_mut().zip(REPLICA_NODES) {
        admin
            .execute(
                "INSERT INTO events (origin, n, note)
                 SELECT $1, n, 'before' FROM generate_series(1, $2::bigint) AS n",
                &[&node, &ROWS_BEFORE_SUBSCRIBING],
            )
            .unwrap();
    }

    // Each node publishes only the rows it made (node field = its node id), so a row applied
    // from the other node is never sent back: no loop, without PG16's origin = none.
    for (admin, node) in admins.iter_mut().zip(REPLICA_NODES) {
        admin
            .batch_execute(&format!(
                "CREATE PUBLICATION events_from_node{node} FOR TABLE events
                     WHERE (((id >> {shift}) & {mask}) = {node});"
            ))
            .unwrap();
    }
    // Subscribe one way, wait for the initial copy, then the other way: node 2's initial copy
    // of node 1's table then already holds node 2's rows, which the row filter must leave out.
    let synced = |client: &mut Client| {
        count(
            client,
            "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'",
        ) == 0
    };
    for (index, node) in REPLICA_NODES.iter().enumerate() {
        let other = 1 - index;
        let other_node = REPLICA_NODES[other];
        admins[index]
            .batch_execute(&format!(
                "CREATE SUBSCRIPTION events_from_node{other_node}
                     CONNECTION '{conninfo}'
                     PUBLICATION events_from_node{other_node};",
                conninfo = nodes[other].conninfo("postgres"),
            ))
            .unwrap_or_else(|error| panic!("subscription on node {node}: {error}"));
        assert!(
            wait_until(Duration::from_secs(60), || synced(&mut admins[index])),
            "initial table sync on node {node} did not finish\n{}",
            nodes[index].log_tail()
        );
    }
    for admin in &mut admins {
        let row = admin
            .query_one(
                "SELECT count(*),
                        (SELECT coalesce(sum(apply_error_count + sync_error_count), 0)::bigint
                         FROM pg_stat_subscription_stats)
                 FROM events",
                &[],
            )
            .unwrap();
        let (rows, errors): (i64, i64) = (row.get(0), row.get(1));
        assert_eq!(
            rows,
            2 * ROWS_BEFORE_SUBSCRIBING,
            "rows after the initial copies"
        );
        assert_eq!(errors, 0, "errors in the initial copies");
    }

    // Both nodes insert at the same time, two sessions each, in many transactions.
    let started = Instant::now();
    let writers: Vec<_> = nodes
        .iter()
        .zip(REPLICA_NODES)
        .flat_map(|(cluster, node)| [(cluster, node), (cluster, node)])
        .map(|(cluster, node)| {
            let mut client = cluster.connect();
            thread::spawn(move || {
                for _ in 0..BATCHES {
                    client
                        .execute(
                            "INSERT INTO events (origin, n, note)
                             SELECT $1, n, 'concurrent' FROM generate_series(1, $2::bigint) AS n",
                            &[&node, &ROWS_PER_BATCH],
                        )
                        .unwrap();
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    let insert_time = started.elapsed();
    // Each node updates and deletes some of its own rows.
    for (admin, node) in admins.iter_mut().zip(REPLICA_NODES) {
        admin
            .batch_execute(&format!(
                "UPDATE events SET note = 'updated on node {node}'
                     WHERE origin = {node} AND note = 'before' AND n <= 100;
                 DELETE FROM events WHERE origin = {node} AND n > 490 AND note = 'before';"
            ))
            .unwrap();
    }

    let writes_done = Instant::now();
    let per_node = ROWS_BEFORE_SUBSCRIBING - 10 + 2 * BATCHES * ROWS_PER_BATCH;
    let expected = per_node * REPLICA_NODES.len() as i64;
    let mut last = (table_state(&mut admins[0]), table_state(&mut admins[1]));
    let converged = wait_until(Duration::from_secs(60), || {
        last = (table_state(&mut admins[0]), table_state(&mut admins[1]));
        last.0 == last.1 && last.0 .0 == expected
    });
    let lag = writes_done.elapsed();
    assert!(
        converged,
        "nodes did not converge to {expected} rows: node 1 {:?}, node 2 {:?}\n{}\n{}",
        last.0,
        last.1,
        nodes[0].log_tail(),
        nodes[1].log_tail()
    );
    for admin in &mut admins {
        let row = admin
            .query_one(
                "SELECT count(*),
                        count(DISTINCT id),
                        count(*) FILTER (WHERE (snowflake_decode(id, 'events')).node <> origin),
                        count(*) FILTER (WHERE note LIKE 'updated on node %'),
                        (SELECT coalesce(sum(apply_error_count + sync_error_count), 0)::bigint
                         FROM pg_stat_subscription_stats)
                 FROM events",
                &[],
            )
            .unwrap();
        let (rows, distinct, wrong_node, updated, errors): (i64, i64, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
        assert_eq!((rows, distinct), (expected, expected));
        assert_eq!(wrong_node, 0, "rows whose decoded node is not their origin");
        assert_eq!(updated, 200, "updates replicated from their origin");
        assert_eq!(errors, 0, "replication apply or sync errors (conflicts)");
    }
    println!(
        "bidirectional logical replication: {} rows inserted on 2 nodes in {:.0} ms, both \
         converged to {expected} rows (same IDs and contents) {:.0} ms after the last write; \
         0 apply errors",
        2 * 2 * BATCHES * ROWS_PER_BATCH,
        insert_time.as_secs_f64() * 1e3,
        lag.as_secs_f64() * 1e3
    );

    // The rule that makes this loop-free: a row is changed only on the node that made it. An
    // update of node 1's row made on node 2 is not published (node 2 publishes node 2's rows).
    let id: i64 = admins[0]
        .query_one("SELECT min(id) FROM events WHERE origin = 1", &[])
        .unwrap()
        .get(0);
    admins[1]
        .execute(
            "UPDATE events SET note = 'changed on node 2' WHERE id = $1",
            &[&id],
        )
        .unwrap();
    let marker: i64 = admins[1]
        .query_one(
            "INSERT INTO events (origin, n, note) VALUES (2, 0, 'marker') RETURNING id",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(
        wait_until(Duration::from_secs(30), || count(
            &mut admins[0],
            &format!("SELECT count(*) FROM events WHERE id = {marker}")
        ) == 1),
        "marker row did not replicate"
    );
    let note = text(
        &mut admins[0],
        &format!("SELECT note FROM events WHERE id = {id}"),
    );
    assert_ne!(
        note, "changed on node 2",
        "a non-origin update was replicated"
    );
    println!("an update made on a non-origin node stays local (node 1 still has '{note}')");
}
