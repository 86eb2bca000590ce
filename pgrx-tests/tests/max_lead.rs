//! The lead bound (docs/design.md §3.3): a layout with only 2 sequence bits, under bulk insert by
//! two sessions, exhausts its ticks and borrows the next ones, but no ID is further ahead of the
//! clock than `snowflake_id.max_lead` plus the tick it falls in; past it the sessions sleep
//! (`throttle_sleeps`). No ID repeats and each session's IDs strictly increase; the test prints
//! what it measured (`--nocapture`).

use std::thread;
use std::time::Instant;

use snowflake_id_cluster_tests::fixtures::{assert_strictly_increasing, stats};
use snowflake_id_cluster_tests::Cluster;
use snowflake_id_core::layout::PRESET_EPOCH_UNIX_US;

#[test]
fn few_sequence_bits_under_bulk_insert_stay_within_max_lead() {
    const MAX_LEAD_MS: i64 = 20;
    const SESSIONS: i32 = 2;
    const ROWS: i64 = 10_000;
    let cluster = Cluster::builder()
        .setting(&format!("snowflake_id.max_lead = {MAX_LEAD_MS}"))
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
    assert_eq!(layout, (41, 10, 2, PRESET_EPOCH_UNIX_US / 1_000_000, 0.001));
    let tick_unix_ms = |id: i64| (id >> 12) + PRESET_EPOCH_UNIX_US / 1000;

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
