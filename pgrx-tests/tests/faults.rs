//! Whole-cluster fault tests: restarts and crashes with the wall clock set back, a backend
//! killed mid-generation, clock steps under load, throttling of a small layout, connection
//! churn, a hot standby, a corrupt reservation file, and decoding in a parallel query. Each test
//! starts (and drops) its own cluster; clock faults use libfaketime (`ClusterBuilder::faketime`).
//!
//! Every test asserts that no ID repeats (primary keys, plus explicit counts) and that the IDs
//! of each session strictly increase, and prints what it measured (`--nocapture`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use snowflake_id_cluster_tests::{backend_pid, error_parts, wait_until, Client, Cluster, PgError};

/// The default sequence's epoch, 2025-01-01 00:00:00 UTC, in unix milliseconds.
const DEFAULT_EPOCH_UNIX_MS: i64 = 1_735_689_600_000;
const MINUTE_US: i64 = 60_000_000;
const HOUR_US: i64 = 60 * MINUTE_US;
const RESERVATION_FILE: &str = "snowflake_id.reservation";

const IDS_TABLE: &str = "CREATE EXTENSION snowflake_id;
     CREATE TABLE ids (
         id bigint PRIMARY KEY,
         session int NOT NULL,
         n bigint NOT NULL,
         before timestamptz NOT NULL
     );";

/// The test process's (real, never faked) time in unix microseconds.
fn real_now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as i64
}

/// Unix milliseconds of the tick of an ID of the default sequence (`id >> 22` + epoch).
fn default_id_unix_ms(id: i64) -> i64 {
    (id >> 22) + DEFAULT_EPOCH_UNIX_MS
}

/// How far the server's wall clock (`clock_timestamp()`) is from the real time, in µs.
fn server_clock_offset_us(client: &mut Client) -> i64 {
    let before = real_now_us();
    let server: i64 = client
        .query_one(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8",
            &[],
        )
        .unwrap()
        .get(0);
    let after = real_now_us();
    server - (before + after) / 2
}

/// Waits until the server's wall clock is `expected_us` off the real time (± 2 s).
fn assert_server_clock_offset(client: &mut Client, expected_us: i64) -> i64 {
    let mut offset = 0;
    let moved = wait_until(Duration::from_secs(10), || {
        offset = server_clock_offset_us(client);
        (offset - expected_us).abs() < 2_000_000
    });
    assert!(
        moved,
        "the server's wall clock is {offset} µs off the real time, expected about {expected_us}"
    );
    offset
}

#[derive(Debug)]
#[allow(dead_code)] // Printed with {:?}.
struct Stats {
    backward_steps: i64,
    largest_backward_step_ms: f64,
    wall_clock_behind_ms: f64,
    borrowed_ticks: i64,
    throttle_sleeps: i64,
    reservation_writes: i64,
    reserved_until_us: Option<i64>,
    cluster_clock_us: Option<i64>,
    slots_in_use: i32,
}

fn stats(client: &mut Client) -> Stats {
    let row = client
        .query_one(
            "SELECT backward_steps, largest_backward_step_ms, wall_clock_behind_ms,
                    borrowed_ticks, throttle_sleeps, reservation_writes,
                    (extract(epoch FROM reserved_until) * 1000000)::int8,
                    (extract(epoch FROM cluster_clock) * 1000000)::int8,
                    slots_in_use
             FROM snowflake_stats()",
            &[],
        )
        .unwrap();
    Stats {
        backward_steps: row.get(0),
        largest_backward_step_ms: row.get(1),
        wall_clock_behind_ms: row.get(2),
        borrowed_ticks: row.get(3),
        throttle_sleeps: row.get(4),
        reservation_writes: row.get(5),
        reserved_until_us: row.get(6),
        cluster_clock_us: row.get(7),
        slots_in_use: row.get(8),
    }
}

/// The reserved time in the data directory's reservation file (unix µs).
fn reservation_in_file(cluster: &Cluster) -> i64 {
    let path = cluster.data_dir().join(RESERVATION_FILE);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
    text.lines()
        .find_map(|line| line.strip_prefix("reserved_until_unix_us="))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no reserved time in {}: {text:?}", path.display()))
}

fn reservation_file_text(unix_us: i64) -> String {
    format!("snowflake_id reservation v1\nreserved_until_unix_us={unix_us}\n")
}

