//! Worker-slot churn (docs/design.md §4): 3,000 short connections, each claiming a worker slot
//! for four IDs and exiting, beside four steady sessions that keep generating. No ID repeats,
//! every session's IDs strictly increase, and every slot is free again once its session has
//! gone. The test prints what it measured (`--nocapture`).

use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::{
    assert_strictly_increasing, assert_table_consistent, check_runs, column, generate_while, stats,
    worker_ids_in_use, IDS_TABLE,
};
use snowflake_id_cluster_tests::{wait_until, Cluster};

#[test]
fn short_connections_release_their_slots_beside_steady_generators() {
    const CHURN_THREADS: i32 = 4;
    const CYCLES_PER_THREAD: i32 = 750;
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(&format!(
            "{IDS_TABLE}
             CREATE TABLE churn (id bigint PRIMARY KEY, cycle int NOT NULL);"
        ))
        .unwrap();

    let started = Instant::now();
    let (steady, churned) = generate_while(&cluster, 4, 100, || {
        thread::scope(|scope| {
            let handles: Vec<_> = (0..CHURN_THREADS)
                .map(|thread_number| {
                    let cluster = &cluster;
                    scope.spawn(move || {
                        let mut ids = Vec::new();
                        for cycle in 0..CYCLES_PER_THREAD {
                            let cycle = thread_number * CYCLES_PER_THREAD + cycle;
                            let mut client = cluster.connect();
                            let first: i64 = client
                                .query_one("SELECT snowflake_nextval()", &[])
                                .unwrap()
                                .get(0);
                            let rows = client
                                .query(
                                    "INSERT INTO churn (id, cycle)
                                     SELECT snowflake_nextval(), $1
                                     FROM generate_series(1, 3) RETURNING id",
                                    &[&cycle],
                                )
                                .unwrap_or_else(|error| panic!("cycle {cycle}: {error}"));
                            let mut mine = vec![first];
                            mine.extend(rows.iter().map(|row| row.get::<_, i64>(0)));
                            assert_strictly_increasing(&format!("cycle {cycle}"), &mine);
                            ids.extend(mine);
                        }
                        ids
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|handle| handle.join().expect("a churn thread panicked"))
                .collect::<Vec<i64>>()
        })
    });
    let elapsed = started.elapsed();
    let (batches, median, max) = check_runs(&steady);
    let steady_rows = assert_table_consistent(&mut admin);
    let mut all: Vec<i64> = churned.clone();
    all.extend(
        steady
            .iter()
            .flat_map(|run| run.rows.iter().map(|&(id, _)| id)),
    );
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "an ID was issued twice");
    let row = admin
        .query_one(
            "SELECT count(*), count(DISTINCT id),
                    count(DISTINCT (id >> 12) & 1023), max((id >> 12) & 1023)
             FROM churn",
            &[],
        )
        .unwrap();
    let (churn_rows, churn_distinct, workers, max_worker): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(churn_rows, 3 * (CHURN_THREADS * CYCLES_PER_THREAD) as i64);
    assert_eq!(churn_distinct, churn_rows);

    let slots = || worker_ids_in_use(&mut cluster.connect());
    let mut left = slots();
    let released = wait_until(Duration::from_secs(60), || {
        left = slots();
        left == 0
    });
    let held: Vec<String> = column(
        &mut admin,
        "SELECT format('%s', w) FROM snowflake_workers w",
    );
    let after = stats(&mut admin);
    println!("churn: stats {after:?}");
    println!(
        "churn: {} connections ({} IDs) beside 4 steady sessions ({steady_rows} rows, {batches} \
         batches, latency median {median:?}, max {max:?}) in {elapsed:?}; churn used {workers} \
         distinct workers, highest {max_worker}; slots held afterwards: {left}",
        CHURN_THREADS * CYCLES_PER_THREAD,
        churned.len()
    );
    assert!(
        released,
        "{left} worker slots still held after every session disconnected: {held:?}"
    );
    assert_eq!(
        after.backward_steps, 0,
        "the clock never stepped: {after:?}"
    );
}
