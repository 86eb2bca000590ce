//! Failover to an asynchronous standby that lags (docs/design.md §5.2): the standby streams
//! through a link on 127.0.0.1 that delivers the primary's WAL a fixed time late
//! (`LaggingLink`); at the failure the link is cut (what is in flight is lost) and the primary
//! stopped at once; then the standby is promoted and issues IDs. Every ID the old primary
//! returned (stored or not) must stay below every ID of the promoted standby, for a lag up to
//! `snowflake_id.failover_lag` (default 500 ms), in the cases that break a promise made in wall
//! time: a burst after an idle period (the standby's clock behind), a burst that borrows ticks
//! seconds ahead (a raised `snowflake_id.max_lead`), and a lag of 0.9 times the covered bound under
//! steady load. One more shows the gap the design names: a failover within the lag after a
//! forward jump of the old primary's clock. The IDs are of a `js53` sequence (256 IDs per 10 ms tick and session), whose
//! bursts move ID time fastest. The test prints what it measured (`--nocapture`).

use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::text;
use snowflake_id_cluster_tests::lagging_link::LaggingLink;
use snowflake_id_cluster_tests::{error_parts, Client, Cluster};

const JS53_TABLE: &str = "CREATE EXTENSION snowflake_id;
    SELECT snowflake_create_sequence('web', 'js53');
    CREATE TABLE web (id bigint PRIMARY KEY DEFAULT snowflake_nextval('web'), n int);";

/// A primary (with `settings`) and a hot standby (its clock `standby_clock` off, a libfaketime
/// offset) that streams through a link delaying the primary's WAL by `lag`; the standby has
/// caught up with the table, and with the primary's first ID when `first_id`.
fn lagging_pair(
    settings: &[&str],
    standby_clock: &str,
    lag: Duration,
    first_id: bool,
) -> (Cluster, Cluster, LaggingLink) {
    lagging_pair_from(Cluster::builder(), settings, standby_clock, lag, first_id)
}

/// [`lagging_pair`] with the primary built from `builder` (one whose clock can step, say).
fn lagging_pair_from(
    builder: snowflake_id_cluster_tests::ClusterBuilder,
    settings: &[&str],
    standby_clock: &str,
    lag: Duration,
    first_id: bool,
) -> (Cluster, Cluster, LaggingLink) {
    let mut builder = builder.setting("listen_addresses = '127.0.0.1'");
    for setting in settings {
        builder = builder.setting(setting);
    }
    let primary = builder.start();
    primary.connect().batch_execute(JS53_TABLE).unwrap();
    if first_id {
        primary
            .connect()
            .query_one("SELECT snowflake_nextval('web')", &[])
            .unwrap();
    }
    let standby = primary.replica().faketime_at(standby_clock).start();
    primary.wait_for_standby(&standby, Duration::from_secs(60));
    let link = LaggingLink::between(&primary, &standby, lag);
    (primary, standby, link)
}

/// Holds the link (nothing the primary sends from now on reaches the standby) once the standby
/// has received everything sent so far; returns the primary's WAL insert position at the hold,
/// which every record written afterwards starts at or after.
fn hold_link(primary: &Cluster, standby: &Cluster, link: &LaggingLink) -> String {
    primary.wait_for_standby(standby, Duration::from_secs(60));
    link.hold();
    text(
        &mut primary.connect(),
        "SELECT pg_current_wal_insert_lsn()::text",
    )
}

/// The arrangement the failover tests rely on, checked rather than hoped for: the standby has
/// received no WAL written after `held_from`.
fn assert_received_nothing_since(test: &str, standby: &Cluster, held_from: &str) {
    let received = text(
        &mut standby.connect(),
        "SELECT pg_last_wal_receive_lsn()::text",
    );
    let beyond: bool = standby
        .connect()
        .query_one(
            "SELECT $1::text::pg_lsn > $2::text::pg_lsn",
            &[&received, &held_from],
        )
        .unwrap()
        .get(0);
    assert!(
        !beyond,
        "{test}: the standby received WAL up to {received}, past the hold at {held_from}"
    );
}

/// `rows` IDs of `'web'` in statements of `batch` (half stored, half only returned).
fn burst(client: &mut Client, rows: i64, batch: i64) -> Vec<i64> {
    let mut ids = Vec::new();
    while (ids.len() as i64) < rows {
        let statement = if ids.len() as i64 / batch % 2 == 0 {
            "INSERT INTO web (n) SELECT g FROM generate_series(1, $1::bigint) g RETURNING id"
        } else {
            "SELECT snowflake_nextval('web') FROM generate_series(1, $1::bigint)"
        };
        let rows = client
            .query(statement, &[&batch])
            .unwrap_or_else(|error| panic!("burst: {:?}", error_parts(&error)));
        ids.extend(rows.iter().map(|row| row.get::<_, i64>(0)));
    }
    ids
}