/// Inserts `count` rows of the default sequence into `ids` for `session`, numbered
/// `first + 1 ..= first + count`, with the server's wall clock read just before each ID.
/// Returns (ID, that wall clock reading in unix µs) in the order the IDs were made.
fn insert_rows(
    client: &mut Client,
    session: i32,
    first: i64,
    count: i64,
) -> Result<Vec<(i64, i64)>, PgError> {
    let rows = client.query(
        "INSERT INTO ids (before, id, session, n)
         SELECT clock_timestamp(), snowflake_nextval(), $1, $2 + g
         FROM generate_series(1, $3::bigint) g
         RETURNING id, (extract(epoch FROM before) * 1000000)::int8",
        &[&session, &first, &count],
    )?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

/// [`insert_rows`], IDs only.
fn insert_batch(
    client: &mut Client,
    session: i32,
    first: i64,
    count: i64,
) -> Result<Vec<i64>, PgError> {
    Ok(insert_rows(client, session, first, count)?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// Asserts that `ids` strictly increase.
fn assert_strictly_increasing(what: &str, ids: &[i64]) {
    if let Some(position) = ids.windows(2).position(|pair| pair[1] <= pair[0]) {
        panic!(
            "{what}: IDs not strictly increasing at {position}: {} then {}",
            ids[position],
            ids[position + 1]
        );
    }
}

/// Asserts that in table `ids` every session's IDs strictly increase in `n` order and that no
/// ID repeats; returns the row count.
fn assert_table_consistent(client: &mut Client) -> i64 {
    let rows = client
        .query(
            "SELECT session, count(*) FILTER (WHERE previous IS NOT NULL AND id <= previous)
             FROM (SELECT session, id, lag(id) OVER (PARTITION BY session ORDER BY n) previous
                   FROM ids) ordered
             GROUP BY session
             ORDER BY session",
            &[],
        )
        .unwrap();
    for row in &rows {
        let (session, decreasing): (i32, i64) = (row.get(0), row.get(1));
        assert_eq!(
            decreasing, 0,
            "session {session}: {decreasing} IDs not above the session's previous one"
        );
    }
    let row = client
        .query_one("SELECT count(*), count(DISTINCT id) FROM ids", &[])
        .unwrap();
    let (count, distinct): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(count, distinct, "duplicate IDs in table ids");
    count
}

// ---------------------------------------------------------------------------------------------
// 1 + 2: restart with the wall clock set back
// ---------------------------------------------------------------------------------------------

/// Generates (committed rows, plus IDs still streaming to a client when the server goes down),
/// stops the server with `mode`, sets its wall clock 10 minutes back, restarts and generates
/// again: every new ID is above every old one and at or after the persisted reservation.
fn restart_with_clock_set_back(mode: &str) {
    let mut cluster = Cluster::builder().faketime().start();
    let mut admin = cluster.connect();
    admin.batch_execute(IDS_TABLE).unwrap();
    let offset = assert_server_clock_offset(&mut admin, 0);
    println!("[{mode}] server wall clock before: {offset} µs off the real time");

    // Two sessions commit 20k IDs each.
    let mut old: Vec<i64> = Vec::new();
    for session in 0..2 {
        let mut client = cluster.connect();
        let ids = insert_batch(&mut client, session, 0, 20_000).unwrap();
        assert_strictly_increasing(&format!("old session {session}"), &ids);
        old.extend(ids);
    }
    // A third session keeps fetching IDs (not stored) until the server stops under it, so the
    // newest IDs are as close as possible to the shutdown.
    let streamed = Arc::new(Mutex::new(Vec::<i64>::new()));
    let streaming = {
        let mut client = cluster.connect();
        let streamed = streamed.clone();
        thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                match client.query(
                    "SELECT snowflake_nextval() FROM generate_series(1, 500)",
                    &[],
                ) {
                    Ok(rows) => {
                        let mut streamed = streamed.lock().unwrap();
                        streamed.extend(rows.iter().map(|row| row.get::<_, i64>(0)));
                    }
                    Err(_) => return,
                }
            }
        })
    };
    assert!(
        wait_until(Duration::from_secs(30), || streamed.lock().unwrap().len()
            >= 5_000),
        "the streaming session produced no IDs"
    );
    let before_stop = stats(&mut admin);
    drop(admin);
    cluster.stop(mode);
    streaming.join().unwrap();
    let streamed = std::mem::take(&mut *streamed.lock().unwrap());
    assert_strictly_increasing("streaming session", &streamed);
    let streamed_count = streamed.len();
    old.extend(streamed);
    let reserved = reservation_in_file(&cluster);
    let old_max = *old.iter().max().unwrap();
    assert!(
        (default_id_unix_ms(old_max) + 1) * 1000 <= reserved,
        "an issued ID's tick ({} ms) ends after the reservation on disk ({reserved} µs)",
        default_id_unix_ms(old_max)
    );

    cluster.set_fake_time("-10m");
    cluster.start();
    let mut admin = cluster.connect();
    let offset = assert_server_clock_offset(&mut admin, -10 * MINUTE_US);
    println!("[{mode}] server wall clock after restart: {offset} µs off the real time");

    let mut new: Vec<i64> = Vec::new();
    for session in 10..12 {
        let mut client = cluster.connect();
        let ids = insert_batch(&mut client, session, 0, 20_000).unwrap();
        assert_strictly_increasing(&format!("new session {session}"), &ids);
        new.extend(ids);
    }
    let new_min = *new.iter().min().unwrap();
    let after = stats(&mut admin);
    let rows = assert_table_consistent(&mut admin);
    assert_eq!(rows, 80_000);
    let mut all = old.clone();
    all.extend(&new);
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        old.len() + new.len(),
        "IDs repeated across the restart"
    );
    println!(
        "[{mode}] old IDs: {} ({} committed, {streamed_count} streamed), max tick {} ms; \
         reservation on disk {} µs; new IDs: {}, min tick {} ms; gap {} ms",
        old.len(),
        old.len() - streamed_count,
        default_id_unix_ms(old_max),
        reserved,
        new.len(),
        default_id_unix_ms(new_min),
        default_id_unix_ms(new_min) - default_id_unix_ms(old_max)
    );
    println!("[{mode}] stats before stop: {before_stop:?}");
    println!("[{mode}] stats after restart: {after:?}");
    assert!(
        new_min > old_max,
        "after the restart with the clock 10 minutes back, new ID {new_min} (tick {} ms) is not \
         above old ID {old_max} (tick {} ms)",
        default_id_unix_ms(new_min),
        default_id_unix_ms(old_max)
    );
    assert!(
        default_id_unix_ms(new_min) * 1000 >= reserved,
        "new IDs start at tick {} ms, before the reservation {reserved} µs",
        default_id_unix_ms(new_min)
    );
    // The cluster clock did not follow the wall clock back: IDs are still about real time.
    let lag_ms = real_now_us() / 1000 - default_id_unix_ms(*new.iter().max().unwrap());
    assert!(
        (-5_000..60_000).contains(&lag_ms),
        "new IDs are {lag_ms} ms behind the real time"
    );
}

