//! The lead of IDs over real time after crashes in a row (README, "Guarantees"): a crash starts
//! the clock at the reservation, at most `snowflake_id.reserve_ahead` beyond the latest tick used,
//! itself at most `snowflake_id.max_lead` beyond the cluster clock, so each crash adds at most
//! `reserve_ahead + max_lead` to the lead it finds, and k crashes in quick succession lead by at
//! most k times that. Ten immediate stops under load; the test prints the lead after each
//! (`--nocapture`) and checks the stated bound, and that no ID repeats.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{
    default_id_unix_ms, insert_batch, real_now_us, IDS_TABLE,
};
use snowflake_id_cluster_tests::{error_parts, Cluster};

const CRASHES: i64 = 10;
/// The defaults: `snowflake_id.reserve_ahead` 1 s, `snowflake_id.max_lead` 100 ms.
const RESERVE_AHEAD_US: i64 = 1_000_000;
const MAX_LEAD_US: i64 = 100_000;
/// Measuring slack: a tick, and the time between the server making an ID and the test reading
/// its own clock.
const SLACK_US: i64 = 50_000;

#[test]
fn ten_crashes_in_a_row_keep_the_lead_within_the_stated_bound() {
    let mut cluster = Cluster::builder().start();
    cluster.connect().batch_execute(IDS_TABLE).unwrap();
    let mut seen = HashSet::new();
    let mut leads = Vec::new();
    for crash in 1..=CRASHES {
        // Two sessions insert until the immediate stop cuts them off.
        let stop = AtomicBool::new(false);
        let made: Vec<Vec<i64>> = thread::scope(|scope| {
            let loads: Vec<_> = (0..2)
                .map(|session| {
                    let mut client = cluster.connect();
                    let stop = &stop;
                    scope.spawn(move || {
                        let mut ids = Vec::new();
                        while !stop.load(Ordering::Relaxed) {
                            match insert_batch(&mut client, session, ids.len() as i64, 500) {
                                Ok(batch) => ids.extend(batch),
                                Err(_) => break,
                            }
                        }
                        ids
                    })
                })
                .collect();
            thread::sleep(Duration::from_millis(400));
            cluster.stop("immediate");
            stop.store(true, Ordering::Relaxed);
            loads.into_iter().map(|load| load.join().unwrap()).collect()
        });
        cluster.start();
        let mut client = cluster.connect();
        let id: i64 = client
            .query_one("SELECT snowflake_nextval()", &[])
            .unwrap_or_else(|error| panic!("after crash {crash}: {:?}", error_parts(&error)))
            .get(0);
        let lead = default_id_unix_ms(id) * 1_000 - real_now_us();
        leads.push(lead);
        for id in made.into_iter().flatten().chain([id]) {
            assert!(seen.insert(id), "ID {id} issued twice (crash {crash})");
        }
    }
    let leads_ms: Vec<i64> = leads.iter().map(|lead| lead / 1_000).collect();
    println!(
        "lead of the first ID after each of {CRASHES} immediate stops under load (ms): \
         {leads_ms:?}; {} IDs, none repeated",
        seen.len()
    );
    for (index, lead) in leads.iter().enumerate() {
        let crashes = index as i64 + 1;
        let bound = crashes * (RESERVE_AHEAD_US + MAX_LEAD_US) + SLACK_US;
        assert!(
            *lead <= bound,
            "after {crashes} crashes IDs lead by {lead} µs, above the stated {bound} µs"
        );
    }
}
