//! The floor relation keeps up with sessions that were already running (docs/design.md §5.3):
//!
//! - sessions connected before `ALTER EXTENSION snowflake_id UPDATE` from 0.4.0 (which creates
//!   the relation) write it at their next tick, so after the README's update steps a dump of
//!   the database carries a floor above every ID issued, also by them; restored into a cluster
//!   33 s behind, it continues above every one of them;
//! - a dump of another cluster (its clock 40 s ahead) restored into a live database, with
//!   `pg_restore --clean --if-exists` or `--data-only`, is seen by the sessions generating
//!   there before their next tick: no ID they issue once the restore has returned is at or
//!   below a restored one.
//!
//! Each prints what it saw (`--nocapture`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use postgres::SimpleQueryMessage;
use snowflake_id_cluster_tests::fixtures::{
    assert_no_id_reissued, assert_server_clock_offset, column, count, default_id_unix_ms,
    insert_for, insert_load, load_after, min_new_id, Issued, DEFAULT_IDS_TABLE,
};
use snowflake_id_cluster_tests::pgbouncer::{PgBouncer, Pooling};
use snowflake_id_cluster_tests::{error_parts, Client, Cluster, InDatabase};

/// Table `ids` of `DEFAULT_IDS_TABLE`, without creating the extension.
fn ids_table() -> &'static str {
    DEFAULT_IDS_TABLE.split_once(';').unwrap().1
}

#[test]
fn sessions_older_than_the_update_keep_the_floor_above_their_ids() {
    let test = "update from 0.4.0 under load, dump restored 33 s behind";
    let cluster = Cluster::builder().start();
    cluster
        .connect()
        .batch_execute("CREATE DATABASE pool")
        .unwrap();
    let mut admin = cluster.connect_to("pool");
    admin
        .batch_execute(&format!(
            "CREATE EXTENSION snowflake_id VERSION '0.1.0';
             ALTER EXTENSION snowflake_id UPDATE TO '0.4.0';
             {}",
            ids_table()
        ))
        .unwrap();
    let pool = InDatabase {
        cluster: &cluster,
        database: "pool",
    };
    let mut before = Issued::new("4 sessions connected before the update");
    thread::scope(|scope| {
        let load = scope.spawn(|| {
            let mut load = Issued::new("4 sessions connected before the update");
            insert_for(&pool, &mut load, 0..4, Duration::from_secs(8));
            load
        });
        thread::sleep(Duration::from_secs(2));
        // The README's update steps: update, then one ID in a new session.
        admin
            .batch_execute("ALTER EXTENSION snowflake_id UPDATE")
            .unwrap();
        cluster
            .connect_to("pool")
            .batch_execute("SELECT snowflake_nextval()")
            .unwrap();
        before = load.join().unwrap();
    });
    let floor_us = count(
        &mut admin,
        "SELECT last_value FROM snowflake_id_internal.snowflake_floor",
    );
    let newest = before.max().unwrap();
    let newest_end_us = (default_id_unix_ms(newest) + 1) * 1000;
    println!(
        "[{test}] {} IDs; the floor relation is {:.3} s above the end of the newest ID's tick",
        before.ids.len(),
        (floor_us - newest_end_us) as f64 / 1e6
    );
    assert!(
        floor_us >= newest_end_us,
        "the floor relation is {} µs below the newest ID",
        newest_end_us - floor_us
    );

    let behind = Cluster::builder().faketime_at("-33s").start();
    let mut client = behind.connect();
    assert_server_clock_offset(&mut client, -33_000_000);
    client.batch_execute("CREATE DATABASE pool").unwrap();
    cluster.dump_and_restore_into("pool", &behind, "pool");
    let after = load_after(
        "the dump restored into a cluster 33 s behind",
        "restored cluster, insert load",
        &InDatabase {
            cluster: &behind,
            database: "pool",
        },
        &[&before],
    );
    assert_no_id_reissued(test, &[&before, &after]);
}

/// IDs one live session issued: each call's start, and the IDs it returned.
struct LiveSession {
    calls: Vec<(Instant, Vec<i64>)>,
    errors: usize,
}

