//! Hostile input and hostile sessions (docs/design.md §6). A fuzzer calls every SQL function
//! with generated arguments (NULLs, extremes, odd text, odd intervals and timestamps, foreign
//! IDs), half of the time under a `search_path` that puts a schema of booby-trapped operators
//! first, some calls in read-only transactions, on a server whose environment asks for Rust
//! backtraces. Every outcome must be a result or an error whose SQLSTATE the reference (docs/reference.md) documents:
//! never XX000, never panic text or a backtrace, never a crash, and a failed call leaves nothing
//! changed. A cancel while a backend waits for the clock must look like any cancel, and a lookup
//! that calls back into the extension gets a clean error.
//! The tests print the number of calls and the outcomes by SQLSTATE (`--nocapture`).

use std::collections::BTreeMap;

use snowflake_id_cluster_tests::fixtures::{count, reference_error_tables, text};
use snowflake_id_cluster_tests::{error_parts, Client, Cluster, PgError};

/// Calls the fuzzer makes; with the state checks around them, about 20 s here.
const CALLS: usize = 4_000;
/// A new session every so many calls, so fresh backends look sequences up again.
const CALLS_PER_SESSION: usize = 250;
const SEED: u64 = 0x5eed_f1a4_e00d_0001;

/// Sequences the fuzzer's names refer to (besides 'default'), and the tables it converts.
const SETUP: &str = "
    CREATE EXTENSION snowflake_id;
    SELECT snowflake_create_sequence('fz_js53', preset => 'js53');
    SELECT snowflake_create_sequence('fz_gene', gene_bits => 3, worker_bits => 7);
    SELECT snowflake_create_sequence('fz_sec', time_unit => interval '1 s', time_bits => 33);
    CREATE TABLE fz_serial (id serial PRIMARY KEY, note text);
    CREATE TABLE fz_checked (id serial PRIMARY KEY CHECK (id < 1000000), note text);
    CREATE TABLE fz_identity (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, note text);
    CREATE TABLE fz_child (id serial PRIMARY KEY, parent int REFERENCES fz_serial);
    CREATE TABLE fz_text (id text PRIMARY KEY, note text);
    CREATE VIEW fz_view AS SELECT id FROM fz_serial;
    CREATE ROLE fz_plain;
    GRANT USAGE ON SCHEMA public TO fz_plain;
";

/// The schema a hostile session puts first, and the setting that does it.
const HOSTILE_SCHEMA: &str = include_str!("../fixtures/hostile_schema.sql");
const HOSTILE_PATH: &str = "SET search_path = evil, pg_catalog, public";

/// What a failed call must leave as it was: the sequences' layouts, the fuzzed tables'
/// columns, and the ordinary sequences.
const STATE: &str = "
    SELECT concat_ws(' | ',
        (SELECT string_agg(name || ' ' || fingerprint, ', ' ORDER BY name) FROM public.snowflake_sequences),
        (SELECT string_agg(format('%s.%s %s %s %s', a.attrelid::regclass, a.attname,
                                  a.atttypid::regtype, a.attidentity,
                                  pg_get_expr(d.adbin, d.adrelid)), ', '
                           ORDER BY a.attrelid::regclass::text, a.attnum)
           FROM pg_attribute a
           LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          WHERE a.attrelid IN ('fz_serial'::regclass, 'fz_checked'::regclass,
                               'fz_identity'::regclass, 'fz_child'::regclass)
            AND a.attnum > 0),
        (SELECT string_agg(c.relname, ', ' ORDER BY c.relname) FROM pg_class c WHERE c.relkind = 'S'))";

/// A deterministic generator (xorshift64*), so a failing case reproduces from the seed.
struct Cases(u64);

