//! Every path Citus writes rows by (through the coordinator, `INSERT ... SELECT` pushed down or
//! repartitioned, COPY, reference tables, directly on the workers) gives unique IDs that decode
//! to the node that evaluated the default; an order's lines land on its shard; a shard move, a
//! new worker and a rebalance keep every row and ID, and new rows after them stay unique.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use snowflake_id_cluster_tests::citus::{
    add_worker, start_node, CitusCluster, COORDINATOR_NODE, LATER_WORKER_NODE, WORKER_NODES,
};
use snowflake_id_cluster_tests::fixtures::{column, count, rate};
use snowflake_id_cluster_tests::{Client, Row};

/// The sharding guide's Citus schema, run on the coordinator: tables distributed by a tenant
/// column, by the snowflake ID itself, a child table colocated with its parent, and a reference
/// table, all taking their IDs from one sequence.
const SCHEMA: &str = "
    CREATE EXTENSION snowflake_id;
    SELECT snowflake_create_sequence('events', preset => 'sharded');

    -- Distributed by a tenant column (the primary key must contain it).
    CREATE TABLE events (
        tenant_id bigint NOT NULL,
        id        bigint NOT NULL DEFAULT snowflake_nextval('events'),
        path      text NOT NULL,
        PRIMARY KEY (tenant_id, id)
    );
    SELECT create_distributed_table('events', 'tenant_id');
    CREATE TABLE events_archive (
        tenant_id bigint NOT NULL,
        id        bigint NOT NULL DEFAULT snowflake_nextval('events'),
        path      text NOT NULL,
        PRIMARY KEY (tenant_id, id)
    );
    SELECT create_distributed_table('events_archive', 'tenant_id', colocate_with => 'events');

    -- Distributed by the snowflake ID.
    CREATE TABLE orders (
        id          bigint PRIMARY KEY DEFAULT snowflake_nextval('events'),
        customer_id bigint NOT NULL,
        path        text NOT NULL
    );
    SELECT create_distributed_table('orders', 'id');
    -- An order's lines, distributed by their parent's ID: on the parent's shard.
    CREATE TABLE order_lines (
        order_id bigint NOT NULL,
        id       bigint NOT NULL DEFAULT snowflake_nextval('events'),
        path     text NOT NULL,
        PRIMARY KEY (order_id, id)
    );
    SELECT create_distributed_table('order_lines', 'order_id', colocate_with => 'orders');

    -- A reference table: a copy on every node.
    CREATE TABLE tags (
        id   bigint PRIMARY KEY DEFAULT snowflake_nextval('events'),
        path text NOT NULL
    );
    SELECT create_reference_table('tags');";

/// The tables the write paths fill, each with an `id` and a `path` column.
const TABLES: [&str; 5] = ["events", "events_archive", "orders", "order_lines", "tags"];

/// One write path: what it ran, into which table, where it was sent, and how many rows.
struct WritePath {
    path: String,
    table: &'static str,
    rows: i64,
    elapsed: std::time::Duration,
}

/// Runs `work` (which writes rows whose `path` column is `path`) and counts the rows it wrote.
fn write_path(
    paths: &mut Vec<WritePath>,
    client: &mut Client,
    table: &'static str,
    path: &str,
    work: impl FnOnce(&mut Client),
) {
    let started = Instant::now();
    work(client);
    let elapsed = started.elapsed();
    let rows = client
        .query_one(
            &format!("SELECT count(*) FROM {table} WHERE path = $1"),
            &[&path],
        )
        .unwrap()
        .get(0);
    paths.push(WritePath {
        path: path.to_owned(),
        table,
        rows,
        elapsed,
    });
}

/// The node fields of the IDs each path wrote: path -> {node: rows}. Decoding runs on the
/// workers (Citus pushes the query down to the shards).
fn nodes_by_path(client: &mut Client) -> BTreeMap<String, BTreeMap<i32, i64>> {
    let mut nodes: BTreeMap<String, BTreeMap<i32, i64>> = BTreeMap::new();
    let select = "SELECT path, (snowflake_decode(id, 'events')).node, count(*) FROM {table} \
                  GROUP BY 1, 2";
    for (_, row) in rows_of_every_table(client, select) {
        *nodes
            .entry(row.get(0))
            .or_default()
            .entry(row.get(1))
            .or_default() += row.get::<_, i64>(2);
    }
    nodes
}

/// Every (table, id, path) stored, sorted: what a data move must keep.
fn stored_rows(client: &mut Client) -> Vec<(String, i64, String)> {
    let mut rows: Vec<_> = rows_of_every_table(client, "SELECT id, path FROM {table}")
        .into_iter()
        .map(|(table, row)| (table.to_owned(), row.get(0), row.get(1)))
        .collect();
    rows.sort();
    rows
}

