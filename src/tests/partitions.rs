//! `#[pg_test]`s of the time-partition helpers (docs/partitioning.md): widths and bounds on every
//! preset, the refusals, and native range partitioning on the key itself: every row in the
//! partition of its UTC day, run-time pruning of `id >= snowflake_min_id(now() - …)`, and a
//! foreign key to the partitioned table.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::tests::helpers::{create, error_of, one};
    use pgrx::prelude::*;

    /// The partition bounds of `what` (a time or an ID, as SQL) as "lower..upper".
    fn bounds(what: &str, span: &str, seq: &str) -> String {
        one(&format!(
            "SELECT format('%s..%s', lower, coalesce(upper::text, 'MAXVALUE'))
             FROM snowflake_partition_bounds({what}, '{span}', '{seq}')"
        ))
    }

    #[pg_test]
    fn a_day_partition_of_every_preset_holds_exactly_that_utc_days_ids() {
        for (seq, preset) in [
            ("p_classic", "classic"),
            ("p_sharded", "sharded"),
            ("p_js53", "js53"),
            ("p_pgedge", "pgedge"),
        ] {
            create(&format!("'{seq}', '{preset}'"));
            let day = "'2026-03-10 00:00:00+00'::timestamptz";
            let next = "'2026-03-11 00:00:00+00'::timestamptz";
            // The partition holding any time of the day runs from the day's first ID to the
            // next day's first.
            let expected: String = one(&format!(
                "SELECT format('%s..%s', snowflake_min_id({day}, '{seq}'),
                               snowflake_min_id({next}, '{seq}'))"
            ));
            for at in ["00:00:00", "12:34:56.789", "23:59:59.999999"] {
                let ts = format!("'2026-03-10 {at}+00'::timestamptz");
                assert_eq!(bounds(&ts, "1 day", seq), expected, "{seq} at {at}");
            }
            // An ID of the day's last tick and the day's first ID fall in the same partition.
            let last: i64 = one(&format!(
                "SELECT snowflake_max_id('2026-03-10 23:59:59.999999+00', '{seq}')"
            ));
            assert_eq!(bounds(&last.to_string(), "1 day", seq), expected, "{seq}");
            let width: i64 = one(&format!(
                "SELECT snowflake_partition_width('1 day', '{seq}')"
            ));
            let (lower, upper) = expected.split_once("..").unwrap();
            assert_eq!(
                upper.parse::<i64>().unwrap() - lower.parse::<i64>().unwrap(),
                width,
                "{seq}"
            );
        }
    }

    #[pg_test]
    fn widths_are_whole_ticks_and_spans_that_are_not_are_refused() {
        let width: i64 = one("SELECT snowflake_partition_width('1 hour')");
        assert_eq!(width, 3_600_000_i64 << 22);
        let same: i64 = one("SELECT snowflake_partition_width('60 minutes')");
        assert_eq!(same, width);
        create("'p_js', 'js53'");
        assert_eq!(
            error_of("SELECT snowflake_partition_width('15 milliseconds', 'p_js')"),
            "22023: interval '00:00:00.015' cannot partition snowflake sequence \"p_js\": the span \
             is not a whole number of 10000 µs ticks | Use a positive interval of days, hours, \
             minutes or seconds that is a whole number of the sequence's 10000 µs ticks, such as \
             '1 day'."
        );
        assert!(error_of("SELECT snowflake_partition_width('1 month')")
            .starts_with("22023: interval '1 mon' cannot partition snowflake sequence \"default\": months and years have no fixed length"));
        assert!(error_of("SELECT snowflake_partition_width('-1 day')")
            .starts_with("22023: interval '-1 days' cannot partition snowflake sequence \"default\": the span is not positive"));
        assert!(error_of("SELECT snowflake_partition_width('0')").starts_with("22023:"));
        assert!(error_of("SELECT snowflake_partition_width('1000000 days')")
            .contains("the span is longer than the sequence's whole time field"));
        assert!(error_of(
            "SELECT * FROM snowflake_partition_bounds('2020-01-01'::timestamptz, '1 day')"
        )
        .starts_with("22008: snowflake sequence \"default\" makes no IDs at 2020-01-01"));
        assert!(
            error_of("SELECT * FROM snowflake_partition_bounds(1, '1 day', 'no_such')")
                .starts_with("42704:")
        );
    }

    /// The ```sql block of docs/partitioning.md that contains `marker`, as the guide has it.
    fn guide_block(marker: &str) -> String {
        const GUIDE: &str = include_str!("../../docs/partitioning.md");
        GUIDE
            .split("```sql\n")
            .skip(1)
            .map(|block| block.split("```").next().unwrap_or_default())
            .find(|block| block.contains(marker))
            .unwrap_or_else(|| panic!("no sql block with {marker:?} in docs/partitioning.md"))
            .to_owned()
    }

    #[pg_test]
    fn native_partitions_hold_their_days_prune_at_run_time_and_take_a_foreign_key() {
        // Five UTC days of partitions around today (now() is fixed in the test's transaction)
        // and a default; rows on two past days, placed by snowflake_min_id of a time of that day
        // (the tick's first ID plus a counter), and rows from the column default.
        Spi::run(
            "CREATE TABLE messages (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text)
                 PARTITION BY RANGE (id);
             CREATE TABLE messages_default PARTITION OF messages DEFAULT;",
        )
        .unwrap();
        // The guide's daily block, as it stands there, run twice: the second run changes nothing.
        let create = guide_block("-- One partition per UTC day");
        Spi::run(&create).unwrap();
        Spi::run(&create).unwrap();
        Spi::run(
            "INSERT INTO messages (id, body)
             SELECT snowflake_min_id(((now() AT TIME ZONE 'UTC')::date - d)::timestamp AT TIME ZONE 'UTC'
                                     + h * interval '1 hour') + h, 'old'
             FROM generate_series(1, 2) d, generate_series(0, 23) h;
             INSERT INTO messages (body) SELECT 'new' FROM generate_series(1, 100);
             CREATE TABLE replies (message_id bigint REFERENCES messages, body text);
             INSERT INTO replies SELECT id, 'reply' FROM messages WHERE body = 'new' LIMIT 10;
             CREATE FUNCTION pg_temp.plan_of(query text) RETURNS text LANGUAGE plpgsql AS $fn$
             DECLARE line text; plan text := '';
             BEGIN
                 FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
                     plan := plan || line || E'\\n';
                 END LOOP;
                 RETURN plan;
             END $fn$;",
        )
        .unwrap();
        let misplaced: i64 = one("SELECT count(*) FROM messages
             WHERE to_char(snowflake_timestamp(id) AT TIME ZONE 'UTC', 'YYYYMMDD')
                   <> substr(tableoid::regclass::text, length('messages_') + 1)");
        assert_eq!(misplaced, 0);
        assert_eq!(one::<i64>("SELECT count(*) FROM messages_default"), 0);
        assert_eq!(one::<i64>("SELECT count(*) FROM messages"), 148);
        // now() is known only when the query runs: the executor prunes the two oldest days (the
        // default partition stays: it could hold IDs past the last range).
        let plan: String = one("SELECT pg_temp.plan_of('SELECT count(*) FROM messages
                                     WHERE id >= snowflake_min_id(now() - interval ''1 day'')')");
        assert!(plan.contains("Subplans Removed: 2"), "{plan}");
        let today: String = one("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')");
        assert!(plan.contains(&format!("messages_{today}")), "{plan}");
        let refused = error_of("INSERT INTO replies VALUES (1, 'no such event')");
        assert!(refused.starts_with("23503:"), "{refused}");
        // Retention: the guide's block with two days instead of thirty drops the partitions wholly
        // older than two days, and a second run finds none.
        let retention =
            guide_block("DECLARE old regclass;").replace("interval '30 days'", "interval '2 days'");
        let partitions = "SELECT string_agg(c.relname, ',' ORDER BY c.relname)
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'messages'::regclass";
        let before: String = one(partitions);
        Spi::run(&retention).unwrap();
        Spi::run(&retention).unwrap();
        let after: String = one(partitions);
        let three_days_ago: String =
            one("SELECT to_char((now() AT TIME ZONE 'UTC')::date - 3, 'YYYYMMDD')");
        assert_eq!(
            before.replace(&format!("messages_{three_days_ago},"), ""),
            after,
            "only the partition of three days ago goes"
        );
    }
}
