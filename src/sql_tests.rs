//! `#[pg_test]`s of the SQL surface, run in a server that preloads the extension.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn one<T: FromDatum + IntoDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql)
            .expect(sql)
            .expect("query returned NULL")
    }

    /// Runs `sql` in a subtransaction and returns "SQLSTATE: message | hint" of the error it raises.
    fn error_of(sql: &str) -> String {
        Spi::run(
            "CREATE OR REPLACE FUNCTION pg_temp.error_of(statement text) RETURNS text
             LANGUAGE plpgsql AS $$
             DECLARE hint text;
             BEGIN
                 EXECUTE statement;
                 RETURN 'no error';
             EXCEPTION WHEN OTHERS THEN
                 GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
                 RETURN SQLSTATE || ': ' || SQLERRM || ' | ' || hint;
             END $$",
        )
        .expect("create error_of");
        Spi::get_one_with_args::<String>("SELECT pg_temp.error_of($1)", &[sql.into()])
            .expect("error_of")
            .expect("error_of returned NULL")
    }

    #[pg_test]
    fn nextval_is_positive_and_increasing() {
        let first: i64 = one("SELECT snowflake_nextval()");
        let second: i64 = one("SELECT snowflake_nextval('default')");
        assert!(first > 0);
        assert!(second > first, "{second} <= {first}");
    }

    #[pg_test]
    fn ids_strictly_increase_within_a_statement() {
        let all_increasing: bool = one("SELECT bool_and(id > previous) FROM (
                 SELECT id, lag(id) OVER (ORDER BY n) AS previous
                 FROM (SELECT n, snowflake_nextval() AS id FROM generate_series(1, 20000) n) ids
             ) pairs WHERE previous IS NOT NULL");
        assert!(all_increasing);
    }

    #[pg_test]
    fn column_default_inserts_and_decodes_to_this_backend() {
        Spi::run(
            "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
             INSERT INTO orders(item) SELECT 'book ' || n FROM generate_series(1, 5000) n;",
        )
        .unwrap();
        assert_eq!(one::<i64>("SELECT count(*) FROM orders"), 5000);
        let my_slot: i32 = one("SELECT slot FROM snowflake_workers WHERE pid = pg_backend_pid()");
        let workers: Vec<i32> = Spi::connect(|client| {
            client
                .select(
                    "SELECT DISTINCT (snowflake_decode(id)).worker FROM orders",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| row.get::<i32>(1).unwrap().unwrap())
                .collect()
        });
        assert_eq!(workers, vec![my_slot]);
        let fields_ok: bool = one("SELECT bool_and(d.node = 0 AND d.gene = 0
                             AND d.ts BETWEEN clock_timestamp() - interval '1 minute'
                                          AND clock_timestamp())
             FROM orders, snowflake_decode(id) d");
        assert!(fields_ok);
    }

    #[pg_test]
    fn decode_splits_the_classic_layout() {
        // tick 1000 (1 s after the epoch), worker 5, sequence 7.
        let (ts, node, worker, sequence, gene): (String, i32, i32, i32, i32) = Spi::connect(|c| {
            let row = c
                .select(
                    "SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'),
                            node, worker, sequence, gene
                     FROM snowflake_decode((1000::bigint << 22) | (5 << 12) | 7)",
                    Some(1),
                    &[],
                )
                .unwrap()
                .first();
            (
                row.get(1).unwrap().unwrap(),
                row.get(2).unwrap().unwrap(),
                row.get(3).unwrap().unwrap(),
                row.get(4).unwrap().unwrap(),
                row.get(5).unwrap().unwrap(),
            )
        });
        assert_eq!(ts, "2025-01-01 00:00:01.000");
        assert_eq!((node, worker, sequence, gene), (0, 5, 7, 0));
        // `id >> 22` is milliseconds since the epoch.
        let millis: i64 = one("SELECT snowflake_nextval() >> 22");
        let expected: i64 = one(
            "SELECT (extract(epoch FROM clock_timestamp() - '2025-01-01 00:00:00+00') * 1000)::bigint",
        );
        assert!((expected - millis).abs() < 5_000, "{millis} vs {expected}");
    }

    #[pg_test]
    fn null_in_null_out() {
        assert!(one::<bool>("SELECT snowflake_nextval(NULL) IS NULL"));
        assert!(one::<bool>("SELECT snowflake_decode(NULL) IS NULL"));
        assert!(one::<bool>("SELECT snowflake_decode(1, NULL) IS NULL"));
    }

    #[pg_test]
    fn unknown_sequence_is_42704() {
        let error = error_of("SELECT snowflake_nextval('unknown')");
        assert!(
            error.starts_with("42704: snowflake sequence \"unknown\" does not exist | "),
            "{error}"
        );
        assert!(error.contains("snowflake_sequence_catalog"), "{error}");
        let error = error_of("SELECT snowflake_decode(1, 'nope')");
        assert!(
            error.starts_with("42704: snowflake sequence \"nope\" does not exist"),
            "{error}"
        );
    }

    #[pg_test]
    fn decode_of_a_negative_id_is_22003() {
        let error = error_of("SELECT snowflake_decode(-5)");
        assert!(
            error.starts_with("22003: -5 is not an ID of snowflake sequence \"default\""),
            "{error}"
        );
        assert!(error.contains("| Pass the name of the sequence"), "{error}");
    }

    #[pg_test]
    fn workers_view_shows_this_backend() {
        Spi::run("SELECT snowflake_nextval() FROM generate_series(1, 10)").unwrap();
        let (database_ok, issued_ok): (bool, bool) = Spi::get_two(
            "SELECT database = current_database(), ids_issued >= 10
             FROM snowflake_workers WHERE pid = pg_backend_pid()",
        )
        .map(|(a, b)| (a.unwrap(), b.unwrap()))
        .unwrap();
        assert!(database_ok && issued_ok);
    }

    #[pg_test]
    fn ids_carry_the_clock_not_the_transaction_start() {
        // pg_test runs inside one transaction, so now() is frozen here (prior-art #9).
        let gap_ms: f64 = one(
            "WITH a AS (SELECT snowflake_nextval() AS id),
                  s AS (SELECT pg_sleep(0.05) FROM a),
                  b AS (SELECT snowflake_nextval() AS id FROM s)
             SELECT extract(epoch FROM (snowflake_decode(b.id)).ts - (snowflake_decode(a.id)).ts)::float8 * 1000
             FROM a, b",
        );
        assert!(
            gap_ms >= 40.0,
            "IDs 50 ms apart decode only {gap_ms} ms apart"
        );
    }

    #[pg_test]
    fn low_rate_ids_spread_over_low_bits() {
        // One ID per tick: a counter reset on every tick would make all of them ≡ 0 (mod 16).
        let distinct: i64 = one("SELECT count(DISTINCT id % 16) FROM (
                 SELECT snowflake_nextval() AS id, pg_sleep(0.002) FROM generate_series(1, 32)
             ) ids");
        assert_eq!(distinct, 16);
    }

    #[pg_test]
    fn catalog_is_read_only_for_ordinary_roles() {
        Spi::run("CREATE ROLE snowflake_test_user; SET ROLE snowflake_test_user").unwrap();
        let error = error_of("DELETE FROM snowflake_sequence_catalog");
        assert!(error.starts_with("42501: permission denied"), "{error}");
        assert!(one::<i64>("SELECT snowflake_nextval()") > 0);
        Spi::run("RESET ROLE").unwrap();
    }
}
