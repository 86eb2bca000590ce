//! Point-in-time recovery: a base backup (`pg_basebackup`) restored with the WAL archive
//! (`archive_mode = on`, `restore_command`) up to a named restore point
//! (`pg_create_restore_point`, `recovery_target_name`, `recovery_target_action = 'promote'`)
//! continues above every ID issued before the restore point (docs/design.md §5), even with its
//! wall clock 10 minutes back: replay raises the restored server's floor over what its WAL
//! carries, and the rows it brings along are above none of its new IDs.
//!
//! IDs issued after the restore point belong to a history the restore discards; the test prints
//! how many of them the restored server issued again but promises nothing about them. It
//! asserts no row refused by the primary key, no ID issued twice among the IDs before the
//! restore point and the restored server's, and the restored server's IDs above the former, and
//! prints the IDs, duplicates and how far IDs ran ahead of real time (`--nocapture`).
//!
//! A dump taken after the recovery target (of the history the recovery leaves) and restored into
//! the recovered server brings a floor written on another timeline: the writer relation names
//! the cluster and its timeline, so the recovered server takes it for a floor from elsewhere and
//! continues above the dump's IDs, its clock a minute behind. The protocol's model check found
//! this (a writer relation naming the system identifier alone took that floor for the server's
//! own, and new IDs repeated the dump's).

use std::collections::HashSet;
use std::thread;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{
    assert_no_id_reissued, assert_server_clock_offset, insert_load, load_after, min_new_id, Issued,
    DEFAULT_IDS_TABLE, MINUTE_US,
};
use snowflake_id_cluster_tests::{Client, Cluster};
use std::path::Path;

const RESTORE_POINT: &str = "before_the_last_rows";

/// Archives the WAL `cluster` wrote, stops it, and restores `backup` with its archive up to
/// [`RESTORE_POINT`] on a host whose clock is `offset` from real time (libfaketime): the
/// recovered server, promoted (`cluster`, whose directory holds the archive, must outlive it).
fn recover_to_the_restore_point(
    cluster: &mut Cluster,
    mut admin: Client,
    backup: &Path,
    offset: &str,
) -> Cluster {
    cluster.archive_current_wal(&mut admin);
    drop(admin);
    cluster.stop("fast");
    let restored = cluster
        .restore(backup)
        .faketime_at(offset)
        .setting(&format!("recovery_target_name = '{RESTORE_POINT}'"))
        .setting("recovery_target_action = 'promote'")
        .start();
    restored.wait_until_primary(Duration::from_secs(60));
    restored
}

#[test]
fn point_in_time_restore_with_the_clock_ten_minutes_back_continues_above_the_restored_ids() {
    let test = "point-in-time restore, clock 10 min back";
    let mut cluster = Cluster::builder().wal_archive().start();
    let mut admin = cluster.connect();
    admin.batch_execute(DEFAULT_IDS_TABLE).unwrap();
    let mut before_backup = Issued::new("before the base backup, insert load");
    insert_load(&cluster, &mut before_backup, 0..2, 2_000);
    let backup = cluster.base_backup();

    // Rows over 5 s after the base backup: well past the backup's copy of the reservation file.
    let mut after_backup = Issued::new("after the base backup, 10 rounds of insert load in 5 s");
    for round in 0..10 {
        let first = 10 + 2 * round;
        insert_load(&cluster, &mut after_backup, first..first + 2, 1_000);
        thread::sleep(Duration::from_millis(500));
    }
    admin
        .execute("SELECT pg_create_restore_point($1)", &[&RESTORE_POINT])
        .unwrap();
    let mut discarded = Issued::new("after the restore point, insert load (discarded)");
    insert_load(&cluster, &mut discarded, 40..42, 2_000);
    let restored = recover_to_the_restore_point(&mut cluster, admin, &backup, "-10m");
    let mut client = restored.connect();
    let offset = assert_server_clock_offset(&mut client, -10 * MINUTE_US);
    println!("[{test}] restored server's wall clock {offset} µs off the real time");
    let stored = Issued::stored(&mut client, "rows after the restore");
    let expected: HashSet<i64> = before_backup
        .ids
        .iter()
        .chain(&after_backup.ids)
        .copied()
        .collect();
    assert_eq!(
        stored.ids.iter().copied().collect::<HashSet<i64>>(),
        expected,
        "the restore did not bring back exactly the rows inserted before the restore point"
    );

    let new = load_after(
        "the point-in-time restore",
        "restored server (clock 10 min back), insert load",
        &restored,
        &[&before_backup, &after_backup],
    );
    let discarded_ids: HashSet<i64> = discarded.ids.iter().copied().collect();
    let again = new
        .ids
        .iter()
        .filter(|id| discarded_ids.contains(id))
        .count();
    println!(
        "[{test}] {} rows restored; of the {} IDs issued after the restore point (a discarded \
         history, not promised), the restored server issued {again} again",
        stored.ids.len(),
        discarded.ids.len()
    );
    assert_no_id_reissued(test, &[&before_backup, &after_backup, &new]);
}

#[test]
fn a_dump_taken_after_the_recovery_target_restores_above_the_recovered_servers_new_ids() {
    let test = "dump from after the recovery target";
    let mut cluster = Cluster::builder().wal_archive().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE TABLE app_ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);
             INSERT INTO app_ids (n) SELECT g FROM generate_series(1, 1000) g;",
        )
        .unwrap();
    let backup = cluster.base_backup();
    admin
        .execute("SELECT pg_create_restore_point($1)", &[&RESTORE_POINT])
        .unwrap();
    // Past what the reservations before the restore point and a promotion's margin cover.
    thread::sleep(Duration::from_secs(3));
    let newest: i64 = admin
        .query_one(
            "WITH added AS (INSERT INTO app_ids (n) SELECT g FROM generate_series(1, 1000) g \
             RETURNING id) SELECT max(id) FROM added",
            &[],
        )
        .unwrap()
        .get(0);
    let dump = cluster.dump_as("postgres", "postgres");
    let restored = recover_to_the_restore_point(&mut cluster, admin, &backup, "-1m");
    restored
        .connect()
        .batch_execute("CREATE DATABASE copy")
        .unwrap();
    restored.restore_dump(&dump, "copy", &[]);
    let first = min_new_id(
        &mut restored.connect_to("copy"),
        "INSERT INTO app_ids (n) SELECT g FROM generate_series(1, 1000) g",
    );
    println!(
        "[{test}] newest ID of the dump {newest}, first new ID in the restored copy {first} \
         (restored server's clock 1 min behind)"
    );
    assert!(
        first > newest,
        "[{test}] new ID {first} at or below the dump's newest {newest}"
    );
}
