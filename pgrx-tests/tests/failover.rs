//! Failover to a streaming standby (`pg_basebackup -R`, `pg_ctl promote`): the promoted standby
//! never issues an ID the old primary issued, and continues above every ID the old primary
//! issued that the standby has in its WAL (docs/design.md §2.3, §5), even when the old
//! primary's IDs ran ahead of real time (many fast restarts; a clock that was fast and was
//! stepped back) or the standby's wall clock is behind.
//!
//! Each test: a primary with a standby made before the IDs of interest, IDs issued on the
//! primary (`INSERT … RETURNING` into `ids`, whose primary key defaults to
//! `snowflake_nextval()`, and plain `snowflake_nextval()` calls), a fast stop of the primary
//! (every WAL record reaches the standby), promotion, then insert load on the new primary until
//! its IDs pass the newest old ID: its clock then crosses every tick the old primary used. It
//! asserts no row refused by the primary key, no ID issued twice and the new IDs above the old
//! ones, and prints the IDs, duplicates and how far IDs ran ahead of real time (`--nocapture`).

use std::time::Instant;

use snowflake_id_cluster_tests::fixtures::{
    assert_no_id_reissued, assert_server_clock_offset, clock_fast_then_corrected, fail_over,
    insert_load, load_after, Issued, CLOCK_FAST, DEFAULT_IDS_TABLE,
};
use snowflake_id_cluster_tests::Cluster;

/// Rows each of two sessions inserts on the old primary right before the failover.
const OLD_ROWS: i64 = 10_000;

/// Fails over from `primary` to `standby` and inserts on the new primary until its IDs pass
/// every ID of `old`; returns that load.
fn promote_and_load(mut primary: Cluster, standby: &Cluster, old: &[&Issued]) -> Issued {
    fail_over(&mut primary, standby);
    load_after(
        "promotion",
        "new primary (the promoted standby), insert load",
        standby,
        old,
    )
}

#[test]
fn promoted_standby_continues_above_ids_pushed_ahead_by_twenty_fast_restarts() {
    let test = "failover after 20 fast restarts";
    let mut primary = Cluster::builder().start();
    primary.connect().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    // The standby is older than every ID: its copy of the primary's files holds no reservation.
    let standby = primary.start_replica();

    let mut restarts =
        Issued::new("old primary, one snowflake_nextval() after each of 20 restarts");
    let started = Instant::now();
    for _ in 0..20 {
        primary.stop("fast");
        primary.start();
        restarts.probe(&primary);
    }
    restarts.elapsed = started.elapsed();
    let mut load = Issued::new("old primary, insert load");
    insert_load(&primary, &mut load, 0..2, OLD_ROWS);

    let new = promote_and_load(primary, &standby, &[&restarts, &load]);
    assert_no_id_reissued(test, &[&restarts, &load, &new]);
}

#[test]
fn promoted_standby_with_its_clock_fifteen_seconds_behind_continues_above_the_old_ids() {
    let test = "failover to a standby 15 s behind";
    let primary = Cluster::builder().start();
    primary.connect().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    // The standby's wall clock is 15 s behind from its first start on.
    let standby = primary.replica().faketime_at("-15s").start();
    let offset = assert_server_clock_offset(&mut standby.connect(), -15_000_000);
    println!("[{test}] standby's wall clock {offset} µs off the real time");

    let mut load = Issued::new("old primary, insert load");
    insert_load(&primary, &mut load, 0..2, OLD_ROWS);

    let new = promote_and_load(primary, &standby, &[&load]);
    assert_no_id_reissued(test, &[&load, &new]);
}

#[test]
fn promoted_standby_continues_above_ids_of_a_primary_whose_fast_clock_was_stepped_back() {
    let test = "failover after the primary's clock was stepped back 30 s";
    // The primary's wall clock runs 30 s fast from its start; the standby's is right.
    let primary = Cluster::builder().faketime_at(CLOCK_FAST).start();
    primary.connect().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    let standby = primary.start_replica();

    let (fast, corrected) = clock_fast_then_corrected(
        &primary,
        |offset| primary.set_fake_time(offset),
        "old primary",
        0,
        OLD_ROWS,
    );

    let new = promote_and_load(primary, &standby, &[&fast, &corrected]);
    assert_no_id_reissued(test, &[&fast, &corrected, &new]);
}
