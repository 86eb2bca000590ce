//! Whole-cluster tests of multi-node setups (issue 5): several real clusters, each with its own
//! `snowflake.node_id`, whose IDs meet in one table — by copying, through a postgres_fdw
//! coordinator, by bidirectional logical replication, and by merging two databases. Every test
//! asserts zero conflicts. The SQL here is the SQL of docs-drafts/sharding-guide.md.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::{error_parts, wait_until, Client, Cluster, PgError};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Starts one cluster per entry at once (initdb dominates), with `snowflake.node_id` set when
/// the entry is `Some` and every line of `settings` added to postgresql.conf.
fn start_clusters(node_ids: &[Option<i32>], settings: &[&str]) -> Vec<Cluster> {
    thread::scope(|scope| {
        let starting: Vec<_> = node_ids
            .iter()
            .map(|node_id| {
                scope.spawn(move || {
                    let mut builder = Cluster::builder();
                    if let Some(node_id) = node_id {
                        builder = builder.setting(&format!("snowflake.node_id = {node_id}"));
                    }
                    for line in settings {
                        builder = builder.setting(line);
                    }
                    builder.start()
                })
            })
            .collect();
        starting
            .into_iter()
            .map(|cluster| cluster.join().expect("start cluster"))
            .collect()
    })
}

fn count(client: &mut Client, query: &str) -> i64 {
    client
        .query_one(query, &[])
        .unwrap_or_else(|error| panic!("{query}: {error}"))
        .get(0)
}

fn text(client: &mut Client, query: &str) -> String {
    client
        .query_one(query, &[])
        .unwrap_or_else(|error| panic!("{query}: {error}"))
        .get(0)
}

/// The fingerprint of sequence `name`'s layout on this node.
fn fingerprint(client: &mut Client, name: &str) -> String {
    client
        .query_one(
            "SELECT fingerprint FROM snowflake_sequences WHERE name = $1",
            &[&name],
        )
        .unwrap()
        .get(0)
}

