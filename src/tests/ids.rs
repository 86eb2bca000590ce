//! `#[pg_test]`s of issuing IDs: order, the reservation, worker ids, genes, `currval` and
//! `lastval`, read-only transactions, Citus's hooks.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::tests::helpers::{create, error_of, one};
    use pgrx::prelude::*;

    #[pg_test]
    fn nextval_is_positive_and_increasing() {
        let first: i64 = one("SELECT snowflake_nextval()");
        let second: i64 = one("SELECT snowflake_nextval('default')");
        assert!(first > 0);
        assert!(second > first, "{second} <= {first}");
    }

    #[pg_test]
    fn the_reservation_covers_every_issued_tick() {
        // The first IDs of a server find nothing reserved (i64::MIN): the reservation must be
        // written before they leave, and reach at least half a window beyond their tick.
        let covered: bool = one(
            "WITH ids AS (SELECT snowflake_nextval() AS id FROM generate_series(1, 1000))
             SELECT (SELECT reserved_until FROM snowflake_stats())
                    >= max(snowflake_timestamp(id)) + interval '1 ms'
                       + current_setting('snowflake_id.reserve_ahead')::interval / 2
             FROM ids",
        );
        assert!(covered);
        let writes: i64 = one("SELECT reservation_writes FROM snowflake_stats()");
        assert!(writes >= 1, "{writes} reservation writes");
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
        let my_slot: i32 = one(
            "SELECT worker FROM snowflake_workers WHERE pid = pg_backend_pid() AND worker_bits = 10",
        );
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
    fn a_session_takes_one_worker_id_per_worker_width_it_uses() {
        Spi::run(
            "SELECT snowflake_create_sequence('t_js', preset => 'js53');
             SELECT snowflake_create_sequence('t_narrow', preset => 'js53', worker_bits => 2,
                                              sequence_bits => 13);
             SELECT snowflake_nextval('t_js'), snowflake_nextval('t_narrow'),
                    snowflake_nextval('default') FROM generate_series(1, 3);",
        )
        .unwrap();
        // 'default' (10 bits, the space of max_workers = 1024), js53 (7 bits) and 2 bits: a
        // worker id in each, alone, each counted.
        let spaces: String = one(
            "SELECT string_agg(format('%s:%s:%s:%s', worker_bits, sessions, shared, ids_issued),
                               ' ' ORDER BY worker_bits)
             FROM snowflake_workers WHERE pid = pg_backend_pid()",
        );
        assert_eq!(spaces, "2:1:f:3 7:1:f:3 10:1:f:3");
        // Each sequence's IDs carry the worker id of its space.
        let agree: bool = one(
            "SELECT bool_and(w.worker = (snowflake_decode(snowflake_nextval(s.name), s.name)).worker)
             FROM (VALUES ('t_js', 7), ('t_narrow', 2), ('default', 10)) AS s(name, bits)
             JOIN snowflake_workers w ON w.worker_bits = s.bits AND w.pid = pg_backend_pid()",
        );
        assert!(agree);
        let (sharing, conflicts): (i32, i64) =
            Spi::get_two("SELECT sharing_sessions, tick_conflicts FROM snowflake_stats()")
                .map(|(a, b)| (a.unwrap(), b.unwrap()))
                .unwrap();
        assert_eq!((sharing, conflicts), (0, 0));
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
    fn gene_carries_the_low_bits_of_the_key() {
        create("'t_gene', worker_bits => 6, gene_bits => 4");
        let genes: String = one(
            "SELECT string_agg(format('%s:%s:%s', key, (snowflake_decode(id, 't_gene')).gene, id % 16), ' ' ORDER BY key)
             FROM (SELECT key, snowflake_nextval('t_gene', key) AS id
                   FROM unnest(ARRAY[0, 5, 37, -1, 9223372036854775807]::bigint[]) key) ids",
        );
        assert_eq!(
            genes,
            "-1:15:15 0:0:0 5:5:5 37:5:5 9223372036854775807:15:15"
        );
        let error = error_of("SELECT snowflake_nextval('default', 5)");
        assert!(
            error.starts_with("22023: snowflake sequence \"default\" has no gene bits | Call snowflake_nextval('default') without a key"),
            "{error}"
        );
    }

    #[pg_test]
    fn nextval_works_in_a_read_only_transaction() {
        // Decided: snowflake_nextval changes no table, so (like gen_random_uuid, unlike
        // nextval) it issues IDs in read-only transactions. docs/reference.md, snowflake_nextval.
        Spi::run("CREATE SEQUENCE t_read_only_plain").unwrap();
        error_of("SELECT 1"); // creates error_of's helper while writing is still allowed
        Spi::run("SET LOCAL transaction_read_only = on").unwrap();
        assert!(one::<i64>("SELECT snowflake_nextval()") > 0);
        let error = error_of("SELECT nextval('t_read_only_plain')");
        assert!(error.starts_with("25006: "), "{error}");
    }

    #[pg_test]
    fn currval_and_lastval_follow_the_column_default() {
        // Each pg_test runs in a backend that may have made IDs already: use fresh sequences.
        create("'t_curr_a'");
        create("'t_curr_b', preset => 'js53'");
        let error = error_of("SELECT snowflake_currval('t_curr_a')");
        assert!(
            error.starts_with(
                "55000: currval of snowflake sequence \"t_curr_a\" is not yet defined in this session | "
            ),
            "{error}"
        );
        Spi::run(
            "CREATE TABLE t_curr (id bigint PRIMARY KEY DEFAULT snowflake_nextval('t_curr_a'), n int);
             CREATE TABLE t_curr_child (id bigint PRIMARY KEY DEFAULT snowflake_nextval('t_curr_b'),
                                        parent bigint REFERENCES t_curr);",
        )
        .unwrap();
        // An INSERT through the default, then currval in the same statement list and the next.
        let inserted: i64 = one("INSERT INTO t_curr (n) VALUES (1) RETURNING id");
        assert_eq!(one::<i64>("SELECT snowflake_currval('t_curr_a')"), inserted);
        assert_eq!(one::<i64>("SELECT snowflake_lastval()"), inserted);
        Spi::run("INSERT INTO t_curr_child (parent) VALUES (snowflake_currval('t_curr_a'))")
            .unwrap();
        let child: i64 = one("SELECT id FROM t_curr_child");
        assert_eq!(one::<i64>("SELECT snowflake_lastval()"), child);
        assert_eq!(one::<i64>("SELECT snowflake_currval('t_curr_b')"), child);
        assert_eq!(one::<i64>("SELECT snowflake_currval('t_curr_a')"), inserted);
        assert_eq!(
            one::<i64>("SELECT parent FROM t_curr_child"),
            inserted,
            "the child references the row just inserted"
        );
        let error = error_of("SELECT snowflake_currval('t_curr_missing')");
        assert!(error.starts_with("42704: "), "{error}");
        // Dropped and created again with the same layout: a new sequence, undefined again.
        Spi::run(
            "SELECT snowflake_drop_sequence('t_curr_a');
             SELECT snowflake_create_sequence('t_curr_a');",
        )
        .unwrap();
        let error = error_of("SELECT snowflake_currval('t_curr_a')");
        assert!(error.starts_with("55000: "), "{error}");
        assert_eq!(one::<i64>("SELECT snowflake_lastval()"), child);
    }

    #[pg_test]
    fn function_lookups_are_hooked_only_when_citus_is_preloaded() {
        // This server preloads snowflake_id alone: no lookup pays for the Citus hooks.
        // SAFETY: reads a hook global that only _PG_init functions write.
        assert!(unsafe { pg_sys::needs_fmgr_hook }.is_none());
        // SAFETY: as above.
        assert!(unsafe { pg_sys::fmgr_hook }.is_none());
        for (libraries, citus) in [
            ("citus,snowflake_id", true),
            ("\"$libdir/citus\" , snowflake_id", true),
            ("citus.so", true),
            ("snowflake_id", false),
            ("citus_columnar, pg_stat_statements", false),
            ("", false),
        ] {
            assert_eq!(
                crate::state::citus::lists_citus(libraries),
                citus,
                "{libraries}"
            );
        }
    }
}
