//! Wall-clock steps while four sessions generate (libfaketime, `ClusterBuilder::faketime`). The
//! cluster clock is forward-only (docs/design.md §3.1): after a step back of 10 minutes IDs run
//! on at real speed, 10 minutes ahead of the wall clock, with no stall and one backward step in
//! `snowflake_stats()`; after a step forward of an hour IDs follow the wall clock from each
//! backend's next tick, and keep that hour of lead when the wall clock steps back. No ID repeats
//! and each session's IDs strictly increase; each test prints what it measured (`--nocapture`).

use std::thread;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{
    assert_server_clock_offset, assert_table_consistent, check_runs, default_id_unix_ms,
    generate_while, real_now_us, stats, HOUR_US, IDS_TABLE, MINUTE_US,
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