/// The IDs in the rows of a simple query's answer.
fn ids_of(messages: &[SimpleQueryMessage]) -> Vec<i64> {
    messages
        .iter()
        .filter_map(|message| match message {
            SimpleQueryMessage::Row(row) => row.get(0).map(|id| id.parse().unwrap()),
            _ => None,
        })
        .collect()
}

/// `clients` generating (50 IDs a statement, back to back) while `during` runs, and 2 s
/// after; an error while a restore has dropped the extension and not yet created it again is
/// counted and the session goes on.
fn generate_around<T>(clients: Vec<Client>, during: impl FnOnce() -> T) -> (Vec<LiveSession>, T) {
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        let handles: Vec<_> = clients
            .into_iter()
            .map(|mut client| {
                let stop = &stop;
                scope.spawn(move || {
                    let mut session = LiveSession {
                        calls: Vec::new(),
                        errors: 0,
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let started = Instant::now();
                        // The simple protocol: a pooled client's statement is one message.
                        match client
                            .simple_query("SELECT snowflake_nextval() FROM generate_series(1, 50)")
                        {
                            Ok(messages) => session.calls.push((started, ids_of(&messages))),
                            Err(error) => {
                                // While the extension is gone: its function (42883), or its
                                // catalog under a statement already running (42704).
                                let (code, message, _) = error_parts(&error);
                                assert!(
                                    ["42883", "42704"].contains(&code.as_str()),
                                    "a live session failed: {code} {message}"
                                );
                                session.errors += 1;
                                thread::sleep(Duration::from_millis(5));
                            }
                        }
                    }
                    session
                })
            })
            .collect();
        thread::sleep(Duration::from_secs(1));
        let result = during();
        thread::sleep(Duration::from_secs(2));
        stop.store(true, Ordering::Relaxed);
        let sessions = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (sessions, result)
    })
}

/// Restores a dump of a cluster whose clock is 40 s ahead into database `live` of a cluster
/// where 3 sessions keep generating, with pg_restore's `options`; asserts that no ID a session
/// issued in a statement started after pg_restore returned is at or below a restored ID.
fn restore_into_a_live_database(test: &str, options: &[&str], live_has_the_table: bool) {
    let source = Cluster::builder().faketime_at("+40s").start();
    assert_server_clock_offset(&mut source.connect(), 40_000_000);
    source.connect().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    let mut stored = Issued::new("the other cluster (clock 40 s ahead)");
    insert_load(&source, &mut stored, 0..2, 5_000);
    let dump = source.dump_as("postgres", "postgres");

    let live = Cluster::builder().start();
    live.connect()
        .batch_execute("CREATE DATABASE live")
        .unwrap();
    let mut admin = live.connect_to("live");
    admin
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    if live_has_the_table {
        admin.batch_execute(ids_table()).unwrap();
    }
    let clients = (0..3).map(|_| live.connect_to("live")).collect();
    let (sessions, restored_at) = generate_around(clients, || {
        let restored = live.pg_restore(&dump, "live", options);
        assert!(
            restored.status.success(),
            "pg_restore {options:?}: {}",
            String::from_utf8_lossy(&restored.stderr)
        );
        Instant::now()
    });
    let restored: Vec<i64> = column(&mut admin, "SELECT id FROM ids ORDER BY id");
    assert_eq!(restored.len(), 10_000, "the restored rows");
    let newest_restored = *restored.last().unwrap();
    let after: Vec<i64> = sessions
        .iter()
        .flat_map(|session| &session.calls)
        .filter(|(started, _)| *started > restored_at)
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    let at_or_below = after.iter().filter(|&&id| id <= newest_restored).count();
    let equal = after
        .iter()
        .filter(|id| restored.binary_search(id).is_ok())
        .count();
    let errors: usize = sessions.iter().map(|session| session.errors).sum();
    println!(
        "[{test}] {} IDs issued after pg_restore returned: {at_or_below} at or below the newest \
         restored ID, {equal} equal to a restored one ({errors} calls failed while the \
         extension was gone)",
        after.len()
    );
    assert!(after.len() > 1_000, "the sessions kept generating");
    assert_eq!((at_or_below, equal), (0, 0), "[{test}]");
}

