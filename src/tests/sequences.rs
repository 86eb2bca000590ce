//! `#[pg_test]`s of sequences and decoding: presets and layouts, their errors, privileges, the
//! catalog lookup, the base32 form, time bounds.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::tests::helpers::{create, error_of, one};
    use pgrx::prelude::*;

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
        assert!(
            error.contains("snowflake_sequences lists the sequences"),
            "{error}"
        );
        assert!(error.contains("case included"), "{error}");
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
        assert!(
            error.contains("| No snowflake sequence makes a negative ID"),
            "{error}"
        );
        create("'t_narrow', preset => 'js53'");
        let error = error_of("SELECT snowflake_decode(9223372036854775807, 't_narrow')");
        assert!(error.starts_with("22003: "), "{error}");
        assert!(error.contains("| Pass the name of the sequence"), "{error}");
    }

    #[pg_test]
    fn creating_a_sequence_in_a_read_only_transaction_is_25006() {
        // error_of creates its helper function on first use, which a read-only one cannot.
        assert_eq!(error_of("SELECT 1"), "no error");
        Spi::run("SET LOCAL transaction_read_only = on").unwrap();
        for call in [
            "SELECT snowflake_create_sequence('t_read_only')",
            "SELECT snowflake_drop_sequence('t_read_only')",
        ] {
            let error = error_of(call);
            assert!(
                error.starts_with("25006: cannot execute snowflake_"),
                "{error}"
            );
            assert!(error.contains("in a read-only transaction | "), "{error}");
        }
    }

    #[pg_test]
    fn presets_create_their_layouts() {
        create("'t_classic'");
        create("'t_sharded', preset => 'sharded'");
        create("'t_js53', 'js53'");
        create("'t_pgedge', 'pgedge'");
        let layouts: Vec<String> = Spi::connect(|client| {
            client
                .select(
                    "SELECT format('%s %s/%s/%s/%s/%s %s %s/tick %s/s %s sessions %s nodes',
                                   name, time_bits, node_bits, worker_bits, sequence_bits,
                                   gene_bits, time_unit, ids_per_tick,
                                   ids_per_second_per_session, sessions_per_node, nodes)
                     FROM snowflake_sequences WHERE name LIKE 't\\_%' ORDER BY name",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| row.get::<String>(1).unwrap().unwrap())
                .collect()
        });
        assert_eq!(
            layouts,
            [
                "t_classic 41/0/10/12/0 00:00:00.001 4096/tick 4096000/s 1024 sessions 1 nodes",
                "t_js53 38/0/7/8/0 00:00:00.01 256/tick 25600/s 128 sessions 1 nodes",
                "t_pgedge 41/10/0/12/0 00:00:00.001 4096/tick 4096000/s 1 sessions 1024 nodes",
                "t_sharded 39/6/8/10/0 00:00:00.001 1024/tick 1024000/s 256 sessions 64 nodes",
            ]
        );
        let same_fingerprint: bool = one(
            "SELECT a.fingerprint = b.fingerprint FROM snowflake_sequences a, snowflake_sequences b
             WHERE a.name = 'default' AND b.name = 't_classic'",
        );
        assert!(
            same_fingerprint,
            "equal layouts must have equal fingerprints"
        );
        let different: bool = one(
            "SELECT a.fingerprint <> b.fingerprint FROM snowflake_sequences a, snowflake_sequences b
             WHERE a.name = 't_js53' AND b.name = 't_classic'",
        );
        assert!(different);
        // js53 IDs are exact in a JavaScript number; the sharded preset needs a node id.
        assert!(one::<i64>("SELECT snowflake_nextval('t_js53')") < 1 << 53);
        let error = error_of("SELECT snowflake_nextval('t_sharded')");
        assert!(
            error.starts_with(
                "55000: snowflake sequence \"t_sharded\" needs snowflake_id.node_id, which is not set | Set snowflake_id.node_id"
            ),
            "{error}"
        );
    }

    #[pg_test]
    fn default_sequence_runs_out_in_2094() {
        let runs_out: String = one(
            "SELECT to_char(runs_out_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS')
             FROM snowflake_sequences WHERE name = 'default'",
        );
        assert_eq!(runs_out, "2094-09-07 15:47:35.552");
    }

    #[pg_test]
    fn explicit_arguments_override_the_preset() {
        create(
            "'t_override', preset => 'js53', time_bits => 30, time_unit => interval '1 s',
             epoch => '2025-06-01 00:00:00+00', gene_bits => 3",
        );
        let row: String = one(
            "SELECT format('%s/%s/%s/%s/%s %s %s', time_bits, node_bits, worker_bits,
                           sequence_bits, gene_bits, time_unit, epoch AT TIME ZONE 'UTC')
             FROM snowflake_sequences WHERE name = 't_override'",
        );
        assert_eq!(row, "30/0/7/8/3 00:00:01 2025-06-01 00:00:00");
    }

    #[pg_test]
    fn invalid_layouts_name_the_field() {
        for (args, expected) in [
            ("'t_bad', time_bits => 50", "22023: invalid layout for snowflake sequence \"t_bad\": the widths add up to 72 bits"),
            ("'t_bad', sequence_bits => 0", "22023: invalid layout for snowflake sequence \"t_bad\": the sequence field needs at least 1 bit"),
            ("'t_bad', time_unit => interval '5 ms'", "22023: invalid layout for snowflake sequence \"t_bad\": time_unit must be 1 ms, 10 ms, 100 ms or 1 s"),
            ("'t_bad', time_unit => interval '1 month'", "22023: invalid layout for snowflake sequence \"t_bad\": time_unit must be"),
            ("'t_bad', epoch => clock_timestamp() + interval '1 day'", "22023: invalid layout for snowflake sequence \"t_bad\": epoch is in the future"),
            ("'t_bad', epoch => '1960-01-01'", "22023: invalid layout for snowflake sequence \"t_bad\": the epoch"),
            ("'t_bad', time_bits => 5, node_bits => 32", "22023: invalid layout for snowflake sequence \"t_bad\": the node field has 32 bits"),
            ("'t_bad', worker_bits => -1", "22023: invalid layout for snowflake sequence \"t_bad\": worker_bits = -1 is out of range"),
            ("'t_bad', preset => 'nope'", "22023: invalid layout for snowflake sequence \"t_bad\": unknown preset \"nope\" | Presets: classic, sharded, js53, pgedge."),
            ("'t_bad', preset => NULL", "22023: invalid layout for snowflake sequence \"t_bad\": preset must not be NULL"),
            ("''", "22023: invalid snowflake sequence name \"\""),
            ("repeat('x', 64)", "22023: invalid snowflake sequence name"),
            ("NULL", "22004: snowflake sequence name must not be NULL"),
            ("'default'", "42710: snowflake sequence \"default\" already exists"),
        ] {
            let error = error_of(&format!("SELECT snowflake_create_sequence({args})"));
            assert!(error.starts_with(expected), "{args}: {error}");
        }
        let leftovers: i64 = one("SELECT count(*) FROM snowflake_sequences WHERE name = 't_bad'");
        assert_eq!(leftovers, 0);
    }

    #[pg_test]
    fn drop_sequence() {
        create("'t_drop'");
        assert!(one::<i64>("SELECT snowflake_nextval('t_drop')") > 0);
        Spi::run("SELECT snowflake_drop_sequence('t_drop')").unwrap();
        let error = error_of("SELECT snowflake_nextval('t_drop')");
        assert!(
            error.starts_with("42704: snowflake sequence \"t_drop\" does not exist"),
            "{error}"
        );
        let error = error_of("SELECT snowflake_drop_sequence('t_drop')");
        assert!(
            error.starts_with("42704: snowflake sequence \"t_drop\" does not exist"),
            "{error}"
        );
        let error = error_of("SELECT snowflake_drop_sequence('default')");
        assert!(
            error.starts_with("2BP01: cannot drop snowflake sequence \"default\""),
            "{error}"
        );
        // Created again with another layout, in the same session: a new generator is used.
        create("'t_drop', preset => 'js53'");
        let id: i64 = one("SELECT snowflake_nextval('t_drop')");
        assert!(id < 1 << 53, "{id} was made with the dropped layout");
    }

    #[pg_test]
    fn a_rolled_back_create_leaves_nothing() {
        Spi::run(
            "DO $$ BEGIN
                 PERFORM snowflake_create_sequence('t_rolled_back');
                 RAISE EXCEPTION 'roll back';
             EXCEPTION WHEN raise_exception THEN NULL;
             END $$",
        )
        .unwrap();
        let count: i64 =
            one("SELECT count(*) FROM snowflake_sequences WHERE name = 't_rolled_back'");
        assert_eq!(count, 0);
        let error = error_of("SELECT snowflake_nextval('t_rolled_back')");
        assert!(error.starts_with("42704"), "{error}");
    }

    #[pg_test]
    fn timestamp_min_and_max_bracket_an_id() {
        let ok: bool = one(
            "WITH i AS (SELECT snowflake_nextval() AS id)
             SELECT snowflake_timestamp(id) = (snowflake_decode(id)).ts
                AND snowflake_min_id(snowflake_timestamp(id)) <= id
                AND id <= snowflake_max_id(snowflake_timestamp(id))
                AND snowflake_max_id(snowflake_timestamp(id)) - snowflake_min_id(snowflake_timestamp(id)) = (1 << 22) - 1
                AND snowflake_min_id(snowflake_timestamp(id) + interval '1 ms') = snowflake_max_id(snowflake_timestamp(id)) + 1
             FROM i",
        );
        assert!(ok);
        let edges: String = one(
            "SELECT format('%s %s %s %s', snowflake_min_id('2000-01-01'), snowflake_max_id('2000-01-01'),
                           snowflake_max_id('infinity'), snowflake_min_id('infinity'))",
        );
        assert_eq!(edges, "0 -1 9223372036854775807 9223372036854775807");
        create("'t_js_range', 'js53'");
        let js_max: i64 = one("SELECT snowflake_max_id('infinity', 't_js_range')");
        assert_eq!(js_max, (1 << 53) - 1);
    }

    #[pg_test]
    fn min_and_max_id_make_an_index_range_scan() {
        Spi::run(
            "CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), payload text);
             INSERT INTO events(payload) SELECT 'e' FROM generate_series(1, 2000);
             ANALYZE events;",
        )
        .unwrap();
        let plan: String = Spi::connect(|client| {
            client
                .select(
                    "EXPLAIN (COSTS OFF) SELECT * FROM events
                     WHERE id BETWEEN snowflake_min_id(now() - interval '1 hour') AND snowflake_max_id(now())",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| row.get::<String>(1).unwrap().unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        });
        assert!(
            plan.contains("Index Cond: ((id >= snowflake_min_id("),
            "{plan}"
        );
        let last_hour: i64 = one(
            "SELECT count(*) FROM events
             WHERE id BETWEEN snowflake_min_id(now() - interval '1 hour') AND snowflake_max_id(clock_timestamp())",
        );
        assert_eq!(last_hour, 2000);
    }

    #[pg_test]
    fn a_layout_whose_time_ran_out_is_a_clear_error() {
        // 2^10 ticks of 1 s from 2025-01-01: ran out after 17 minutes.
        create("'t_short', epoch => '2025-01-01 00:00:00+00', time_unit => interval '1 s', time_bits => 10");
        Spi::run("SET LOCAL TimeZone = 'UTC'").unwrap();
        let error = error_of("SELECT snowflake_nextval('t_short')");
        assert!(
            error.starts_with(
                "2200H: snowflake sequence \"t_short\" has run out of time: its 10-bit time field ended at 2025-01-01 00:17:04+00"
            ),
            "{error}"
        );
    }

    #[pg_test]
    fn decode_rejects_ids_of_a_wider_layout() {
        create("'t_narrow', 'js53'");
        let error = error_of("SELECT snowflake_decode(1::bigint << 60, 't_narrow')");
        assert!(
            error.starts_with(
                "22003: 1152921504606846976 is not an ID of snowflake sequence \"t_narrow\""
            ),
            "{error}"
        );
    }

    #[pg_test]
    fn only_roles_with_create_on_the_database_manage_sequences_whatever_is_granted() {
        Spi::run("CREATE ROLE snowflake_app; SET ROLE snowflake_app").unwrap();
        let refused = "42501: permission denied for function snowflake_create_sequence: only a \
                       role with CREATE on the database";
        let error = error_of("SELECT snowflake_create_sequence('t_app')");
        assert!(error.starts_with(refused), "{error}");
        assert!(error.contains("GRANT CREATE ON DATABASE"), "{error}");
        // A grant on the function does not change who it serves (decided when it runs).
        Spi::run("RESET ROLE; GRANT EXECUTE ON FUNCTION snowflake_create_sequence TO snowflake_app; SET ROLE snowflake_app").unwrap();
        let error = error_of("SELECT snowflake_create_sequence('t_app')");
        assert!(error.starts_with(refused), "{error}");
        // CREATE on the database does, as for CREATE SCHEMA.
        Spi::run(
            "RESET ROLE;
             DO $$ BEGIN
                 EXECUTE pg_catalog.format('GRANT CREATE ON DATABASE %I TO snowflake_app',
                                           pg_catalog.current_database());
             END $$;
             SET ROLE snowflake_app",
        )
        .unwrap();
        create("'t_app'");
        assert!(one::<i64>("SELECT snowflake_nextval('t_app')") > 0);
        Spi::run("RESET ROLE").unwrap();
    }

    #[pg_test]
    fn catalog_lookup_ignores_the_callers_search_path() {
        create("'t_hostile_js53', preset => 'js53'");
        // An always-true text equality, and a name/oid equality that calls back into the
        // extension: the lookup must use neither.
        Spi::run(include_str!("../../pgrx-tests/fixtures/hostile_schema.sql")).unwrap();
        Spi::run("SET LOCAL search_path = evil, pg_catalog, public").unwrap();
        let id: i64 = one("SELECT snowflake_nextval('t_hostile_js53')");
        assert!(id < 1 << 53, "{id} was not made with the js53 layout");
        let ts_matches: bool = one(
            "SELECT snowflake_timestamp(snowflake_nextval('t_hostile_js53'), 't_hostile_js53')
                    BETWEEN clock_timestamp() - interval '1 minute' AND clock_timestamp() + interval '1 minute'",
        );
        assert!(
            ts_matches,
            "the epoch was read wrongly under a hostile search_path"
        );
        create("'t_hostile_created', preset => 'js53'");
        assert!(one::<i64>("SELECT snowflake_nextval('t_hostile_created')") < 1 << 53);
        let error = error_of("SELECT snowflake_nextval('t_hostile_missing')");
        assert!(error.starts_with("42704: "), "{error}");
    }

    #[pg_test]
    fn base32_is_13_characters_in_id_order_and_parses_back() {
        assert_eq!(
            one::<String>("SELECT snowflake_to_base32(250096955256995841)"),
            "06Y45VC8R0001"
        );
        assert_eq!(
            one::<i64>("SELECT snowflake_from_base32('06y45vc8r000l')"),
            250096955256995841
        );
        assert!(one::<bool>(
            "SELECT bool_and(snowflake_from_base32(snowflake_to_base32(id)) = id)
                    AND count(DISTINCT snowflake_to_base32(id)) = 1000
                    AND array_agg(id ORDER BY id) = array_agg(id ORDER BY snowflake_to_base32(id) COLLATE \"C\")
             FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 1000)) ids"
        ));
        for (call, expected) in [
            ("snowflake_from_base32('06Y45UC8R0001')", "22P02: invalid snowflake base32 text \"06Y45UC8R0001\": the character \"U\" at position 6 is not base32 | "),
            ("snowflake_from_base32('06Y45')", "22P02: invalid snowflake base32 text \"06Y45\": it has 5 characters, not 13 | "),
            ("snowflake_from_base32('8000000000000')", "22003: invalid snowflake base32 text \"8000000000000\": its value is above the largest bigint | "),
            ("snowflake_to_base32(-1)", "22003: -1 is not a snowflake ID: IDs are never negative | "),
        ] {
            let error = error_of(&format!("SELECT {call}"));
            assert!(error.starts_with(expected), "{call}: {error}");
        }
        // IMMUTABLE, so it can back an expression index.
        Spi::run(
            "CREATE TABLE t_b32 (id bigint PRIMARY KEY DEFAULT snowflake_nextval());
             CREATE INDEX ON t_b32 (snowflake_to_base32(id));
             INSERT INTO t_b32 SELECT FROM generate_series(1, 10);",
        )
        .unwrap();
        assert!(one::<bool>(
            "SELECT count(*) = 1 FROM t_b32
             WHERE snowflake_to_base32(id) = (SELECT snowflake_to_base32(max(id)) FROM t_b32)"
        ));
    }
}
