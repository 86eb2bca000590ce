//! Named sequences across sessions and databases: changes are seen at the next call after
//! commit, and pg_dump / restore keeps them.

use snowflake_id_cluster_tests::{error_parts, Cluster};

fn fingerprints(client: &mut postgres::Client) -> Vec<(String, String)> {
    client
        .query(
            "SELECT name, fingerprint FROM snowflake_sequences ORDER BY name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[test]
fn catalog_changes_reach_other_sessions_at_their_next_call() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("CREATE EXTENSION snowflake_id; SELECT snowflake_create_sequence('orders')")
        .unwrap();
    let mut user = cluster.connect();
    let classic: i64 = user
        .query_one("SELECT snowflake_nextval('orders')", &[])
        .unwrap()
        .get(0);
    assert!(
        classic > 1 << 53,
        "a classic ID today is above 2^53: {classic}"
    );

    // Uncommitted: the other session still uses the old layout.
    admin
        .batch_execute(
            "BEGIN; SELECT snowflake_drop_sequence('orders');
             SELECT snowflake_create_sequence('orders', preset => 'js53');",
        )
        .unwrap();
    let still_classic: i64 = user
        .query_one("SELECT snowflake_nextval('orders')", &[])
        .unwrap()
        .get(0);
    assert!(still_classic > classic);
    admin.batch_execute("COMMIT").unwrap();

    // Committed: the next call sees the new layout, without any polling delay.
    let js53: i64 = user
        .query_one("SELECT snowflake_nextval('orders')", &[])
        .unwrap()
        .get(0);
    assert!(js53 < 1 << 53, "{js53} was made with the dropped layout");

    admin
        .batch_execute("SELECT snowflake_drop_sequence('orders')")
        .unwrap();
    let error = user
        .query("SELECT snowflake_nextval('orders')", &[])
        .unwrap_err();
    assert_eq!(error_parts(&error).0, "42704");

    // A rolled-back create is never seen.
    admin
        .batch_execute("BEGIN; SELECT snowflake_create_sequence('ghost'); ROLLBACK;")
        .unwrap();
    let error = user
        .query("SELECT snowflake_nextval('ghost')", &[])
        .unwrap_err();
    assert_eq!(error_parts(&error).0, "42704");
}

#[test]
fn pg_dump_and_restore_keep_the_sequences() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    for database in ["shop", "shop_restored"] {
        admin
            .batch_execute(&format!("CREATE DATABASE {database}"))
            .unwrap();
    }
    let mut shop = cluster.connect_to("shop");
    shop.batch_execute(
        "CREATE EXTENSION snowflake_id;
         SELECT snowflake_create_sequence('orders', preset => 'js53');
         SELECT snowflake_create_sequence('events', time_unit => interval '10 ms', time_bits => 40,
                                          worker_bits => 9, sequence_bits => 10, gene_bits => 4);
         CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval('orders'), item text);
         INSERT INTO orders(item) SELECT 'item ' || n FROM generate_series(1, 1000) n;",
    )
    .unwrap();
    let before = fingerprints(&mut shop);
    assert_eq!(before.len(), 3);

    cluster.dump_and_restore("shop", "shop_restored");

    let mut restored = cluster.connect_to("shop_restored");
    assert_eq!(fingerprints(&mut restored), before);
    let row = restored
        .query_one(
            "SELECT count(*), max(id) < (1::bigint << 53), bool_and((snowflake_decode(id, 'orders')).ts <= now())
             FROM orders",
            &[],
        )
        .unwrap();
    let (rows, js_safe, decodes): (i64, bool, bool) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((rows, js_safe, decodes), (1000, true, true));
    // The restored column default keeps working with the restored sequence.
    restored
        .batch_execute("INSERT INTO orders(item) SELECT 'more' FROM generate_series(1, 1000)")
        .unwrap();
    let count: i64 = restored
        .query_one("SELECT count(*) FROM orders", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 2000);
}
