//! Beside pgEdge's snowflake extension, and moving over from it (docs/sharding.md, "Coming from
//! pgEdge snowflake"). pgEdge's extension (built from vendor/pgedge-snowflake/ by
//! scripts/install-pgedge-snowflake.sh) must be installed in the server under test.
//! - Both preloaded in one server, each with its own node number (`snowflake.node` is pgEdge's,
//!   `snowflake_id.node_id` ours), generate under load from several sessions.
//! - A configuration that still names a pre-0.7.0 `snowflake.*` setting of ours gets a WARNING
//!   naming the new name, and a sequence with node bits fails closed with a hint naming it.
//! - A table whose IDs pgEdge wrote on several node numbers is converted with the `pgedge`
//!   preset: the old IDs decode as pgEdge reads them, and the new ones continue above every
//!   stored one, none equal; converting with another layout is refused with a hint naming the
//!   preset.

use snowflake_id_cluster_tests::fixtures::{count, failure, text};
use snowflake_id_cluster_tests::{Client, Cluster};

const BOTH_PRELOADED: &str = "shared_preload_libraries = 'snowflake_id, snowflake'";

/// Inserts `rows` rows into `table` (its key from its default, `written` = `by`) in statements
/// of 500.
fn insert(client: &mut Client, table: &str, rows: i64, by: &str) {
    for _ in 0..rows / 500 {
        client
            .execute(
                &format!("INSERT INTO {table} (written) SELECT $1 FROM generate_series(1, 500)"),
                &[&by],
            )
            .unwrap_or_else(|error| panic!("insert into {table}: {error}"));
    }
}

#[test]
fn both_extensions_generate_in_one_server_each_with_its_node_number() {
    let cluster = Cluster::builder()
        .setting(BOTH_PRELOADED)
        .setting("snowflake.node = 3")
        .setting("snowflake_id.node_id = 5")
        .start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake;
             CREATE EXTENSION snowflake_id;
             CREATE SEQUENCE theirs_seq;
             CREATE TABLE theirs (id bigint PRIMARY KEY DEFAULT snowflake.nextval('theirs_seq'),
                                  written text);
             SELECT snowflake_create_sequence('ours', preset => 'sharded');
             CREATE TABLE ours (id bigint PRIMARY KEY DEFAULT snowflake_nextval('ours'),
                                written text);",
        )
        .unwrap();
    assert_eq!(text(&mut client, "SHOW snowflake.node"), "3");
    assert_eq!(text(&mut client, "SHOW snowflake_id.node_id"), "5");

    // Four sessions, each writing both tables in turn.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let mut session = cluster.connect();
                for _ in 0..4 {
                    insert(&mut session, "theirs", 1_000, "load");
                    insert(&mut session, "ours", 1_000, "load");
                }
            });
        }
    });
    assert_eq!(count(&mut client, "SELECT count(*) FROM theirs"), 16_000);
    assert_eq!(count(&mut client, "SELECT count(*) FROM ours"), 16_000);
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM theirs WHERE snowflake.get_node(id) <> 3"
        ),
        0
    );
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM ours WHERE (snowflake_decode(id, 'ours')).node <> 5"
        ),
        0
    );
    let log = cluster.server_log();
    assert!(
        !log.contains("invalid configuration parameter name"),
        "a setting was removed at start:\n{log}"
    );
    println!("one server: 16,000 pgEdge IDs on node 3 and 16,000 of ours on node 5");
}

#[test]
fn an_old_setting_name_is_named_in_a_warning_and_fails_closed() {
    let cluster = Cluster::builder()
        .setting("snowflake.node_id = 5")
        .setting("snowflake.max_lead = 250")
        .start();
    let log = cluster.server_log();
    for (old, value) in [("node_id", "5"), ("max_lead", "250")] {
        let warning = format!(
            "WARNING:  snowflake_id: \"snowflake.{old} = {value}\" is no longer read: since 0.7.0 \
             the setting is \"snowflake_id.{old}\"; rename it in postgresql.conf"
        );
        assert!(log.contains(&warning), "no {warning:?} in:\n{log}");
    }
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('events', preset => 'sharded');",
        )
        .unwrap();
    assert_eq!(text(&mut client, "SHOW snowflake_id.node_id"), "-1");
    assert_eq!(text(&mut client, "SHOW snowflake_id.max_lead"), "100ms");
    let (code, message, hint) = failure(&mut client, "SELECT snowflake_nextval('events')");
    assert_eq!(code, "55000", "{message}");
    assert_eq!(
        message,
        "snowflake sequence \"events\" needs snowflake_id.node_id, which is not set"
    );
    assert!(
        hint.contains("snowflake.node_id = 5")
            && hint.contains("rename it to snowflake_id.node_id"),
        "{hint}"
    );
}