/// How far the time of `id` (of `'web'`) lies ahead of the server's clock, in ms.
fn lead_ms(client: &mut Client, id: i64) -> String {
    text(
        client,
        &format!(
            "SELECT round(extract(epoch FROM (snowflake_decode({id}, 'web')).ts - clock_timestamp())
                          * 1000)::text"
        ),
    )
}

/// [`fail_over`], asserting that every new ID is above every ID of `old` (and so equal to
/// none).
fn fail_over_and_check(
    test: &str,
    primary: Cluster,
    standby: &Cluster,
    link: LaggingLink,
    old: &[i64],
    count: i64,
) {
    let (at_or_below, equal) = fail_over(test, primary, standby, link, old, count);
    assert_eq!(
        (at_or_below, equal),
        (0, 0),
        "{test}: old IDs issued again or passed"
    );
}

/// The failure: the link is cut (WAL in flight is lost), then the primary stops at once; the
/// standby is promoted and makes `count` IDs in statements of 500. Prints how long the cut and
/// the stop took (they add to the lag) and how far the promoted standby's first ID led its
/// clock; returns how many new IDs are at or below the newest of `old`, and how many equal one.
fn fail_over(
    test: &str,
    mut primary: Cluster,
    standby: &Cluster,
    mut link: LaggingLink,
    old: &[i64],
    count: i64,
) -> (usize, usize) {
    let started = Instant::now();
    link.cut();
    primary.stop("immediate");
    let stop_took = started.elapsed();
    standby.promote();
    let mut client = standby.connect();
    let mut new = Vec::new();
    while (new.len() as i64) < count {
        let rows = client
            .query(
                "INSERT INTO web (n) SELECT g FROM generate_series(1, 500) g RETURNING id",
                &[],
            )
            .unwrap_or_else(|error| panic!("{test}: {:?}", error_parts(&error)));
        new.extend(rows.iter().map(|row| row.get::<_, i64>(0)));
    }
    let newest_old = old.iter().copied().max().unwrap();
    let at_or_below = new.iter().filter(|&&id| id <= newest_old).count();
    let old_set: std::collections::HashSet<i64> = old.iter().copied().collect();
    let equal = new.iter().filter(|id| old_set.contains(id)).count();
    let lead = lead_ms(&mut client, new[0]);
    println!(
        "[{test}] old primary returned {} IDs; cut-to-stop took {stop_took:.0?}; the promoted \
         standby made {} IDs: {at_or_below} at or below the old primary's newest, {equal} equal \
         to one; its first ID led its clock by {lead} ms",
        old.len(),
        new.len()
    );
    (at_or_below, equal)
}

#[test]
fn a_burst_after_an_idle_period_is_covered_with_the_standbys_clock_behind() {
    let test = "idle 30 s, burst of 5,000 js53 IDs, lag 300 ms, standby clock 15 s behind";
    let (primary, standby, link) = lagging_pair(&[], "-15s", Duration::from_millis(300), true);
    thread::sleep(Duration::from_secs(30));
    let old = burst(&mut primary.connect(), 5_000, 500);
    fail_over_and_check(test, primary, &standby, link, &old, 10_000);
}

#[test]
fn a_burst_that_borrows_seconds_ahead_is_covered_with_a_raised_max_lead() {
    let test = "max_lead 3 s, burst of 60,000 js53 IDs, lag 300 ms";
    let (primary, standby, link) = lagging_pair(
        &["snowflake_id.max_lead = 3000"],
        "+0",
        Duration::from_millis(300),
        true,
    );
    let mut client = primary.connect();
    let old = burst(&mut client, 60_000, 10_000);
    let ahead = lead_ms(&mut client, *old.iter().max().unwrap());
    println!("[{test}] the burst's newest ID is {ahead} ms ahead of the primary's clock");
    fail_over_and_check(test, primary, &standby, link, &old, 10_000);
}

#[test]
fn a_lag_of_nine_tenths_of_the_covered_bound_under_steady_load_is_covered() {
    let test = "lag 450 ms (0.9 x snowflake_id.failover_lag), steady load";
    let (primary, standby, link) = lagging_pair(&[], "+0", Duration::from_millis(450), true);
    let mut client = primary.connect();
    let mut old = Vec::new();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        old.extend(burst(&mut client, 200, 200));
        thread::sleep(Duration::from_millis(20));
    }
    fail_over_and_check(test, primary, &standby, link, &old, 10_000);
}

