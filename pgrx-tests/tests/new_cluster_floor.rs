//! IDs that arrive with the data: a cluster that has neither the reservation nor the WAL of the
//! cluster that issued the IDs in its tables (a `pg_dump` restored into a new cluster, a
//! reservation file deleted) still continues above every stored ID (docs/design.md §5), from
//! each database's floor relation (`snowflake_floor`, dumped as a `setval`), even when its wall
//! clock is 10 minutes behind those IDs. The dump test restores a second database whose IDs are
//! stored in every column shape of `column_shapes`.
//!
//! With the clock 10 minutes behind, a cluster that started from its wall clock would reach the
//! stored IDs only after 10 minutes; the tests insert a few thousand rows and assert the new IDs
//! above the stored ones (and no row refused by the primary key, no ID issued twice), and print
//! the IDs, duplicates and how far IDs ran ahead of real time (`--nocapture`).
//!
//! The dump comes from a cluster of `DUMP_FROM_PG_CONFIG` (default: the installation under test),
//! made with that cluster's own `pg_dump` and restored with the new one's `pg_restore`;
//! scripts/test.sh runs it from PostgreSQL 15 on every major (15 → 15, 15 → 17, 15 → 18), the way
//! from Debian's 15 to the newer majors (pg_upgrade from Debian's 15.20 fails; see the README).

use snowflake_id_cluster_tests::fixtures::{
    assert_ids_rows, assert_no_id_reissued, assert_server_clock_offset, assert_table_consistent,
    insert_load, Issued, DEFAULT_IDS_TABLE, MINUTE_US,
};
use snowflake_id_cluster_tests::{column_shapes, pg_config_program, pg_major, Cluster};
use snowflake_id_core::reservation_file;

/// Rows each of two sessions inserts before and after the event.
const ROWS: i64 = 5_000;

/// After `event`, `cluster` (`what`) inserts a few thousand rows; asserts that no ID of
/// `before` was issued again and that every new ID is above them.
fn load_and_check(test: &str, event: &str, what: &str, cluster: &Cluster, before: &Issued) {
    let mut after = Issued::after(event, what);
    insert_load(cluster, &mut after, 10..12, ROWS);
    assert_no_id_reissued(test, &[before, &after]);
    assert_table_consistent(&mut cluster.connect());
}

#[test]
fn dump_restored_into_a_new_cluster_ten_minutes_behind_continues_above_the_stored_ids() {
    let from = std::env::var("DUMP_FROM_PG_CONFIG").unwrap_or_else(|_| pg_config_program());
    let test = &format!(
        "pg_dump from {from} into a new PostgreSQL {} cluster 10 min behind",
        pg_major()
    );
    let old = Cluster::builder().installation(&from).start();
    old.connect().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    column_shapes::create(&old);
    let mut before = Issued::new("old cluster, insert load");
    insert_load(&old, &mut before, 0..2, ROWS);
    column_shapes::fill(&mut old.connect_to(column_shapes::DATABASE), ROWS);
    let stored_shapes = column_shapes::stored(&mut old.connect_to(column_shapes::DATABASE));

    let new = Cluster::builder().faketime_at("-10m").start();
    let mut client = new.connect();
    let offset = assert_server_clock_offset(&mut client, -10 * MINUTE_US);
    println!("[{test}] new cluster's wall clock {offset} µs off the real time");
    old.dump_and_restore_into("postgres", &new, "postgres");
    let shapes = column_shapes::DATABASE;
    client
        .batch_execute(&format!("CREATE DATABASE {shapes}"))
        .unwrap();
    old.dump_and_restore_into(shapes, &new, shapes);
    assert_ids_rows(&new, before.ids.len() as i64, "rows of the dump");

    // The second database first: its floor relation alone covers its IDs.
    let (below, equal) = column_shapes::new_ids_against(
        &mut new.connect_to(column_shapes::DATABASE),
        &stored_shapes,
        4 * ROWS,
    );
    println!(
        "[{test}] second database: {} IDs stored in 8 column shapes; {} new IDs: {below} at or \
         below the newest stored, {equal} equal to a stored one",
        stored_shapes.len(),
        4 * ROWS
    );
    assert_eq!(
        (below, equal),
        (0, 0),
        "second database: new IDs among the stored ones"
    );

    load_and_check(
        test,
        "the restore into a new cluster",
        "new cluster (clock 10 min behind), insert load",
        &new,
        &before,
    );
}

#[test]
fn deleted_reservation_file_and_clock_ten_minutes_back_continue_above_the_stored_ids() {
    let test = "reservation file deleted, clock 10 min back";
    let mut cluster = Cluster::builder().faketime().start();
    cluster.connect().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    let mut before = Issued::new("insert load");
    insert_load(&cluster, &mut before, 0..2, ROWS);

    cluster.stop("fast");
    let file = cluster.data_dir().join(reservation_file::FILE_NAME);
    std::fs::remove_file(&file)
        .unwrap_or_else(|error| panic!("delete {}: {error}", file.display()));
    cluster.set_fake_time("-10m");
    cluster.start();
    let mut client = cluster.connect();
    let offset = assert_server_clock_offset(&mut client, -10 * MINUTE_US);
    println!("[{test}] wall clock {offset} µs off the real time after the restart");

    load_and_check(
        test,
        "deleting the reservation file and restarting with the clock 10 min back",
        "insert load",
        &cluster,
        &before,
    );
}
