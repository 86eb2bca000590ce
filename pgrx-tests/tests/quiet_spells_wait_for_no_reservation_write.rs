//! The first ID after a quiet spell waits for no reservation write (design §5.1, "Extending";
//! issue 64): on 229c10d an INSERT after more than a `snowflake_id.reserve_ahead` window of quiet
//! renewed the reservation in its own statement (a WAL flush and two fsyncs), 1.6–1.9× a
//! `bigserial` INSERT's latency at one transaction a second. The reservation worker now goes on
//! renewing for `snowflake_id.idle_renewal` after the last ID, then stops: an idle server writes
//! nothing after that. Renewals made inside a session's statement are `reservation_writes` less
//! `reservation_worker_writes`, both read at once.
//!
//! Runs in nextest group `timing` (at most two other such tests beside it, none of the rest):
//! the worker renews an eighth of a window before a session would, 250 ms here, and on a busy
//! machine it can be that late; so the spells are tried up to three times, each try reported,
//! as `reservation_renewal.rs` does.

use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{stats, Stats};
use snowflake_id_cluster_tests::{within_tries, Client, Cluster};

/// The window of these servers: a quiet spell of `QUIET` is longer, so without the idle renewal
/// the reservation has lapsed when it ends.
const WINDOW: &str = "2s";
const QUIET: Duration = Duration::from_secs(3);

/// Renewals made in sessions' statements and by the worker between two readings.
fn renewals(before: &Stats, after: &Stats) -> (i64, i64) {
    let all = after.reservation_writes - before.reservation_writes;
    let worker = after.reservation_worker_writes - before.reservation_worker_writes;
    (all - worker, worker)
}

/// Inserts one row through the column default; the renewals its statement made (and the
/// worker's meanwhile).
fn insert(client: &mut Client) -> (i64, i64) {
    let before = stats(client);
    client
        .batch_execute("INSERT INTO orders DEFAULT VALUES")
        .unwrap();
    renewals(&before, &stats(client))
}

fn set_idle_renewal(client: &mut Client, value: &str) {
    client
        .batch_execute(&format!(
            "ALTER SYSTEM SET snowflake_id.idle_renewal = '{value}'"
        ))
        .unwrap();
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    // The worker reads it at its next wake-up (a sixteenth of the window).
    std::thread::sleep(Duration::from_millis(500));
}

#[test]
fn the_first_id_after_a_quiet_spell_finds_the_reservation_renewed_until_the_idle_renewal_ends() {
    let cluster = Cluster::builder()
        .setting(&format!("snowflake_id.reserve_ahead = '{WINDOW}'"))
        .start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval());",
        )
        .unwrap();
    let (first, _) = insert(&mut client);
    assert_eq!(first, 1, "the server's first ID reserves in its statement");

    // The default: five minutes of renewals after the last ID.
    let shown: String = client
        .query_one("SHOW snowflake_id.idle_renewal", &[])
        .unwrap()
        .get(0);
    assert_eq!(shown, "5min");
    within_tries("three quiet spells", 3, || {
        for spell in 1..=3 {
            std::thread::sleep(QUIET);
            let (in_statement, by_worker) = insert(&mut client);
            println!("quiet spell {spell}: {in_statement} renewals in the INSERT, {by_worker} by the worker meanwhile");
            if in_statement != 0 {
                return Err(format!(
                    "the INSERT after quiet spell {spell} renewed the reservation itself \
                     ({in_statement} renewals in it)"
                ));
            }
        }
        Ok(())
    });
    let during = stats(&mut client);
    std::thread::sleep(QUIET);
    let (_, while_quiet) = renewals(&during, &stats(&mut client));
    assert!(
        while_quiet >= 3,
        "the worker renewed {while_quiet} times in {QUIET:?} of quiet (about 4 a second expected)"
    );

    // The control: without the idle renewal the INSERT after a spell renews in its statement,
    // which the counters above would show.
    set_idle_renewal(&mut client, "0");
    std::thread::sleep(QUIET);
    let (in_statement, _) = insert(&mut client);
    assert_eq!(
        in_statement, 1,
        "with snowflake_id.idle_renewal = 0 the INSERT after a spell renews itself"
    );

    // After the idle renewal the server writes nothing.
    set_idle_renewal(&mut client, "1s");
    insert(&mut client);
    // The last ID's window (2 s), the idle renewal (1 s) and the worker's periods.
    std::thread::sleep(Duration::from_secs(4));
    let idle = stats(&mut client);
    std::thread::sleep(QUIET);
    let (in_statements, by_worker) = renewals(&idle, &stats(&mut client));
    assert_eq!(
        (in_statements, by_worker),
        (0, 0),
        "an idle server past snowflake_id.idle_renewal wrote"
    );
}
