//! Removing snowflake_id as the reference says (docs/reference.md, "Removing snowflake_id"),
//! word for word: its SQL blocks are read from the page and run in order, on a primary with a
//! streaming standby and tables keyed by snowflake IDs (one partitioned, one under another
//! schema). The defaults are listed and replaced, the extension dropped, the primary restarted
//! without the library at a clean shutdown, the standby after it replayed that shutdown; then
//! each server crashes and comes back without the library, and new rows keep unique keys. The
//! same with a crash after each step, the recovery of a primary that crashed before its clean
//! restart, and the reservation file deleted; and step 2 under eight writers.

use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{count, doc_code_blocks, doc_sql_blocks};
use snowflake_id_cluster_tests::{Client, Cluster};

/// The defaults that still call the extension (the section's first query).
fn listed_defaults(client: &mut Client, query: &str) -> Vec<String> {
    let listing = format!(
        "SELECT table_name::text, column_name::text FROM ({}) AS listed",
        query.trim().trim_end_matches(';')
    );
    client
        .query(&listing, &[])
        .unwrap()
        .iter()
        .map(|row| format!("{}.{}", row.get::<_, String>(0), row.get::<_, String>(1)))
        .collect()
}

fn without_library(cluster: &Cluster) {
    cluster.append_config("shared_preload_libraries = ''");
}

#[test]
fn removal_as_the_reference_says_completes_and_survives_a_crash() {
    let blocks = doc_sql_blocks("docs/reference.md", "Removing snowflake_id");
    assert_eq!(blocks.len(), 3, "list, replace, drop: {blocks:#?}");
    let (list, replace, drop_extension) = (&blocks[0], &blocks[1], &blocks[2]);

    let mut primary = Cluster::builder().start();
    let mut client = primary.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE SCHEMA app;
             CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
             CREATE TABLE app.events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), kind text)
                 PARTITION BY RANGE (id);
             CREATE TABLE app.events_all PARTITION OF app.events DEFAULT;
             INSERT INTO orders (item) SELECT 'before' FROM generate_series(1, 1000);
             INSERT INTO app.events (kind) SELECT 'before' FROM generate_series(1, 1000);",
        )
        .unwrap();
    let mut standby = primary.start_replica();
    primary.wait_for_standby(&standby, Duration::from_secs(30));

    let listed = listed_defaults(&mut client, list);
    println!("[removal] defaults that call the extension: {listed:?}");
    assert_eq!(listed, ["app.events.id", "orders.id"]);
    client.batch_execute(replace).unwrap();
    assert!(listed_defaults(&mut client, list).is_empty());
    client.batch_execute(drop_extension).unwrap();
    drop(client);

    // The primary, at a clean shutdown; then a crash right after it came back.
    without_library(&primary);
    primary.stop("fast");
    primary.start();
    // The shutdown checkpoint's record, which is flushed; not the insert position, whose WAL the
    // crash below may lose, after which an idle primary might never write that far again.
    let shutdown_at: String = primary
        .connect()
        .query_one(
            "SELECT checkpoint_lsn::text FROM pg_control_checkpoint()",
            &[],
        )
        .unwrap()
        .get(0);
    primary.stop("immediate");
    primary.start();

    // The standby, once it replayed the shutdown: a restartpoint, then without the library.
    let mut replica = standby.connect();
    let replayed = snowflake_id_cluster_tests::wait_until(Duration::from_secs(30), || {
        replica
            .query_one(
                "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
                &[&shutdown_at],
            )
            .unwrap()
            .get::<_, bool>(0)
    });
    assert!(
        replayed,
        "the standby did not replay the primary's shutdown"
    );
    replica.batch_execute("CHECKPOINT").unwrap();
    drop(replica);
    without_library(&standby);
    standby.stop("fast");
    standby.start();
    standby.stop("immediate");
    standby.start();

    let mut client = primary.connect();
    client
        .batch_execute(
            "INSERT INTO orders (item) SELECT 'after' FROM generate_series(1, 1000);
             INSERT INTO app.events (kind) SELECT 'after' FROM generate_series(1, 1000);",
        )
        .unwrap();
    for table in ["orders", "app.events"] {
        let distinct = count(
            &mut client,
            &format!("SELECT count(DISTINCT id) FROM {table}"),
        );
        assert_eq!(distinct, 2000, "{table}: every key unique");
    }
    let library: String = client
        .query_one("SHOW shared_preload_libraries", &[])
        .unwrap()
        .get(0);
    assert_eq!(library, "");
    primary.wait_for_standby(&standby, Duration::from_secs(30));
    let on_standby = count(&mut standby.connect(), "SELECT count(*) FROM orders");
    assert_eq!(on_standby, 2000, "the standby follows without the library");
    println!("[removal] both servers restarted and crashed without the library; 4,000 unique keys");
}