/// The reference's step for a lag above the default `snowflake_id.failover_lag` (Known gaps):
/// for a lag that peaks at 3 s, `snowflake_id.failover_lag = '5s'` in the standby's
/// `postgresql.conf`, then a reload; a failover under steady load is then covered (with the
/// default, 500 ms, the same failover issues IDs at or below the old primary's).
#[test]
fn a_lag_above_the_default_is_covered_once_failover_lag_is_raised_as_the_reference_says() {
    let test = "lag 3 s, standby clock 10 s behind, snowflake_id.failover_lag = '5s' on the \
                standby, steady load";
    let (primary, standby, link) = lagging_pair(&[], "-10s", Duration::from_millis(3_000), true);
    standby.append_config("snowflake_id.failover_lag = '5s'");
    let mut on_standby = standby.connect();
    on_standby.batch_execute("SELECT pg_reload_conf()").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let lag: String = on_standby
            .query_one("SHOW snowflake_id.failover_lag", &[])
            .unwrap()
            .get(0);
        if lag == "5s" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{test}: the reload did not take: {lag}"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let mut client = primary.connect();
    let mut old = Vec::new();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        old.extend(burst(&mut client, 200, 200));
        thread::sleep(Duration::from_millis(20));
    }
    fail_over_and_check(test, primary, &standby, link, &old, 10_000);
}

/// A standby that never received a reservation record (no reservation worker on the primary,
/// and the link held before the first ID, so that the first IDs' record never reaches it) knows
/// of no ID the old primary issued. It starts `max_lead` and a second above its clock
/// (`protocol::floor_after_promotion`, a case the protocol's model check found); it used to
/// start at its clock, below IDs that a burst borrowed seconds ahead. The hold, not the
/// burst's speed, keeps the record from the standby, and the test checks that it did.
#[test]
fn a_standby_that_never_received_a_reservation_starts_above_a_burst_ahead() {
    let test = "no reservation received: max_lead 3 s, failover_lag 3 s, link held, burst of 60,000 js53 IDs";
    let (primary, standby, link) = lagging_pair(
        &[
            "max_worker_processes = 0",
            "snowflake_id.max_lead = 3000",
            "snowflake_id.failover_lag = 3000",
        ],
        "+0",
        Duration::from_millis(300),
        false,
    );
    let held_from = hold_link(&primary, &standby, &link);
    let started = Instant::now();
    let mut client = primary.connect();
    let old = burst(&mut client, 60_000, 10_000);
    let ahead = lead_ms(&mut client, *old.iter().max().unwrap());
    let took = started.elapsed();
    println!("[{test}] the burst took {took:.0?}; its newest ID is {ahead} ms ahead");
    assert_received_nothing_since(test, &standby, &held_from);
    fail_over_and_check(test, primary, &standby, link, &old, 10_000);
}

/// The gap the design names (§5.2, "Not covered"; the reference's Known gaps): a failover less
/// than `failover_lag` after a forward jump of the old primary's clock, which skips the half
/// window between reservation records that the margin relies on. With `max_clock_jump` raised
/// to 40 s the primary follows a 30 s step at once (far more than a slow machine takes to fail
/// over); the link is held from the step on (the
/// failure comes before the standby has any record written after it, however long the burst
/// takes), a burst, then the failure: the promoted standby's IDs fall at or below the old
/// primary's. (The same failover without the jump is covered: above.)
#[test]
fn a_failover_within_the_lag_after_a_forward_jump_is_not_covered_as_documented() {
    let test = "a 30 s forward step, link held, burst of 2,000 js53 IDs";
    // Without the floor lead: with it the promoted standby's first ID learns the old primary's
    // floor relation, written `idle_renewal` (5 min) ahead, which covers a 30 s step.
    let (primary, standby, link) = lagging_pair_from(
        Cluster::builder().faketime(),
        &[
            "snowflake_id.max_clock_jump = '40s'",
            "snowflake_id.idle_renewal = 0",
        ],
        "+0",
        Duration::from_millis(300),
        true,
    );
    // Reservation records of the clock before the step reach the standby; none after it.
    thread::sleep(Duration::from_secs(2));
    let held_from = hold_link(&primary, &standby, &link);
    primary.set_fake_time("+30s");
    let old = burst(&mut primary.connect(), 2_000, 500);
    assert_received_nothing_since(test, &standby, &held_from);
    let (at_or_below, _) = fail_over(test, primary, &standby, link, &old, 2_000);
    assert!(at_or_below > 0, "{test}: the documented gap did not show");
}