#[test]
fn a_clean_restore_into_a_live_database_is_seen_before_the_next_tick() {
    restore_into_a_live_database(
        "pg_restore --clean --if-exists into a live database",
        &["--clean", "--if-exists"],
        false,
    );
}

#[test]
fn a_data_only_restore_into_a_live_database_is_seen_before_the_next_tick() {
    restore_into_a_live_database(
        "pg_restore --data-only into a live database",
        &["--data-only"],
        true,
    );
}

/// A table of IDs in schema `app` of database `postgres`, filled with 20,000 rows: the newest.
fn app_ids(cluster: &Cluster) -> i64 {
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE SCHEMA app;
             CREATE TABLE app.ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);
             INSERT INTO app.ids (n) SELECT g FROM generate_series(1, 20000) g;",
        )
        .unwrap();
    client
        .query_one("SELECT max(id) FROM app.ids", &[])
        .unwrap()
        .get(0)
}

/// 20,000 new rows of `app.ids` on `cluster`: the smallest new ID.
fn first_new_id(cluster: &Cluster) -> i64 {
    min_new_id(
        &mut cluster.connect(),
        "INSERT INTO app.ids (n) SELECT g FROM generate_series(1, 20000) g",
    )
}

/// A dump of `old`'s database `postgres` made with `dump_options` (`--schema=app` or
/// `--table=app.ids`, …), restored with `restore_options` into a new cluster whose clock is
/// `offset` from real time, where the extension exists already; and what pg_restore said.
fn restore_partial(
    old: &Cluster,
    dump_options: &[&str],
    offset: &str,
    restore_options: &[&str],
) -> (Cluster, std::process::Output) {
    let dump = old.dump_with("postgres", "postgres", dump_options);
    let new = Cluster::builder().faketime_at(offset).start();
    new.connect()
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    if dump_options
        .iter()
        .any(|option| option.starts_with("--table"))
    {
        // A table's dump holds no schema: the reader creates it first.
        new.connect().batch_execute("CREATE SCHEMA app").unwrap();
    }
    let restored = new.pg_restore(&dump, "postgres", restore_options);
    (new, restored)
}

/// The step a WARNING in `said` (what pg_restore printed) gives: the text between `after` and
/// the next `before`.
fn step_in<'a>(said: &'a str, after: &str, before: &str) -> &'a str {
    said.split(after)
        .nth(1)
        .and_then(|rest| rest.split(before).next())
        .unwrap_or_else(|| panic!("no step in {said}"))
}

/// A partial dump (one schema) carries the floor with `--extension=snowflake_id`, as the
/// reference's "Moving to a new cluster" says, into a cluster whose clock is behind and where
/// the extension exists already.
#[test]
fn a_partial_dump_with_the_extension_carries_the_floor() {
    let old = Cluster::builder().start();
    old.connect()
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let newest = app_ids(&old);
    for part in ["--schema=app", "--table=app.ids"] {
        let (new, restored) =
            restore_partial(&old, &[part, "--extension=snowflake_id"], "-40s", &[]);
        assert_server_clock_offset(&mut new.connect(), -40_000_000);
        println!(
            "[{part}, clock 40 s behind] pg_restore said: {}",
            String::from_utf8_lossy(&restored.stderr)
        );
        let first = first_new_id(&new);
        println!("[{part}, clock 40 s behind] newest stored {newest}, first new {first}");
        assert!(first > newest, "{part}: new IDs among the restored ones");
    }
}