/// The reference's removal with a crash after each step: after steps 2 and 3 the server comes
/// back with the library still listed; after the edit of step 4 but before its clean restart,
/// a crash leaves WAL only the library can replay, so the server does not start without it, and
/// the reference's recovery (the library back, a start, out again, a clean restart) brings it
/// back; after step 4 a crash recovers without the library; step 7 deletes the reservation file.
#[test]
fn removal_survives_a_crash_after_each_step() {
    let blocks = doc_sql_blocks("docs/reference.md", "Removing snowflake_id");
    let (replace, drop_extension) = (&blocks[1], &blocks[2]);
    let setup = "CREATE EXTENSION snowflake_id;
         CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
         INSERT INTO orders (item) SELECT 'before' FROM generate_series(1, 1000);";

    // Steps 2 and 3, a crash after each: the library is still listed, so it replays its WAL.
    let mut cluster = Cluster::builder().start();
    cluster.connect().batch_execute(setup).unwrap();
    for step in [replace, drop_extension] {
        cluster.connect().batch_execute(step).unwrap();
        cluster.stop("immediate");
        cluster.start();
    }
    assert_eq!(
        count(&mut cluster.connect(), "SELECT count(*) FROM orders"),
        1000
    );
    drop(cluster);

    // IDs, steps 2 and 3, the edit of step 4, and a crash before the clean restart.
    let mut cluster = Cluster::builder().start();
    cluster.connect().batch_execute(setup).unwrap();
    cluster.connect().batch_execute(replace).unwrap();
    cluster.connect().batch_execute(drop_extension).unwrap();
    without_library(&cluster);
    cluster.stop("immediate");
    let failure = cluster
        .try_start()
        .expect_err("a crash before the clean restart leaves WAL that needs the library");
    println!(
        "[removal, crash before the clean restart] {}",
        failure
            .lines()
            .filter(|line| line.contains("resource manager"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert!(
        failure.contains("resource manager with ID 176 not registered"),
        "{failure}"
    );
    // The reference's recovery.
    cluster.append_config("shared_preload_libraries = 'snowflake_id'");
    cluster.start();
    without_library(&cluster);
    cluster.stop("fast");
    cluster.start();
    cluster.stop("immediate");
    cluster.start();

    // Step 7, as the reference writes it.
    let delete_file = doc_code_blocks("docs/reference.md", "Removing snowflake_id", "sh");
    assert_eq!(delete_file.len(), 1, "{delete_file:?}");
    let file = cluster.data_dir().join("snowflake_id.reservation");
    assert!(file.exists(), "the reservation file before step 7");
    let deleted = std::process::Command::new("bash")
        .args(["-c", &delete_file[0]])
        .env("PGDATA", cluster.data_dir())
        .output()
        .unwrap();
    assert!(deleted.status.success(), "{deleted:?}");
    assert!(!file.exists(), "step 7 deletes the reservation file");
    cluster.stop("fast");
    cluster.start();
    let mut client = cluster.connect();
    client
        .batch_execute("INSERT INTO orders (item) SELECT 'after' FROM generate_series(1, 1000)")
        .unwrap();
    assert_eq!(
        count(&mut client, "SELECT count(DISTINCT id) FROM orders"),
        2000
    );
}

/// Step 2 (replace the defaults) while eight sessions insert: each table is locked before its
/// largest ID is read, so no insert lands between that read and the new default. 0.9.0's
/// block read `max(id)` unlocked: 5-15 IDs were stored twice, and keyed inserts failed with
/// 23505.
#[test]
fn replacing_the_defaults_under_eight_writers_stores_no_id_twice() {
    let blocks = doc_sql_blocks("docs/reference.md", "Removing snowflake_id");
    let replace = &blocks[1];
    let cluster = Cluster::builder().start();
    cluster
        .connect()
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE TABLE keyed (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);
             CREATE TABLE unkeyed (id bigint DEFAULT snowflake_nextval(), n int);",
        )
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..8)
        .map(|writer| {
            let mut client = cluster.connect();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut inserted, mut failures) = (0u64, Vec::new());
                let table = if writer % 2 == 0 { "keyed" } else { "unkeyed" };
                // Bounded: at most 20,000 rows a writer, however long the replacement takes.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && inserted < 20_000 {
                    match client.batch_execute(&format!("INSERT INTO {table} (n) VALUES (1)")) {
                        Ok(()) => inserted += 1,
                        Err(error) => failures.push(error.to_string()),
                    }
                }
                (inserted, failures)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut client = cluster.connect();
    client.batch_execute(replace).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut failures = Vec::new();
    let mut inserted = 0;
    for writer in writers {
        let (rows, failed) = writer.join().unwrap();
        inserted += rows;
        failures.extend(failed);
    }
    // Per column: after the switch each table counts on from its own largest ID.
    let twice = count(
        &mut client,
        "SELECT (SELECT count(*) - count(DISTINCT id) FROM keyed)
              + (SELECT count(*) - count(DISTINCT id) FROM unkeyed)",
    );
    println!(
        "[removal under writers] {inserted} rows inserted, {twice} IDs stored twice, {} failed inserts",
        failures.len()
    );
    assert_eq!(twice, 0, "IDs stored twice");
    assert!(
        failures.is_empty(),
        "failed inserts: {:?}",
        &failures[..failures.len().min(3)]
    );
    let switched = count(
        &mut client,
        "SELECT count(*) FROM pg_attrdef WHERE pg_get_expr(adbin, adrelid) LIKE 'nextval(%'",
    );
    assert_eq!(switched, 2, "both defaults replaced");
}
