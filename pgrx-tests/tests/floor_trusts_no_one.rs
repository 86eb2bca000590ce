//! The durable floor trusts no role (docs/design.md §5.3): taking a first ID runs no role's
//! code, reads no table a role wrote, and trips over no other session's temporary table. What
//! an ordinary role can plant (a partial-index predicate, an index expression, a wrapper
//! default, a domain check, an operator ahead of pg_catalog's, a huge value in a keyed column)
//! neither runs as another role nor moves any other role's IDs.
//!
//! Each test would have failed on 0.4.0, whose first ID of a sequence in a backend planned
//! `SELECT max(id)` over every keyed table as the bootstrap superuser.

use postgres::{Client, NoTls};
use snowflake_id_cluster_tests::fixtures::{count, default_id_unix_ms, real_now_us};
use snowflake_id_cluster_tests::{error_parts, Cluster};

/// How far an ID's time may be from the real time in these tests (no clock is faked).
const NEAR_US: i64 = 5_000_000;

fn connect_as(cluster: &Cluster, role: &str) -> Client {
    postgres::Config::new()
        .host_path(cluster.socket_dir())
        .port(cluster.port())
        .user(role)
        .dbname("postgres")
        .connect(NoTls)
        .unwrap_or_else(|error| panic!("connect as {role}: {error}"))
}

/// Role `app`: LOGIN, no privilege beyond owning schema `app`. Its function `app.escalate()`
/// tries to make it a superuser and records every call made as another role; the IMMUTABLE
/// `app.pred` and `app.expr` call it, so wherever PostgreSQL evaluates them, it runs.
const HOSTILE_ROLE: &str = "
    CREATE ROLE app LOGIN;
    CREATE SCHEMA app AUTHORIZATION app;
    CREATE EXTENSION snowflake_id;
    SELECT snowflake_create_sequence('web', 'js53');";

const HOSTILE_OBJECTS: &str = r#"
    CREATE TABLE app.foreign_calls (caller name NOT NULL, what text NOT NULL);
    GRANT INSERT ON app.foreign_calls TO PUBLIC;
    CREATE FUNCTION app.escalate(what text) RETURNS void VOLATILE LANGUAGE plpgsql AS $$
    BEGIN
        IF current_user <> 'app' THEN
            INSERT INTO app.foreign_calls VALUES (current_user, what);
        END IF;
        BEGIN
            ALTER ROLE app SUPERUSER;
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
    END $$;
    CREATE FUNCTION app.pred(bigint) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$
    BEGIN PERFORM app.escalate('partial-index predicate'); RETURN true; END $$;
    CREATE FUNCTION app.expr(bigint) RETURNS bigint IMMUTABLE LANGUAGE plpgsql AS $$
    BEGIN PERFORM app.escalate('index expression'); RETURN $1; END $$;
    CREATE FUNCTION app.next_web() RETURNS bigint VOLATILE LANGUAGE plpgsql AS $$
    BEGIN PERFORM app.escalate('wrapper default'); RETURN snowflake_nextval('web'); END $$;
    CREATE FUNCTION app.checked(bigint) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$
    BEGIN PERFORM app.escalate('domain check'); RETURN true; END $$;
    CREATE FUNCTION app.eq(bigint, bigint) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$
    BEGIN PERFORM app.escalate('operator'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
    CREATE FUNCTION app.eq_text(text, text) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$
    BEGIN PERFORM app.escalate('operator'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
    CREATE OPERATOR app.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = app.eq);
    CREATE OPERATOR app.= (LEFTARG = text, RIGHTARG = text, FUNCTION = app.eq_text);
    CREATE DOMAIN app.web_id AS bigint CHECK (app.checked(VALUE));

    CREATE TABLE app.partial (id bigint DEFAULT snowflake_nextval('web'), n int);
    CREATE UNIQUE INDEX ON app.partial (id) WHERE app.pred(id);
    CREATE TABLE app.expression (id bigint PRIMARY KEY DEFAULT snowflake_nextval('web'), n int);
    CREATE INDEX ON app.expression ((app.expr(id)));
    CREATE TABLE app.wrapped (id bigint PRIMARY KEY DEFAULT app.next_web(), n int);
    CREATE TABLE app.domained (id app.web_id PRIMARY KEY DEFAULT snowflake_nextval('web'), n int);
    INSERT INTO app.partial (n) SELECT g FROM generate_series(1, 100) g;
    INSERT INTO app.expression (n) SELECT g FROM generate_series(1, 100) g;
    INSERT INTO app.wrapped (n) SELECT g FROM generate_series(1, 100) g;
    INSERT INTO app.domained (n) SELECT g FROM generate_series(1, 100) g;"#;

#[test]
fn no_code_of_a_role_runs_as_another_when_sessions_take_their_first_ids() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin.batch_execute(HOSTILE_ROLE).unwrap();
    admin.batch_execute("CREATE ROLE other LOGIN").unwrap();
    let mut app = connect_as(&cluster, "app");
    app.batch_execute(HOSTILE_OBJECTS).unwrap();
    assert_eq!(
        count(&mut admin, "SELECT count(*) FROM app.foreign_calls"),
        0,
        "app's own inserts ran its code as app only"
    );

    // New sessions of a superuser (also with app's schema ahead of pg_catalog, so its
    // operators come first) and of another ordinary role take their first IDs of 'web'.
    for (role, search_path) in [
        ("postgres", "public"),
        ("postgres", "app, pg_catalog, public"),
        ("other", "app, pg_catalog, public"),
    ] {
        let mut session = connect_as(&cluster, role);
        session
            .batch_execute(&format!("SET search_path = {search_path}"))
            .unwrap();
        let id: i64 = session
            .query_one("SELECT public.snowflake_nextval('web')", &[])
            .unwrap_or_else(|error| panic!("{role}: {:?}", error_parts(&error)))
            .get(0);
        assert!(id > 0, "{role} got an ID");
    }
    let superuser: bool = admin
        .query_one("SELECT rolsuper FROM pg_roles WHERE rolname = 'app'", &[])
        .unwrap()
        .get(0);
    let calls: Vec<(String, String)> = admin
        .query("SELECT caller::text, what FROM app.foreign_calls", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    println!("app superuser: {superuser}; app's code run as others: {calls:?}");
    assert!(!superuser, "app became a superuser");
    assert!(
        calls.is_empty(),
        "app's code ran as another role: {calls:?}"
    );
}

#[test]
fn another_sessions_temporary_table_stops_no_new_session() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
             INSERT INTO orders (item) VALUES ('book');",
        )
        .unwrap();
    // An ETL session keeps a staging copy, default and primary key included, open.
    let mut etl = cluster.connect();
    etl.batch_execute(
        "CREATE TEMP TABLE stage (LIKE orders INCLUDING ALL);
         INSERT INTO stage (item) SELECT 'staged' FROM generate_series(1, 1000);",
    )
    .unwrap();
    for session in 0..5 {
        let mut client = cluster.connect();
        client
            .query_one("INSERT INTO orders (item) VALUES ('pen') RETURNING id", &[])
            .unwrap_or_else(|error| panic!("new session {session}: {:?}", error_parts(&error)));
    }
    assert_eq!(count(&mut etl, "SELECT count(*) FROM stage"), 1000);
    assert_eq!(count(&mut admin, "SELECT count(*) FROM orders"), 6);
}

