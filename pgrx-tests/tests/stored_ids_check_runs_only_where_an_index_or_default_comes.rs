//! The stored-IDs check (the event trigger `snowflake_id_warn_of_stored_ids_ahead`,
//! src/checks/stored_ids.rs) warns at every command that builds an index led by a snowflake column
//! holding IDs ahead of the floor, or gives such a column its default (an `ALTER TABLE` that
//! builds any index, changes a column's type or attaches a partition looks at every index of its
//! table), and does no work for any other `CREATE INDEX` or `ALTER TABLE` (most of a migration's
//! steps), which therefore never warn, even on that table.

use snowflake_id_cluster_tests::fixtures::doc_examples::psql;
use snowflake_id_cluster_tests::Cluster;

const WARNING: &str = "public.ahead.id holds IDs of snowflake sequence \"default\"";

#[test]
fn the_stored_ids_check_runs_for_commands_that_index_or_set_a_default_and_only_those() {
    let cluster = Cluster::builder().start();
    let setup = psql(
        &cluster,
        "postgres",
        "CREATE EXTENSION snowflake_id;
         CREATE TABLE ahead (id bigint NOT NULL DEFAULT snowflake_nextval(), v int);
         -- Rows that came without their floor: IDs of an hour from now.
         INSERT INTO ahead (id, v)
         SELECT snowflake_min_id(now() + interval '1 hour') + g, g FROM generate_series(1, 10) g;",
        "setup.sql",
    );
    assert!(setup.success, "{}", setup.text);
    // In order: each command, and whether it warns of the IDs ahead.
    let commands = [
        ("ALTER TABLE ahead ADD PRIMARY KEY (id)", true),
        ("ALTER TABLE ahead ADD COLUMN x int", false),
        ("ALTER TABLE ahead ADD COLUMN y int DEFAULT 0", false),
        ("ALTER TABLE ahead DROP COLUMN x", false),
        ("ALTER TABLE ahead ALTER COLUMN v SET NOT NULL", false),
        (
            "ALTER TABLE ahead ADD CONSTRAINT v_positive CHECK (v > 0)",
            false,
        ),
        ("ALTER TABLE ahead ALTER COLUMN id DROP DEFAULT", false),
        (
            "ALTER TABLE ahead ALTER COLUMN id SET DEFAULT snowflake_nextval()",
            true,
        ),
        ("CREATE INDEX ahead_v ON ahead (v)", false),
        ("CREATE INDEX ahead_id_descending ON ahead (id DESC)", true),
        // An ALTER TABLE that builds any index looks at every index of its table.
        (
            "ALTER TABLE ahead ADD CONSTRAINT ahead_v_unique UNIQUE (v)",
            true,
        ),
        (
            "ALTER TABLE ahead ADD CONSTRAINT ahead_id_v UNIQUE (id, v)",
            true,
        ),
        ("ALTER TABLE ahead ALTER COLUMN v TYPE bigint", true),
    ];
    for (number, (command, warns)) in commands.iter().enumerate() {
        let printed = psql(&cluster, "postgres", command, &format!("{number}.sql"));
        assert!(printed.success, "{command}: {}", printed.text);
        assert_eq!(
            printed.text.contains(WARNING),
            *warns,
            "{command} should {}warn; it printed: {}",
            if *warns { "" } else { "not " },
            printed.text
        );
    }
    // The function runs only as the event trigger's.
    let called = psql(
        &cluster,
        "postgres",
        "SELECT snowflake_id_internal.stored_ids_ahead_of_new_indexes()",
        "called.sql",
    );
    assert!(!called.success, "{}", called.text);
    assert!(called.text.contains("ERROR:"), "{}", called.text);
}