/// A partial dump without `--extension` carries no floor, and no value in a table may move it:
/// when `pg_restore` builds the table's key over the restored rows, on a cluster whose clock is
/// behind, a WARNING says new IDs can repeat them and names a superuser's step (`pg_restore`
/// shows it with `--verbose`; the server log has it too); after the step, as the WARNING gives
/// it, new IDs are above the restored ones. On a cluster whose clock agrees, nothing warns.
#[test]
fn a_partial_dump_without_the_extension_warns_with_the_step_that_carries_its_floor() {
    let old = Cluster::builder().start();
    old.connect()
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    app_ids(&old);
    for (part, behind) in [
        ("--schema=app", "-40s"),
        ("--table=app.ids", "-40s"),
        ("--schema=app", "-10m"),
        ("--schema=app", "+0s"),
    ] {
        // Fresh rows for each dump: the ones before were made long enough ago, on a slow
        // machine, to lie no more than 40 s ahead of the next cluster's clock.
        let mut client = old.connect();
        client
            .batch_execute("INSERT INTO app.ids (n) SELECT g FROM generate_series(1, 1000) g")
            .unwrap();
        let newest: i64 = client
            .query_one("SELECT max(id) FROM app.ids", &[])
            .unwrap()
            .get(0);
        let (new, restored) = restore_partial(&old, &[part], behind, &["--verbose"]);
        let said = String::from_utf8_lossy(&restored.stderr).into_owned();
        let warnings: Vec<&str> = said
            .lines()
            .filter(|line| line.contains("WARNING") || line.starts_with("HINT"))
            .collect();
        println!("[{part}, clock {behind}] pg_restore --verbose: {warnings:?}");
        if behind == "+0s" {
            assert!(warnings.is_empty(), "{said}");
            continue;
        }
        assert!(
            said.contains("app.ids.id holds IDs of snowflake sequence \"default\""),
            "{said}"
        );
        let step = step_in(&said, "before new IDs are issued here: ", " (");
        new.connect().batch_execute(step).unwrap();
        let first = first_new_id(&new);
        println!(
            "[{part}, clock {behind}] after {step}: newest stored {newest}, first new {first}"
        );
        assert!(first > newest, "{part}: new IDs among the restored ones");
    }
}

/// A partial dump without `--extension` of a table whose default names a sequence other than
/// `'default'` brings neither the sequence nor the floor: the restore's key over its rows warns
/// that the database lacks the sequence and names the steps; followed as the WARNING gives them
/// (the sequence created with its layout, then the floor raised), new IDs are above the
/// restored ones, on a cluster whose clock is 40 s behind.
#[test]
fn a_partial_dump_of_a_sequence_the_database_lacks_names_the_steps() {
    let old = Cluster::builder().start();
    old.connect()
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('web', 'js53');
             CREATE SCHEMA app;
             CREATE TABLE app.visits (id bigint PRIMARY KEY DEFAULT snowflake_nextval('web'));
             INSERT INTO app.visits SELECT FROM generate_series(1, 20000);",
        )
        .unwrap();
    let newest = count(&mut old.connect(), "SELECT max(id) FROM app.visits");
    let (new, restored) = restore_partial(&old, &["--schema=app"], "-40s", &["--verbose"]);
    let said = String::from_utf8_lossy(&restored.stderr).into_owned();
    println!("[--schema=app, 'web' missing] pg_restore --verbose: {said}");
    assert!(
        said.contains("app.visits.id holds IDs of snowflake sequence \"web\", which this database does not have"),
        "{said}"
    );
    let step = step_in(&said, "a superuser runs ", " (docs/reference.md");
    let mut admin = new.connect();
    admin
        .batch_execute("SELECT snowflake_create_sequence('web', 'js53')")
        .unwrap();
    admin.batch_execute(step).unwrap();
    let first = min_new_id(
        &mut new.connect(),
        "INSERT INTO app.visits SELECT FROM generate_series(1, 20000)",
    );
    println!(
        "[--schema=app, 'web' missing] after {step}: newest stored {newest}, first new {first}"
    );
    assert!(first > newest, "new IDs among the restored ones");
}

