//! Whole-cluster tests of the foundation: many sessions at once, each with its own worker id,
//! released when it exits; sessions past `snowflake_id.max_workers` share instead of being
//! refused; the preload requirement. Each on a real cluster
//! started (and stopped) by the test.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{column, count, worker_ids_in_use};
use snowflake_id_cluster_tests::{backend_pid, error_parts, wait_until, Client, Cluster};

const SESSIONS: usize = 8;
const ROWS_PER_SESSION: i64 = 100_000;

#[test]
fn eight_sessions_insert_through_the_column_default() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE TABLE orders (
                 id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                 session int NOT NULL,
                 n int NOT NULL,
                 item text
             );",
        )
        .unwrap();

    // All sessions hold their slots at once, insert concurrently, then check their own rows.
    let all_claimed = Arc::new(Barrier::new(SESSIONS));
    let all_inserted = Arc::new(Barrier::new(SESSIONS));
    let sessions: Vec<_> = (0..SESSIONS as i32)
        .map(|session| {
            let mut client = cluster.connect();
            let (all_claimed, all_inserted) = (all_claimed.clone(), all_inserted.clone());
            thread::spawn(move || {
                client.query_one("SELECT snowflake_nextval()", &[]).unwrap();
                let slot: i32 = client
                    .query_one(
                        "SELECT worker FROM snowflake_workers
                         WHERE pid = pg_backend_pid() AND worker_bits = 10",
                        &[],
                    )
                    .unwrap()
                    .get(0);
                all_claimed.wait();
                let inserted = client
                    .execute(
                        "INSERT INTO orders (session, n, item)
                         SELECT $1, n, 'item ' || n FROM generate_series(1, $2::bigint) n",
                        &[&session, &ROWS_PER_SESSION],
                    )
                    .unwrap();
                assert_eq!(inserted, ROWS_PER_SESSION as u64);
                all_inserted.wait();
                let row = client
                    .query_one(
                        "SELECT count(DISTINCT (snowflake_decode(id)).worker),
                                min((snowflake_decode(id)).worker),
                                bool_and(id > previous OR previous IS NULL)
                         FROM (SELECT id, lag(id) OVER (ORDER BY n) AS previous
                               FROM orders WHERE session = $1) mine",
                        &[&session],
                    )
                    .unwrap();
                let (workers, worker, increasing): (i64, i32, bool) =
                    (row.get(0), row.get(1), row.get(2));
                assert_eq!(workers, 1, "session {session} decodes to {workers} workers");
                assert_eq!(worker, slot, "session {session} decodes to another worker");
                assert!(increasing, "session {session}: IDs not strictly increasing");
                slot
            })
        })
        .collect();
    let mut slots: Vec<i32> = sessions.into_iter().map(|s| s.join().unwrap()).collect();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(
        slots.len(),
        SESSIONS,
        "sessions shared worker ids: {slots:?}"
    );

    let row = admin
        .query_one(
            "SELECT count(*), count(DISTINCT id), count(DISTINCT (snowflake_decode(id)).worker)
             FROM orders",
            &[],
        )
        .unwrap();
    let (rows, distinct, workers): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(rows, SESSIONS as i64 * ROWS_PER_SESSION);
    assert_eq!(distinct, rows);
    assert_eq!(workers, SESSIONS as i64);

    // The sessions have disconnected: their slots come free (backend exit is asynchronous).
    assert!(
        wait_until(Duration::from_secs(60), || worker_ids_in_use(&mut admin)
            == 0),
        "worker ids still held after disconnect: {}",
        worker_ids_in_use(&mut admin)
    );
    println!(
        "8 sessions × {ROWS_PER_SESSION} rows: {rows} unique IDs, slots {slots:?}, all released"
    );
}

/// Every ID a session issues is counted once in `snowflake_stats().ids_issued`: in its own
/// reading inside its transaction, in another session's after its commits, and after it exited
/// in the middle of a transaction.
#[test]
fn every_id_a_session_issues_is_counted_once() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let issued = |client: &mut Client| count(client, "SELECT ids_issued FROM snowflake_stats()");
    let mut session = cluster.connect();
    session
        .batch_execute("BEGIN; SELECT count(snowflake_nextval()) FROM generate_series(1, 5000);")
        .unwrap();
    assert_eq!(issued(&mut session), 5_000, "the session's own reading");
    session.batch_execute("COMMIT").unwrap();
    for _ in 0..3 {
        session.batch_execute("SELECT snowflake_nextval()").unwrap();
    }
    assert_eq!(
        issued(&mut admin),
        5_003,
        "another session's reading after the commits"
    );
    session
        .batch_execute("BEGIN; SELECT snowflake_nextval(), snowflake_nextval();")
        .unwrap();
    drop(session);
    assert!(
        wait_until(Duration::from_secs(60), || worker_ids_in_use(&mut admin)
            == 0),
        "the session's worker id is still held after it disconnected"
    );
    assert_eq!(
        issued(&mut admin),
        5_005,
        "after the session exited mid-transaction"
    );
}

#[test]
fn without_preload_every_function_names_the_fix() {
    let cluster = Cluster::builder().without_preload().start();
    let mut client = cluster.connect();
    client
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    for call in [
        "SELECT snowflake_nextval()",
        "SELECT snowflake_nextval('default')",
        "SELECT snowflake_decode(1)",
        "SELECT * FROM snowflake_workers",
    ] {
        let error = client.query(call, &[]).expect_err(call);
        let (code, message, hint) = error_parts(&error);
        assert_eq!(code, "55000", "{call}: {message}");
        assert_eq!(
            message,
            "snowflake_id must be loaded via shared_preload_libraries"
        );
        assert!(
            hint.contains("shared_preload_libraries = 'snowflake_id'"),
            "{hint}"
        );
        assert!(
            !message.contains("PgLwLock") && !message.contains("panic"),
            "{message}"
        );
    }
}

#[test]
fn sessions_past_max_workers_share_a_worker_id_and_a_freed_one_is_taken_alone() {
    let cluster = Cluster::builder()
        .setting("snowflake_id.max_workers = 3")
        .start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let mut holders: Vec<Client> = (0..3).map(|_| cluster.connect()).collect();
    for holder in &mut holders {
        holder.query_one("SELECT snowflake_nextval()", &[]).unwrap();
    }
    // Where 0.5.0 refused with 53400, the fourth session shares the least used id (the lowest).
    let mut fourth = cluster.connect();
    fourth.query_one("SELECT snowflake_nextval()", &[]).unwrap();
    let shared: Vec<String> = column(
        &mut admin,
        "SELECT format('%s:%s:%s', worker, sessions, shared) FROM snowflake_workers",
    );
    assert_eq!(shared, ["0:2:t", "1:1:f", "2:1:f"]);
    let holder_pid = backend_pid(&mut holders[2]);
    drop(holders.pop());
    assert!(
        wait_until(Duration::from_secs(60), || count(
            &mut admin,
            &format!("SELECT count(*) FROM snowflake_workers WHERE pid = {holder_pid}")
        ) == 0),
        "the third holder's worker id was never released"
    );
    let mut fifth = cluster.connect();
    fifth.query_one("SELECT snowflake_nextval()", &[]).unwrap();
    let pid = backend_pid(&mut fifth);
    let row = admin
        .query_one(
            &format!("SELECT worker, shared FROM snowflake_workers WHERE pid = {pid}"),
            &[],
        )
        .unwrap();
    let (worker, shared): (i32, bool) = (row.get(0), row.get(1));
    assert_eq!((worker, shared), (2, false), "the freed id, alone");
}