#[test]
fn immediate_shutdown_then_restart_with_clock_ten_minutes_back() {
    restart_with_clock_set_back("immediate");
}

#[test]
fn fast_shutdown_then_restart_with_clock_ten_minutes_back() {
    restart_with_clock_set_back("fast");
}

// ---------------------------------------------------------------------------------------------
// 3: kill -9 of a generating backend
// ---------------------------------------------------------------------------------------------

#[test]
fn kill_9_of_a_generating_backend_then_crash_recovery() {
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

    let mut new_ids = Vec::new();
    for session in 10..12 {
        let mut client = cluster.connect();
        let ids = insert_batch(&mut client, session, 0, 20_000).unwrap();
        assert_strictly_increasing(&format!("new session {session}"), &ids);
        new_ids.extend(ids);
    }
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
// ---------------------------------------------------------------------------------------------
// 4 + 5: clock steps while sessions generate
// ---------------------------------------------------------------------------------------------

/// What one generating session saw: (ID, server wall clock just before it, unix µs) in order,
/// and each batch's latency.
struct SessionRun {
    session: i32,
    rows: Vec<(i64, i64)>,
    latencies: Vec<Duration>,
}

/// Runs `sessions` sessions that insert `batch`-row batches into `ids` until `during` (run on
/// the calling thread once all sessions hold their slots) returns; panics on any error.
fn generate_while<T>(
    cluster: &Cluster,
    sessions: i32,
    batch: i64,
    during: impl FnOnce() -> T,
) -> (Vec<SessionRun>, T) {
    let stop = AtomicBool::new(false);
    let ready = Barrier::new(sessions as usize + 1);
    thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|session| {
                let (stop, ready) = (&stop, &ready);
                scope.spawn(move || {
                    // Claim the slot before the clock work starts; meet at the barrier even on
                    // failure, so no one waits forever.
                    let client = cluster.try_connect_to("postgres").and_then(|mut client| {
                        client.query_one("SELECT snowflake_nextval()", &[])?;
                        Ok(client)
                    });
                    ready.wait();
                    let mut client = client.unwrap_or_else(|error| {
                        panic!("session {session}: {:?}", error_parts(&error))
                    });
                    let mut run = SessionRun {
                        session,
                        rows: Vec::new(),
                        latencies: Vec::new(),
                    };
                    let deadline = Instant::now() + Duration::from_secs(120);
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        let started = Instant::now();
                        let rows = insert_rows(&mut client, session, run.rows.len() as i64, batch)
                            .unwrap_or_else(|error| {
                                panic!("session {session}: {:?}", error_parts(&error))
                            });
                        run.latencies.push(started.elapsed());
                        run.rows.extend(rows);
                    }
                    run
                })
            })
            .collect();
        ready.wait();
        // Stop the sessions even when `during` panics, so the scope can end.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let result = {
            let _stop = StopOnDrop(&stop);
            during()
        };
        let runs = handles
            .into_iter()
            .map(|handle| handle.join().expect("a generating session panicked"))
            .collect();
        (runs, result)
    })
}

/// Checks every run's IDs strictly increase; returns (batches, median, max) batch latency.
fn check_runs(runs: &[SessionRun]) -> (usize, Duration, Duration) {
    let mut latencies: Vec<Duration> = Vec::new();
    for run in runs {
        let ids: Vec<i64> = run.rows.iter().map(|&(id, _)| id).collect();
        assert_strictly_increasing(&format!("session {}", run.session), &ids);
        assert!(!ids.is_empty(), "session {} made no IDs", run.session);
        latencies.extend(&run.latencies);
    }
    latencies.sort_unstable();
    let median = latencies[latencies.len() / 2];
    let max = *latencies.last().unwrap();
    (latencies.len(), median, max)
}

/// How far an ID's tick is ahead of the wall clock read just before it was made, in µs.
fn ahead_us(&(id, before_us): &(i64, i64)) -> i64 {
    default_id_unix_ms(id) * 1000 - before_us
}

fn min_max(values: impl Iterator<Item = i64>) -> Option<(i64, i64)> {
    values.fold(None, |range, v| match range {
        None => Some((v, v)),
        Some((low, high)) => Some((low.min(v), high.max(v))),
    })
}

/// An ID follows the wall clock when its tick starts at most a tick (plus read jitter) before
/// the reading taken just before it, and at most `snowflake.max_lead` (100 ms) after it, with
/// a generous margin for the reading being late.
const FOLLOWS_WALL_US: std::ops::RangeInclusive<i64> = -2_000..=1_000_000;