/// Runs `select` with `{table}` replaced by each of the tables; returns every row with its
/// table.
fn rows_of_every_table(client: &mut Client, select: &str) -> Vec<(&'static str, Row)> {
    TABLES
        .iter()
        .flat_map(|table| {
            let rows = client
                .query(&select.replace("{table}", table), &[])
                .unwrap();
            rows.into_iter().map(move |row| (*table, row))
        })
        .collect()
}

/// Asserts that no ID repeats across all tables but the reference table's copies; returns the
/// number of IDs.
fn assert_unique_ids(client: &mut Client) -> usize {
    let mut seen = HashSet::new();
    let mut duplicates = Vec::new();
    for table in TABLES {
        for id in column::<i64>(client, &format!("SELECT id FROM {table}")) {
            if !seen.insert(id) {
                duplicates.push(id);
            }
        }
    }
    assert!(
        duplicates.is_empty(),
        "{} duplicate IDs, e.g. {:?}",
        duplicates.len(),
        &duplicates[..duplicates.len().min(5)]
    );
    seen.len()
}

/// `EXPLAIN` of `query` on the coordinator: how Citus runs an INSERT … SELECT.
fn insert_select_method(client: &mut Client, query: &str) -> String {
    let plan: Vec<String> = column(client, &format!("EXPLAIN (COSTS OFF) {query}"));
    plan.iter()
        .find_map(|line| line.split("INSERT/SELECT method: ").nth(1))
        .map_or_else(
            || format!("no INSERT/SELECT method in {plan:?}"),
            str::to_owned,
        )
}