#[test]
fn a_pgedge_table_converts_and_new_ids_continue_above_every_stored_one() {
    let cluster = Cluster::builder()
        .setting(BOTH_PRELOADED)
        .setting("snowflake_id.node_id = 4")
        .start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake;
             CREATE EXTENSION snowflake_id;
             CREATE SEQUENCE orders_id_seq;
             CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake.nextval('orders_id_seq'),
                                  written text);
             CREATE SEQUENCE returns_id_seq;
             CREATE TABLE returns (id bigint PRIMARY KEY DEFAULT snowflake.nextval('returns_id_seq'),
                                   written text);",
        )
        .unwrap();
    // pgEdge writes on nodes 1, 2 and 3 at once (a node number per session: snowflake.node is a
    // superuser setting).
    std::thread::scope(|scope| {
        for node in 1..=3 {
            let cluster = &cluster;
            scope.spawn(move || {
                let mut session = cluster.connect();
                session
                    .batch_execute(&format!("SET snowflake.node = {node}"))
                    .unwrap();
                insert(&mut session, "orders", 6_000, "pgedge");
                insert(&mut session, "returns", 500, "pgedge");
            });
        }
    });
    let stored = count(&mut client, "SELECT count(*) FROM orders");
    let newest_stored = count(&mut client, "SELECT max(id) FROM orders");
    assert_eq!(stored, 18_000);
    assert_eq!(
        count(
            &mut client,
            "SELECT count(DISTINCT snowflake.get_node(id)) FROM orders"
        ),
        3
    );

    // A later epoch would issue IDs below pgEdge's: refused, naming the preset.
    client
        .batch_execute(
            "SELECT snowflake_create_sequence('epoch_2025', preset => 'pgedge',
                                              epoch => '2025-01-01 00:00+00')",
        )
        .unwrap();
    let (code, message, hint) = failure(
        &mut client,
        "SELECT snowflake_convert_column('returns', 'id', 'epoch_2025')",
    );
    assert_eq!(code, "22003", "{message}");
    assert!(hint.contains("preset 'pgedge'"), "{hint}");

    client
        .batch_execute("SELECT snowflake_create_sequence('from_pgedge', preset => 'pgedge')")
        .unwrap();
    let converted = text(
        &mut client,
        "SELECT snowflake_convert_column('orders', 'id', 'from_pgedge')",
    );
    assert!(
        converted.contains("default public.snowflake_nextval('from_pgedge')"),
        "{converted}"
    );
    // pgEdge's IDs decode with the preset as pgEdge itself reads them.
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM orders, snowflake_decode(id, 'from_pgedge') AS d
             WHERE d.node <> snowflake.get_node(id) OR d.sequence <> snowflake.get_count(id)
                OR extract(epoch FROM d.ts) <> snowflake.get_epoch(id)"
        ),
        0
    );

    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| insert(&mut cluster.connect(), "orders", 2_500, "snowflake_id"));
        }
    });
    let new_rows = count(
        &mut client,
        "SELECT count(*) FROM orders WHERE written = 'snowflake_id'",
    );
    let at_or_below = count(
        &mut client,
        &format!(
            "SELECT count(*) FROM orders WHERE written = 'snowflake_id' AND id <= {newest_stored}"
        ),
    );
    assert_eq!(new_rows, 10_000);
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM orders WHERE written = 'snowflake_id'
             AND (snowflake_decode(id, 'from_pgedge')).node <> 4"
        ),
        0,
        "every new ID carries node 4"
    );
    assert_eq!(at_or_below, 0, "new IDs at or below the newest stored");

    // A stored ID of the layout up to 2 s ahead of the clock (pgEdge runs ahead when a
    // millisecond's 4,096 IDs are used up) is waited out: new IDs continue above it.
    let ahead = count(
        &mut client,
        "INSERT INTO returns (id, written)
         VALUES (snowflake_min_id(clock_timestamp() + interval '700 ms', 'from_pgedge')
                 | 4095, 'ahead')
         RETURNING id",
    );
    let started = std::time::Instant::now();
    text(
        &mut client,
        "SELECT snowflake_convert_column('returns', 'id', 'from_pgedge')",
    );
    let waited = started.elapsed();
    // The conversion returned only once the server's clock had passed the stored ID's tick
    // (it waits out the lead; on a slow machine the clock may have passed it already).
    let passed: bool = client
        .query_one(
            "SELECT clock_timestamp() >= snowflake_timestamp($1, 'from_pgedge')",
            &[&ahead],
        )
        .unwrap()
        .get(0);
    assert!(
        passed,
        "converted before the clock passed the stored ID {ahead}"
    );
    client
        .batch_execute("INSERT INTO returns (written) VALUES ('snowflake_id')")
        .unwrap();
    let first_new = count(
        &mut client,
        "SELECT min(id) FROM returns WHERE written = 'snowflake_id'",
    );
    assert!(first_new > ahead, "{first_new} after {ahead}");
    println!("an ID 700 ms ahead: the conversion waited {waited:?}, the next ID is above it");
    println!(
        "pgEdge table: {stored} IDs on nodes 1-3, then {new_rows} new IDs on node 4: \
         {at_or_below} at or below the newest stored, 0 equal (primary key)"
    );
}