/// A dump of a database at 0.9.0 (its state in the extension's schema) restores as the
/// CHANGELOG says: the extension created at 0.9.0 first, the dump restored, then updated; or,
/// restored as it is into a fresh database, with the step its WARNING names.
#[test]
fn a_dump_of_0_9_0_restores_with_its_floor_and_updates() {
    let old = Cluster::builder().start();
    old.connect()
        .batch_execute(
            "CREATE EXTENSION snowflake_id VERSION '0.1.0';
             ALTER EXTENSION snowflake_id UPDATE TO '0.9.0';
             SELECT snowflake_create_sequence('web', 'js53');",
        )
        .unwrap();
    let newest = app_ids(&old);
    let dump = old.dump_as("postgres", "postgres");
    let new = Cluster::builder().faketime_at("-10m").start();
    new.connect()
        .batch_execute(
            "CREATE EXTENSION snowflake_id VERSION '0.1.0';
             ALTER EXTENSION snowflake_id UPDATE TO '0.9.0';",
        )
        .unwrap();
    new.restore_dump(&dump, "postgres", &[]);
    new.connect()
        .batch_execute("ALTER EXTENSION snowflake_id UPDATE")
        .unwrap();
    let sequences: Vec<String> = column(
        &mut new.connect(),
        "SELECT name FROM snowflake_sequences ORDER BY name",
    );
    assert_eq!(sequences, ["default", "web"]);
    let first = first_new_id(&new);
    println!("[0.9.0 dump, clock 10 min behind] newest stored {newest}, first new {first}");
    assert!(first > newest, "new IDs among the restored ones");

    // Restored as it is into a fresh database of another cluster, the dump creates the
    // extension at 0.10.0: its catalog rows and floor do not land (pg_restore's errors name
    // them in the old schema), and the rows' key gives the WARNING with the step that carries
    // their floor.
    let fresh = Cluster::builder().faketime_at("-10m").start();
    fresh
        .connect()
        .batch_execute("CREATE DATABASE fresh")
        .unwrap();
    let restored = fresh.pg_restore(&dump, "fresh", &["--verbose"]);
    let said = String::from_utf8_lossy(&restored.stderr).into_owned();
    assert!(said.contains("public.snowflake_floor"), "{said}");
    let step = step_in(&said, "before new IDs are issued here: ", " (");
    fresh.connect_to("fresh").batch_execute(step).unwrap();
    let first = min_new_id(
        &mut fresh.connect_to("fresh"),
        "INSERT INTO app.ids (n) SELECT g FROM generate_series(1, 20000) g",
    );
    println!("[0.9.0 dump into a fresh database] after {step}: first new {first}");
    assert!(first > newest, "new IDs among the restored ones");
}

/// The update from 0.9.0, which moves the catalog table and the floor relations into the
/// schema `snowflake_id_internal`, under four sessions of their own and eight clients that
/// share two server connections through a real PgBouncer (transaction pooling), all started
/// before it and generating throughout: no statement fails, and every ID is new.
#[test]
fn the_update_to_its_own_schema_under_load_fails_no_statement() {
    let cluster = Cluster::builder().start();
    cluster
        .connect()
        .batch_execute(
            "CREATE EXTENSION snowflake_id VERSION '0.1.0';
             ALTER EXTENSION snowflake_id UPDATE TO '0.9.0';",
        )
        .unwrap();
    let bouncer = PgBouncer::start(
        &cluster,
        &Pooling {
            database: "postgres",
            mode: "transaction",
            server_connections: 2,
            client_connections: 20,
        },
    );
    let clients = (0..4)
        .map(|_| cluster.connect())
        .chain((0..8).map(|_| bouncer.try_connect_to("postgres").unwrap()))
        .collect();
    let (sessions, ()) = generate_around(clients, || {
        cluster
            .connect()
            .batch_execute("ALTER EXTENSION snowflake_id UPDATE")
            .unwrap();
    });
    let errors: usize = sessions.iter().map(|session| session.errors).sum();
    let ids: Vec<i64> = sessions
        .iter()
        .flat_map(|session| {
            session
                .calls
                .iter()
                .flat_map(|(_, ids)| ids.iter().copied())
        })
        .collect();
    let distinct: std::collections::HashSet<i64> = ids.iter().copied().collect();
    let schema: Vec<String> = column(
        &mut cluster.connect(),
        "SELECT relnamespace::regnamespace::text FROM pg_class WHERE relname = 'snowflake_floor'",
    );
    println!(
        "[update to 0.10.0 under load] {} IDs from 4 sessions and 8 pooled clients, {} failed \
         statements; the floor relation is in {schema:?}",
        ids.len(),
        errors
    );
    assert_eq!(errors, 0, "statements failed during the update");
    assert_eq!(distinct.len(), ids.len(), "an ID was issued twice");
    assert_eq!(schema, ["snowflake_id_internal"]);
}