#[test]
fn every_write_path_gives_unique_ids_that_decode_to_where_the_default_ran() {
    let mut cluster = CitusCluster::start();
    let mut coordinator = cluster.coordinator();
    coordinator.batch_execute(SCHEMA).unwrap();
    let mut paths = Vec::new();

    // Through the coordinator.
    write_path(
        &mut paths,
        &mut coordinator,
        "events",
        "single-row INSERT",
        |client| {
            let insert = client
                .prepare("INSERT INTO events (tenant_id, path) VALUES ($1, 'single-row INSERT')")
                .unwrap();
            for tenant in 0..3_000i64 {
                client.execute(&insert, &[&(tenant % 500)]).unwrap();
            }
        },
    );
    write_path(
        &mut paths,
        &mut coordinator,
        "events",
        "multi-row VALUES",
        |client| {
            for statement in 0..200i64 {
                let values: Vec<String> = (0..100)
                    .map(|row| format!("({}, 'multi-row VALUES')", (statement * 100 + row) % 500))
                    .collect();
                client
                    .batch_execute(&format!(
                        "INSERT INTO events (tenant_id, path) VALUES {}",
                        values.join(", ")
                    ))
                    .unwrap();
            }
        },
    );
    // Between colocated tables Citus would push an INSERT ... SELECT down to the shards, but its
    // planner refuses volatile functions there (the DEFAULT is one), so both forms repartition.
    let pushdown = "INSERT INTO events_archive (tenant_id, path)
                    SELECT tenant_id, 'INSERT ... SELECT, colocated' FROM events
                    WHERE path = 'multi-row VALUES'";
    let pushdown_method = insert_select_method(&mut coordinator, pushdown);
    write_path(
        &mut paths,
        &mut coordinator,
        "events_archive",
        "INSERT ... SELECT, colocated",
        |client| {
            client.batch_execute(pushdown).unwrap();
        },
    );
    let repartitioned = "INSERT INTO events_archive (tenant_id, path)
                         SELECT (id >> 8) % 500, 'INSERT ... SELECT, repartitioned' FROM events
                         WHERE path = 'multi-row VALUES'";
    let repartition_method = insert_select_method(&mut coordinator, repartitioned);
    write_path(
        &mut paths,
        &mut coordinator,
        "events_archive",
        "INSERT ... SELECT, repartitioned",
        |client| {
            client.batch_execute(repartitioned).unwrap();
        },
    );
    write_path(&mut paths, &mut coordinator, "events", "COPY", |client| {
        use std::io::Write;
        let mut copy = client
            .copy_in("COPY events (tenant_id, path) FROM STDIN")
            .unwrap();
        let mut data = String::new();
        for row in 0..50_000 {
            data.push_str(&format!("{}\tCOPY\n", row % 500));
        }
        copy.write_all(data.as_bytes()).unwrap();
        copy.finish().unwrap();
    });
    write_path(
        &mut paths,
        &mut coordinator,
        "orders",
        "orders by ID, INSERT ... SELECT",
        |client| {
            client
                .batch_execute(
                    "INSERT INTO orders (customer_id, path)
                 SELECT n, 'orders by ID, INSERT ... SELECT' FROM generate_series(1, 20000) AS n",
                )
                .unwrap();
        },
    );
    write_path(
        &mut paths,
        &mut coordinator,
        "orders",
        "orders by ID, single-row INSERT",
        |client| {
            let insert = client
            .prepare("INSERT INTO orders (customer_id, path) VALUES ($1, 'orders by ID, single-row INSERT')")
            .unwrap();
            for customer in 0..1_000i64 {
                client.execute(&insert, &[&customer]).unwrap();
            }
        },
    );
    write_path(
        &mut paths,
        &mut coordinator,
        "order_lines",
        "order lines, INSERT ... SELECT",
        |client| {
            client
                .batch_execute(
                    "INSERT INTO order_lines (order_id, path)
                 SELECT id, 'order lines, INSERT ... SELECT' FROM orders",
                )
                .unwrap();
        },
    );
    write_path(
        &mut paths,
        &mut coordinator,
        "tags",
        "reference table, INSERT ... SELECT",
        |client| {
            client
                .batch_execute(
                    "INSERT INTO tags (path)
                 SELECT 'reference table, INSERT ... SELECT' FROM generate_series(1, 10000)",
                )
                .unwrap();
        },
    );

    // Directly on the workers (Citus lets any node with metadata take writes).
    for (index, worker) in cluster.workers.iter().enumerate() {
        let mut client = worker.connect();
        let path = format!("INSERT on worker {}", WORKER_NODES[index]);
        write_path(&mut paths, &mut client, "events", &path, |client| {
            client
                .execute(
                    "INSERT INTO events (tenant_id, path)
                     SELECT n % 500, $1 FROM generate_series(1, 20000) AS n",
                    &[&path],
                )
                .unwrap();
        });
        let path = format!("reference table, INSERT on worker {}", WORKER_NODES[index]);
        write_path(&mut paths, &mut client, "tags", &path, |client| {
            client
                .execute(
                    "INSERT INTO tags (path) SELECT $1 FROM generate_series(1, 1000)",
                    &[&path],
                )
                .unwrap();
        });
    }

    let nodes = nodes_by_path(&mut coordinator);
    let total: i64 = paths.iter().map(|path| path.rows).sum();
    println!("INSERT ... SELECT methods: pushed down: {pushdown_method}; repartitioned: {repartition_method}");
    println!(
        "{:<44} {:<15} {:>8}  {:<22} timing",
        "write path", "table", "rows", "node of the IDs"
    );
    for path in &paths {
        println!(
            "{:<44} {:<15} {:>8}  {:<22} {}",
            path.path,
            path.table,
            path.rows,
            format!("{:?}", nodes.get(&path.path)),
            rate(path.rows, path.elapsed)
        );
    }
    assert_eq!(
        (pushdown_method.as_str(), repartition_method.as_str()),
        ("repartition", "repartition")
    );
    // Where each path evaluates the DEFAULT: the coordinator (node 1) for what it routes itself,
    // the worker that runs the statement, and for INSERT ... SELECT the workers that hold the
    // target's shards.
    let (coordinator_node, workers) = (vec![COORDINATOR_NODE], WORKER_NODES.to_vec());
    for path in &paths {
        let expected = match path.path.as_str() {
            "INSERT ... SELECT, colocated"
            | "INSERT ... SELECT, repartitioned"
            | "order lines, INSERT ... SELECT" => workers.clone(),
            "INSERT on worker 2" | "reference table, INSERT on worker 2" => vec![WORKER_NODES[0]],
            "INSERT on worker 3" | "reference table, INSERT on worker 3" => vec![WORKER_NODES[1]],
            _ => coordinator_node.clone(),
        };
        let found: Vec<i32> = nodes[&path.path].keys().copied().collect();
        assert_eq!(found, expected, "node of the IDs of '{}'", path.path);
    }
    let unique = assert_unique_ids(&mut coordinator);
    println!(
        "{total} rows over {} write paths, {unique} distinct IDs, 0 duplicates",
        paths.len()
    );
    assert!(total >= 200_000, "only {total} rows");
    assert_eq!(unique as i64, total);
    assert_lines_on_their_orders_shard(&mut coordinator);

    // Data moves: one shard group moved to the other worker, then a new worker and a rebalance.
    let before = stored_rows(&mut coordinator);
    let started = Instant::now();
    let (shard, from): (i64, i32) = {
        let row = coordinator
            .query_one(
                "SELECT shardid, nodeport FROM citus_shards
                 WHERE table_name = 'events'::regclass ORDER BY shardid LIMIT 1",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    let to = cluster
        .workers
        .iter()
        .map(|worker| i32::from(worker.port()))
        .find(|&port| port != from)
        .unwrap();
    coordinator
        .execute(
            "SELECT citus_move_shard_placement($1, '127.0.0.1', $2, '127.0.0.1', $3,
                                               shard_transfer_mode => 'block_writes')",
            &[&shard, &from, &to],
        )
        .unwrap();
    let later = start_node(LATER_WORKER_NODE);
    add_worker(&mut coordinator, &later);
    cluster.workers.push(later);
    coordinator
        .batch_execute("SELECT rebalance_table_shards(shard_transfer_mode => 'block_writes')")
        .unwrap();
    let moved_in = count(
        &mut coordinator,
        &format!(
            "SELECT count(*) FROM citus_shards WHERE nodeport = {}",
            cluster.workers[2].port()
        ),
    );
    println!(
        "moved shard {shard} from port {from} to {to}; added worker {LATER_WORKER_NODE}, \
         rebalanced: {moved_in} shards on it ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    assert!(
        moved_in > 0,
        "the rebalance moved no shard to the new worker"
    );
    assert!(
        stored_rows(&mut coordinator) == before,
        "rows or IDs changed in the moves"
    );
    assert_lines_on_their_orders_shard(&mut coordinator);

    // New rows after the moves: through the coordinator and on every worker, the new one too.
    let mut after_paths = Vec::new();
    write_path(
        &mut after_paths,
        &mut coordinator,
        "events",
        "after moves: coordinator",
        |client| {
            client
                .batch_execute(
                    "INSERT INTO events (tenant_id, path)
                 SELECT n % 500, 'after moves: coordinator' FROM generate_series(1, 5000) AS n;
                 INSERT INTO orders (customer_id, path)
                 SELECT n, 'after moves: coordinator' FROM generate_series(1, 5000) AS n;",
                )
                .unwrap();
        },
    );
    for (index, worker) in cluster.workers.iter().enumerate() {
        let node_id = [WORKER_NODES[0], WORKER_NODES[1], LATER_WORKER_NODE][index];
        let path = format!("after moves: worker {node_id}");
        write_path(
            &mut after_paths,
            &mut worker.connect(),
            "events",
            &path,
            |client| {
                client
                    .execute(
                        "INSERT INTO events (tenant_id, path)
                     SELECT n % 500, $1 FROM generate_series(1, 5000) AS n",
                        &[&path],
                    )
                    .unwrap();
            },
        );
    }
    let nodes = nodes_by_path(&mut coordinator);
    for path in &after_paths {
        println!(
            "{:<44} {:>8}  {:?}",
            path.path,
            path.rows,
            nodes.get(&path.path)
        );
    }
    for (path, node) in [
        ("after moves: coordinator", COORDINATOR_NODE),
        ("after moves: worker 2", WORKER_NODES[0]),
        ("after moves: worker 3", WORKER_NODES[1]),
        ("after moves: worker 4", LATER_WORKER_NODE),
    ] {
        assert_eq!(
            nodes[path].keys().copied().collect::<Vec<_>>(),
            vec![node],
            "the IDs of '{path}'"
        );
    }
    let unique = assert_unique_ids(&mut coordinator);
    println!("after the moves: {unique} distinct IDs in all tables, 0 duplicates");
}

/// Every order line is on its order's shard: a join on the distribution columns runs shard by
/// shard (Citus pushes it down to each colocated pair), so it finds a line only where its
/// order is on the same shard, and the counts must match.
fn assert_lines_on_their_orders_shard(coordinator: &mut Client) {
    let lines = count(coordinator, "SELECT count(*) FROM order_lines");
    let joined = count(
        coordinator,
        "SELECT count(*) FROM order_lines l JOIN orders o ON o.id = l.order_id",
    );
    let plan: Vec<String> = column(
        coordinator,
        "EXPLAIN (COSTS OFF) SELECT count(*) FROM order_lines l JOIN orders o ON o.id = l.order_id",
    );
    assert!(lines > 0);
    assert_eq!(joined, lines, "lines not on their order's shard");
    assert!(
        !plan.iter().any(|line| line.contains("Repartition")),
        "the join must run per shard: {plan:?}"
    );
    // And where Citus keeps them: the line's shard and its order's shard are on one node.
    let same_node = count(
        coordinator,
        "WITH lines AS MATERIALIZED (SELECT order_id FROM order_lines)
         SELECT count(*) FROM lines l
         JOIN pg_dist_placement line_shard
           ON line_shard.shardid = get_shard_id_for_distribution_column('order_lines', l.order_id)
         JOIN pg_dist_placement order_shard
           ON order_shard.shardid = get_shard_id_for_distribution_column('orders', l.order_id)
         WHERE line_shard.groupid = order_shard.groupid",
    );
    assert_eq!(same_node, lines, "lines on another node than their order");
}