/// `EXPLAIN (COSTS OFF)` of `query`, one string per plan line.
fn explain(client: &mut Client, query: &str) -> Vec<String> {
    client
        .query(&format!("EXPLAIN (COSTS OFF) {query}"), &[])
        .unwrap_or_else(|error| panic!("EXPLAIN {query}: {error}"))
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// The relations a plan scans with a Foreign Scan.
fn foreign_scans(plan: &[String]) -> Vec<String> {
    plan.iter()
        .filter_map(|line| line.split("Foreign Scan on ").nth(1))
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Copies rows with `COPY ... TO STDOUT` on one connection and `COPY ... FROM STDIN` on another;
/// returns the rows written, or the error of the receiving side (e.g. 23505 on a duplicate key).
fn copy_between(
    from: &mut Client,
    copy_out: &str,
    to: &mut Client,
    copy_in: &str,
) -> Result<u64, PgError> {
    let mut data = Vec::new();
    from.copy_out(copy_out)?
        .read_to_end(&mut data)
        .expect("read COPY data");
    let mut writer = to.copy_in(copy_in)?;
    let written = writer.write_all(&data);
    match (written, writer.finish()) {
        (_, Err(error)) => Err(error),
        (Err(error), Ok(_)) => panic!("COPY FROM STDIN: write failed: {error}"),
        (Ok(()), Ok(rows)) => Ok(rows),
    }
}

/// The server's bin directory (pg_dump, psql), found as the harness finds it.
fn postgres_bin_dir() -> PathBuf {
    let pg_config = std::env::var("PG_CONFIG").unwrap_or_else(|_| "pg_config".into());
    let output = Command::new(pg_config)
        .arg("--bindir")
        .output()
        .expect("run pg_config");
    assert!(output.status.success(), "pg_config --bindir failed");
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// libpq arguments for a command-line client (pg_dump, psql) connecting to `cluster`.
fn client_args(cluster: &Cluster) -> Vec<String> {
    vec![
        "--host".into(),
        cluster.socket_dir().display().to_string(),
        "--port".into(),
        cluster.port().to_string(),
        "--username".into(),
        "postgres".into(),
        "--dbname".into(),
        "postgres".into(),
    ]
}

fn rate(rows: i64, elapsed: Duration) -> String {
    format!(
        "{rows} rows in {:.0} ms ({:.0} rows/s)",
        elapsed.as_secs_f64() * 1e3,
        rows as f64 / elapsed.as_secs_f64()
    )
}

// ---------------------------------------------------------------------------------------------
// 1. Three nodes, merged into one primary key
// ---------------------------------------------------------------------------------------------

const MERGE_NODES: [i32; 3] = [1, 2, 3];
const SESSIONS_PER_NODE: i32 = 2;
const ROWS_PER_SESSION: i64 = 20_000;

/// Nodes, sessions per node, IDs per second per session and end of time of a sequence.
fn capacity(client: &mut Client, sequence: &str) -> (i64, i64, i64, String) {
    let row = client
        .query_one(
            "SELECT nodes, sessions_per_node, ids_per_second_per_session, runs_out_at::text
             FROM snowflake_sequences WHERE name = $1",
            &[&sequence],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

#[test]
fn three_nodes_merge_into_one_primary_key_without_conflicts() {
    let nodes = start_clusters(&MERGE_NODES.map(Some), &[]);
    let mut admins: Vec<Client> = nodes.iter().map(Cluster::connect).collect();
    for admin in &mut admins {
        admin
            .batch_execute(
                "CREATE EXTENSION snowflake_id;
                 SELECT snowflake_create_sequence('events', preset => 'sharded');
                 CREATE TABLE events (
                     id      bigint PRIMARY KEY DEFAULT snowflake_nextval('events'),
                     session int NOT NULL,
                     n       int NOT NULL
                 );",
            )
            .unwrap();
    }

    // The same layout on every node: equal fingerprints.
    let fingerprints: Vec<String> = admins
        .iter_mut()
        .map(|admin| fingerprint(admin, "events"))
        .collect();
    assert!(
        fingerprints.iter().all(|f| *f == fingerprints[0]),
        "layouts differ across nodes: {fingerprints:?}"
    );
    let (nodes_max, sessions, per_second, runs_out) = capacity(&mut admins[0], "events");
    assert_eq!((nodes_max, sessions, per_second), (64, 256, 1_024_000));
    println!(
        "'sharded' layout, fingerprint {} on all 3 nodes: {nodes_max} nodes × {sessions} \
         sessions × {per_second} IDs/s, runs out at {runs_out}",
        fingerprints[0]
    );

    // Two sessions per node insert concurrently on all three nodes.
    let sessions = nodes.len() * SESSIONS_PER_NODE as usize;
    let start_line = Arc::new(Barrier::new(sessions));
    let started = Instant::now();
    let inserting: Vec<_> = nodes
        .iter()
        .flat_map(|node| (0..SESSIONS_PER_NODE).map(move |session| (node, session)))
        .map(|(node, session)| {
            let mut client = node.connect();
            let start_line = start_line.clone();
            thread::spawn(move || {
                start_line.wait();
                let began = Instant::now();
                let inserted = client
                    .execute(
                        "INSERT INTO events (session, n)
                         SELECT $1, n FROM generate_series(1, $2::bigint) AS n",
                        &[&session, &ROWS_PER_SESSION],
                    )
                    .unwrap();
                assert_eq!(inserted, ROWS_PER_SESSION as u64);
                began.elapsed()
            })
        })
        .collect();
    let session_times: Vec<Duration> = inserting.into_iter().map(|s| s.join().unwrap()).collect();
    let all_rows = sessions as i64 * ROWS_PER_SESSION;
    println!(
        "insert on 3 nodes × {SESSIONS_PER_NODE} sessions: {}; slowest session {:.0} ms",
        rate(all_rows, started.elapsed()),
        session_times.iter().max().unwrap().as_secs_f64() * 1e3
    );

    // Copy every node's rows into one primary-key table on node 1.
    admins[0]
        .batch_execute(
            "CREATE TABLE all_events (
                 id      bigint PRIMARY KEY,
                 origin  int NOT NULL,
                 session int NOT NULL,
                 n       int NOT NULL
             );",
        )
        .unwrap();
    let mut target = nodes[0].connect();
    let started = Instant::now();
    for (node, node_id) in nodes.iter().zip(MERGE_NODES) {
        let mut source = node.connect();
        let copied = copy_between(
            &mut source,
            &format!(
                "COPY (SELECT id, {node_id}, session, n FROM events) TO STDOUT (FORMAT binary)"
            ),
            &mut target,
            "COPY all_events (id, origin, session, n) FROM STDIN (FORMAT binary)",
        )
        .unwrap_or_else(|error| panic!("copy node {node_id}'s rows: {:?}", error_parts(&error)));
        assert_eq!(copied, SESSIONS_PER_NODE as u64 * ROWS_PER_SESSION as u64);
    }
    println!(
        "COPY into one primary key on node 1: {}",
        rate(all_rows, started.elapsed())
    );

    let row = admins[0]
        .query_one(
            "SELECT count(*),
                    count(DISTINCT id),
                    count(*) FILTER (WHERE (snowflake_decode(id, 'events')).node <> origin),
                    count(DISTINCT ((snowflake_decode(id, 'events')).node,
                                    (snowflake_decode(id, 'events')).worker))
             FROM all_events",
            &[],
        )
        .unwrap();
    let (rows, distinct, wrong_node, node_workers): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(rows, all_rows);
    assert_eq!(distinct, rows, "duplicate IDs across nodes");
    assert_eq!(wrong_node, 0, "rows whose decoded node is not their origin");
    assert_eq!(node_workers, sessions as i64, "(node, worker) pairs");
    let per_node: Vec<(i32, i64)> = admins[0]
        .query(
            "SELECT (snowflake_decode(id, 'events')).node, count(*)
             FROM all_events GROUP BY 1 ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let expected: Vec<(i32, i64)> = MERGE_NODES
        .iter()
        .map(|&node| (node, SESSIONS_PER_NODE as i64 * ROWS_PER_SESSION))
        .collect();
    assert_eq!(per_node, expected);
    println!(
        "merged {rows} rows: {distinct} distinct IDs, 0 conflicts, decoded nodes {per_node:?}, \
         {node_workers} (node, worker) pairs"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. A postgres_fdw coordinator routing by the gene bits
// ---------------------------------------------------------------------------------------------

/// Node ids of the three shard clusters (shard k holds the IDs whose gene is k).
const SHARD_NODES: [i32; 3] = [1, 2, 3];
/// Node id of the coordinator: it evaluates the DEFAULT of rows inserted through it.
const COORDINATOR_NODE: i32 = 4;
const ROWS_BY_KEY: i64 = 1_500;
const ROWS_BY_DEFAULT: i64 = 1_500;
const ROWS_DIRECT_PER_SHARD: i64 = 2_000;

/// The layout of `orders` on every node: 'sharded' with 2 bits moved from sequence to gene.
const CREATE_ORDERS_SEQUENCE: &str =
    "SELECT snowflake_create_sequence('orders', preset => 'sharded', \
     sequence_bits => 8, gene_bits => 2);";

fn shard_schema(shard: usize) -> String {
    format!(
        "CREATE EXTENSION snowflake_id;
         {CREATE_ORDERS_SEQUENCE}
         CREATE TABLE orders (
             id          bigint PRIMARY KEY DEFAULT snowflake_nextval('orders', {shard})
                         CHECK ((id & 3) = {shard}),
             customer_id bigint NOT NULL,
             note        text NOT NULL
         );"
    )
}

const COORDINATOR_SCHEMA: &str = "
    CREATE EXTENSION snowflake_id;
    CREATE EXTENSION postgres_fdw;
    SELECT snowflake_create_sequence('orders', preset => 'sharded', sequence_bits => 8, gene_bits => 2);

    -- Hash partitioning whose 'hash' of an ID is its gene. PostgreSQL's partition hash of a
    -- one-column key is FUNCTION 2's result + 0x49a0f4dd15e5a8e3, called with seed
    -- 0x7A5B22367996DCFD; the two constants sum to a multiple of 32, so with MODULUS 4 the
    -- remainder is id & 3 (the trick of PostgreSQL's own regression tests; checked below).
    CREATE FUNCTION snowflake_gene_hash(id bigint, seed bigint) RETURNS bigint
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $$ SELECT (id & 3) + seed $$;
    CREATE OPERATOR CLASS snowflake_gene_ops FOR TYPE bigint USING hash AS
        OPERATOR 1 = (bigint, bigint),
        FUNCTION 2 snowflake_gene_hash(bigint, bigint);

    CREATE TABLE orders (
        id          bigint NOT NULL DEFAULT snowflake_nextval('orders', floor(random() * 3)::bigint),
        customer_id bigint NOT NULL,
        note        text NOT NULL
    ) PARTITION BY HASH (id snowflake_gene_ops);

    -- For comparison: LIST partitioning on the expression (id & 3).
    CREATE TABLE orders_by_list (
        id          bigint NOT NULL,
        customer_id bigint NOT NULL,
        note        text NOT NULL
    ) PARTITION BY LIST ((id & 3));";

fn coordinator_shard(shard: usize, cluster: &Cluster) -> String {
    format!(
        "CREATE SERVER shard{shard} FOREIGN DATA WRAPPER postgres_fdw
             OPTIONS (host '{host}', port '{port}', dbname 'postgres', batch_size '1000');
         CREATE USER MAPPING FOR postgres SERVER shard{shard} OPTIONS (user 'postgres');
         CREATE FOREIGN TABLE orders_shard{shard}
             PARTITION OF orders FOR VALUES WITH (MODULUS 4, REMAINDER {shard})
             SERVER shard{shard} OPTIONS (table_name 'orders');
         CREATE FOREIGN TABLE orders_by_list_shard{shard}
             PARTITION OF orders_by_list FOR VALUES IN ({shard})
             SERVER shard{shard} OPTIONS (table_name 'orders');
         CREATE FOREIGN TABLE shard{shard}_sequences (name text, fingerprint text)
             SERVER shard{shard} OPTIONS (table_name 'snowflake_sequences');",
        host = cluster.socket_dir().display(),
        port = cluster.port(),
    )
}

#[test]
fn coordinator_routes_by_gene_and_prunes_lookups_to_one_shard() {
    let node_ids: Vec<Option<i32>> = SHARD_NODES
        .iter()
        .chain([&COORDINATOR_NODE])
        .map(|&id| Some(id))
        .collect();
    let mut clusters = start_clusters(&node_ids, &[]);
    let coordinator_cluster = clusters.pop().unwrap();
    let shards = clusters;
    let mut shard_clients: Vec<Client> = shards.iter().map(Cluster::connect).collect();
    for (shard, client) in shard_clients.iter_mut().enumerate() {
        client.batch_execute(&shard_schema(shard)).unwrap();
    }
    let mut coordinator = coordinator_cluster.connect();
    coordinator.batch_execute(COORDINATOR_SCHEMA).unwrap();
    for (shard, cluster) in shards.iter().enumerate() {
        coordinator
            .batch_execute(&coordinator_shard(shard, cluster))
            .unwrap();
    }

    // 'sharded' uses all 63 bits: gene bits must be taken from another field.
    let error = coordinator
        .batch_execute(
            "SELECT snowflake_create_sequence('too_wide', preset => 'sharded', gene_bits => 2)",
        )
        .unwrap_err();
    let (code, message, _) = error_parts(&error);
    assert_eq!(code, "22023", "{message}");
    println!("'sharded' + gene_bits => 2: {code} {message}");
    let (nodes_max, sessions, per_second, runs_out) = capacity(&mut coordinator, "orders");
    assert_eq!((nodes_max, sessions, per_second), (64, 256, 256_000));
    println!(
        "'orders' layout (39/6/8/8/2): {nodes_max} nodes × {sessions} sessions × {per_second} \
         IDs/s, 4 genes, runs out at {runs_out}"
    );

    // One query on the coordinator compares the layouts of all four nodes.
    let layouts = count(
        &mut coordinator,
        "SELECT count(DISTINCT fingerprint) FROM (
             SELECT fingerprint FROM snowflake_sequences WHERE name = 'orders'
             UNION ALL SELECT fingerprint FROM shard0_sequences WHERE name = 'orders'
             UNION ALL SELECT fingerprint FROM shard1_sequences WHERE name = 'orders'
             UNION ALL SELECT fingerprint FROM shard2_sequences WHERE name = 'orders'
         ) AS all_nodes",
    );
    assert_eq!(layouts, 1, "the 'orders' layouts differ across the 4 nodes");

    // Inserts through the coordinator (by business key, and by the coordinator's DEFAULT) run
    // at the same time as inserts made directly on each shard (by the shard's DEFAULT).
    let started = Instant::now();
    let direct: Vec<_> = shards
        .iter()
        .enumerate()
        .map(|(shard, cluster)| {
            let mut client = cluster.connect();
            thread::spawn(move || {
                client
                    .execute(
                        "INSERT INTO orders (customer_id, note)
                         SELECT c * 3 + $1::int, 'direct on shard'
                         FROM generate_series(1, $2::bigint) AS c",
                        &[&(shard as i32), &ROWS_DIRECT_PER_SHARD],
                    )
                    .unwrap()
            })
        })
        .collect();
    let by_key = coordinator
        .execute(
            "INSERT INTO orders (id, customer_id, note)
             SELECT snowflake_nextval('orders', customer_id % 3), customer_id, 'coordinator, by key'
             FROM generate_series(1, $1::bigint) AS customer_id",
            &[&ROWS_BY_KEY],
        )
        .unwrap();
    let by_default = coordinator
        .execute(
            "INSERT INTO orders (customer_id, note)
             SELECT customer_id, 'coordinator, by default'
             FROM generate_series(1, $1::bigint) AS customer_id",
            &[&ROWS_BY_DEFAULT],
        )
        .unwrap();
    let coordinator_time = started.elapsed();
    let direct_rows: u64 = direct.into_iter().map(|d| d.join().unwrap()).sum();
    assert_eq!(by_key, ROWS_BY_KEY as u64);
    assert_eq!(by_default, ROWS_BY_DEFAULT as u64);
    assert_eq!(direct_rows, 3 * ROWS_DIRECT_PER_SHARD as u64);
    println!(
        "through the coordinator: {}; directly on the shards: {direct_rows} rows",
        rate(ROWS_BY_KEY + ROWS_BY_DEFAULT, coordinator_time)
    );

    // Every row sits on the shard its gene names; the coordinator made its rows with its own
    // node id, each shard its rows with its node id; all IDs are distinct.
    let row = coordinator
        .query_one(
            "SELECT count(*),
                    count(DISTINCT id),
                    count(*) FILTER (WHERE tableoid <> ('orders_shard' || (id & 3))::regclass),
                    count(*) FILTER (WHERE note LIKE 'coordinator%' AND node <> $1),
                    count(*) FILTER (WHERE note = 'direct on shard' AND node <> gene + 1),
                    count(*) FILTER (WHERE note <> 'coordinator, by default'
                                       AND gene <> customer_id % 3),
                    min(count_by_default), max(count_by_default)
             FROM (SELECT o.*, tableoid, (snowflake_decode(id, 'orders')).*,
                          count(*) FILTER (WHERE note = 'coordinator, by default')
                              OVER (PARTITION BY tableoid) AS count_by_default
                   FROM orders o) AS decoded",
            &[&COORDINATOR_NODE],
        )
        .unwrap();
    let total = ROWS_BY_KEY + ROWS_BY_DEFAULT + 3 * ROWS_DIRECT_PER_SHARD;
    let counts: Vec<i64> = (0..8).map(|i| row.get(i)).collect();
    assert_eq!(counts[0], total);
    assert_eq!(counts[1], total, "duplicate IDs across shards");
    assert_eq!(counts[2], 0, "rows on a shard their gene does not name");
    assert_eq!(counts[3], 0, "coordinator rows not made with its node id");
    assert_eq!(
        counts[4], 0,
        "direct rows not made with their shard's node id"
    );
    assert_eq!(
        counts[5], 0,
        "rows whose gene is not their customer's shard"
    );
    assert!(
        counts[6] > ROWS_BY_DEFAULT / 5,
        "the coordinator's DEFAULT spreads poorly: {} to {} rows per shard",
        counts[6],
        counts[7]
    );
    let per_shard: Vec<(String, i32, i64)> = coordinator
        .query(
            "SELECT tableoid::regclass::text, (snowflake_decode(id, 'orders')).node, count(*)
             FROM orders GROUP BY 1, 2 ORDER BY 1, 2",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    println!(
        "{total} rows, {total} distinct IDs; (partition, decoded node, rows): {per_shard:?}; \
         coordinator DEFAULT put {} to {} rows on each shard",
        counts[6], counts[7]
    );

    // A gene with no shard has no partition; a shard refuses a row of another shard's gene.
    let error = coordinator
        .execute(
            "INSERT INTO orders (id, customer_id, note)
             VALUES (snowflake_nextval('orders', 3), 3, 'no shard for gene 3')",
            &[],
        )
        .unwrap_err();
    let (code, message, _) = error_parts(&error);
    assert_eq!(code, "23514", "{message}");
    assert!(message.contains("no partition"), "{message}");
    let error = shard_clients[0]
        .execute(
            "INSERT INTO orders (id, customer_id, note)
             VALUES (snowflake_nextval('orders', 1), 1, 'gene of shard 1')",
            &[],
        )
        .unwrap_err();
    assert_eq!(error_parts(&error).0, "23514", "{error}");

    // A lookup by ID alone is routed to the one shard its gene names.
    for (shard, client) in shard_clients.iter_mut().enumerate() {
        for note in [
            "direct on shard",
            "coordinator, by key",
            "coordinator, by default",
        ] {
            let id: i64 = client
                .query_one(
                    "SELECT id FROM orders WHERE note = $1 ORDER BY id DESC LIMIT 1",
                    &[&note],
                )
                .unwrap()
                .get(0);
            let plan = explain(
                &mut coordinator,
                &format!("SELECT * FROM orders WHERE id = {id}"),
            );
            assert_eq!(
                foreign_scans(&plan),
                [format!("orders_shard{shard}")],
                "lookup of {id} (gene {shard}) is not pruned to shard {shard}: {plan:#?}"
            );
            let found = coordinator
                .query("SELECT note FROM orders WHERE id = $1", &[&id])
                .unwrap();
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].get::<_, String>(0), note);
        }
    }
    let id: i64 = shard_clients[2]
        .query_one("SELECT max(id) FROM orders", &[])
        .unwrap()
        .get(0);
    let plan = explain(
        &mut coordinator,
        &format!("SELECT * FROM orders WHERE id = {id}"),
    );
    println!(
        "EXPLAIN SELECT * FROM orders WHERE id = {id}:\n  {}",
        plan.join("\n  ")
    );

    // Also with a generic plan (a prepared statement): pruned at executor start-up.
    coordinator
        .batch_execute(
            "SET plan_cache_mode = force_generic_plan;
             PREPARE order_by_id(bigint) AS SELECT * FROM orders WHERE id = $1;",
        )
        .unwrap();
    let plan = explain(&mut coordinator, &format!("EXECUTE order_by_id({id})"));
    assert_eq!(foreign_scans(&plan), ["orders_shard2"], "{plan:#?}");
    assert!(
        plan.iter().any(|line| line.contains("Subplans Removed: 2")),
        "{plan:#?}"
    );
    println!(
        "EXPLAIN EXECUTE order_by_id({id}):\n  {}",
        plan.join("\n  ")
    );
    coordinator
        .batch_execute("RESET plan_cache_mode; DEALLOCATE order_by_id;")
        .unwrap();

    // LIST partitioning on (id & 3) prunes only when the query names the expression itself.
    let plan = explain(
        &mut coordinator,
        &format!("SELECT * FROM orders_by_list WHERE id = {id}"),
    );
    assert_eq!(foreign_scans(&plan).len(), 3, "{plan:#?}");
    let plan = explain(
        &mut coordinator,
        &format!("SELECT * FROM orders_by_list WHERE id = {id} AND (id & 3) = ({id}::bigint & 3)"),
    );
    assert_eq!(foreign_scans(&plan), ["orders_by_list_shard2"], "{plan:#?}");
    assert_eq!(
        count(&mut coordinator, "SELECT count(*) FROM orders_by_list"),
        total
    );
    println!("LIST ((id & 3)): WHERE id = X scans 3 shards; adding AND (id & 3) = (X & 3) scans 1");
}

// ---------------------------------------------------------------------------------------------
// 3. Bidirectional logical replication on PostgreSQL 15
// ---------------------------------------------------------------------------------------------

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
    let nodes = start_clusters(
        &REPLICA_NODES.map(Some),
        &[
            "wal_level = logical",
            "max_replication_slots = 10",
            "max_wal_senders = 10",
        ],
    );
    let mut admins: Vec<Client> = nodes.iter().map(Cluster::connect).collect();
    for admin in &mut admins {
        admin
            .batch_execute(
                "CREATE EXTENSION snowflake_id;
                 SELECT snowflake_create_sequence('events', preset => 'sharded');
                 CREATE TABLE events (
                     id     bigint PRIMARY KEY DEFAULT snowflake_nextval('events'),
                     origin int NOT NULL,
                     n      int NOT NULL,
                     note   text NOT NULL
                 );",
            )
            .unwrap();
    }
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

// ---------------------------------------------------------------------------------------------
// 4. Two game servers, used apart, then merged
// ---------------------------------------------------------------------------------------------

const GAME_NODES: [i32; 2] = [1, 2];
const PLAYERS_PER_ROUND: i64 = 1_000;
const ITEMS_PER_PLAYER: i64 = 3;
const ROUNDS: usize = 2;

const GAME_SCHEMA: &str = "
    CREATE EXTENSION snowflake_id;
    SELECT snowflake_create_sequence('game', preset => 'sharded');
    CREATE TABLE players (
        id   bigint PRIMARY KEY DEFAULT snowflake_nextval('game'),
        name text NOT NULL
    );
    CREATE TABLE items (
        id        bigint PRIMARY KEY DEFAULT snowflake_nextval('game'),
        player_id bigint NOT NULL REFERENCES players,
        kind      text NOT NULL
    );
    -- For comparison: what the servers would have used without snowflake IDs.
    CREATE TABLE legacy_players (
        id   bigserial PRIMARY KEY,
        name text NOT NULL
    );";

/// One round of play on one server: new players, each with a few items.
fn play_round(client: &mut Client, server: i32, round: usize) {
    let mut transaction = client.transaction().unwrap();
    let name = format!("server {server} round {round}");
    transaction
        .execute(
            "INSERT INTO players (name) SELECT $1 || ' player ' || n
             FROM generate_series(1, $2::bigint) AS n",
            &[&name, &PLAYERS_PER_ROUND],
        )
        .unwrap();
    transaction
        .execute(
            "INSERT INTO items (player_id, kind)
             SELECT p.id, 'item ' || k FROM players p, generate_series(1, $2::bigint) AS k
             WHERE p.name LIKE $1 || ' player %'",
            &[&name, &ITEMS_PER_PLAYER],
        )
        .unwrap();
    transaction
        .execute(
            "INSERT INTO legacy_players (name) SELECT $1 || ' player ' || n
             FROM generate_series(1, $2::bigint) AS n",
            &[&name, &PLAYERS_PER_ROUND],
        )
        .unwrap();
    transaction.commit().unwrap();
}

#[test]
fn two_game_servers_used_apart_merge_without_conflicts() {
    let mut servers = start_clusters(&GAME_NODES.map(Some), &[]);
    for server in &servers {
        server.connect().batch_execute(GAME_SCHEMA).unwrap();
    }

    // The servers run separately, both at once, with a restart of each between rounds.
    for round in 1..=ROUNDS {
        if round > 1 {
            for server in &mut servers {
                server.stop("fast");
                server.start();
            }
        }
        thread::scope(|scope| {
            for (server, node) in servers.iter().zip(GAME_NODES) {
                let mut client = server.connect();
                scope.spawn(move || play_round(&mut client, node, round));
            }
        });
    }

    // Merge: pg_dump server 2's game data and load it into server 1, as an operator would.
    let bin = postgres_bin_dir();
    let dump = Command::new(bin.join("pg_dump"))
        .args(client_args(&servers[1]))
        .args(["--data-only", "--table=players", "--table=items"])
        .output()
        .expect("run pg_dump");
    assert!(
        dump.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let started = Instant::now();
    let mut psql = Command::new(bin.join("psql"))
        .args(client_args(&servers[0]))
        .args(["--no-psqlrc", "--quiet", "--set", "ON_ERROR_STOP=1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run psql");
    psql.stdin
        .take()
        .unwrap()
        .write_all(&dump.stdout)
        .expect("feed the dump to psql");
    let restore = psql.wait_with_output().expect("wait for psql");
    assert!(
        restore.status.success(),
        "loading server 2's dump into server 1 failed (conflict?): {}",
        String::from_utf8_lossy(&restore.stderr)
    );
    let merge_time = started.elapsed();

    let mut merged = servers[0].connect();
    let per_server = PLAYERS_PER_ROUND * ROUNDS as i64;
    let row = merged
        .query_one(
            "SELECT (SELECT count(*) FROM players),
                    (SELECT count(DISTINCT (snowflake_decode(id, 'game')).node) FROM players),
                    (SELECT count(*) FROM items),
                    (SELECT count(*) FROM items i JOIN players p ON p.id = i.player_id
                     WHERE (snowflake_decode(i.id, 'game')).node
                           <> (snowflake_decode(p.id, 'game')).node),
                    (SELECT count(*) FROM players
                     WHERE name LIKE 'server ' || (snowflake_decode(id, 'game')).node || ' %')",
            &[],
        )
        .unwrap();
    let (players, nodes, items, crossed, named_right): (i64, i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    assert_eq!(players, 2 * per_server);
    assert_eq!(nodes, 2);
    assert_eq!(items, 2 * per_server * ITEMS_PER_PLAYER);
    assert_eq!(crossed, 0, "items attached to another server's player");
    assert_eq!(
        named_right, players,
        "players whose decoded node is not their server"
    );
    println!(
        "game merge: {players} players and {items} items from 2 servers ({ROUNDS} rounds, a \
         restart between) loaded with pg_dump | psql in {:.0} ms: 0 key conflicts, no ID \
         rewritten, foreign keys intact",
        merge_time.as_secs_f64() * 1e3
    );

    // The same merge with bigserial keys collides at once.
    let mut source = servers[1].connect();
    let error = copy_between(
        &mut source,
        "COPY legacy_players TO STDOUT (FORMAT binary)",
        &mut merged,
        "COPY legacy_players FROM STDIN (FORMAT binary)",
    )
    .unwrap_err();
    assert_eq!(error_parts(&error).0, "23505", "{error}");
    println!(
        "the same merge of bigserial keys: {}",
        error_parts(&error).1
    );
}

// ---------------------------------------------------------------------------------------------
// Fail-closed node id, end to end
// ---------------------------------------------------------------------------------------------

#[test]
fn node_id_unset_fails_closed_then_out_of_range_then_works() {
    let mut cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('events', preset => 'sharded');
             CREATE TABLE events (
                 id bigint PRIMARY KEY DEFAULT snowflake_nextval('events'),
                 n  int NOT NULL
             );",
        )
        .unwrap();

    // Unset: refused, and the insert through the DEFAULT writes nothing.
    let error = client
        .query_one("SELECT snowflake_nextval('events')", &[])
        .unwrap_err();
    let (code, message, hint) = error_parts(&error);
    assert_eq!(code, "55000", "{message}");
    assert_eq!(
        message,
        "snowflake sequence \"events\" needs snowflake.node_id, which is not set"
    );
    assert!(
        hint.contains("snowflake.node_id") && hint.contains("0 to 63"),
        "{hint}"
    );
    let error = client
        .execute("INSERT INTO events (n) VALUES (1)", &[])
        .unwrap_err();
    assert_eq!(error_parts(&error).0, "55000", "{error}");
    assert_eq!(count(&mut client, "SELECT count(*) FROM events"), 0);
    // The single-node 'default' sequence has no node bits and needs no node id.
    client.query_one("SELECT snowflake_nextval()", &[]).unwrap();
    println!("node id unset: {code} {message} (hint: {hint})");
    drop(client);

    // A node id too large for 6 node bits.
    cluster.stop("fast");
    cluster.append_config("snowflake.node_id = 64");
    cluster.start();
    let mut client = cluster.connect();
    let error = client
        .execute("INSERT INTO events (n) VALUES (1)", &[])
        .unwrap_err();
    let (code, message, hint) = error_parts(&error);
    assert_eq!(code, "22023", "{message}");
    assert_eq!(
        message,
        "snowflake.node_id = 64 does not fit the 6 node bits of snowflake sequence \"events\""
    );
    println!("node id 64: {code} {message} (hint: {hint})");
    drop(client);

    // A valid node id: IDs carry it.
    cluster.stop("fast");
    cluster.append_config("snowflake.node_id = 7");
    cluster.start();
    let mut client = cluster.connect();
    client
        .execute("INSERT INTO events (n) VALUES (1)", &[])
        .unwrap();
    let node: i32 = client
        .query_one(
            "SELECT (snowflake_decode(id, 'events')).node FROM events",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(node, 7);
}
