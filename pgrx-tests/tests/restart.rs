//! Restarts with the wall clock set back (libfaketime, `ClusterBuilder::faketime`): sessions
//! generate, the server stops (`immediate` or `fast`) with IDs still streaming to a client, its
//! wall clock is set 10 minutes back, and it starts again. The reservation (docs/design.md §5)
//! starts the cluster clock at or after the reserved time, so every new ID is above every ID
//! issued before the stop, and IDs stay about the real time: the cluster clock does not follow
//! the wall clock back. No ID repeats and each session's IDs strictly increase; each test prints
//! what it measured (`--nocapture`).

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::{
    assert_server_clock_offset, assert_strictly_increasing, assert_table_consistent,
    default_id_unix_ms, insert_in_turn, real_now_us, reservation_in_file, stats, IDS_TABLE,
    MINUTE_US,
};
use snowflake_id_cluster_tests::{wait_until, Cluster};

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
    let mut old = insert_in_turn(&cluster, "old", 0..2, 20_000);
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

    let new = insert_in_turn(&cluster, "new", 10..12, 20_000);
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
