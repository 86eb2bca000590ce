//! The promise side by side with pgEdge's snowflake (docs/benchmarks.md, "The promise beside
//! pgEdge's"): seven fault scenarios, each run once on a cluster that preloads both extensions,
//! with table `ids` in two databases, `ours` (default `snowflake_nextval()`) and `pgedge`
//! (default pgEdge's `snowflake.nextval('ids_seq')`, `snowflake.node = 1`). The same sessions,
//! loads and faults hit both. Each test prints its row of the fault table (`fault table | … |`:
//! IDs issued twice, ours then pgEdge's, counted as rows the primary key refused plus IDs
//! returned twice) and asserts ours: no ID issued twice, and every load after the fault above
//! every earlier ID. pgEdge's count is evidence whatever it is; its loads must have made IDs.

use std::ops::Range;
use std::thread;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{
    count, count_reissues, insert_for, insert_load, load_after, real_now_us, Generator, Issued,
    CLOCK_FAST, DEFAULT_IDS_TABLE,
};
use snowflake_id_cluster_tests::lagging_link::LaggingLink;
use snowflake_id_cluster_tests::{Client, Cluster, ClusterBuilder, InDatabase};

/// One extension's side of a scenario: its database and the table `ids` there.
struct Side {
    name: &'static str,
    database: &'static str,
    generator: Generator,
    ids_table: &'static str,
    /// An expression that returns the next ID of the sequence behind `ids`.
    nextval: &'static str,
}

const OURS: Side = Side {
    name: "snowflake_id",
    database: "ours",
    generator: Generator::Ours,
    ids_table: DEFAULT_IDS_TABLE,
    nextval: "snowflake_nextval()",
};

const PGEDGE: Side = Side {
    name: "pgEdge",
    database: "pgedge",
    generator: Generator::PgEdge,
    ids_table: "CREATE EXTENSION snowflake;
        CREATE SEQUENCE ids_seq;
        CREATE TABLE ids (
            id bigint PRIMARY KEY DEFAULT snowflake.nextval('ids_seq'),
            session int NOT NULL,
            n bigint NOT NULL,
            before timestamptz NOT NULL
        );",
    nextval: "snowflake.nextval('ids_seq')",
};

const SIDES: [&Side; 2] = [&OURS, &PGEDGE];

impl Side {
    /// This side's database on `cluster`.
    fn on<'a>(&self, cluster: &'a Cluster) -> InDatabase<'a> {
        InDatabase {
            cluster,
            database: self.database,
        }
    }

    /// A phase of this side's IDs.
    fn issued(&self, what: &str) -> Issued {
        Issued::new(&format!("{}, {what}", self.name)).of(self.generator)
    }

    fn rows(&self, cluster: &Cluster) -> i64 {
        count(
            &mut cluster.connect_to(self.database),
            "SELECT count(*) FROM ids",
        )
    }
}

/// A cluster that preloads both extensions (pgEdge's node number 1, ours without node bits).
fn both_preloaded() -> ClusterBuilder {
    Cluster::builder()
        .setting("shared_preload_libraries = 'snowflake_id, snowflake'")
        .setting("snowflake.node = 1")
}

/// Creates each side's database and its table `ids` on `cluster`.
fn create_tables(cluster: &Cluster) {
    let mut admin = cluster.connect();
    for side in SIDES {
        admin
            .batch_execute(&format!("CREATE DATABASE {}", side.database))
            .unwrap();
        cluster
            .connect_to(side.database)
            .batch_execute(side.ids_table)
            .unwrap();
    }
}

/// Both sides' `ids` at once, sessions `sessions` inserting for `duration` each, while `fault`
/// runs beside them; returns both loads (ours, then pgEdge's) and what `fault` returned.
fn both_loads_while<T: Send>(
    cluster: &Cluster,
    what: &str,
    sessions: Range<i32>,
    duration: Duration,
    fault: impl FnOnce() -> T + Send,
) -> ([Issued; 2], T) {
    thread::scope(|scope| {
        let loads = SIDES.map(|side| {
            let sessions = sessions.clone();
            scope.spawn(move || {
                let mut load = side.issued(what);
                insert_for(&side.on(cluster), &mut load, sessions, duration);
                load
            })
        });
        let fault = scope.spawn(fault).join().unwrap();
        (loads.map(|load| load.join().unwrap()), fault)
    })
}

