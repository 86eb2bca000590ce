//! A corrupt reservation file (docs/design.md §5): after a restart every `snowflake_nextval`, of
//! any sequence, fails with XX001 naming the file, the server warns in its log and leaves the
//! file as it is, and decoding still works. Once the operator writes a valid reservation (an
//! hour ahead) and restarts, IDs resume after it, above every ID issued before, and the server
//! extends it. The test prints what it measured (`--nocapture`).

use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{
    assert_strictly_increasing, assert_table_consistent, default_id_unix_ms, insert_batch,
    real_now_us, reservation_in_file, stats, Stats, HOUR_US, IDS_TABLE,
};
use snowflake_id_cluster_tests::{error_parts, wait_until, Cluster};
use snowflake_id_core::reservation_file;

#[test]
fn corrupt_reservation_file_refuses_ids_until_a_valid_one_is_written() {
    let mut cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client.batch_execute(IDS_TABLE).unwrap();
    let old = insert_batch(&mut client, 0, 0, 1_000).unwrap();
    let old_max = *old.iter().max().unwrap();
    drop(client);
    let path = cluster.data_dir().join(reservation_file::FILE_NAME);
    let path_text = path.display().to_string();

    let mut refused = Vec::new();
    for (what, contents) in [
        ("garbage", &b"not a reservation\n\x00\xff"[..]),
        ("empty", &b""[..]),
        (
            "a valid header and a bad number",
            &b"snowflake_id reservation v1\nreserved_until_unix_us=12x4\n"[..],
        ),
    ] {
        cluster.stop("fast");
        cluster.write_data_file(reservation_file::FILE_NAME, contents);
        cluster.start();
        let mut client = cluster.connect();
        let error = client
            .query_one("SELECT snowflake_nextval()", &[])
            .expect_err(what);
        let (code, message, hint) = error_parts(&error);
        println!("corrupt reservation ({what}): {code}: {message} (hint: {hint})");
        assert_eq!(code, "XX001", "{what}: {message}");
        assert!(
            message.contains(&path_text),
            "{what}: the message does not name {path_text}: {message}"
        );
        assert!(!hint.is_empty(), "{what}: no hint");
        // Another sequence, and a second try, are refused as well; the file is left alone.
        client
            .batch_execute("SELECT snowflake_create_sequence('other', preset => 'js53')")
            .unwrap();
        let error = client
            .query_one("SELECT snowflake_nextval('other')", &[])
            .expect_err(what);
        assert_eq!(error_parts(&error).0, "XX001");
        let error = client
            .query_one("SELECT snowflake_nextval()", &[])
            .expect_err(what);
        assert_eq!(error_parts(&error).0, "XX001");
        client
            .batch_execute("SELECT snowflake_drop_sequence('other')")
            .unwrap();
        // Reading IDs still works.
        let decoded: i64 = client
            .query_one(
                "SELECT (extract(epoch FROM snowflake_timestamp($1)) * 1000)::int8",
                &[&old_max],
            )
            .unwrap()
            .get(0);
        assert_eq!(decoded, default_id_unix_ms(old_max));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            contents,
            "{what}: the server rewrote the corrupt file"
        );
        refused.push(what);
    }
    assert!(
        cluster
            .server_log()
            .contains("the reservation file is unusable"),
        "no warning in the server log\n{}",
        cluster.log_tail()
    );

    // The operator writes a valid reservation an hour ahead: IDs resume after it.
    cluster.stop("fast");
    let reserved = real_now_us() + HOUR_US;
    cluster.write_data_file(
        reservation_file::FILE_NAME,
        reservation_file::encode(reserved).as_bytes(),
    );
    cluster.start();
    let mut client = cluster.connect();
    let new = insert_batch(&mut client, 1, 0, 1_000).unwrap();
    assert_strictly_increasing("after repair", &new);
    let new_min = *new.iter().min().unwrap();
    let after = stats(&mut client);
    let on_disk = reservation_in_file(&cluster);
    println!(
        "repaired reservation {reserved} µs (1 h ahead): new IDs start at tick {} ms ({} ms after \
         it); file now {on_disk} µs; stats {after:?}",
        default_id_unix_ms(new_min),
        default_id_unix_ms(new_min) - reserved / 1000
    );
    assert!(
        default_id_unix_ms(new_min) * 1000 >= reserved,
        "new IDs (tick {} ms) start before the written reservation {reserved} µs",
        default_id_unix_ms(new_min)
    );
    assert!(
        default_id_unix_ms(new_min) * 1000 < reserved + 60_000_000,
        "new IDs start far after the reservation"
    );
    assert!(new_min > old_max);
    assert!(on_disk > reserved, "the reservation was not extended");
    assert_eq!(assert_table_consistent(&mut client), 2_000);
    assert_eq!(refused.len(), 3);
}

/// A write that fails names the file that failed: here the temporary file, whose name a
/// directory has taken. No ID is issued until the write succeeds again.
#[test]
fn a_failed_reservation_write_names_the_file_that_failed() {
    let mut cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    drop(client);
    cluster.stop("fast");
    let blocker = cluster
        .data_dir()
        .join(reservation_file::TEMPORARY_FILE_NAME);
    std::fs::create_dir(&blocker).unwrap();
    cluster.start();
    let mut client = cluster.connect();
    let error = client
        .query_one("SELECT snowflake_nextval()", &[])
        .expect_err("the reservation cannot be written");
    let (code, message, hint) = error_parts(&error);
    println!("reservation write blocked: {code}: {message} (hint: {hint})");
    assert_eq!(code, "58030", "{message}");
    assert!(
        message.contains(&format!("\"{}\"", blocker.display())),
        "the message does not name {}: {message}",
        blocker.display()
    );
    assert!(hint.starts_with("No ID was issued."), "{hint}");
    // Counted for monitoring (SnowflakeReservationWriteFailed, docs/monitoring.md).
    let failed = stats(&mut client).reservation_write_failures;
    assert!(failed >= 1, "{failed} failures counted");
    std::fs::remove_dir(&blocker).unwrap();
    let id: i64 = client
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap()
        .get(0);
    assert!(id > 0);
    // The reservation worker may have failed again before the directory went (it retries
    // every sixteenth of the window); once it has written, every failure is counted. From
    // then on, through further writes of the sessions and the worker, none is.
    let wrote = |client: &mut postgres::Client, done: &dyn Fn(&Stats) -> bool| {
        wait_until(Duration::from_secs(60), || {
            client
                .batch_execute("SELECT snowflake_nextval() FROM generate_series(1, 100)")
                .unwrap();
            done(&stats(client))
        })
    };
    let before = stats(&mut client);
    assert!(
        wrote(&mut client, &|now| now.reservation_worker_writes
            > before.reservation_worker_writes),
        "the reservation worker did not write after the directory went: {before:?}"
    );
    let after = stats(&mut client);
    assert!(
        wrote(&mut client, &|now| now.reservation_writes
            >= after.reservation_writes + 2),
        "no reservation writes after the worker's: {after:?}"
    );
    assert_eq!(
        stats(&mut client).reservation_write_failures,
        after.reservation_write_failures,
        "a write that worked is no failure"
    );
}
