//! The reference's "Known gaps" are what it says they are, and the step it gives avoids each
//! (docs/design.md §8). The protocol's model check finds these histories when they are let in;
//! here they run on real servers with real `pg_dump` and `pg_restore`.
//!
//! - A restore into a live database that sets its floor below IDs the database holds (an older
//!   dump's extension data, restored with `--data-only`), followed by a dump before an ID is
//!   issued there: the lower floor travels, and a cluster whose clock is behind issues IDs
//!   below stored ones (restoring it warns of the stored IDs ahead of the floor). Issuing an ID
//!   after such a restore, as the reference says, carries the floor above them again; where the
//!   lower floor has travelled already, the reference's `snowflake_raise_floor` over the newest
//!   stored ID's time plus a second, on the new cluster, carries it there.
//! - Two restores into one live database with no ID issued in between, the second (this
//!   cluster's own older dump) over a floor no session has read yet: the first floor is lost.
//!   Issuing an ID after each restore keeps it.
//! - A copy that goes back in its cluster's history on the same timeline (a base backup started
//!   as it is, a restored file-system snapshot) takes a dump of the original taken after the
//!   backup for its own. `snowflake_accept_floor()` after such a restore, as the reference says,
//!   takes its floor.
//! - Equal-layout sequences of two databases after `pg_upgrade` into a cluster whose clock is
//!   behind: each database continues above its own IDs only. The old cluster's reservation file
//!   copied into the new data directory after `pg_upgrade` and before its first start, as the
//!   reference says, keeps every database above every old ID.

use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{assert_server_clock_offset, count, MINUTE_US};
use snowflake_id_cluster_tests::{Client, Cluster};
use snowflake_id_core::reservation_file;

/// 20,000 rows into `app.ids` of `cluster`'s database `postgres`, now.
fn insert_rows(cluster: &Cluster) {
    cluster
        .connect()
        .batch_execute("INSERT INTO app.ids (n) SELECT g FROM generate_series(1, 20000) g")
        .unwrap();
}

/// `dump` restored into a new cluster whose clock is 10 minutes behind (further than any slow
/// machine takes between the rows and the new IDs): whether the restore warned of stored IDs
/// ahead of the floor, and how many of 1,000 new IDs of `'default'` are at or below the largest
/// stored one.
fn new_ids_at_or_below_stored(dump: &std::path::Path) -> (bool, i64) {
    let new = Cluster::builder().faketime_at("-10m").start();
    assert_server_clock_offset(&mut new.connect(), -10 * MINUTE_US);
    let restored = new.pg_restore(dump, "postgres", &["--exit-on-error", "--verbose"]);
    let said = String::from_utf8_lossy(&restored.stderr);
    assert!(restored.status.success(), "{said}");
    let warned = said.contains("app.ids.id holds IDs of snowflake sequence");
    (warned, new_ids_at_or_below_stored_in(&mut new.connect()))
}

/// The reference's step where a lower floor has travelled already (Known gaps): before IDs are
/// issued in the database, its floor raised past the newest ID of `table` (of `'default'`), as
/// it stands on the page.
fn raise_floor_past_newest(client: &mut Client, table: &str) {
    client
        .batch_execute(&format!(
            "SELECT snowflake_raise_floor(snowflake_timestamp(max(id)) + interval '1 second') FROM {table}"
        ))
        .unwrap();
}

