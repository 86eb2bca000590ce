//! The time model (docs/design.md §3, §5.1): IDs stay within a tick of real time across clean
//! restarts; after a crash they lead by at most `snowflake_id.reserve_ahead` and the lead decays
//! without a stall; a forward glitch of the wall clock leaves no trace while a lasting
//! correction is followed once confirmed; a clock before a sequence's epoch is an error, not a
//! wait; a coarse-tick sequence never makes a fine one wait; a reservation file written by 0.2.0
//! keeps its floor. The tests print what they measured (`--nocapture`).

use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::{
    assert_server_clock_offset, real_now_us, stats, HOUR_US,
};
use snowflake_id_cluster_tests::{backend_pid, error_parts, wait_until, Client, Cluster};
use snowflake_id_core::reservation_file;

const DAY_US: i64 = 24 * HOUR_US;

/// How far the next ID's time is ahead of the server's wall clock, in ms (negative: behind).
fn lead_ms(client: &mut Client, sequence: &str) -> f64 {
    client
        .query_one(
            "SELECT (extract(epoch FROM snowflake_timestamp(snowflake_nextval($1), $1)
                                        - clock_timestamp()) * 1000)::float8",
            &[&sequence],
        )
        .unwrap()
        .get(0)
}

/// The next ID's time minus the real time (the test machine's clock), in µs.
fn ahead_of_real_us(client: &mut Client, sequence: &str) -> i64 {
    let ts: i64 = client
        .query_one(
            "SELECT (extract(epoch FROM snowflake_timestamp(snowflake_nextval($1), $1))
                     * 1000000)::int8",
            &[&sequence],
        )
        .unwrap()
        .get(0);
    ts - real_now_us()
}

/// Forward jumps of the wall clock followed and ignored so far.
fn jumps(client: &mut Client) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT forward_jumps_followed, forward_jumps_ignored FROM snowflake_stats()",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

const SECONDS_SEQUENCE: &str =
    "SELECT snowflake_create_sequence('sec', time_unit => interval '1 s', time_bits => 33)";

#[test]
fn clean_restarts_keep_ids_within_a_tick_of_real_time() {
    // A long reserve_ahead made the old design's lead grow by a minute per restart.
    let mut cluster = Cluster::builder()
        .setting("snowflake_id.reserve_ahead = '60s'")
        .start();
    cluster
        .connect()
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let mut leads = Vec::new();
    for _ in 0..10 {
        leads.push(lead_ms(&mut cluster.connect(), "default"));
        cluster.stop("fast");
        cluster.start();
    }
    let last = lead_ms(&mut cluster.connect(), "default");
    println!("lead after each of 10 clean restarts (ms): {leads:?}, then {last}");
    // Behind the wall clock by a few ms is the time between making the ID and reading the
    // clock on a busy machine; ahead is what restarts must not do.
    for lead in leads.iter().chain([&last]) {
        assert!(
            *lead < 5.0,
            "an ID {lead} ms ahead of the wall clock after clean restarts: {leads:?}"
        );
    }
}

#[test]
fn a_crash_leads_by_at_most_reserve_ahead_and_the_lead_decays_without_a_stall() {
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client
        .batch_execute("CREATE EXTENSION snowflake_id; SELECT snowflake_nextval()")
        .unwrap();
    let pid = backend_pid(&mut client);
    cluster.kill_backend(pid);
    // Connect only once the postmaster has reacted, or the connection may still reach the
    // server that is about to reinitialise.
    assert!(wait_until(Duration::from_secs(30), || cluster
        .server_log()
        .contains("all server processes terminated; reinitializing")));
    let mut client = cluster.wait_for_connection(Duration::from_secs(30));
    let mut leads = vec![lead_ms(&mut client, "default")];
    let started = Instant::now();
    // A stall while the lead decays would be a session sleeping for its lead: counted in
    // throttle_sleeps, whatever the machine's speed.
    let sleeps_before = stats(&mut client).throttle_sleeps;
    while started.elapsed() < Duration::from_secs(12) {
        thread::sleep(Duration::from_millis(1000));
        leads.push(lead_ms(&mut client, "default"));
    }
    println!("lead after a crash, sampled each second (ms): {leads:?}");
    assert_eq!(
        stats(&mut client).throttle_sleeps - sleeps_before,
        0,
        "a call slept while the lead decayed"
    );
    assert!(
        leads[0] <= 1_000.0 + 50.0,
        "after a crash IDs led by {} ms, more than reserve_ahead (1 s)",
        leads[0]
    );
    // Once the lead is gone, an ID's time may read behind the clock by however long the
    // statement was preempted between the two: only a lead above zero must never grow.
    for pair in leads.windows(2) {
        assert!(
            pair[1].max(0.0) <= pair[0].max(0.0) + 5.0,
            "the lead grew from {} to {} ms",
            pair[0],
            pair[1]
        );
    }
    assert!(
        *leads.last().unwrap() < 5.0,
        "the lead did not decay within 12 s: {leads:?}"
    );
}