/// After `event` on `cluster` (`what`), each side inserts until its IDs pass every ID of its
/// `earlier` phases ([`load_after`]).
fn both_loads_after(
    event: &str,
    what: &str,
    cluster: &Cluster,
    earlier: [Vec<&Issued>; 2],
) -> [Issued; 2] {
    let mut loads = SIDES.iter().zip(earlier).map(|(side, earlier)| {
        load_after(
            event,
            &format!("{}, {what}", side.name),
            &side.on(cluster),
            &earlier,
        )
    });
    [loads.next().unwrap(), loads.next().unwrap()]
}

/// Prints the scenario's row of the fault table and asserts ours (see the module comment);
/// `phases` are each side's, ours first.
fn row(scenario: &str, phases: [Vec<&Issued>; 2]) {
    for (side, phases) in SIDES.iter().zip(&phases) {
        for phase in phases {
            assert!(
                !phase.ids.is_empty(),
                "[{scenario}] {} made no IDs",
                phase.what
            );
        }
        assert!(phases.iter().all(|phase| phase.generator == side.generator));
    }
    let [ours, pgedge] = phases;
    let ours_test = format!("{scenario}: snowflake_id");
    let ours_found = count_reissues(&ours_test, &ours);
    let pgedge_found = count_reissues(&format!("{scenario}: pgEdge"), &pgedge);
    let ids = |phases: &[&Issued]| phases.iter().map(|phase| phase.ids.len()).sum::<usize>();
    println!(
        "fault table | {scenario} | {} of {} | {} of {} | pgEdge loads after the fault below \
         earlier IDs: {} |",
        ours_found.duplicates(),
        ids(&ours),
        pgedge_found.duplicates(),
        ids(&pgedge),
        pgedge_found.below.len()
    );
    ours_found.assert_none(&ours_test);
}

#[test]
fn a_runtime_clock_step_back_of_five_seconds_under_load() {
    let cluster = both_preloaded().faketime().start();
    create_tables(&cluster);
    let ([ours, pgedge], ()) = both_loads_while(
        &cluster,
        "insert load, the wall clock stepped back 5 s after 1.5 s",
        0..2,
        Duration::from_secs(4),
        || {
            thread::sleep(Duration::from_millis(1500));
            cluster.set_fake_time("-5s");
        },
    );
    row(
        "clock stepped back 5 s under load",
        [vec![&ours], vec![&pgedge]],
    );
}