#[test]
fn a_restore_that_lowers_the_floor_travels_in_a_dump_until_an_id_is_issued() {
    // Without the floor lead: with it the older dump's floor lies `idle_renewal` (5 min) past
    // its newest ID, above the rows stored the seconds since, and the gap shows only for rows
    // stored more than that after the older dump.
    let old = Cluster::builder()
        .setting("snowflake_id.idle_renewal = 0")
        .start();
    old.connect()
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE SCHEMA app;
             CREATE TABLE app.ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);",
        )
        .unwrap();
    insert_rows(&old);
    // An older dump: its floor lies at most `reserve_ahead` (1 s) past its newest ID.
    let older = old.dump_with("postgres", "postgres", &["--no-comments"]);
    std::thread::sleep(Duration::from_millis(2_500));
    insert_rows(&old);
    // Its extension data restored into the live database: the floor goes back below the rows
    // stored since.
    restore_data(&old, &older, true);

    // The gap: dumped before an ID is issued there, the lower floor travels.
    let lowered = old.dump_as("postgres", "postgres");
    let (warned, below) = new_ids_at_or_below_stored(&lowered);
    println!(
        "[known gap] dumped right after the restore: {below} of 1,000 new IDs at or below stored \
         ones; the restore warned: {warned}"
    );
    assert!(below > 0, "the gap the reference names did not show");
    // The restore's key over those rows says so, with the step (`stored_ids.rs`).
    assert!(warned, "no WARNING of stored IDs ahead of the floor");

    // Travelled already: the reference's step on the new cluster, before IDs are issued there.
    // Its clock is 30 s behind, within the 6 min 1 s ahead of it that `snowflake_raise_floor` takes.
    let behind = Cluster::builder().faketime_at("-30s").start();
    assert_server_clock_offset(&mut behind.connect(), -30_000_000);
    behind.restore_dump(&lowered, "postgres", &[]);
    let mut client = behind.connect();
    raise_floor_past_newest(&mut client, "app.ids");
    let below = new_ids_at_or_below_stored_in(&mut client);
    println!(
        "[known gap] restored elsewhere, the floor raised past the newest stored ID there: {below} \
         of 1,000 new IDs at or below stored ones"
    );
    assert_eq!(
        below, 0,
        "the reference's step did not carry the floor there"
    );

    // The reference's step: issue an ID in the database after such a restore, then move it.
    old.connect()
        .batch_execute("SELECT snowflake_nextval()")
        .unwrap();
    let carried = old.dump_with("postgres", "postgres", &["--no-owner"]);
    let (warned, below) = new_ids_at_or_below_stored(&carried);
    println!(
        "[known gap] dumped after an ID was issued: {below} of 1,000 new IDs at or below stored \
         ones; the restore warned: {warned}"
    );
    assert_eq!(below, 0, "the reference's step did not carry the floor");
    assert!(!warned, "a WARNING where the floor was carried");
}

/// Restores `dump`'s data of the extension's schema only (its floor and writer relations, its
/// sequences) into `cluster`'s database `postgres`, or all of its data with `only_extension`
/// false.
fn restore_data(cluster: &Cluster, dump: &std::path::Path, only_extension: bool) {
    let mut options = vec!["--data-only"];
    if only_extension {
        options.push("--schema=snowflake_id_internal");
    }
    cluster.restore_dump(dump, "postgres", &options);
}

/// How many of 1,000 new IDs of `'default'` that `client` takes are at or below the largest
/// stored in `app.ids`.
fn new_ids_at_or_below_stored_in(client: &mut Client) -> i64 {
    count(
        client,
        "SELECT count(*) FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 1000)) n
          WHERE n.id <= (SELECT max(id) FROM app.ids)",
    )
}

/// A restore over a floor no session of this server has read yet, naming this cluster as its
/// writer (this cluster's own older dump), loses the floor restored just before (rows of a
/// cluster whose clock is 10 minutes ahead): new IDs fall below theirs. An ID issued after the first
/// restore, as the reference says, carries it.
#[test]
fn a_second_restore_over_an_unread_floor_loses_it_until_an_id_is_issued_between() {
    let schema = "CREATE EXTENSION snowflake_id;
                  CREATE SCHEMA app;
                  CREATE TABLE app.ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);";
    let ahead = Cluster::builder().faketime_at("+10m").start();
    assert_server_clock_offset(&mut ahead.connect(), 10 * MINUTE_US);
    ahead.connect().batch_execute(schema).unwrap();
    insert_rows(&ahead);
    let theirs = ahead.dump_as("postgres", "postgres");

    for issue_between in [false, true] {
        let live = Cluster::builder().start();
        live.connect().batch_execute(schema).unwrap();
        insert_rows(&live);
        let own = live.dump_as("postgres", "postgres");
        restore_data(&live, &theirs, false);
        if issue_between {
            live.connect()
                .batch_execute("SELECT snowflake_nextval()")
                .unwrap();
        }
        restore_data(&live, &own, true);
        let below = new_ids_at_or_below_stored_in(&mut live.connect());
        println!(
            "[known gap] an ID issued between the restores: {issue_between}; {below} of 1,000 new \
             IDs at or below stored ones"
        );
        if issue_between {
            assert_eq!(below, 0, "the reference's step did not keep the floor");
        } else {
            assert!(below > 0, "the gap the reference names did not show");
        }
    }
}