#[test]
fn a_forward_glitch_of_the_wall_clock_leaves_no_trace() {
    let mut cluster = Cluster::builder().faketime().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(&format!(
            "CREATE EXTENSION snowflake_id; {SECONDS_SEQUENCE}"
        ))
        .unwrap();
    for (glitch, offset_us) in [("+36500d", 36_500 * DAY_US), ("+1826d", 1_826 * DAY_US)] {
        let mut client = cluster.connect();
        cluster.set_fake_time(glitch);
        assert_server_clock_offset(&mut admin, offset_us);
        let started = Instant::now();
        let mut furthest_us = i64::MIN;
        while started.elapsed() < Duration::from_secs(2) {
            for sequence in ["default", "sec"] {
                furthest_us = furthest_us.max(ahead_of_real_us(&mut client, sequence));
            }
        }
        cluster.set_fake_time("+0");
        assert_server_clock_offset(&mut admin, 0);
        println!("wall clock {glitch} for 2 s: IDs at most {furthest_us} µs ahead of real time");
        assert!(
            furthest_us < 2_000_000,
            "IDs followed the {glitch} glitch: {furthest_us} µs ahead"
        );
    }
    let (followed, ignored) = jumps(&mut admin);
    println!("forward jumps followed {followed}, ignored {ignored}");
    assert_eq!((followed, ignored), (0, 2));
    // Nothing carried over a restart either: every sequence still makes IDs near real time.
    cluster.stop("fast");
    cluster.start();
    let mut client = cluster.connect();
    for sequence in ["default", "sec"] {
        let ahead = ahead_of_real_us(&mut client, sequence);
        println!("after a restart, '{sequence}' IDs are {ahead} µs ahead of real time");
        assert!(ahead < 2_000_000, "'{sequence}' is {ahead} µs ahead");
    }
}

#[test]
fn a_lasting_forward_correction_is_followed_once_confirmed_and_a_step_back_decays() {
    let cluster = Cluster::builder()
        .faketime()
        .setting("snowflake_id.clock_jump_confirm = '2s'")
        .start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let mut client = cluster.connect();
    cluster.set_fake_time("+1h");
    assert_server_clock_offset(&mut admin, HOUR_US);
    // The confirmation starts at the first reading of the jumped clock, which the first sample
    // makes: the windows count from that sample, by when each was sent and answered, so a slow
    // round trip moves a sample out of a window rather than into the wrong one.
    let stepped = Instant::now();
    let first_sent = stepped.elapsed();
    let first_ahead = ahead_of_real_us(&mut client, "default");
    let first_answered = stepped.elapsed();
    let mut samples = vec![(first_sent, first_answered, first_ahead)];
    let is_early = |answered: Duration| answered < first_sent + Duration::from_millis(1500);
    let is_late = |sent: Duration| sent > first_answered + Duration::from_millis(3000);
    while samples.iter().filter(|(sent, _, _)| is_late(*sent)).count() < 5
        && stepped.elapsed() < Duration::from_secs(60)
    {
        let sent = stepped.elapsed();
        let ahead = ahead_of_real_us(&mut client, "default");
        samples.push((sent, stepped.elapsed(), ahead));
        thread::sleep(Duration::from_millis(100));
    }
    let early: Vec<i64> = samples
        .iter()
        .filter(|(_, answered, _)| is_early(*answered))
        .map(|&(_, _, ahead)| ahead)
        .collect();
    let late: Vec<i64> = samples
        .iter()
        .filter(|(sent, _, _)| is_late(*sent))
        .map(|&(_, _, ahead)| ahead)
        .collect();
    println!(
        "wall clock +1 h, confirmation 2 s: IDs ahead of real time (µs) in the first 1.5 s \
         {:?}..{:?}, after 3 s {:?}..{:?}",
        early.iter().min(),
        early.iter().max(),
        late.iter().min(),
        late.iter().max()
    );
    assert!(!early.is_empty() && late.len() >= 5, "{samples:?}");
    assert!(early.iter().all(|ahead| *ahead < 1_000_000), "{early:?}");
    assert!(
        late.iter()
            .all(|ahead| (HOUR_US - 1_000_000..HOUR_US + 1_000_000).contains(ahead)),
        "{late:?}"
    );
    assert_eq!(jumps(&mut admin), (1, 0));

    // The correction is undone: the clock neither goes back nor stops; the lead shrinks by a
    // tenth of the time that passes.
    cluster.set_fake_time("+0");
    assert_server_clock_offset(&mut admin, 0);
    // Lead and clock read by the server in one statement each: the shrink is compared with the
    // time that passed on the server between them, whatever the round trips took.
    let (first, first_at) = lead_and_clock_us(&mut client);
    thread::sleep(Duration::from_secs(2));
    let (second, second_at) = lead_and_clock_us(&mut client);
    let passed = second_at - first_at;
    let shrunk = first - second;
    println!(
        "after the step back: {first} µs ahead, {passed} µs later {second} µs ahead (shrunk by \
         {shrunk} µs)"
    );
    assert!(first > HOUR_US - 5_000_000, "the clock went back: {first}");
    assert!(
        (passed / 20..=passed / 5).contains(&shrunk),
        "the lead shrank by {shrunk} µs in {passed} µs, expected about a tenth"
    );
}

