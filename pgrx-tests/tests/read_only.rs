//! Where IDs cannot be made, they still decode. A hot standby refuses `snowflake_nextval` with
//! 25006, like `nextval`, claims no worker slot, and decodes the replicated IDs exactly as the
//! primary does (docs/design.md §5). `snowflake_decode` and `snowflake_timestamp` are PARALLEL
//! SAFE and work in the workers of a parallel read-only query. Each test prints what it saw
//! (`--nocapture`).

use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{column, insert_batch, IDS_TABLE};
use snowflake_id_cluster_tests::{error_parts, wait_until, Cluster};

#[test]
fn hot_standby_refuses_nextval_and_decodes_replicated_ids() {
    let primary = Cluster::builder().start();
    let mut client = primary.connect();
    client
        .batch_execute(&format!(
            "{IDS_TABLE}
             SELECT snowflake_create_sequence('short', preset => 'js53');
             CREATE TABLE short_ids (id bigint PRIMARY KEY);
             INSERT INTO short_ids SELECT snowflake_nextval('short') FROM generate_series(1, 100);"
        ))
        .unwrap();
    insert_batch(&mut client, 0, 0, 1_000).unwrap();
    let replica = primary.start_replica();
    // Rows made after the base backup arrive by streaming.
    insert_batch(&mut client, 0, 1_000, 1_000).unwrap();
    let expected: String = client
        .query_one(
            "SELECT string_agg(format('%s=%s', id, snowflake_decode(id)), ',' ORDER BY id)
             FROM ids",
            &[],
        )
        .unwrap()
        .get(0);
    let expected_short: String = client
        .query_one(
            "SELECT string_agg(format('%s=%s', id, snowflake_decode(id, 'short')), ',' ORDER BY id)
             FROM short_ids",
            &[],
        )
        .unwrap()
        .get(0);

    let mut standby = replica.connect();
    let in_recovery: bool = standby
        .query_one("SELECT pg_is_in_recovery()", &[])
        .unwrap()
        .get(0);
    assert!(in_recovery, "the replica is not a standby");
    let mut replicated = 0;
    assert!(
        wait_until(Duration::from_secs(30), || {
            replicated = standby
                .query_one("SELECT count(*) FROM ids", &[])
                .unwrap()
                .get::<_, i64>(0);
            replicated == 2_000
        }),
        "the standby has {replicated} of 2000 rows"
    );

    // Fresh sessions, so each result is the first use of the extension in its backend.
    let nextval = replica
        .connect()
        .query_one("SELECT snowflake_nextval()", &[])
        .map(|row| row.get::<_, i64>(0))
        .map_err(|error| error_parts(&error));
    let nextval_short = replica
        .connect()
        .query_one("SELECT snowflake_nextval('short')", &[])
        .map(|row| row.get::<_, i64>(0))
        .map_err(|error| error_parts(&error));
    let decoded = replica
        .connect()
        .query_one(
            "SELECT string_agg(format('%s=%s', id, snowflake_decode(id)), ',' ORDER BY id)
             FROM ids",
            &[],
        )
        .map(|row| row.get::<_, String>(0))
        .map_err(|error| error_parts(&error));
    let decoded_short = replica
        .connect()
        .query_one(
            "SELECT string_agg(format('%s=%s', id, snowflake_decode(id, 'short')), ',' ORDER BY id)
             FROM short_ids",
            &[],
        )
        .map(|row| row.get::<_, String>(0))
        .map_err(|error| error_parts(&error));
    let workers = replica
        .connect()
        .query_one("SELECT count(*) FROM snowflake_workers", &[])
        .map(|row| row.get::<_, i64>(0))
        .map_err(|error| error_parts(&error));
    println!(
        "standby: {replicated} rows replicated; snowflake_nextval() -> {nextval:?}; \
         snowflake_nextval('short') -> {nextval_short:?}; decode of replicated IDs: {}; \
         decode of 'short' IDs: {}; workers on the standby: {workers:?}",
        match &decoded {
            Ok(text) => format!("ok, equal to the primary's: {}", *text == expected),
            Err(error) => format!("{error:?}"),
        },
        match &decoded_short {
            Ok(text) => format!("ok, equal to the primary's: {}", *text == expected_short),
            Err(error) => format!("{error:?}"),
        },
    );
    let mut problems = Vec::new();
    for (call, result) in [
        ("snowflake_nextval()", &nextval),
        ("snowflake_nextval('short')", &nextval_short),
    ] {
        match result {
            Ok(id) => problems.push(format!("{call} on the standby returned {id}")),
            Err((code, message, hint)) => {
                if code != "25006" {
                    problems.push(format!(
                        "{call} on the standby failed with SQLSTATE {code} (expected 25006): \
                         {message}"
                    ));
                } else if !message.contains("recovery") || hint.is_empty() {
                    problems.push(format!("{call}: unclear error: {message} / {hint}"));
                }
            }
        }
    }
    for (what, result, expected) in [
        ("snowflake_decode(id)", &decoded, &expected),
        (
            "snowflake_decode(id, 'short')",
            &decoded_short,
            &expected_short,
        ),
    ] {
        match result {
            Ok(text) if text == expected => {}
            Ok(text) => problems.push(format!(
                "{what} on the standby differs from the primary: {:.200} vs {:.200}",
                text, expected
            )),
            Err((code, message, _)) => problems.push(format!(
                "{what} of replicated IDs failed on the standby: SQLSTATE {code}: {message}"
            )),
        }
    }
    if workers != Ok(0) {
        problems.push(format!("snowflake_workers on the standby: {workers:?}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `snowflake_decode` / `snowflake_timestamp` are declared PARALLEL SAFE; a parallel scan that
/// calls them in a read-only query must work, in the leader and in the workers.
#[test]
fn decode_works_in_a_parallel_read_only_query() {
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client.batch_execute(IDS_TABLE).unwrap();
    insert_batch(&mut client, 0, 0, 50_000).unwrap();
    client.batch_execute("VACUUM ANALYZE ids").unwrap();

    // A fresh session, so the extension has not looked anything up in this backend yet.
    let mut reader = cluster.connect();
    reader
        .batch_execute(
            "SET max_parallel_workers_per_gather = 2;
             SET parallel_setup_cost = 0;
             SET parallel_tuple_cost = 0;
             SET min_parallel_table_scan_size = 0;
             SET parallel_leader_participation = off;",
        )
        .unwrap();
    let query = "SELECT count(*) FROM ids
                 WHERE snowflake_timestamp(id) >= '2025-01-01'
                   AND (snowflake_decode(id)).worker >= 0";
    let plan: Vec<String> = column(&mut reader, &format!("EXPLAIN {query}"));
    assert!(
        plan.iter().any(|line| line.contains("Parallel Seq Scan")),
        "not a parallel plan: {plan:#?}"
    );
    let result = reader
        .query_one(query, &[])
        .map(|row| row.get::<_, i64>(0))
        .map_err(|error| error_parts(&error));
    let xid = reader
        .query_one(
            "SELECT snowflake_timestamp(1)::text, pg_current_xact_id_if_assigned()::text",
            &[],
        )
        .map(|row| (row.get::<_, String>(0), row.get::<_, Option<String>>(1)))
        .map_err(|error| error_parts(&error));
    println!(
        "parallel decode: {:?}; a read-only SELECT of snowflake_timestamp in a fresh session \
         -> (ts, xid assigned) {xid:?}",
        result
            .as_ref()
            .map_err(|(code, message, _)| (code, message))
    );
    match result {
        Ok(count) => assert_eq!(count, 50_000),
        Err((code, message, _)) => panic!(
            "snowflake_decode/snowflake_timestamp failed in a parallel query: SQLSTATE {code}: \
             {message}"
        ),
    }
}