/// In a transaction of its own, left open: 1,000 IDs of each side's sequence, ours first, so
/// that pgEdge's are the last WAL before a crash. Returns the IDs and the open sessions.
fn ids_in_open_transactions(cluster: &Cluster, what: &str) -> ([Issued; 2], Vec<Client>) {
    let mut sessions = Vec::new();
    let phases = SIDES.map(|side| {
        let mut client = cluster.connect_to(side.database);
        client.batch_execute("BEGIN").unwrap();
        let ids: Vec<i64> = client
            .query(
                &format!("SELECT {} FROM generate_series(1, 1000)", side.nextval),
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        let mut phase = side.issued(what);
        phase.add(&ids, 0, real_now_us());
        sessions.push(client);
        phase
    });
    (phases, sessions)
}

#[test]
fn a_crash_with_the_clock_set_back_one_minute_while_down() {
    let mut cluster = both_preloaded().faketime().start();
    create_tables(&cluster);
    let ([ours, pgedge], ()) = both_loads_while(
        &cluster,
        "insert load before the crash",
        0..2,
        Duration::from_secs(2),
        || (),
    );
    let ([ours_open, pgedge_open], sessions) = ids_in_open_transactions(
        &cluster,
        "1,000 IDs returned in a transaction still open at the crash",
    );
    cluster.stop("immediate");
    drop(sessions);
    cluster.set_fake_time("-1m");
    cluster.start();
    let [ours_after, pgedge_after] = both_loads_after(
        "a crash with the clock set back 1 min",
        "insert load after crash recovery",
        &cluster,
        [vec![&ours, &ours_open], vec![&pgedge, &pgedge_open]],
    );
    row(
        "crash (with IDs returned in an open transaction), clock set back 1 min while down",
        [
            vec![&ours, &ours_open, &ours_after],
            vec![&pgedge, &pgedge_open, &pgedge_after],
        ],
    );
}

#[test]
fn twenty_clean_restarts_then_failover_to_a_streaming_standby() {
    let mut primary = both_preloaded().start();
    create_tables(&primary);
    let standby = primary.start_replica();
    let mut restarts = SIDES.map(|side| side.issued("100 rows after each of 20 fast restarts"));
    for round in 0..20 {
        primary.stop("fast");
        primary.start();
        for (side, issued) in SIDES.iter().zip(&mut restarts) {
            insert_load(&side.on(&primary), issued, 200 + round..201 + round, 100);
        }
    }
    let mut loads = SIDES.map(|side| side.issued("insert load before the failover"));
    for (side, load) in SIDES.iter().zip(&mut loads) {
        insert_load(&side.on(&primary), load, 0..2, 10_000);
    }
    let rows = SIDES.map(|side| side.rows(&primary));
    primary.wait_for_standby(&standby, Duration::from_secs(30));
    primary.stop("fast");
    standby.promote();
    assert_eq!(
        SIDES.map(|side| side.rows(&standby)),
        rows,
        "the standby lost rows"
    );
    let [ours_after, pgedge_after] = both_loads_after(
        "promotion",
        "new primary (the promoted standby), insert load",
        &standby,
        [vec![&restarts[0], &loads[0]], vec![&restarts[1], &loads[1]]],
    );
    row(
        "20 clean restarts, then failover to a streaming standby",
        [
            vec![&restarts[0], &loads[0], &ours_after],
            vec![&restarts[1], &loads[1], &pgedge_after],
        ],
    );
}

/// Failover to a standby that streams through a link 200 ms late, its wall clock
/// `standby_clock` off (a libfaketime offset): loads on the primary for 3 s, the link cut
/// (what is in flight is lost) and the primary stopped at once, the standby promoted.
fn failover_to_a_lagging_standby(scenario: &str, standby_clock: &str) {
    let primary = both_preloaded()
        .setting("listen_addresses = '127.0.0.1'")
        .start();
    create_tables(&primary);
    let standby = primary.replica().faketime_at(standby_clock).start();
    primary.wait_for_standby(&standby, Duration::from_secs(60));
    let mut link = LaggingLink::between(&primary, &standby, Duration::from_millis(200));
    let ([ours, pgedge], ()) = both_loads_while(
        &primary,
        "insert load until the failure",
        0..2,
        Duration::from_secs(3),
        || (),
    );
    link.cut();
    let mut primary = primary;
    primary.stop("immediate");
    standby.promote();
    let [ours_after, pgedge_after] = both_loads_after(
        "promotion",
        "new primary (the promoted standby), insert load",
        &standby,
        [vec![&ours], vec![&pgedge]],
    );
    row(
        scenario,
        [vec![&ours, &ours_after], vec![&pgedge, &pgedge_after]],
    );
}

#[test]
fn failover_to_an_asynchronous_standby_lagging_200_ms() {
    failover_to_a_lagging_standby("failover to an asynchronous standby lagging 200 ms", "+0");
}

/// Not one of the seven: the same failover with the standby's clock 15 s behind, where
/// a promise kept in wall time no longer holds.
#[test]
fn failover_to_an_asynchronous_standby_lagging_200_ms_with_its_clock_behind() {
    failover_to_a_lagging_standby(
        "failover to an asynchronous standby lagging 200 ms, its clock 15 s behind",
        "-15s",
    );
}

#[test]
fn point_in_time_restore_to_the_middle_of_a_burst() {
    const RESTORE_POINT: &str = "mid_burst";
    let mut cluster = both_preloaded().wal_archive().start();
    create_tables(&cluster);
    let mut before = SIDES.map(|side| side.issued("insert load before the base backup"));
    for (side, load) in SIDES.iter().zip(&mut before) {
        insert_load(&side.on(&cluster), load, 0..2, 2_000);
    }
    let backup = cluster.base_backup();
    let ([ours, pgedge], ()) = both_loads_while(
        &cluster,
        "burst (4 s, the restore point after 2 s)",
        10..12,
        Duration::from_secs(4),
        || {
            thread::sleep(Duration::from_secs(2));
            cluster
                .connect()
                .execute("SELECT pg_create_restore_point($1)", &[&RESTORE_POINT])
                .unwrap();
        },
    );
    cluster.archive_current_wal(&mut cluster.connect());
    cluster.stop("fast");
    let restored = cluster
        .restore(&backup)
        .setting(&format!("recovery_target_name = '{RESTORE_POINT}'"))
        .setting("recovery_target_action = 'promote'")
        .start();
    restored.wait_until_primary(Duration::from_secs(60));
    for (side, (before, burst)) in SIDES.iter().zip(before.iter().zip([&ours, &pgedge])) {
        let rows = side.rows(&restored);
        let all = (before.ids.len() + burst.ids.len()) as i64;
        assert!(
            before.ids.len() as i64 <= rows && rows < all,
            "[{}] the restore brought back {rows} rows, not some of the burst's: {all} inserted",
            side.name
        );
    }
    let [ours_after, pgedge_after] = both_loads_after(
        "the point-in-time restore",
        "restored cluster, insert load",
        &restored,
        [vec![&before[0], &ours], vec![&before[1], &pgedge]],
    );
    row(
        "PITR to the middle of a burst (new IDs against every ID issued before or after the point)",
        [
            vec![&before[0], &ours, &ours_after],
            vec![&before[1], &pgedge, &pgedge_after],
        ],
    );
}

#[test]
fn pg_upgrade_of_a_cluster_whose_clock_ran_thirty_seconds_fast() {
    let mut old = both_preloaded().faketime_at(CLOCK_FAST).start();
    create_tables(&old);
    let mut fast = SIDES.map(|side| side.issued("insert load, clock 30 s fast"));
    for (side, load) in SIDES.iter().zip(&mut fast) {
        insert_load(&side.on(&old), load, 0..2, 10_000);
    }
    old.set_fake_time("+0");
    let mut corrected = SIDES.map(|side| side.issued("insert load, clock corrected"));
    for (side, load) in SIDES.iter().zip(&mut corrected) {
        insert_load(&side.on(&old), load, 2..4, 10_000);
    }
    old.stop("fast");
    let mut new = both_preloaded().create();
    new.upgrade_from(&old);
    new.start();
    let [ours_after, pgedge_after] = both_loads_after(
        "pg_upgrade",
        "upgraded cluster, insert load",
        &new,
        [vec![&fast[0], &corrected[0]], vec![&fast[1], &corrected[1]]],
    );
    row(
        "pg_upgrade after the clock ran 30 s fast and was corrected",
        [
            vec![&fast[0], &corrected[0], &ours_after],
            vec![&fast[1], &corrected[1], &pgedge_after],
        ],
    );
}

#[test]
fn a_dump_restored_into_a_cluster_ten_minutes_behind() {
    let old = both_preloaded().start();
    create_tables(&old);
    let mut before = SIDES.map(|side| side.issued("insert load in the dumped cluster"));
    for (side, load) in SIDES.iter().zip(&mut before) {
        insert_load(&side.on(&old), load, 0..2, 5_000);
    }
    let new = both_preloaded().faketime_at("-10m").start();
    for side in SIDES {
        new.connect()
            .batch_execute(&format!("CREATE DATABASE {}", side.database))
            .unwrap();
        old.dump_and_restore_into(side.database, &new, side.database);
    }
    let [ours_after, pgedge_after] = both_loads_after(
        "the restore",
        "cluster 10 min behind, insert load",
        &new,
        [vec![&before[0]], vec![&before[1]]],
    );
    row(
        "dump restored into a cluster 10 min behind",
        [
            vec![&before[0], &ours_after],
            vec![&before[1], &pgedge_after],
        ],
    );
}