/// The next `'default'` ID's time minus the server's wall clock, and that clock, in µs, read in
/// one statement.
fn lead_and_clock_us(client: &mut Client) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT (extract(epoch FROM snowflake_timestamp(snowflake_nextval()) - now) * 1e6)::int8,
                    (extract(epoch FROM now) * 1e6)::int8
             FROM (SELECT clock_timestamp() AS now) AS reading",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

#[test]
fn a_clock_before_the_epoch_is_an_error_not_a_wait() {
    let mut cluster = Cluster::builder().faketime().start();
    cluster
        .connect()
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    // A fresh cluster (no ID issued, no reservation) whose machine clock reads 2 years back.
    cluster.stop("fast");
    cluster.set_fake_time("-730d");
    cluster.start();
    let started = Instant::now();
    let mut message = String::new();
    for _ in 0..100 {
        let mut client = cluster.connect();
        let error = client
            .query_one("SELECT snowflake_nextval()", &[])
            .expect_err("the clock is before the epoch");
        let (code, text, _) = error_parts(&error);
        assert_eq!(code, "55000", "{text}");
        message = text;
    }
    let mut client = cluster.connect();
    let error = client
        .query_one(
            "SELECT count(snowflake_nextval()) FROM generate_series(1, 100000)",
            &[],
        )
        .expect_err("a bulk statement fails too");
    assert_eq!(error_parts(&error).0, "55000");
    println!(
        "100 sessions and one bulk statement refused in {:?}: {message}",
        started.elapsed()
    );
    assert!(
        message.starts_with("snowflake sequence \"default\" starts at 2025-01-01")
            && message.contains("but the server's clock reads 2"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_coarse_tick_sequence_never_makes_a_fine_one_wait() {
    let cluster = Cluster::builder().start();
    cluster
        .connect()
        .batch_execute(&format!(
            "CREATE EXTENSION snowflake_id; {SECONDS_SEQUENCE}"
        ))
        .unwrap();
    // A fine-tick ID that found the coarse floor would skip up to a second ahead, beyond
    // max_lead, and sleep: counted in throttle_sleeps around the fine calls only (the 1 s-tick
    // calls do sleep, for their own next second), whatever the machine's speed (the elapsed
    // time is only printed).
    let mut sleeps = 0;
    let mut slowest = Duration::ZERO;
    let mut fine_call = |client: &mut Client| {
        let before = stats(client).throttle_sleeps;
        let call = Instant::now();
        client.batch_execute("SELECT snowflake_nextval()").unwrap();
        slowest = slowest.max(call.elapsed());
        sleeps += stats(client).throttle_sleeps - before;
    };
    for _ in 0..5 {
        let mut client = cluster.connect();
        client
            .batch_execute("SELECT snowflake_nextval('sec')")
            .unwrap();
        fine_call(&mut client);
        drop(client);
        // The next session takes the same worker slot, whose 'sec' floor is the end of the
        // current second.
        fine_call(&mut cluster.connect());
    }
    println!(
        "slowest 1 ms-tick call right after a 1 s-tick one: {slowest:?}; {sleeps} throttle sleeps"
    );
    assert_eq!(sleeps, 0, "a fine-tick call slept for a coarse tick");
}

#[test]
fn a_reservation_file_from_release_0_2_0_keeps_its_floor() {
    let mut cluster = Cluster::builder().start();
    cluster
        .connect()
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    cluster.stop("fast");
    // 0.2.0 wrote this format; its reservation an hour ahead of the clock.
    let floor_us = real_now_us() + HOUR_US;
    cluster.write_data_file(
        reservation_file::FILE_NAME,
        reservation_file::encode(floor_us).as_bytes(),
    );
    cluster.start();
    let ahead = ahead_of_real_us(&mut cluster.connect(), "default");
    println!("after a 0.2.0 reservation an hour ahead, IDs are {ahead} µs ahead of real time");
    assert!(
        ahead >= HOUR_US - 60_000_000,
        "the floor was lost: {ahead} µs"
    );
}
