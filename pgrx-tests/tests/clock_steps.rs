//! A wall-clock step back while four sessions generate (libfaketime, `ClusterBuilder::faketime`).
//! The cluster clock never goes back (docs/design.md §3.1): after a step back of 10 minutes IDs
//! run on from where they were, about 10 minutes ahead of the wall clock (a lead that shrinks by
//! a tenth of the time passing), with no stall and one backward step in `snowflake_stats()`. No
//! ID repeats and each session's IDs strictly increase; the test prints what it measured
//! (`--nocapture`). Forward jumps are in time_model.rs.

use std::thread;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{
    assert_server_clock_offset, assert_table_consistent, check_runs, default_id_unix_ms,
    generate_while, real_now_us, stats, IDS_TABLE, MINUTE_US,
};
use snowflake_id_cluster_tests::Cluster;

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
/// the reading taken just before it, and at most `snowflake_id.max_lead` (100 ms) after it, with
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
    // When the sessions stopped: the newest ID is compared with this, not with a reading taken
    // after the checks below, however slow they are.
    let stopped_us = real_now_us();
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
    let newest_lag_ms = stopped_us / 1000 - default_id_unix_ms(newest);
    println!(
        "step back 10 min: server wall clock {offset} µs off the real time after the step; \
         {rows} rows in {batches} batches of 200 by 4 sessions; batch latency median \
         {median:?}, max {max:?} ({:.1}x median); IDs ahead of the wall clock read before them: \
         {before_range:?} µs before the step, {after_range:?} µs for the {made_after} rows \
         after it; newest ID {newest_lag_ms} ms behind the real time",
        max.as_secs_f64() / median.as_secs_f64()
    );
    println!("step back 10 min: stats {after:?}");
    // The failure this guards against is IDs stopping until the wall clock catches up (ten
    // minutes); a busy machine's batch may take seconds.
    assert!(
        max < Duration::from_secs(30),
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
