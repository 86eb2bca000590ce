//! Adoption: updating from the previous release, and dump/restore of a converted database.

use snowflake_id_cluster_tests::fixtures::{
    column, count, extension_crate_version, extension_objects, extension_version,
};
use snowflake_id_cluster_tests::Cluster;

/// The sequences with their layouts' fingerprints.
const SEQUENCES: &str = "SELECT format('%s %s', name, fingerprint) FROM snowflake_sequences";

#[test]
fn update_from_0_1_0_matches_a_fresh_install_and_keeps_sequences() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    for database in ["old_install", "fresh_install"] {
        admin
            .batch_execute(&format!("CREATE DATABASE {database}"))
            .unwrap();
    }
    let mut old = cluster.connect_to("old_install");
    old.batch_execute(
        "CREATE EXTENSION snowflake_id VERSION '0.1.0';
         SELECT snowflake_create_sequence('orders', preset => 'js53');
         SELECT snowflake_create_sequence('events', gene_bits => 3, worker_bits => 7);
         CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval('orders'), item text);
         INSERT INTO orders(item) SELECT 'before' FROM generate_series(1, 500);",
    )
    .unwrap();
    let version = extension_version(&mut old);
    assert_eq!(version, "0.1.0");
    let before_objects = extension_objects(&mut old);
    let sequences_before: Vec<String> = column(&mut old, SEQUENCES);
    let max_before: i64 = old
        .query_one("SELECT max(id) FROM orders", &[])
        .unwrap()
        .get(0);

    // Until the update, the old definitions read the new library's functions: their columns
    // are a prefix of the new ones (snowflake_worker_slots, snowflake_stats).
    let holders = count(
        &mut old,
        "SELECT count(*) FROM snowflake_workers WHERE pid = pg_backend_pid() AND ids_issued >= 500",
    );
    assert_eq!(holders, 1, "the 0.1.0 view of this session's worker id");
    let in_use: i32 = old
        .query_one("SELECT slots_in_use FROM snowflake_stats()", &[])
        .unwrap()
        .get(0);
    assert!(in_use >= 1);
    old.batch_execute("ALTER EXTENSION snowflake_id UPDATE")
        .unwrap();
    let version = extension_version(&mut old);
    assert_eq!(version, extension_crate_version());

    let mut fresh = cluster.connect_to("fresh_install");
    fresh
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let updated_objects = extension_objects(&mut old);
    assert_eq!(
        updated_objects,
        extension_objects(&mut fresh),
        "updated and fresh installs differ"
    );
    // 0.9.0 takes the catalog table's CHECK constraints and default away (a new connection's
    // first ID then reads neither pg_constraint nor pg_attrdef).
    let catalog_table = |objects: &[(String, Option<String>)]| {
        objects
            .iter()
            .find(|(object, _)| {
                // In the extension's schema up to 0.9.0, in its own since 0.10.0.
                object == "table snowflake_sequence_catalog"
                    || object == "table snowflake_id_internal.snowflake_sequence_catalog"
            })
            .and_then(|(_, definition)| definition.clone())
            .expect("the catalog table is a member")
    };
    let old_catalog = catalog_table(&before_objects);
    assert_eq!(old_catalog.matches("CHECK").count(), 8, "{old_catalog}");
    assert!(old_catalog.contains("DEFAULT now()"), "{old_catalog}");
    let updated_catalog = catalog_table(&updated_objects);
    assert!(
        !updated_catalog.contains("CHECK") && !updated_catalog.contains("DEFAULT"),
        "{updated_catalog}"
    );
    assert_eq!(
        updated_objects.len(),
        before_objects.len() + 30,
        "0.2.0 adds one function (snowflake_convert_column), 0.3.0 four (snowflake_currval, \
         snowflake_lastval, snowflake_to_base32, snowflake_from_base32), 0.4.0 three \
         (snowflake_citus_receive_sequence, snowflake_citus_forget_sequence, \
         snowflake_citus_node_ids), 0.5.0 five (the sequences snowflake_floor and \
         snowflake_floor_writer, their configuration entries, snowflake_raise_floor), 0.8.0 three \
         (snowflake_partition_width and the two snowflake_partition_bounds), 0.10.0 fourteen (the \
         schema snowflake_id_internal, its functions nextval, min_id, max_id, tick_start, \
         user_function, citus_receive_sequence, citus_forget_sequence, fingerprint, \
         catalog_guard, warn_of_stored_ids_ahead and stored_ids_ahead_of_new_indexes, the event \
         trigger snowflake_id_warn_of_stored_ids_ahead, snowflake_accept_floor); 0.12.0 drops \
         one (warn_of_stored_ids_ahead); 0.13.0 adds one (snowflake_directory)"
    );

    let sequences_after: Vec<String> = column(&mut old, SEQUENCES);
    assert_eq!(sequences_after, sequences_before);
    old.batch_execute("INSERT INTO orders(item) SELECT 'after' FROM generate_series(1, 500)")
        .unwrap();
    let row = old
        .query_one(
            "SELECT count(*), count(DISTINCT id), min(id) FILTER (WHERE item = 'after') FROM orders",
            &[],
        )
        .unwrap();
    let (rows, distinct, min_after): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((rows, distinct), (1000, 1000));
    assert!(
        min_after > max_before,
        "IDs after the update must continue above {max_before}"
    );
    println!(
        "0.1.0 -> {version}: {} extension objects equal to a fresh install",
        updated_objects.len()
    );
}

#[test]
fn a_converted_database_dumps_and_restores() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    for database in ["legacy", "legacy_restored"] {
        admin
            .batch_execute(&format!("CREATE DATABASE {database}"))
            .unwrap();
    }
    let mut legacy = cluster.connect_to("legacy");
    legacy
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE TABLE customers (id serial PRIMARY KEY, name text);
             CREATE TABLE orders (id serial PRIMARY KEY, customer_id int REFERENCES customers);
             INSERT INTO customers(name) SELECT 'c' || n FROM generate_series(1, 10) n;
             INSERT INTO orders(customer_id) SELECT 1 + n % 10 FROM generate_series(1, 100) n;
             SELECT snowflake_convert_column('customers', 'id');
             INSERT INTO customers(name) VALUES ('new');
             INSERT INTO orders(customer_id) SELECT max(id) FROM customers;",
        )
        .unwrap();

    cluster.dump_and_restore("legacy", "legacy_restored");

    let mut restored = cluster.connect_to("legacy_restored");
    restored
        .batch_execute(
            "INSERT INTO customers(name) VALUES ('after restore');
             INSERT INTO orders(customer_id) SELECT max(id) FROM customers;",
        )
        .unwrap();
    let row = restored
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE id > 1 << 50),
                    (SELECT count(*) FROM orders o JOIN customers c ON c.id = o.customer_id),
                    (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
                     WHERE attrelid = 'orders'::regclass AND attname = 'customer_id')
             FROM customers",
            &[],
        )
        .unwrap();
    let (customers, snowflakes, joined, fk_type): (i64, i64, i64, String) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!((customers, snowflakes, joined), (12, 2, 102));
    assert_eq!(fk_type, "bigint");
}
