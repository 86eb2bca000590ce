//! Citus: snowflake IDs on the distributed tables of a real Citus cluster (docs/sharding.md,
//! "Citus", whose SQL this is). A coordinator and two workers on 127.0.0.1, each with its own
//! `snowflake.node_id`, Citus and snowflake_id preloaded in that order; a third worker joins
//! later. Sequences made on the coordinator exist on every node (created, rolled back, dropped,
//! and on the worker added later); every path Citus writes rows by gives unique IDs that decode
//! to the node that evaluated the default; shard moves and a rebalance keep every ID; a child row
//! lands on its parent's shard; one call on the coordinator checks every node's node id.
//!
//! Built only with the `citus` feature: the test command runs it on every major, with the Citus
//! it builds for each (scripts/install-citus.sh: 14.0.1 for 17 and 18, 13.2.2 for 15). The tests
//! print what they measured
//! (`--nocapture`).

use std::collections::{BTreeMap, HashSet};
use std::thread;
use std::time::Instant;

use snowflake_id_cluster_tests::fixtures::{column, count, fingerprint, rate};
use snowflake_id_cluster_tests::{error_parts, Client, Cluster, Row};

/// `postgresql.conf` of every Citus node. Citus must be loaded first; its nodes talk to each
/// other over TCP on 127.0.0.1 (initdb's pg_hba trusts it); its two-phase commit needs prepared
/// transactions.
const CITUS_SETTINGS: [&str; 3] = [
    "shared_preload_libraries = 'citus,snowflake_id'",
    "listen_addresses = '127.0.0.1'",
    "max_prepared_transactions = 100",
];
const COORDINATOR_NODE: i32 = 1;
const WORKER_NODES: [i32; 2] = [2, 3];
/// The worker that joins the running cluster (`citus_add_node`).
const LATER_WORKER_NODE: i32 = 4;

/// A coordinator and its workers.
struct CitusCluster {
    coordinator: Cluster,
    workers: Vec<Cluster>,
}

/// Starts a Citus node with `snowflake.node_id = node_id`, Citus created in its database.
fn start_node(node_id: i32) -> Cluster {
    let mut builder = Cluster::builder().setting(&format!("snowflake.node_id = {node_id}"));
    for line in CITUS_SETTINGS {
        builder = builder.setting(line);
    }
    let cluster = builder.start();
    cluster
        .connect()
        .batch_execute("CREATE EXTENSION citus")
        .unwrap();
    cluster
}

/// Adds `worker` to the cluster of `coordinator` (what the sharding guide shows).
fn add_worker(coordinator: &mut Client, worker: &Cluster) {
    coordinator
        .execute(
            "SELECT citus_add_node('127.0.0.1', $1)",
            &[&i32::from(worker.port())],
        )
        .unwrap_or_else(|error| {
            panic!(
                "citus_add_node: {:?}\n{}",
                error_parts(&error),
                worker.log_tail()
            )
        });
}

impl CitusCluster {
    /// Starts the coordinator (node id 1) and two workers (2, 3) at once and forms the cluster.
    fn start() -> CitusCluster {
        let mut nodes: Vec<Cluster> = thread::scope(|scope| {
            let starting: Vec<_> = [COORDINATOR_NODE]
                .iter()
                .chain(&WORKER_NODES)
                .map(|&node_id| scope.spawn(move || start_node(node_id)))
                .collect();
            starting
                .into_iter()
                .map(|node| node.join().unwrap())
                .collect()
        });
        let coordinator = nodes.remove(0);
        let mut client = coordinator.connect();
        client
            .execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', $1)",
                &[&i32::from(coordinator.port())],
            )
            .unwrap();
        for worker in &nodes {
            add_worker(&mut client, worker);
        }
        CitusCluster {
            coordinator,
            workers: nodes,
        }
    }

    /// A session on the coordinator.
    fn coordinator(&self) -> Client {
        self.coordinator.connect()
    }

    /// Every node, the coordinator first.
    fn nodes(&self) -> impl Iterator<Item = &Cluster> {
        std::iter::once(&self.coordinator).chain(&self.workers)
    }
}

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

/// The SQLSTATE and message of `sql`'s error.
fn failure(client: &mut Client, sql: &str) -> (String, String, String) {
    let error = client
        .batch_execute(sql)
        .expect_err(&format!("{sql} must fail"));
    error_parts(&error)
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
    cluster.workers[1].append_config(&format!("snowflake.node_id = {}", WORKER_NODES[0]));
    cluster.workers[1].start();
    let (code, message, hint) =
        failure(&mut coordinator, "SELECT * FROM snowflake_citus_node_ids()");
    assert_eq!(code, "55000", "{message}");
    assert!(
        message.contains(&format!(
            "snowflake.node_id = {} is set on more than one node",
            WORKER_NODES[0]
        )) && message.contains(&format!("127.0.0.1:{first}"))
            && message.contains(&format!("127.0.0.1:{second}")),
        "{message}"
    );
    assert!(hint.contains("its own snowflake.node_id"), "{hint}");

    // A node without one: named too.
    cluster.workers[1].stop("fast");
    cluster.workers[1].append_config("snowflake.node_id = -1");
    cluster.workers[1].start();
    let (code, message, _) = failure(&mut coordinator, "SELECT * FROM snowflake_citus_node_ids()");
    assert_eq!(code, "55000", "{message}");
    assert!(
        message.contains(&format!(
            "snowflake.node_id is not set on 127.0.0.1:{second}"
        )),
        "{message}"
    );
    println!("node id check: {reported:?}; a shared id and an unset one are named");
}

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