/// The time (unix µs) of a new session's first `'default'` ID, and how far it is from real time.
fn first_id_offset(cluster: &Cluster) -> i64 {
    let mut client = cluster.connect();
    let id: i64 = client
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|error| panic!("{:?}", error_parts(&error)))
        .get(0);
    default_id_unix_ms(id) * 1_000 - real_now_us()
}

#[test]
fn values_a_role_plants_raise_no_floor_also_after_a_restart() {
    let mut cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin.batch_execute(HOSTILE_ROLE).unwrap();
    let mut app = connect_as(&cluster, "app");
    // The largest bigint (the layout's last ID), one of 2060, and one an hour ahead: in app's own
    // keyed table and in its temporary one (as an ETL or a migration copying foreign IDs would).
    let planted = "VALUES (9223372036854775807), (4611686018427387904),
                          (snowflake_min_id(now() + interval '1 hour'))";
    app.batch_execute(&format!(
        "CREATE TABLE app.keyed (id bigint PRIMARY KEY DEFAULT snowflake_nextval());
         INSERT INTO app.keyed (id) {planted};
         CREATE TEMP TABLE keyed_temp (id bigint PRIMARY KEY DEFAULT snowflake_nextval());
         INSERT INTO keyed_temp (id) {planted};"
    ))
    .unwrap();

    let offset = first_id_offset(&cluster);
    println!("first ID of a new session after the planted values: {offset} µs from real time");
    assert!(
        offset.abs() < NEAR_US,
        "a planted value moved IDs by {offset} µs"
    );

    drop(app);
    cluster.stop("fast");
    cluster.start();
    let offset = first_id_offset(&cluster);
    println!("first ID after a restart: {offset} µs from real time");
    assert!(
        offset.abs() < NEAR_US,
        "a planted value moved IDs by {offset} µs"
    );

    // Not even the owner of the data: only snowflake_raise_floor moves the floor, and app
    // may not call it, nor write the floor relation.
    let mut app = connect_as(&cluster, "app");
    for statement in [
        "SELECT snowflake_raise_floor(now() + interval '1 hour')",
        "SELECT setval('snowflake_id_internal.snowflake_floor', 9223372036854775807)",
    ] {
        let error = app.batch_execute(statement).unwrap_err();
        assert_eq!(error_parts(&error).0, "42501", "{statement}: {error}");
    }
    let offset = first_id_offset(&cluster);
    assert!(offset.abs() < NEAR_US, "IDs moved by {offset} µs");
}
