//! A new connection's first ID takes the layout, the catalog table and the floor relations
//! from the server's extension directory (src/state/extension_directory.rs), which earlier
//! connections filled. Every change that removes or replaces what it holds reaches the next new
//! connection: a sequence dropped (and created again with another layout), in a plain or a
//! prepared transaction; rows deleted by a superuser with the guard trigger off, or truncated;
//! a change replayed on a standby, before and after its promotion; the extension dropped and
//! created again (a row updated past the guard is refused by the next
//! read: state_out_of_reach.rs).
//! What a transaction made and rolled back never gets there, and a transaction that dropped a
//! sequence does not find it there. Each check runs in a connection of
//! its own, after one that filled the directory.

use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{failure, first_id, is_js53};
use snowflake_id_cluster_tests::{error_parts, Client, Cluster, ClusterBuilder};

/// `builder`'s cluster, started, with the extension created and `setup` run, and the
/// connection that ran them; a new connection took a first ID of `used` (and filled the
/// directory).
fn filled(builder: ClusterBuilder, setup: &str, used: &str) -> (Cluster, Client) {
    let cluster = builder.start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(&format!("CREATE EXTENSION snowflake_id; {setup}"))
        .unwrap();
    assert!(first_id(&cluster, used).is_ok());
    (cluster, admin)
}

/// [`filled`] with a sequence "orders" of the classic layout, used once.
fn with_orders(builder: ClusterBuilder) -> (Cluster, Client) {
    filled(
        builder,
        "SELECT snowflake_create_sequence('orders')",
        "orders",
    )
}

/// After `change`, a new connection finds no sequence "orders" and still serves `'default'`.
fn orders_gone_after(cluster: &Cluster, admin: &mut Client, change: &str) {
    admin.batch_execute(change).unwrap();
    assert_eq!(first_id(cluster, "orders"), Err("42704".into()));
    assert!(first_id(cluster, "default").is_ok());
}

/// Drops "orders" and creates it again with the js53 layout, in one transaction; then a new
/// connection's first ID is of the new layout.
fn replace_orders_with_js53(cluster: &Cluster, admin: &mut Client) {
    admin
        .batch_execute(
            "BEGIN; SELECT snowflake_drop_sequence('orders');
             SELECT snowflake_create_sequence('orders', preset => 'js53'); COMMIT;",
        )
        .unwrap();
    assert_js53(cluster, "the dropped layout");
}

/// A new connection's first ID of "orders" is of the js53 layout, not of `replaced`.
fn assert_js53(cluster: &Cluster, replaced: &str) {
    let id = first_id(cluster, "orders").unwrap();
    assert!(is_js53(id), "{id} was made with {replaced}");
}

#[test]
fn a_sequence_dropped_and_created_again_reaches_new_connections() {
    let (cluster, mut admin) = with_orders(Cluster::builder());
    assert!(!is_js53(first_id(&cluster, "orders").unwrap()));

    replace_orders_with_js53(&cluster, &mut admin);

    orders_gone_after(
        &cluster,
        &mut admin,
        "SELECT snowflake_drop_sequence('orders')",
    );
}

#[test]
fn a_standby_and_then_its_promotion_see_what_the_primary_changed() {
    let (primary, mut admin) = with_orders(Cluster::builder());
    let standby = primary.start_replica();
    primary.wait_for_standby(&standby, Duration::from_secs(60));
    // A standby's connections read layouts too (snowflake_min_id), but issue no ID.
    let min_id = |cluster: &Cluster| -> i64 {
        cluster
            .connect()
            .query_one("SELECT snowflake_min_id(now(), 'orders')", &[])
            .unwrap()
            .get(0)
    };
    assert!(!is_js53(min_id(&standby)));
    assert!(!is_js53(min_id(&standby)));
    // Replayed, not run: no hook or callback of the standby sees the change.
    replace_orders_with_js53(&primary, &mut admin);
    primary.wait_for_standby(&standby, Duration::from_secs(60));
    let id = min_id(&standby);
    assert!(is_js53(id), "{id}: the standby read the dropped layout");
    standby.promote();
    standby.wait_until_primary(Duration::from_secs(60));
    assert_js53(&standby, "the layout the standby read before its promotion");
}