#[test]
fn wall_clock_stepped_back_while_four_sessions_generate() {
    let cluster = Cluster::builder().faketime().start();
    let mut admin = cluster.connect();
    admin.batch_execute(IDS_TABLE).unwrap();
    assert_server_clock_offset(&mut admin, 0);

    let (runs, (stepped_at_us, offset)) = generate_while(&cluster, 4, 200, || {
        thread::sleep(Duration::from_millis(1500));
        let stepped_at_us = real_now_us();
        cluster.set_fake_time("-10m");
        let offset = assert_server_clock_offset(&mut admin, -10 * MINUTE_US);
        thread::sleep(Duration::from_millis(1500));
        (stepped_at_us, offset)
    });
    let (batches, median, max) = check_runs(&runs);
    let rows = assert_table_consistent(&mut admin);
    let after = stats(&mut admin);
    // Rows whose wall clock reading was taken after the step (10 minutes back) carry IDs about
    // 10 minutes ahead of that reading: the cluster clock kept running at real speed.
    let all = || runs.iter().flat_map(|run| run.rows.iter());
    let is_after = |&&(_, before_us): &&(i64, i64)| before_us < stepped_at_us - MINUTE_US;
    let made_after = all().filter(is_after).count();
    let after_range = min_max(all().filter(is_after).map(ahead_us));
    let before_range = min_max(all().filter(|row| !is_after(row)).map(ahead_us));
    let newest = all().map(|&(id, _)| id).max().unwrap();
    let newest_lag_ms = real_now_us() / 1000 - default_id_unix_ms(newest);
    println!(
        "step back 10 min: server wall clock {offset} µs off the real time after the step; \
         {rows} rows in {batches} batches of 200 by 4 sessions; batch latency median \
         {median:?}, max {max:?} ({:.1}x median); IDs ahead of the wall clock read before them: \
         {before_range:?} µs before the step, {after_range:?} µs for the {made_after} rows \
         after it; newest ID {newest_lag_ms} ms behind the real time",
        max.as_secs_f64() / median.as_secs_f64()
    );
    println!("step back 10 min: stats {after:?}");
    assert!(
        max < Duration::from_secs(1),
        "a batch stalled for {max:?} (median {median:?})"
    );
    assert!(made_after > 0, "no row was made after the step");
    let (low, high) = before_range.unwrap();
    assert!(
        FOLLOWS_WALL_US.contains(&low) && FOLLOWS_WALL_US.contains(&high),
        "before the step IDs were {low}..{high} µs ahead of the wall clock"
    );
    let (low, high) = after_range.unwrap();
    assert!(
        low > 10 * MINUTE_US - 1_000_000 && high < 10 * MINUTE_US + 1_000_000,
        "after the step IDs were {low}..{high} µs ahead of the wall clock, expected 10 minutes"
    );
    assert!(
        (-1_000..5_000).contains(&newest_lag_ms),
        "newest ID is {newest_lag_ms} ms behind the real time"
    );
    assert_eq!(
        after.backward_steps, 1,
        "one step back is counted once: {after:?}"
    );
    assert!(
        (599_000.0..=601_000.0).contains(&after.largest_backward_step_ms),
        "largest backward step {} ms, expected about 600000",
        after.largest_backward_step_ms
    );
}

#[test]
fn wall_clock_stepped_forward_an_hour_then_back() {
    let cluster = Cluster::builder().faketime().start();
    let mut admin = cluster.connect();
    admin.batch_execute(IDS_TABLE).unwrap();
    assert_server_clock_offset(&mut admin, 0);

    let (runs, (forward_at_us, back_at_us)) = generate_while(&cluster, 4, 200, || {
        thread::sleep(Duration::from_millis(1000));
        let forward_at_us = real_now_us();
        cluster.set_fake_time("+1h");
        assert_server_clock_offset(&mut admin, HOUR_US);
        thread::sleep(Duration::from_millis(1000));
        let back_at_us = real_now_us();
        cluster.set_fake_time("+0");
        assert_server_clock_offset(&mut admin, 0);
        thread::sleep(Duration::from_millis(1000));
        (forward_at_us, back_at_us)
    });
    let (batches, median, max) = check_runs(&runs);
    let rows = assert_table_consistent(&mut admin);
    let after = stats(&mut admin);

    // Per session: rows before the forward step follow the wall clock; rows whose reading was
    // taken while the wall clock was an hour ahead follow it too (IDs about an hour ahead of
    // the real time); rows after the step back keep the cluster clock's hour of lead.
    let forward = |&(_, before_us): &(i64, i64)| before_us > forward_at_us + 30 * MINUTE_US;
    let (mut pre, mut during, mut post) = (Vec::new(), Vec::new(), Vec::new());
    let mut during_vs_real = i64::MAX;
    for run in &runs {
        let first = run.rows.iter().position(forward);
        let last = run.rows.iter().rposition(forward);
        let (Some(first), Some(last)) = (first, last) else {
            panic!(
                "session {} made no ID while the clock was ahead",
                run.session
            );
        };
        assert!(
            run.rows[first..=last].iter().all(forward),
            "session {}: the wall clock went forward more than once",
            run.session
        );
        assert!(
            last + 1 < run.rows.len(),
            "session {} made no ID after the step back",
            run.session
        );
        // The last row before the step may have read the wall clock before it and taken its ID
        // after it: leave it out.
        pre.extend(run.rows[..first.saturating_sub(1)].iter().map(ahead_us));
        // A backend reads the wall clock once per tick (the monotonic clock in between), so IDs
        // follow a forward step from the backend's next tick on: only a prefix of this phase
        // may still lag, all within one tick of the last ID made before the step.
        let ahead_phase = &run.rows[first..=last];
        let lagging = ahead_phase
            .iter()
            .position(|row| FOLLOWS_WALL_US.contains(&ahead_us(row)))
            .unwrap_or(ahead_phase.len());
        let last_before_ms = default_id_unix_ms(run.rows[first.saturating_sub(1)].0);
        for &(id, _) in &ahead_phase[..lagging] {
            assert!(
                default_id_unix_ms(id) <= last_before_ms + 2,
                "session {}: ID {id} did not follow the forward step within one tick",
                run.session
            );
        }
        during.extend(ahead_phase[lagging..].iter().map(ahead_us));
        for &(id, _) in &ahead_phase[lagging..] {
            during_vs_real = during_vs_real.min(default_id_unix_ms(id) * 1000 - forward_at_us);
        }
        post.extend(run.rows[last + 1..].iter().map(ahead_us));
    }
    let newest = runs
        .iter()
        .filter_map(|run| run.rows.last())
        .map(|&(id, _)| id)
        .max()
        .unwrap();
    let newest_vs_real_ms = default_id_unix_ms(newest) - real_now_us() / 1000;
    let (pre, during, post) = (
        min_max(pre.into_iter()),
        min_max(during.into_iter()),
        min_max(post.into_iter()),
    );
    println!(
        "forward 1 h then back: {rows} rows in {batches} batches of 200 by 4 sessions; batch \
         latency median {median:?}, max {max:?}; IDs ahead of the wall clock read before them \
         (µs): before the step {pre:?}, while an hour ahead {during:?}, after the step back \
         {post:?}; first ID in the hour-ahead phase {during_vs_real} µs after the real step \
         time; newest ID {newest_vs_real_ms} ms ahead of the real time (step back {} ms before \
         the end)",
        (real_now_us() - back_at_us) / 1000
    );
    println!("forward 1 h then back: stats {after:?}");
    assert!(
        max < Duration::from_secs(1),
        "a batch stalled for {max:?} (median {median:?})"
    );
    for (phase, range) in [("before the step", pre), ("while ahead", during)] {
        let (low, high) = range.unwrap_or_else(|| panic!("no rows {phase}"));
        assert!(
            FOLLOWS_WALL_US.contains(&low) && FOLLOWS_WALL_US.contains(&high),
            "{phase}: IDs {low}..{high} µs ahead of the wall clock"
        );
    }
    assert!(
        during_vs_real > HOUR_US - 1_000_000,
        "IDs during the forward phase are only {during_vs_real} µs after the step"
    );
    let (low, high) = post.unwrap();
    assert!(
        low > HOUR_US - 1_000_000 && high < HOUR_US + 1_000_000,
        "after the step back IDs were {low}..{high} µs ahead of the wall clock, expected 1 h"
    );
    assert!(
        (HOUR_US / 1000 - 5_000..HOUR_US / 1000 + 1_000).contains(&newest_vs_real_ms),
        "newest ID is {newest_vs_real_ms} ms ahead of the real time, expected about 1 h"
    );
    assert_eq!(
        after.backward_steps, 1,
        "one step back is counted once: {after:?}"
    );
    assert!(
        (3_599_000.0..=3_601_000.0).contains(&after.largest_backward_step_ms),
        "largest backward step {} ms, expected about 3600000",
        after.largest_backward_step_ms
    );
}

