//! Crash recovery: a backend killed with `kill -9` in the middle of a long INSERT through
//! `snowflake_nextval()`, beside a session committing small batches. The postmaster resets shared
//! memory and recovers; the killed INSERT leaves no row and its slot is free, and every ID issued
//! after recovery is above every committed one and at or after the crashed server's reservation
//! (docs/design.md §5). No ID repeats and each session's IDs strictly increase; the test prints
//! what it measured (`--nocapture`).

use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::{
    assert_strictly_increasing, assert_table_consistent, default_id_unix_ms, insert_batch,
    insert_in_turn, reservation_in_file, stats, IDS_TABLE,
};
use snowflake_id_cluster_tests::{backend_pid, wait_until, Cluster};

#[test]
fn kill_9_mid_insert_then_new_ids_are_above_every_committed_one() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin.batch_execute(IDS_TABLE).unwrap();

    // Committed before the crash.
    let mut committed = cluster.connect();
    let ids = insert_batch(&mut committed, 0, 0, 20_000).unwrap();
    assert_strictly_increasing("committed session", &ids);

    // A steady session commits small batches until the crash takes it down.
    let steady = {
        let mut client = cluster.connect();
        thread::spawn(move || {
            let mut first = 0;
            let mut ids = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(120);
            while Instant::now() < deadline {
                match insert_batch(&mut client, 1, first, 1_000) {
                    Ok(batch) => ids.extend(batch),
                    Err(_) => break,
                }
                first += 1_000;
            }
            ids
        })
    };
    // The victim runs one long INSERT through the default.
    let mut victim = cluster.connect();
    let victim_pid = backend_pid(&mut victim);
    let victim_run = thread::spawn(move || {
        victim.execute(
            // generate_series in the select list streams (in FROM it would be materialised
            // before the first row).
            "INSERT INTO ids (before, id, session, n)
             SELECT clock_timestamp(), snowflake_nextval(), 2, g
             FROM (SELECT generate_series(1, 100000000) AS g) series",
            &[],
        )
    });
    let mut victim_issued = 0i64;
    assert!(
        wait_until(Duration::from_secs(60), || {
            victim_issued = admin
                .query_opt(
                    "SELECT ids_issued FROM snowflake_workers WHERE pid = $1",
                    &[&victim_pid],
                )
                .unwrap()
                .map_or(0, |row| row.get(0));
            victim_issued >= 100_000
        }),
        "the victim never got going ({victim_issued} IDs)"
    );
    let before_kill = stats(&mut admin);
    cluster.kill_backend(victim_pid);
    let victim_result = victim_run.join().unwrap();
    assert!(victim_result.is_err(), "the killed INSERT succeeded");
    let steady_ids = steady.join().unwrap();
    assert_strictly_increasing("steady session", &steady_ids);
    drop(admin);
    drop(committed);

    // The postmaster resets shared memory and recovers; no ID has been asked for since, so the
    // file holds the reservation of the crashed server.
    let started = Instant::now();
    let mut admin = cluster.wait_for_connection(Duration::from_secs(60));
    let recovery = started.elapsed();
    let reserved = reservation_in_file(&cluster);
    let after_recovery = stats(&mut admin);
    assert!(
        cluster.server_log().contains("terminated by signal 9"),
        "no crash recovery in the log\n{}",
        cluster.log_tail()
    );
    let row = admin
        .query_one(
            "SELECT count(*), max(id), count(*) FILTER (WHERE session = 1),
                    count(*) FILTER (WHERE session = 2)
             FROM ids",
            &[],
        )
        .unwrap();
    let (old_rows, old_max, steady_rows, victim_rows): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(victim_rows, 0, "rows of the killed INSERT survived");
    // The steady session's last batch may have committed without its client hearing so.
    let acknowledged = steady_ids.len() as i64;
    assert!(
        steady_rows == acknowledged || steady_rows == acknowledged + 1_000,
        "the steady session had {acknowledged} rows acknowledged, {steady_rows} in the table"
    );

    let new_ids = insert_in_turn(&cluster, "new", 10..12, 20_000);
    let new_min = *new_ids.iter().min().unwrap();
    let rows = assert_table_consistent(&mut admin);
    println!(
        "kill -9: victim pid {victim_pid} had issued >= {victim_issued} IDs; steady session \
         committed {steady_rows} rows ({} acknowledged); recovery took {recovery:?}; reservation on disk after the crash {} \
         µs; committed old rows {old_rows}, max tick {} ms; new min tick {} ms (gap {} ms); \
         table rows {rows}",
        steady_ids.len(),
        reserved,
        default_id_unix_ms(old_max),
        default_id_unix_ms(new_min),
        default_id_unix_ms(new_min) - default_id_unix_ms(old_max)
    );
    println!("kill -9: stats before the kill: {before_kill:?}");
    println!("kill -9: stats after recovery: {after_recovery:?}");
    assert!(
        new_min > old_max,
        "after crash recovery, new ID {new_min} is not above committed ID {old_max}"
    );
    // Whatever the killed session issued had its tick below the reservation; the recovered
    // cluster clock starts at or after it.
    assert!(
        default_id_unix_ms(new_min) * 1000 >= reserved,
        "new IDs start at tick {} ms, before the crashed server's reservation {reserved} µs",
        default_id_unix_ms(new_min)
    );
    // Shared memory was reset: the killed backend's slot is not held any more.
    assert_eq!(
        admin
            .query_one(
                "SELECT count(*) FROM snowflake_workers WHERE pid = $1",
                &[&victim_pid]
            )
            .unwrap()
            .get::<_, i64>(0),
        0
    );
}