/// Between the package's install and `ALTER EXTENSION snowflake_id UPDATE`, a database at 0.11.0
/// runs its PL/pgSQL trigger function with the new library, which still has the C function it
/// calls: it warns as before, and the update then replaces it.
#[test]
fn a_database_not_updated_yet_still_warns_and_after_the_update_too() {
    let cluster = Cluster::builder().start();
    let older = psql(
        &cluster,
        "postgres",
        "CREATE EXTENSION snowflake_id VERSION '0.11.0';
         CREATE TABLE ahead (id bigint NOT NULL DEFAULT snowflake_nextval(), v int);
         INSERT INTO ahead (id, v)
         SELECT snowflake_min_id(now() + interval '1 hour') + g, g FROM generate_series(1, 10) g;
         ALTER TABLE ahead ADD PRIMARY KEY (id);",
        "older.sql",
    );
    assert!(older.success, "{}", older.text);
    assert!(older.text.contains(WARNING), "{}", older.text);
    let updated = psql(
        &cluster,
        "postgres",
        "ALTER EXTENSION snowflake_id UPDATE;
         CREATE INDEX ahead_id_descending ON ahead (id DESC);",
        "updated.sql",
    );
    assert!(updated.success, "{}", updated.text);
    assert!(updated.text.contains(WARNING), "{}", updated.text);
}

/// On a partitioned table PostgreSQL reports the partitioned index or table and builds the
/// partitions' indexes without reporting them: on 229c10d `CREATE INDEX ON parent (id)`, `ALTER
/// TABLE parent ADD PRIMARY KEY (id, k)` and `ATTACH PARTITION` over rows an hour ahead gave no
/// WARNING. Each partition's index is checked, by its own table's rule, and the WARNING names
/// the partition that holds the IDs.
#[test]
fn commands_on_a_partitioned_table_check_every_partitions_index() {
    let cluster = Cluster::builder().start();
    let setup = psql(
        &cluster,
        "postgres",
        "CREATE EXTENSION snowflake_id;
         CREATE TABLE parted (id bigint NOT NULL DEFAULT snowflake_nextval(), k int)
             PARTITION BY RANGE (k);
         CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (100);
         CREATE TABLE parted_sub PARTITION OF parted FOR VALUES FROM (100) TO (200)
             PARTITION BY RANGE (k);
         CREATE TABLE parted_mid PARTITION OF parted_sub FOR VALUES FROM (100) TO (200);
         INSERT INTO parted (id, k)
         SELECT snowflake_min_id(now() + interval '1 hour') + g, g FROM generate_series(1, 10) g;
         INSERT INTO parted (id, k)
         SELECT snowflake_min_id(now() + interval '1 hour') + g, 100 + g
           FROM generate_series(1, 10) g;
         CREATE TABLE parted_high (id bigint NOT NULL DEFAULT snowflake_nextval(), k int NOT NULL);
         INSERT INTO parted_high (id, k)
         SELECT snowflake_min_id(now() + interval '1 hour') + g, 200 + g
           FROM generate_series(1, 10) g;",
        "setup.sql",
    );
    assert!(setup.success, "{}", setup.text);
    let warning = |table: &str| format!("public.{table}.id holds IDs of snowflake sequence");
    let commands = [
        (
            "CREATE INDEX parted_id ON parted (id)",
            vec!["parted_low", "parted_mid"],
        ),
        ("DROP INDEX parted_id", vec![]),
        (
            "ALTER TABLE parted ADD PRIMARY KEY (id, k)",
            vec!["parted_low", "parted_mid"],
        ),
        (
            "ALTER TABLE parted ATTACH PARTITION parted_high FOR VALUES FROM (200) TO (300)",
            vec!["parted_high"],
        ),
    ];
    for (number, (command, warned)) in commands.iter().enumerate() {
        let printed = psql(&cluster, "postgres", command, &format!("{number}.sql"));
        println!("{command}: {}", printed.text);
        assert!(printed.success, "{command}: {}", printed.text);
        for table in warned {
            assert!(
                printed.text.contains(&warning(table)),
                "{command} did not warn of {table}: {}",
                printed.text
            );
        }
        if warned.is_empty() {
            assert!(
                !printed.text.contains("holds IDs"),
                "{command}: {}",
                printed.text
            );
        }
    }
}