/// A copy that goes back in its cluster's history on the same timeline (a base backup started as
/// it is, without `recovery.signal`, as a restored file-system snapshot starts) takes a dump of
/// the original taken after the backup for its own (its writer relation names this cluster and
/// timeline): restored into a new database of the copy, whose clock is 10 minutes behind, its
/// floor counts for nothing and new IDs repeat the dump's. `snowflake_accept_floor()` in that
/// database after the restore, the reference's step, takes the floor. (A point-in-time recovery
/// starts a new timeline, where the same dump's floor counts: `pitr.rs`.)
#[test]
fn a_copy_back_in_its_history_on_the_same_timeline_takes_a_later_dump_for_its_own() {
    let original = Cluster::builder().start();
    original
        .connect()
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE SCHEMA app;
             CREATE TABLE app.ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);",
        )
        .unwrap();
    insert_rows(&original);
    let backup = original.base_backup();
    // Past what the backup's reservations cover.
    std::thread::sleep(Duration::from_secs(3));
    insert_rows(&original);
    let later = original.dump_as("postgres", "postgres");

    let copy = original.snapshot_copy(&backup).faketime_at("-10m").start();
    assert_server_clock_offset(&mut copy.connect(), -10 * MINUTE_US);
    for accept in [false, true] {
        let database = if accept { "accepted" } else { "restored" };
        copy.connect()
            .batch_execute(&format!("CREATE DATABASE {database}"))
            .unwrap();
        copy.restore_dump(&later, database, &[]);
        let mut client = copy.connect_to(database);
        if accept {
            client
                .batch_execute("SELECT snowflake_accept_floor()")
                .unwrap();
        }
        let below = new_ids_at_or_below_stored_in(&mut client);
        println!(
            "[known gap] a later dump restored into a copy back on the same timeline, \
             snowflake_accept_floor() after it: {accept}; {below} of 1,000 new IDs at or below \
             stored ones"
        );
        if accept {
            assert_eq!(below, 0, "the reference's step did not take the floor");
        } else {
            assert!(below > 0, "the gap the reference names did not show");
        }
    }
}

/// The newest ID in database `database`'s table `ids` and, after a new insert there, its first
/// new ID.
fn newest_then_first_new(cluster: &Cluster, database: &str) -> (i64, i64) {
    let mut client = cluster.connect_to(database);
    let newest: i64 = client
        .query_one("SELECT max(id) FROM ids", &[])
        .unwrap()
        .get(0);
    let first: i64 = client
        .query_one("INSERT INTO ids (n) VALUES (0) RETURNING id", &[])
        .unwrap()
        .get(0);
    (newest, first)
}

/// Database `early` got its `'default'` IDs a few seconds before database `late` got theirs;
/// after `pg_upgrade` into a cluster whose clock is 10 minutes behind, `early` continues above
/// its own IDs only, among `late`'s. With the old cluster's reservation file copied over the
/// new one after `pg_upgrade` and before the new cluster's first start (the reference's step),
/// `early`'s new IDs lie above `late`'s too.
#[test]
fn the_old_reservation_copied_after_pg_upgrade_keeps_equal_layouts_of_two_databases_apart() {
    // Without the floor lead: with it `early`'s floor lies `idle_renewal` (5 min) past its IDs,
    // above `late`'s made seconds later, and the gap shows only for databases whose last IDs
    // are further apart.
    let mut old = Cluster::builder()
        .setting("snowflake_id.idle_renewal = 0")
        .start();
    for database in ["early", "late"] {
        old.connect()
            .batch_execute(&format!("CREATE DATABASE {database}"))
            .unwrap();
        old.connect_to(database)
            .batch_execute(
                "CREATE EXTENSION snowflake_id;
                 CREATE TABLE ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);
                 INSERT INTO ids (n) SELECT g FROM generate_series(1, 5000) g;",
            )
            .unwrap();
        std::thread::sleep(Duration::from_secs(3));
    }
    // A clean shutdown writes the reservation file.
    old.stop("fast");
    let old_file = old.data_dir().join(reservation_file::FILE_NAME);
    assert!(old_file.exists(), "{old_file:?}");
    let mut results = Vec::new();
    for copy_the_reservation in [false, true] {
        let mut new = Cluster::builder().faketime_at("-10m").create();
        new.upgrade_from(&old);
        if copy_the_reservation {
            let contents = std::fs::read(&old_file).unwrap();
            new.write_data_file(reservation_file::FILE_NAME, &contents);
        }
        new.start();
        // `early` first: a database's floor, once read, raises the whole server's.
        let (early_newest, early_first) = newest_then_first_new(&new, "early");
        let (late_newest, _) = newest_then_first_new(&new, "late");
        println!(
            "[known gap] pg_upgrade, reservation copied: {copy_the_reservation}; early's newest \
             {early_newest}, first new {early_first}; late's newest {late_newest}"
        );
        assert!(early_first > early_newest, "among early's own IDs");
        results.push(early_first > late_newest);
        new.stop("fast");
    }
    assert_eq!(
        results,
        [false, true],
        "without the copy early's new IDs fall among late's (the gap), with it above them"
    );
}