#[test]
fn a_transaction_that_dropped_a_sequence_no_longer_finds_it() {
    let (cluster, mut admin) = with_orders(Cluster::builder());
    admin
        .batch_execute("SELECT snowflake_nextval('orders')")
        .unwrap();
    admin
        .batch_execute("BEGIN; SELECT snowflake_drop_sequence('orders')")
        .unwrap();
    let (code, _, _) = failure(&mut admin, "SELECT snowflake_nextval('orders')");
    assert_eq!(code, "42704", "the dropping transaction found the sequence");
    admin.batch_execute("ROLLBACK").unwrap();
    assert!(first_id(&cluster, "orders").is_ok());
}

#[test]
fn a_database_not_updated_since_before_0_10_0_reaches_new_connections_too() {
    // 0.9.0 kept the catalog table in the extension's schema, not in snowflake_id_internal.
    let (cluster, mut admin) = filled(
        Cluster::builder(),
        "DROP EXTENSION snowflake_id; CREATE EXTENSION snowflake_id VERSION '0.9.0';
         SELECT snowflake_create_sequence('orders');",
        "orders",
    );
    assert!(first_id(&cluster, "orders").is_ok());
    replace_orders_with_js53(&cluster, &mut admin);
}

#[test]
fn a_catalog_moved_out_of_its_schema_reaches_new_connections() {
    let (cluster, mut admin) = with_orders(Cluster::builder());
    // A superuser moves the catalog table into the extension's schema, where the hooks do not
    // look for writes, then deletes a row there with the guard trigger off.
    admin
        .batch_execute(
            "ALTER TABLE snowflake_id_internal.snowflake_sequence_catalog SET SCHEMA public",
        )
        .unwrap();
    assert!(first_id(&cluster, "orders").is_ok());
    orders_gone_after(
        &cluster,
        &mut admin,
        "SET session_replication_role = replica;
         DELETE FROM public.snowflake_sequence_catalog WHERE name = 'orders';
         RESET session_replication_role;",
    );
}

#[test]
fn what_a_transaction_rolled_back_never_reaches_new_connections() {
    let (cluster, mut admin) = filled(Cluster::builder(), "", "default");
    // Its own first ID read the row it inserted; the row is gone with the transaction.
    admin
        .batch_execute(
            "BEGIN; SELECT snowflake_create_sequence('ghost'); SELECT snowflake_nextval('ghost');
             ROLLBACK;",
        )
        .unwrap();
    assert_eq!(first_id(&cluster, "ghost"), Err("42704".into()));
    // A drop rolled back keeps the sequence.
    admin
        .batch_execute("SELECT snowflake_create_sequence('kept')")
        .unwrap();
    admin
        .batch_execute("BEGIN; SELECT snowflake_drop_sequence('kept'); ROLLBACK;")
        .unwrap();
    assert!(
        first_id(&cluster, "kept").is_ok(),
        "{:?}",
        first_id(&cluster, "kept")
    );
}

#[test]
fn a_prepared_drop_reaches_new_connections_when_it_commits() {
    let (cluster, mut admin) =
        with_orders(Cluster::builder().setting("max_prepared_transactions = 4"));

    admin
        .batch_execute(
            "BEGIN; SELECT snowflake_drop_sequence('orders');
             PREPARE TRANSACTION 'drop_orders'",
        )
        .unwrap();
    // Not committed: the sequence is still there for everybody.
    assert!(first_id(&cluster, "orders").is_ok());
    assert!(first_id(&cluster, "orders").is_ok());
    // COMMIT PREPARED in another session, where no callback of the dropping one runs.
    cluster
        .connect()
        .batch_execute("COMMIT PREPARED 'drop_orders'")
        .unwrap();
    assert_eq!(first_id(&cluster, "orders"), Err("42704".into()));

    admin
        .batch_execute("SELECT snowflake_create_sequence('orders', preset => 'js53')")
        .unwrap();
    assert!(is_js53(first_id(&cluster, "orders").unwrap()));
    // A prepared drop rolled back keeps it.
    admin
        .batch_execute(
            "BEGIN; SELECT snowflake_drop_sequence('orders');
             PREPARE TRANSACTION 'keep_orders'",
        )
        .unwrap();
    assert!(is_js53(first_id(&cluster, "orders").unwrap()));
    admin
        .batch_execute("ROLLBACK PREPARED 'keep_orders'")
        .unwrap();
    assert!(is_js53(first_id(&cluster, "orders").unwrap()));
}

