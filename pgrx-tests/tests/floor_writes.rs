//! The floor relation only rises (docs/design.md §5.3, "Writes are serialised"). Each write
//! reads the published reservation, then `setval`s it; before 0.8.0 two backends that read it
//! at different moments could `setval` in the other order and lower the relation by the
//! reservation's advance in between (below IDs already issued only if the first backend
//! stalled there for over half a window, which a `pg_upgrade` or a dump would then carry).
//! Writes now take an LWLock and write only a higher value. With `snowflake_id.reserve_ahead`
//! at 4 ms and `snowflake_id.idle_renewal` at 8 ms the floor is written every few
//! milliseconds; four sessions insert while new sessions keep taking their first IDs (each
//! reads the relation and its last writes under that lock), and a sampler reads the relation
//! as fast as it can: no value it reads may be below the one before, and no session may fail.
//! (The race's window is a few microseconds: 0.8.0's first build, without the lock, passed
//! this test too; it checks the property and the lock's paths under load, not that the race
//! was seen.)

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::{check_runs, generate_while, IDS_TABLE};
use snowflake_id_cluster_tests::Cluster;

const SAMPLING: Duration = Duration::from_secs(5);
/// Below the 120 s after which `generate_while` stops its sessions.
const SAMPLING_CAP: Duration = Duration::from_secs(90);

#[test]
fn the_floor_relation_only_rises_while_sessions_write_it_every_few_milliseconds() {
    let cluster = Cluster::builder()
        .setting("snowflake_id.reserve_ahead = '4ms'")
        // A floor lead of 8 ms: writes are due every half window and half lead (6 ms).
        .setting("snowflake_id.idle_renewal = '8ms'")
        .start();
    cluster.connect().batch_execute(IDS_TABLE).unwrap();

    let stop = AtomicBool::new(false);
    let first_ids = AtomicUsize::new(0);
    let (runs, (samples, distinct, first_ids)) = generate_while(&cluster, 4, 20, || {
        thread::scope(|scope| {
            // Sessions that each take one ID and leave: every first ID reads the relation and
            // most write it.
            let newcomers = scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let mut client = cluster.connect();
                    client.query_one("SELECT snowflake_nextval()", &[]).unwrap();
                    first_ids.fetch_add(1, Ordering::Relaxed);
                }
            });
            let mut sampler = cluster.connect();
            let (mut samples, mut distinct, mut last) = (0, 0, i64::MIN);
            // At least SAMPLING long, and until the relation moved often enough under the
            // sampler for the check to mean something, however slow the machine (within a
            // bound below the sessions' own).
            let started = Instant::now();
            while started.elapsed() < SAMPLING
                || ((distinct < 100 || first_ids.load(Ordering::Relaxed) < 20)
                    && started.elapsed() < SAMPLING_CAP)
            {
                let value: i64 = sampler
                    .query_one(
                        "SELECT last_value FROM snowflake_id_internal.snowflake_floor",
                        &[],
                    )
                    .unwrap()
                    .get(0);
                assert!(
                    value >= last,
                    "the floor relation went down from {last} to {value} after {samples} samples"
                );
                distinct += i32::from(value > last);
                (samples, last) = (samples + 1, value);
            }
            stop.store(true, Ordering::Relaxed);
            newcomers.join().unwrap();
            (samples, distinct, first_ids.load(Ordering::Relaxed))
        })
    });
    let (batches, _, _) = check_runs(&runs);
    println!(
        "{samples} samples of the floor relation, {distinct} distinct rising values; \
         {batches} batches of 20 IDs, {first_ids} sessions' first IDs"
    );
    // The check means something only if the relation moved often under it.
    assert!(
        distinct >= 100,
        "only {distinct} distinct floor values in {samples} samples"
    );
    assert!(
        first_ids >= 20,
        "only {first_ids} new sessions took a first ID"
    );
}
