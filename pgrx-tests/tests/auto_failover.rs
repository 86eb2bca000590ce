//! Failover by a real failover manager, pg_auto_failover (`pg_autoctl`): a monitor and two
//! nodes preloading snowflake_id (`snowflake_id.node_id` unset, as the default sequence has no node
//! bits). After insert load the primary node dies at once (SIGKILL to its keeper and
//! postmaster), the monitor promotes the secondary, and the new primary never issues an ID the
//! old one issued and continues above them (docs/design.md §2.3, §5): with right clocks, and
//! when the primary's wall clock was 30 s fast and was stepped back (its IDs stay ahead of real
//! time, so a new primary that starts from its wall clock reaches them within the test).
//!
//! Each test asserts no row refused by the primary key, no ID issued twice and the new IDs
//! above the old ones, and prints the IDs, duplicates, how far IDs ran ahead of real time and
//! how long the failover took (`--nocapture`). Everything it starts (monitor, keepers, servers)
//! is stopped when the formation is dropped, also on failure.

use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::auto_failover::{Formation, Node};
use snowflake_id_cluster_tests::fixtures::{
    assert_ids_rows, assert_no_id_reissued, clock_fast_then_corrected, count, insert_load,
    load_after, Issued, CLOCK_FAST, DEFAULT_IDS_TABLE,
};
use snowflake_id_cluster_tests::{wait_until, Server};

/// Kills `primary`, waits until the monitor has promoted `secondary` and it accepts writes,
/// checks it has every row `primary` committed, and inserts on it until its IDs pass every ID
/// of `old`; returns that load.
fn kill_primary_and_load(
    test: &str,
    formation: &mut Formation,
    primary: &Node,
    secondary: &Node,
    old: &[&Issued],
) -> Issued {
    // pg_auto_failover replicates synchronously: every committed row is on the secondary.
    let rows = count(&mut primary.session(), "SELECT count(*) FROM ids");
    let killed = Instant::now();
    formation.kill_node(primary);
    let states = formation.wait_for(
        Duration::from_secs(60),
        "promotion of the secondary",
        |states| {
            states.iter().any(|state| {
                state.name == secondary.name
                    && ["wait_primary", "primary"].contains(&state.reported.as_str())
            })
        },
    );
    let mut client = secondary.session();
    let writable = wait_until(Duration::from_secs(30), || {
        !client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .map(|row| row.get::<_, bool>(0))
            .unwrap_or(true)
    });
    assert!(writable, "the promoted secondary is still in recovery");
    println!(
        "[{test}] primary killed; {} promoted after {:.1?}; monitor: {states:?}",
        secondary.name,
        killed.elapsed()
    );
    assert_ids_rows(secondary, rows, "rows the primary committed");
    load_after(
        "pg_auto_failover's failover",
        "promoted secondary, insert load",
        secondary,
        old,
    )
}

#[test]
fn pg_auto_failover_promotes_a_secondary_that_continues_above_the_old_primary_s_ids() {
    let test = "pg_auto_failover";
    let started = Instant::now();
    let (mut formation, nodes) = Formation::start(2, None);
    println!(
        "[{test}] monitor and 2 nodes up in {:.1?}",
        started.elapsed()
    );
    let (primary, secondary) = (&nodes[0], &nodes[1]);
    primary.session().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    let mut old = Issued::new("primary, insert load");
    insert_load(primary, &mut old, 0..2, 10_000);

    let new = kill_primary_and_load(test, &mut formation, primary, secondary, &[&old]);
    assert_no_id_reissued(test, &[&old, &new]);
}

#[test]
fn pg_auto_failover_after_the_primary_s_fast_clock_was_stepped_back() {
    let test = "pg_auto_failover, primary's clock stepped back 30 s";
    // The first node (pg_autoctl and its server) has a wall clock 30 s fast from its start.
    let (mut formation, nodes) = Formation::start(2, Some(CLOCK_FAST));
    let (primary, secondary) = (&nodes[0], &nodes[1]);
    primary.session().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    let (fast, corrected) = clock_fast_then_corrected(
        primary,
        |offset| formation.set_fake_time(offset),
        "primary",
        0,
        10_000,
    );

    let new = kill_primary_and_load(
        test,
        &mut formation,
        primary,
        secondary,
        &[&fast, &corrected],
    );
    assert_no_id_reissued(test, &[&fast, &corrected, &new]);
}