#[test]
fn rows_removed_past_the_guard_and_a_new_extension_reach_new_connections() {
    let (cluster, mut admin) = with_orders(Cluster::builder());

    // A superuser's DELETE with the guard trigger off.
    admin
        .batch_execute(
            "SET session_replication_role = replica;
             DELETE FROM snowflake_id_internal.snowflake_sequence_catalog WHERE name = 'orders';
             RESET session_replication_role;",
        )
        .unwrap();
    assert_eq!(first_id(&cluster, "orders"), Err("42704".into()));
    admin
        .batch_execute("SELECT snowflake_create_sequence('orders')")
        .unwrap();
    assert!(!is_js53(first_id(&cluster, "orders").unwrap()));

    // A superuser's TRUNCATE, which no row trigger sees, then a row of another layout.
    admin
        .batch_execute(
            "BEGIN;
             TRUNCATE snowflake_id_internal.snowflake_sequence_catalog;
             INSERT INTO snowflake_id_internal.snowflake_sequence_catalog
               (name, preset, epoch, time_unit_us, time_bits, node_bits, worker_bits,
                sequence_bits, gene_bits, created_at)
             VALUES ('orders', 'js53', '2025-01-01 00:00:00+00', 10000, 38, 0, 7, 8, 0, now());
             COMMIT;",
        )
        .unwrap();
    assert_js53(&cluster, "the truncated layout");

    orders_gone_after(
        &cluster,
        &mut admin,
        "DROP EXTENSION snowflake_id; CREATE EXTENSION snowflake_id",
    );
    // The new extension's schema has another OID: a drop there, by the session that wrote the
    // old one's, is seen too.
    admin
        .batch_execute("SELECT snowflake_create_sequence('orders', preset => 'js53')")
        .unwrap();
    assert_js53(&cluster, "a layout of the dropped extension");
    orders_gone_after(
        &cluster,
        &mut admin,
        "SELECT snowflake_drop_sequence('orders')",
    );
}

#[test]
fn more_sequences_and_databases_than_the_directory_holds_are_all_served() {
    let (cluster, mut admin) = filled(Cluster::builder(), "", "default");
    // The directory keeps 16 layouts a database: the 17th and later are read from the table.
    let names: Vec<String> = (0..20).map(|n| format!("s{n}")).collect();
    for (n, name) in names.iter().enumerate() {
        let preset = if n % 2 == 0 { "js53" } else { "classic" };
        admin
            .execute(
                "SELECT snowflake_create_sequence($1, preset => $2)",
                &[name, &preset],
            )
            .unwrap();
    }
    for round in 0..2 {
        for (n, name) in names.iter().enumerate() {
            let id = first_id(&cluster, name).unwrap();
            assert_eq!(is_js53(id), n % 2 == 0, "{name}, round {round}: {id}");
        }
    }
    // The directory keeps 64 databases: 66 take turns in its entries. Copies of one template
    // have the same OIDs (catalog table, floor relations): entries are per database.
    admin.batch_execute("CREATE DATABASE shop").unwrap();
    cluster
        .connect_to("shop")
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('orders', preset => 'js53');",
        )
        .unwrap();
    for n in 0..66 {
        admin
            .batch_execute(&format!("CREATE DATABASE d{n} TEMPLATE shop"))
            .unwrap();
        if n % 2 == 1 {
            cluster
                .connect_to(&format!("d{n}"))
                .batch_execute("SELECT snowflake_drop_sequence('orders')")
                .unwrap();
        }
    }
    for round in 0..2 {
        for n in 0..66 {
            let result = cluster
                .connect_to(&format!("d{n}"))
                .query_one("SELECT snowflake_nextval('orders')", &[])
                .map(|row| row.get::<_, i64>(0))
                .map_err(|error| error_parts(&error).0);
            match n % 2 {
                0 => assert!(is_js53(result.unwrap()), "d{n}, round {round}"),
                _ => assert_eq!(result, Err("42704".into()), "d{n}, round {round}"),
            }
        }
    }
}