impl Cases {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Generated arguments, each a typed SQL expression (so PostgreSQL's input parsing is never
/// what fails).
struct Arguments {
    /// Sequence names: existing, missing, empty, too long, odd characters.
    names: Vec<String>,
    /// IDs: extremes, negative, foreign layouts, real IDs of each sequence.
    ids: Vec<String>,
}

impl Arguments {
    fn new(client: &mut Client) -> Arguments {
        let mut names: Vec<String> = [
            "default",
            "fz_js53",
            "fz_gene",
            "fz_sec",
            "fz_new",
            "nope",
            "",
            " ",
            "DEFAULT",
            "é ü ✓",
            "quote's",
            "x'); DROP TABLE fz_serial; --",
        ]
        .iter()
        .map(|name| format!("{}::text", quoted(name)))
        .collect();
        names.push(format!("{}::text", quoted(&"n".repeat(63))));
        names.push(format!("{}::text", quoted(&"n".repeat(64))));
        names.push("NULL::text".into());
        let mut ids: Vec<String> = [
            "0",
            "1",
            "-1",
            "9223372036854775807",
            "-9223372036854775808",
            "9007199254740992",
            "9007199254740991",
            "4194304",
            "4611686018427387904",
            "NULL",
        ]
        .iter()
        .map(|id| format!("{id}::bigint"))
        .collect();
        for sequence in ["default", "fz_js53", "fz_gene", "fz_sec"] {
            let id: i64 = client
                .query_one("SELECT snowflake_nextval($1)", &[&sequence])
                .unwrap()
                .get(0);
            ids.push(format!("{id}::bigint"));
        }
        Arguments { names, ids }
    }

    fn name(&self, cases: &mut Cases) -> String {
        self.names[(cases.next() % self.names.len() as u64) as usize].clone()
    }

    fn id(&self, cases: &mut Cases) -> String {
        if cases.chance(20) {
            return format!("{}::bigint", cases.next() >> 1);
        }
        self.ids[(cases.next() % self.ids.len() as u64) as usize].clone()
    }
}

/// One of `values`, cast to `type_name`, so PostgreSQL's input parsing is never what fails.
fn typed(cases: &mut Cases, values: &[&str], type_name: &str) -> String {
    format!("({})::{type_name}", cases.pick(values))
}

const TIMESTAMPS: &[&str] = &[
    "NULL",
    "'-infinity'",
    "'infinity'",
    "'1000-01-01 00:00:00+00'",
    "'1969-12-31 23:59:59.999999+00'",
    "'1970-01-01 00:00:00+00'",
    "'2024-12-31 23:59:59.999+00'",
    "'2025-01-01 00:00:00+00'",
    "clock_timestamp()",
    "clock_timestamp() + interval '1 day'",
    "'2094-06-01 00:00:00+00'",
    "'2200-01-01 00:00:00+00'",
    "'294276-12-31 23:59:59+00'",
];

const INTERVALS: &[&str] = &[
    "NULL",
    "'0'",
    "'1 microsecond'",
    "'1 ms'",
    "'10 ms'",
    "'100 ms'",
    "'1 s'",
    "'1 min'",
    "'1 day'",
    "'1 mon'",
    "'-1 ms'",
    "'1 s 1 ms'",
    "'100000 years'",
];

const WIDTHS: &[&str] = &[
    "NULL",
    "-1",
    "0",
    "1",
    "3",
    "7",
    "8",
    "12",
    "31",
    "32",
    "41",
    "62",
    "63",
    "64",
    "-2147483648",
    "2147483647",
];

/// One generated call: its SQL, and whether it runs inside a transaction that is rolled back
/// (conversions, so the fuzzed tables stay convertible).
fn generate_call(cases: &mut Cases, arguments: &Arguments) -> (String, bool) {
    let name = arguments.name(cases);
    let optional_name = |cases: &mut Cases| {
        if cases.chance(30) {
            String::new()
        } else {
            format!(", {}", arguments.name(cases))
        }
    };
    match cases.next() % 12 {
        0 => {
            let rest = optional_name(cases);
            let first = rest.strip_prefix(", ").unwrap_or_default().to_owned();
            (format!("SELECT snowflake_nextval({first})"), false)
        }
        1 => {
            let id = arguments.id(cases);
            (format!("SELECT snowflake_nextval({name}, {id})"), false)
        }
        2 => {
            let (id, rest) = (arguments.id(cases), optional_name(cases));
            (format!("SELECT (snowflake_decode({id}{rest})).*"), false)
        }
        3 => {
            let (id, rest) = (arguments.id(cases), optional_name(cases));
            (format!("SELECT snowflake_timestamp({id}{rest})"), false)
        }
        4 => {
            let function = cases.pick(&["snowflake_min_id", "snowflake_max_id"]);
            let (ts, rest) = (
                typed(cases, TIMESTAMPS, "timestamptz"),
                optional_name(cases),
            );
            (format!("SELECT {function}({ts}{rest})"), false)
        }
        5 | 6 => {
            let mut call = format!("SELECT snowflake_create_sequence({name}");
            if cases.chance(70) {
                let preset = cases.pick(&[
                    "'classic'",
                    "'sharded'",
                    "'js53'",
                    "'CLASSIC'",
                    "'nope'",
                    "''",
                    "NULL",
                ]);
                call += &format!(", preset => {preset}::text");
            }
            if cases.chance(30) {
                call += &format!(", epoch => {}", typed(cases, TIMESTAMPS, "timestamptz"));
            }
            if cases.chance(30) {
                call += &format!(", time_unit => {}", typed(cases, INTERVALS, "interval"));
            }
            for field in [
                "time_bits",
                "node_bits",
                "worker_bits",
                "sequence_bits",
                "gene_bits",
            ] {
                if cases.chance(25) {
                    call += &format!(", {field} => {}", typed(cases, WIDTHS, "integer"));
                }
            }
            (call + ")", false)
        }
        7 => (format!("SELECT snowflake_drop_sequence({name})"), false),
        8 => {
            let table = cases.pick(&[
                "'fz_serial'",
                "'fz_checked'",
                "'fz_identity'",
                "'fz_child'",
                "'fz_text'",
                "'fz_view'",
                "'pg_class'",
                "'no_such_table'",
                "NULL",
            ]);
            let column = cases.pick(&["'id'", "'parent'", "'note'", "'nope'", "''", "NULL"]);
            let rest = optional_name(cases);
            (
                format!("SELECT snowflake_convert_column({table}::regclass, {column}::name{rest})"),
                true,
            )
        }
        9 => {
            let call = match cases.next() % 3 {
                0 => format!("snowflake_currval({name})"),
                1 => "snowflake_lastval()".to_owned(),
                _ => format!("snowflake_to_base32({})", arguments.id(cases)),
            };
            (format!("SELECT {call}"), false)
        }
        10 => {
            let text = cases.pick(&[
                "'06Y45VC8R0001'",
                "'06y45vc8r000l'",
                "'7ZZZZZZZZZZZZ'",
                "'8000000000000'",
                "'0000000000000'",
                "'06Y45UC8R0001'",
                "''",
                "'0'",
                "'06Y45VC8R00011'",
                "'é6Y45VC8R0001'",
                "' 6Y45VC8R0001'",
                "NULL",
            ]);
            (format!("SELECT snowflake_from_base32({text}::text)"), false)
        }
        _ => {
            let query = cases.pick(&[
                "SELECT * FROM snowflake_stats()",
                "SELECT * FROM snowflake_worker_slots()",
                "SELECT * FROM snowflake_workers",
                "SELECT * FROM snowflake_sequences",
                // Without Citus: 55000.
                "SELECT * FROM snowflake_citus_node_ids()",
            ]);
            (query.to_owned(), false)
        }
    }
}

/// The error's SQLSTATE, after checking it carries no Rust internals.
fn checked_error(call: &str, error: &PgError) -> String {
    let db = error
        .as_db_error()
        .unwrap_or_else(|| panic!("{call}: not a server error (did the server crash?): {error}"));
    let detail = db.detail().unwrap_or_default();
    for text in [db.message(), detail, db.hint().unwrap_or_default()] {
        for sign in ["panicked", "backtrace", "RefCell", "src/", ".rs:", "pgrx"] {
            assert!(
                !text.contains(sign),
                "{call}: the error shows Rust internals ({sign}): {} | {detail}",
                db.message()
            );
        }
    }
    db.code().code().to_owned()
}

/// After a successful conversion the table still takes rows through its new default.
fn assert_converted_table_works(client: &mut Client, call: &str) {
    let table = call
        .split("snowflake_convert_column('")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_else(|| panic!("{call}: converted, but which table?"));
    let id: i64 = client
        .query_one(
            &format!("INSERT INTO {table} DEFAULT VALUES RETURNING id::bigint"),
            &[],
        )
        .unwrap_or_else(|error| panic!("{call}: the converted table refuses rows: {error}"))
        .get(0);
    assert!(id > 0, "{call}: new id {id}");
}

#[test]
fn fuzzed_calls_return_results_or_documented_errors_and_change_nothing_when_they_fail() {
    let cluster = Cluster::builder()
        .server_env("RUST_BACKTRACE", "full")
        .start();
    let mut client = cluster.connect();
    client.batch_execute(SETUP).unwrap();
    client.batch_execute(HOSTILE_SCHEMA).unwrap();
    let arguments = Arguments::new(&mut client);
    let (own, postgres) = reference_error_tables();
    let documented: std::collections::BTreeSet<String> = own.union(&postgres).cloned().collect();
    let mut cases = Cases(SEED);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut hostile_calls = 0;
    let mut read_only_calls = 0;
    for number in 0..CALLS {
        if number % CALLS_PER_SESSION == 0 {
            client = cluster.connect();
            if cases.chance(30) {
                client.batch_execute("SET ROLE fz_plain").unwrap();
            }
        }
        let (call, roll_back) = generate_call(&mut cases, &arguments);
        let hostile = cases.chance(50);
        let read_only = !roll_back && cases.chance(10);
        let before = text(&mut client, STATE);
        if hostile {
            client.batch_execute(HOSTILE_PATH).unwrap();
            hostile_calls += 1;
        }
        if roll_back || read_only {
            let begin = if read_only {
                "BEGIN READ ONLY"
            } else {
                "BEGIN"
            };
            client.batch_execute(begin).unwrap();
            read_only_calls += usize::from(read_only);
        }
        let result = client.query(&call, &[]);
        // A conversion returns what it changed; NULL (a NULL argument) converts nothing.
        let converted = roll_back
            && matches!(&result, Ok(rows) if rows[0].get::<_, Option<String>>(0).is_some());
        if converted {
            client.batch_execute("RESET search_path").unwrap();
            assert_converted_table_works(&mut client, &call);
        }
        if roll_back || read_only {
            client.batch_execute("ROLLBACK").unwrap();
        }
        client.batch_execute("RESET search_path").unwrap();
        let outcome = match &result {
            Ok(rows) => {
                if call.starts_with("SELECT snowflake_nextval('fz_js53'") {
                    if let Some(id) = rows[0].get::<_, Option<i64>>(0) {
                        assert!(id < 1 << 53, "{call} issued {id}, above 2^53");
                    }
                }
                "ok".to_owned()
            }
            Err(error) => {
                let code = checked_error(&call, error);
                assert_ne!(code, "XX000", "{call}: internal error {error}");
                assert!(
                    documented.contains(&code),
                    "{call}: SQLSTATE {code} is not in the reference's error tables: {error}"
                );
                assert_eq!(
                    text(&mut client, STATE),
                    before,
                    "{call} failed ({code}) but changed something"
                );
                code
            }
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    println!(
        "{CALLS} fuzzed calls (seed {SEED:#x}; {hostile_calls} under a hostile search_path, \
         {read_only_calls} in read-only transactions), outcomes: {outcomes:?}"
    );
    assert!(
        outcomes.get("ok").copied().unwrap_or(0) > CALLS / 10,
        "too few calls succeed to exercise the functions: {outcomes:?}"
    );
    assert!(
        outcomes.len() >= 8,
        "the fuzzer provokes too few kinds of outcome to be searching: {outcomes:?}"
    );
    let log = cluster.server_log();
    assert!(
        !log.contains("terminated by signal") && !log.contains("PANIC"),
        "the server crashed:\n{log}"
    );
}

#[test]
fn a_cancel_while_waiting_for_the_clock_looks_like_any_cancel() {
    let cluster = Cluster::builder()
        .server_env("RUST_BACKTRACE", "full")
        .setting("snowflake_id.max_lead = 0")
        .start();
    let mut client = cluster.connect();
    // Two IDs per 1 s tick and no lead: the third ID waits for the next second.
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('slow', time_unit => interval '1 s',
                                              time_bits => 33, sequence_bits => 1);
             SET statement_timeout = '300ms';",
        )
        .unwrap();
    let error = client
        .query_one(
            "SELECT count(snowflake_nextval('slow')) FROM generate_series(1, 100)",
            &[],
        )
        .expect_err("the statement waits for seconds");
    let code = checked_error("a throttled statement", &error);
    let (_, message, hint) = error_parts(&error);
    println!("cancelled while throttled: {code}: {message} (hint: {hint:?})");
    assert_eq!(code, "57014", "{message}");
    assert_eq!(message, "canceling statement due to statement timeout");
    assert_eq!(error.as_db_error().unwrap().detail(), None);
    // The session is usable afterwards.
    client.batch_execute("RESET statement_timeout").unwrap();
    let id: i64 = client
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap()
        .get(0);
    assert!(id > 0);
}

#[test]
fn a_policy_on_the_catalog_runs_no_code_inside_a_lookup() {
    let cluster = Cluster::builder()
        .server_env("RUST_BACKTRACE", "full")
        .start();
    let mut client = cluster.connect();
    // A row-level security policy on the catalog table would run its code (here: a call back
    // into the extension, and a record of the call) in any SQL lookup of a sequence. The lookups
    // read the catalog through its index without SQL, so it never runs there.
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('looked_up', preset => 'js53');
             CREATE ROLE plain;
             CREATE TABLE policy_calls (caller name);
             GRANT INSERT ON policy_calls TO plain;
             CREATE FUNCTION calls_back() RETURNS boolean VOLATILE LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO policy_calls VALUES (current_user);
                 RETURN snowflake_nextval('default') > 0;
             END $$;
             ALTER TABLE snowflake_id_internal.snowflake_sequence_catalog ENABLE ROW LEVEL SECURITY;
             CREATE POLICY calls_back ON snowflake_id_internal.snowflake_sequence_catalog USING (calls_back());",
        )
        .unwrap();
    let mut session = cluster.connect();
    session.batch_execute("SET ROLE plain").unwrap();
    for name in ["looked_up", "default"] {
        let id: i64 = session
            .query_one("SELECT snowflake_nextval($1)", &[&name])
            .unwrap_or_else(|error| panic!("{name}: {:?}", error_parts(&error)))
            .get(0);
        assert!(id > 0);
    }
    let calls = count(&mut client, "SELECT count(*) FROM policy_calls");
    println!("policy calls during lookups: {calls}");
    assert_eq!(calls, 0, "the catalog's policy ran inside a lookup");
}