// ---------------------------------------------------------------------------------------------
// 6: a small layout under bulk insert: borrowing is bounded by snowflake.max_lead
// ---------------------------------------------------------------------------------------------

#[test]
fn few_sequence_bits_under_bulk_insert_stay_within_max_lead() {
    const MAX_LEAD_MS: i64 = 20;
    const SESSIONS: i32 = 2;
    const ROWS: i64 = 10_000;
    let cluster = Cluster::builder()
        .setting(&format!("snowflake.max_lead = {MAX_LEAD_MS}"))
        .start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('tiny', time_bits => 41, worker_bits => 10,
                                              sequence_bits => 2);
             CREATE TABLE tiny_ids (
                 id bigint PRIMARY KEY,
                 session int NOT NULL,
                 n bigint NOT NULL,
                 after timestamptz NOT NULL
             );",
        )
        .unwrap();
    let row = admin
        .query_one(
            "SELECT time_bits, worker_bits, sequence_bits, extract(epoch FROM epoch)::int8,
                    extract(epoch FROM time_unit)::float8
             FROM snowflake_sequences WHERE name = 'tiny'",
            &[],
        )
        .unwrap();
    let layout: (i32, i32, i32, i64, f64) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    assert_eq!(layout, (41, 10, 2, DEFAULT_EPOCH_UNIX_MS / 1000, 0.001));
    let tick_unix_ms = |id: i64| (id >> 12) + DEFAULT_EPOCH_UNIX_MS;

    let started = Instant::now();
    let runs: Vec<Vec<(i64, i64)>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..SESSIONS)
            .map(|session| {
                let cluster = &cluster;
                scope.spawn(move || {
                    let mut client = cluster.connect();
                    // clock_timestamp() after the ID: the ID may not be further ahead of it
                    // than max_lead (plus the tick it falls in).
                    let rows = client
                        .query(
                            "INSERT INTO tiny_ids (id, session, n, after)
                             SELECT snowflake_nextval('tiny'), $1, g, clock_timestamp()
                             FROM generate_series(1, $2::bigint) g
                             RETURNING id, (extract(epoch FROM after) * 1000000)::int8",
                            &[&session, &ROWS],
                        )
                        .unwrap_or_else(|error| panic!("session {session}: {error}"));
                    rows.iter()
                        .map(|row| (row.get(0), row.get(1)))
                        .collect::<Vec<(i64, i64)>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = started.elapsed();
    let mut leads = Vec::new();
    for (session, rows) in runs.iter().enumerate() {
        assert_eq!(rows.len() as i64, ROWS);
        let ids: Vec<i64> = rows.iter().map(|&(id, _)| id).collect();
        assert_strictly_increasing(&format!("tiny session {session}"), &ids);
        leads.extend(
            rows.iter()
                .map(|&(id, after_us)| tick_unix_ms(id) * 1000 - after_us),
        );
    }
    let sample = runs[0][ROWS as usize / 2].0;
    let decoded: i64 = admin
        .query_one(
            "SELECT (extract(epoch FROM snowflake_timestamp($1, 'tiny')) * 1000)::int8",
            &[&sample],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        decoded,
        tick_unix_ms(sample),
        "decode disagrees with the layout"
    );
    let row = admin
        .query_one("SELECT count(*), count(DISTINCT id) FROM tiny_ids", &[])
        .unwrap();
    let (count, distinct): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(
        (count, distinct),
        (SESSIONS as i64 * ROWS, SESSIONS as i64 * ROWS)
    );
    let after = stats(&mut admin);
    let max_lead_us = *leads.iter().max().unwrap();
    let ahead = leads.iter().filter(|&&lead| lead > 0).count();
    println!(
        "tiny layout (2 sequence bits), max_lead {MAX_LEAD_MS} ms: {count} IDs by {SESSIONS} \
         sessions in {elapsed:?} ({:.0} IDs/s); largest lead over clock_timestamp() {} µs; \
         {ahead} IDs ahead of it; borrowed_ticks {}, throttle_sleeps {}",
        count as f64 / elapsed.as_secs_f64(),
        max_lead_us,
        after.borrowed_ticks,
        after.throttle_sleeps
    );
    assert!(
        max_lead_us <= (MAX_LEAD_MS + 1) * 1000,
        "an ID was {max_lead_us} µs ahead of the clock, beyond max_lead {MAX_LEAD_MS} ms + 1 tick"
    );
    assert!(after.borrowed_ticks > 0, "{after:?}");
    assert!(after.throttle_sleeps > 0, "{after:?}");
}

// ---------------------------------------------------------------------------------------------
// 7: connection churn beside steady generators
// ---------------------------------------------------------------------------------------------

#[test]
fn three_thousand_short_connections_beside_steady_generators() {
    const CHURN_THREADS: i32 = 4;
    const CYCLES_PER_THREAD: i32 = 750;
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(&format!(
            "{IDS_TABLE}
             CREATE TABLE churn (id bigint PRIMARY KEY, cycle int NOT NULL);"
        ))
        .unwrap();

    let started = Instant::now();
    let (steady, churned) = generate_while(&cluster, 4, 100, || {
        thread::scope(|scope| {
            let handles: Vec<_> = (0..CHURN_THREADS)
                .map(|thread_number| {
                    let cluster = &cluster;
                    scope.spawn(move || {
                        let mut ids = Vec::new();
                        for cycle in 0..CYCLES_PER_THREAD {
                            let cycle = thread_number * CYCLES_PER_THREAD + cycle;
                            let mut client = cluster.connect();
                            let first: i64 = client
                                .query_one("SELECT snowflake_nextval()", &[])
                                .unwrap()
                                .get(0);
                            let rows = client
                                .query(
                                    "INSERT INTO churn (id, cycle)
                                     SELECT snowflake_nextval(), $1
                                     FROM generate_series(1, 3) RETURNING id",
                                    &[&cycle],
                                )
                                .unwrap_or_else(|error| panic!("cycle {cycle}: {error}"));
                            let mut mine = vec![first];
                            mine.extend(rows.iter().map(|row| row.get::<_, i64>(0)));
                            assert_strictly_increasing(&format!("cycle {cycle}"), &mine);
                            ids.extend(mine);
                        }
                        ids
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|handle| handle.join().expect("a churn thread panicked"))
                .collect::<Vec<i64>>()
        })
    });
    let elapsed = started.elapsed();
    let (batches, median, max) = check_runs(&steady);
    let steady_rows = assert_table_consistent(&mut admin);
    let mut all: Vec<i64> = churned.clone();
    all.extend(
        steady
            .iter()
            .flat_map(|run| run.rows.iter().map(|&(id, _)| id)),
    );
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "an ID was issued twice");
    let row = admin
        .query_one(
            "SELECT count(*), count(DISTINCT id),
                    count(DISTINCT (id >> 12) & 1023), max((id >> 12) & 1023)
             FROM churn",
            &[],
        )
        .unwrap();
    let (churn_rows, churn_distinct, workers, max_worker): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(churn_rows, 3 * (CHURN_THREADS * CYCLES_PER_THREAD) as i64);
    assert_eq!(churn_distinct, churn_rows);

    let slots = || -> i64 {
        cluster
            .connect()
            .query_one("SELECT count(*) FROM snowflake_workers", &[])
            .unwrap()
            .get(0)
    };
    let mut left = slots();
    let released = wait_until(Duration::from_secs(15), || {
        left = slots();
        left == 0
    });
    let held: Vec<String> = admin
        .query("SELECT format('%s', w) FROM snowflake_workers w", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let after = stats(&mut admin);
    println!("churn: stats {after:?}");
    println!(
        "churn: {} connections ({} IDs) beside 4 steady sessions ({steady_rows} rows, {batches} \
         batches, latency median {median:?}, max {max:?}) in {elapsed:?}; churn used {workers} \
         distinct workers, highest {max_worker}; slots held afterwards: {left}",
        CHURN_THREADS * CYCLES_PER_THREAD,
        churned.len()
    );
    assert!(
        released,
        "{left} worker slots still held after every session disconnected: {held:?}"
    );
    assert_eq!(
        after.backward_steps, 0,
        "the clock never stepped: {after:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 8: hot standby
// ---------------------------------------------------------------------------------------------

#[test]
fn hot_standby_refuses_nextval_and_decodes_replicated_ids() {
    let primary = Cluster::builder().start();
    let mut client = primary.connect();
    client
        .batch_execute(&format!(
            "{IDS_TABLE}
             SELECT snowflake_create_sequence('short', preset => 'js53');
             CREATE TABLE short_ids (id bigint PRIMARY KEY);
             INSERT INTO short_ids SELECT snowflake_nextval('short') FROM generate_series(1, 100);"
        ))
        .unwrap();
    insert_batch(&mut client, 0, 0, 1_000).unwrap();
    let replica = primary.start_replica();
    // Rows made after the base backup arrive by streaming.
    insert_batch(&mut client, 0, 1_000, 1_000).unwrap();
    let expected: String = client
        .query_one(
            "SELECT string_agg(format('%s=%s', id, snowflake_decode(id)), ',' ORDER BY id)
             FROM ids",
            &[],
        )
        .unwrap()
        .get(0);
    let expected_short: String = client
        .query_one(
            "SELECT string_agg(format('%s=%s', id, snowflake_decode(id, 'short')), ',' ORDER BY id)
             FROM short_ids",
            &[],
        )
        .unwrap()
        .get(0);

    let mut standby = replica.connect();
    let in_recovery: bool = standby
        .query_one("SELECT pg_is_in_recovery()", &[])
        .unwrap()
        .get(0);
    assert!(in_recovery, "the replica is not a standby");
    let mut replicated = 0;
    assert!(
        wait_until(Duration::from_secs(30), || {
            replicated = standby
                .query_one("SELECT count(*) FROM ids", &[])
                .unwrap()
                .get::<_, i64>(0);
            replicated == 2_000
        }),
        "the standby has {replicated} of 2000 rows"
    );

    // Fresh sessions, so each result is the first use of the extension in its backend.
    let nextval = replica
        .connect()
        .query_one("SELECT snowflake_nextval()", &[])
        .map(|row| row.get::<_, i64>(0))
        .map_err(|error| error_parts(&error));
    let nextval_short = replica
        .connect()
        .query_one("SELECT snowflake_nextval('short')", &[])
        .map(|row| row.get::<_, i64>(0))
        .map_err(|error| error_parts(&error));
    let decoded = replica
        .connect()
        .query_one(
            "SELECT string_agg(format('%s=%s', id, snowflake_decode(id)), ',' ORDER BY id)
             FROM ids",
            &[],
        )
        .map(|row| row.get::<_, String>(0))
        .map_err(|error| error_parts(&error));
    let decoded_short = replica
        .connect()
        .query_one(
            "SELECT string_agg(format('%s=%s', id, snowflake_decode(id, 'short')), ',' ORDER BY id)
             FROM short_ids",
            &[],
        )
        .map(|row| row.get::<_, String>(0))
        .map_err(|error| error_parts(&error));
    let workers = replica
        .connect()
        .query_one("SELECT count(*) FROM snowflake_workers", &[])
        .map(|row| row.get::<_, i64>(0))
        .map_err(|error| error_parts(&error));
    println!(
        "standby: {replicated} rows replicated; snowflake_nextval() -> {nextval:?}; \
         snowflake_nextval('short') -> {nextval_short:?}; decode of replicated IDs: {}; \
         decode of 'short' IDs: {}; workers on the standby: {workers:?}",
        match &decoded {
            Ok(text) => format!("ok, equal to the primary's: {}", *text == expected),
            Err(error) => format!("{error:?}"),
        },
        match &decoded_short {
            Ok(text) => format!("ok, equal to the primary's: {}", *text == expected_short),
            Err(error) => format!("{error:?}"),
        },
    );
    let mut problems = Vec::new();
    for (call, result) in [
        ("snowflake_nextval()", &nextval),
        ("snowflake_nextval('short')", &nextval_short),
    ] {
        match result {
            Ok(id) => problems.push(format!("{call} on the standby returned {id}")),
            Err((code, message, hint)) => {
                if code != "25006" {
                    problems.push(format!(
                        "{call} on the standby failed with SQLSTATE {code} (expected 25006): \
                         {message}"
                    ));
                } else if !message.contains("recovery") || hint.is_empty() {
                    problems.push(format!("{call}: unclear error: {message} / {hint}"));
                }
            }
        }
    }
    for (what, result, expected) in [
        ("snowflake_decode(id)", &decoded, &expected),
        (
            "snowflake_decode(id, 'short')",
            &decoded_short,
            &expected_short,
        ),
    ] {
        match result {
            Ok(text) if text == expected => {}
            Ok(text) => problems.push(format!(
                "{what} on the standby differs from the primary: {:.200} vs {:.200}",
                text, expected
            )),
            Err((code, message, _)) => problems.push(format!(
                "{what} of replicated IDs failed on the standby: SQLSTATE {code}: {message}"
            )),
        }
    }
    if workers != Ok(0) {
        problems.push(format!("snowflake_workers on the standby: {workers:?}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// 9: corrupt reservation file
// ---------------------------------------------------------------------------------------------

#[test]
fn corrupt_reservation_file_refuses_ids_until_a_valid_one_is_written() {
    let mut cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client.batch_execute(IDS_TABLE).unwrap();
    let old = insert_batch(&mut client, 0, 0, 1_000).unwrap();
    let old_max = *old.iter().max().unwrap();
    drop(client);
    let path = cluster.data_dir().join(RESERVATION_FILE);
    let path_text = path.display().to_string();

    let mut refused = Vec::new();
    for (what, contents) in [
        ("garbage", &b"not a reservation\n\x00\xff"[..]),
        ("empty", &b""[..]),
        (
            "a valid header and a bad number",
            &b"snowflake_id reservation v1\nreserved_until_unix_us=12x4\n"[..],
        ),
    ] {
        cluster.stop("fast");
        cluster.write_data_file(RESERVATION_FILE, contents);
        cluster.start();
        let mut client = cluster.connect();
        let error = client
            .query_one("SELECT snowflake_nextval()", &[])
            .expect_err(what);
        let (code, message, hint) = error_parts(&error);
        println!("corrupt reservation ({what}): {code}: {message} (hint: {hint})");
        assert_eq!(code, "XX001", "{what}: {message}");
        assert!(
            message.contains(&path_text),
            "{what}: the message does not name {path_text}: {message}"
        );
        assert!(!hint.is_empty(), "{what}: no hint");
        // Another sequence, and a second try, are refused as well; the file is left alone.
        client
            .batch_execute("SELECT snowflake_create_sequence('other', preset => 'js53')")
            .unwrap();
        let error = client
            .query_one("SELECT snowflake_nextval('other')", &[])
            .expect_err(what);
        assert_eq!(error_parts(&error).0, "XX001");
        let error = client
            .query_one("SELECT snowflake_nextval()", &[])
            .expect_err(what);
        assert_eq!(error_parts(&error).0, "XX001");
        client
            .batch_execute("SELECT snowflake_drop_sequence('other')")
            .unwrap();
        // Reading IDs still works.
        let decoded: i64 = client
            .query_one(
                "SELECT (extract(epoch FROM snowflake_timestamp($1)) * 1000)::int8",
                &[&old_max],
            )
            .unwrap()
            .get(0);
        assert_eq!(decoded, default_id_unix_ms(old_max));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            contents,
            "{what}: the server rewrote the corrupt file"
        );
        refused.push(what);
    }
    assert!(
        cluster
            .server_log()
            .contains("the reservation file is unusable"),
        "no warning in the server log\n{}",
        cluster.log_tail()
    );

    // The operator writes a valid reservation an hour ahead: IDs resume after it.
    cluster.stop("fast");
    let reserved = real_now_us() + HOUR_US;
    cluster.write_data_file(RESERVATION_FILE, reservation_file_text(reserved).as_bytes());
    cluster.start();
    let mut client = cluster.connect();
    let new = insert_batch(&mut client, 1, 0, 1_000).unwrap();
    assert_strictly_increasing("after repair", &new);
    let new_min = *new.iter().min().unwrap();
    let after = stats(&mut client);
    let on_disk = reservation_in_file(&cluster);
    println!(
        "repaired reservation {reserved} µs (1 h ahead): new IDs start at tick {} ms ({} ms after \
         it); file now {on_disk} µs; stats {after:?}",
        default_id_unix_ms(new_min),
        default_id_unix_ms(new_min) - reserved / 1000
    );
    assert!(
        default_id_unix_ms(new_min) * 1000 >= reserved,
        "new IDs (tick {} ms) start before the written reservation {reserved} µs",
        default_id_unix_ms(new_min)
    );
    assert!(
        default_id_unix_ms(new_min) * 1000 < reserved + 60_000_000,
        "new IDs start far after the reservation"
    );
    assert!(new_min > old_max);
    assert!(on_disk > reserved, "the reservation was not extended");
    assert_eq!(assert_table_consistent(&mut client), 2_000);
    assert_eq!(refused.len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Found while writing the above: decoding in a parallel query
// ---------------------------------------------------------------------------------------------

/// `snowflake_decode` / `snowflake_timestamp` are declared PARALLEL SAFE; a parallel scan that
/// calls them in a read-only query must work, in the leader and in the workers.
#[test]
fn decode_works_in_a_parallel_read_only_query() {
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client.batch_execute(IDS_TABLE).unwrap();
    insert_batch(&mut client, 0, 0, 50_000).unwrap();
    client.batch_execute("VACUUM ANALYZE ids").unwrap();

    // A fresh session, so the extension has not looked anything up in this backend yet.
    let mut reader = cluster.connect();
    reader
        .batch_execute(
            "SET max_parallel_workers_per_gather = 2;
             SET parallel_setup_cost = 0;
             SET parallel_tuple_cost = 0;
             SET min_parallel_table_scan_size = 0;
             SET parallel_leader_participation = off;",
        )
        .unwrap();
    let query = "SELECT count(*) FROM ids
                 WHERE snowflake_timestamp(id) >= '2025-01-01'
                   AND (snowflake_decode(id)).worker >= 0";
    let plan: Vec<String> = reader
        .query(&format!("EXPLAIN {query}"), &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        plan.iter().any(|line| line.contains("Parallel Seq Scan")),
        "not a parallel plan: {plan:#?}"
    );
    let result = reader
        .query_one(query, &[])
        .map(|row| row.get::<_, i64>(0))
        .map_err(|error| error_parts(&error));
    let xid = reader
        .query_one(
            "SELECT snowflake_timestamp(1)::text, pg_current_xact_id_if_assigned()::text",
            &[],
        )
        .map(|row| (row.get::<_, String>(0), row.get::<_, Option<String>>(1)))
        .map_err(|error| error_parts(&error));
    println!(
        "parallel decode: {:?}; a read-only SELECT of snowflake_timestamp in a fresh session \
         -> (ts, xid assigned) {xid:?}",
        result
            .as_ref()
            .map_err(|(code, message, _)| (code, message))
    );
    match result {
        Ok(count) => assert_eq!(count, 50_000),
        Err((code, message, _)) => panic!(
            "snowflake_decode/snowflake_timestamp failed in a parallel query: SQLSTATE {code}: \
             {message}"
        ),
    }
}
