//! A postgres_fdw coordinator over three shards, routing by the gene bits (docs/sharding.md,
//! "Recipe: a postgres_fdw coordinator with shards", whose SQL this is). Rows inserted through
//! the coordinator (by business key and by its own DEFAULT) and directly on the shards coexist
//! with no duplicate ID; every row sits on the shard its gene names; a gene with no shard, or a
//! row of another shard's gene, is refused; a lookup by ID alone scans one shard, with a custom
//! plan or a generic one. The test prints what it measured (`--nocapture`).

use std::thread;
use std::time::Instant;

use snowflake_id_cluster_tests::fixtures::{capacity, column, count, rate, start_clusters};
use snowflake_id_cluster_tests::{error_parts, Client, Cluster};

/// `EXPLAIN (COSTS OFF)` of `query`, one string per plan line.
fn explain(client: &mut Client, query: &str) -> Vec<String> {
    column(client, &format!("EXPLAIN (COSTS OFF) {query}"))
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
