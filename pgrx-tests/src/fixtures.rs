//! What more than one test file uses, beside the clusters themselves (the crate root): the
//! repository's root, short queries, the table `ids` that the fault tests fill and the checks on
//! it (no ID repeats, each session's IDs strictly increase), sessions that generate while
//! something else happens, the clock and the reservation as the server sees them,
//! `snowflake_stats()`, and several clusters started at once with their sequences' layouts;
//! and for the tests across server boundaries (failover, restore, upgrade) the table `ids` with
//! a snowflake default, the loads that fill it, the IDs each server issued ([`Issued`]) and the
//! check that none was issued twice ([`assert_no_id_reissued`]).
//!
//! Constants of the ID format (the default sequence's layout and epoch, the reservation file's
//! name and text) come from the pure core, `snowflake_id_core`, never copied here.

use std::collections::{BTreeSet, HashSet};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use snowflake_id_core::layout::{preset, Field};
use snowflake_id_core::reservation;

use crate::{error_parts, wait_until, Client, Cluster, PgError, Server};

// ---------------------------------------------------------------------------------------------
// The repository and short queries
// ---------------------------------------------------------------------------------------------

/// The workspace's root directory (the repository).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The version of the extension crate: `version` in the `[package]` section of the root
/// Cargo.toml (which `cargo pgrx package` also writes as the control file's default_version).
pub fn extension_crate_version() -> String {
    let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let mut section = "";
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[package]" && line.starts_with("version") {
            return line
                .split('"')
                .nth(1)
                .expect("version = \"...\"")
                .to_owned();
        }
    }
    panic!("no version in the [package] section of Cargo.toml");
}

/// Runs `program args…` to completion: its stdout, or on failure a message with its status and
/// output.
pub fn command_output(
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
) -> Result<String, String> {
    let program = program.as_ref();
    let output = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|error| format!("run {}: {error}", program.to_string_lossy()))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        return Ok(stdout);
    }
    Err(format!(
        "{} {args:?}: {}\nstdout: {stdout}\nstderr: {}",
        program.to_string_lossy(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// The package the test command installed for the major under test: `SNOWFLAKE_ID_PACKAGE`,
/// else where `scripts/build-package.sh` puts it (the Debian package for 15, else the tarball).
pub fn package_path(version: &str) -> PathBuf {
    if let Ok(path) = std::env::var("SNOWFLAKE_ID_PACKAGE") {
        return PathBuf::from(path);
    }
    let architecture = command_output("dpkg", &["--print-architecture"])
        .unwrap_or_else(|failure| panic!("{failure}"))
        .trim()
        .to_owned();
    let name = match crate::pg_major() {
        15 => format!("postgresql-15-snowflake-id_{version}_{architecture}.deb"),
        major => format!("snowflake_id-{version}-pg{major}-{architecture}.tar.gz"),
    };
    workspace_root().join("target/package").join(name)
}

/// The single `bigint` that `query` returns (e.g. a `count(*)`).
pub fn count(client: &mut Client, query: &str) -> i64 {
    client
        .query_one(query, &[])
        .unwrap_or_else(|error| panic!("{query}: {error}"))
        .get(0)
}

/// The single `text` that `query` returns.
pub fn text(client: &mut Client, query: &str) -> String {
    client
        .query_one(query, &[])
        .unwrap_or_else(|error| panic!("{query}: {error}"))
        .get(0)
}

/// The first column of every row that `query` returns.
pub fn column<T: postgres::types::FromSqlOwned>(client: &mut Client, query: &str) -> Vec<T> {
    client
        .query(query, &[])
        .unwrap_or_else(|error| panic!("{query}: {error}"))
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// The installed version of the extension in `client`'s database.
pub fn extension_version(client: &mut Client) -> String {
    text(
        client,
        "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'",
    )
}

/// How many worker ids live sessions use (rows of `snowflake_workers`).
pub fn worker_ids_in_use(client: &mut Client) -> i64 {
    count(client, "SELECT count(*) FROM snowflake_workers")
}

// ---------------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------------

pub const MINUTE_US: i64 = 60_000_000;
pub const HOUR_US: i64 = 60 * MINUTE_US;

/// The test process's (real, never faked) time in unix microseconds.
pub fn real_now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros() as i64
}

/// Unix milliseconds of the tick of an ID of the default sequence (the 'classic' preset: 1 ms
/// ticks above 22 bits, from the presets' epoch).
pub fn default_id_unix_ms(id: i64) -> i64 {
    let classic = preset("classic").expect("the 'classic' preset");
    (id >> classic.shift(Field::Time)) + classic.epoch_unix_us / 1000
}

/// How far the server's wall clock (`clock_timestamp()`) is from the real time, in µs.
fn server_clock_offset_us(client: &mut Client) -> i64 {
    let before = real_now_us();
    let server: i64 = client
        .query_one(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8",
            &[],
        )
        .unwrap()
        .get(0);
    let after = real_now_us();
    server - (before + after) / 2
}

/// Waits until the server's wall clock is `expected_us` off the real time (± 2 s).
pub fn assert_server_clock_offset(client: &mut Client, expected_us: i64) -> i64 {
    let mut offset = 0;
    let moved = wait_until(Duration::from_secs(10), || {
        offset = server_clock_offset_us(client);
        (offset - expected_us).abs() < 2_000_000
    });
    assert!(
        moved,
        "the server's wall clock is {offset} µs off the real time, expected about {expected_us}"
    );
    offset
}

// ---------------------------------------------------------------------------------------------
// snowflake_stats() and the reservation file
// ---------------------------------------------------------------------------------------------

/// `snowflake_stats()`, read at one moment (printed with `{:?}` by the tests).
#[derive(Debug)]
pub struct Stats {
    pub backward_steps: i64,
    pub largest_backward_step_ms: f64,
    pub wall_clock_behind_ms: f64,
    pub borrowed_ticks: i64,
    pub throttle_sleeps: i64,
    pub reservation_writes: i64,
    pub reserved_until_us: Option<i64>,
    pub cluster_clock_us: Option<i64>,
    pub slots_in_use: i32,
}

pub fn stats(client: &mut Client) -> Stats {
    let row = client
        .query_one(
            "SELECT backward_steps, largest_backward_step_ms, wall_clock_behind_ms,
                    borrowed_ticks, throttle_sleeps, reservation_writes,
                    (extract(epoch FROM reserved_until) * 1000000)::int8,
                    (extract(epoch FROM cluster_clock) * 1000000)::int8,
                    slots_in_use
             FROM snowflake_stats()",
            &[],
        )
        .unwrap();
    Stats {
        backward_steps: row.get(0),
        largest_backward_step_ms: row.get(1),
        wall_clock_behind_ms: row.get(2),
        borrowed_ticks: row.get(3),
        throttle_sleeps: row.get(4),
        reservation_writes: row.get(5),
        reserved_until_us: row.get(6),
        cluster_clock_us: row.get(7),
        slots_in_use: row.get(8),
    }
}

/// The reserved time in the data directory's reservation file (unix µs), read as the server
/// reads it (`snowflake_id_core::reservation::read`).
pub fn reservation_in_file(cluster: &Cluster) -> i64 {
    let directory = cluster.data_dir();
    match reservation::read(directory) {
        Ok(Some(reserved)) => reserved,
        Ok(None) => panic!("no {} in {}", reservation::FILE_NAME, directory.display()),
        Err(error) => panic!(
            "the {} in {}: {error}",
            reservation::FILE_NAME,
            directory.display()
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Table `ids`: one row per ID of the default sequence
// ---------------------------------------------------------------------------------------------

pub const IDS_TABLE: &str = "CREATE EXTENSION snowflake_id;
     CREATE TABLE ids (
         id bigint PRIMARY KEY,
         session int NOT NULL,
         n bigint NOT NULL,
         before timestamptz NOT NULL
     );";

/// Inserts `count` rows of the default sequence into `ids` for `session`, numbered
/// `first + 1 ..= first + count`, with the server's wall clock read just before each ID.
/// Returns (ID, that wall clock reading in unix µs) in the order the IDs were made.
pub fn insert_rows(
    client: &mut Client,
    session: i32,
    first: i64,
    count: i64,
) -> Result<Vec<(i64, i64)>, PgError> {
    let rows = client.query(
        "INSERT INTO ids (before, id, session, n)
         SELECT clock_timestamp(), snowflake_nextval(), $1, $2 + g
         FROM generate_series(1, $3::bigint) g
         RETURNING id, (extract(epoch FROM before) * 1000000)::int8",
        &[&session, &first, &count],
    )?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

/// [`insert_rows`], IDs only.
pub fn insert_batch(
    client: &mut Client,
    session: i32,
    first: i64,
    count: i64,
) -> Result<Vec<i64>, PgError> {
    Ok(insert_rows(client, session, first, count)?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// Sessions `sessions` insert `count` rows each into `ids`, one after the other, each on a
/// connection of its own; asserts that each session's IDs strictly increase (named
/// "{what} session N") and returns all the IDs.
pub fn insert_in_turn(cluster: &Cluster, what: &str, sessions: Range<i32>, count: i64) -> Vec<i64> {
    let mut all = Vec::new();
    for session in sessions {
        let mut client = cluster.connect();
        let ids = insert_batch(&mut client, session, 0, count).unwrap();
        assert_strictly_increasing(&format!("{what} session {session}"), &ids);
        all.extend(ids);
    }
    all
}

/// Asserts that `ids` strictly increase.
pub fn assert_strictly_increasing(what: &str, ids: &[i64]) {
    if let Some(position) = ids.windows(2).position(|pair| pair[1] <= pair[0]) {
        panic!(
            "{what}: IDs not strictly increasing at {position}: {} then {}",
            ids[position],
            ids[position + 1]
        );
    }
}

/// Asserts that in table `ids` every session's IDs strictly increase in `n` order and that no
/// ID repeats; returns the row count.
pub fn assert_table_consistent(client: &mut Client) -> i64 {
    let rows = client
        .query(
            "SELECT session, count(*) FILTER (WHERE previous IS NOT NULL AND id <= previous)
             FROM (SELECT session, id, lag(id) OVER (PARTITION BY session ORDER BY n) previous
                   FROM ids) ordered
             GROUP BY session
             ORDER BY session",
            &[],
        )
        .unwrap();
    for row in &rows {
        let (session, decreasing): (i32, i64) = (row.get(0), row.get(1));
        assert_eq!(
            decreasing, 0,
            "session {session}: {decreasing} IDs not above the session's previous one"
        );
    }
    let row = client
        .query_one("SELECT count(*), count(DISTINCT id) FROM ids", &[])
        .unwrap();
    let (count, distinct): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(count, distinct, "duplicate IDs in table ids");
    count
}

// ---------------------------------------------------------------------------------------------
// Sessions that generate while something else happens
// ---------------------------------------------------------------------------------------------

/// What one generating session saw: (ID, server wall clock just before it, unix µs) in order,
/// and each batch's latency.
pub struct SessionRun {
    pub session: i32,
    pub rows: Vec<(i64, i64)>,
    pub latencies: Vec<Duration>,
}

/// Runs `sessions` sessions that insert `batch`-row batches into `ids` until `during` (run on
/// the calling thread once all sessions hold their worker ids) returns; panics on any error.
pub fn generate_while<T>(
    cluster: &Cluster,
    sessions: i32,
    batch: i64,
    during: impl FnOnce() -> T,
) -> (Vec<SessionRun>, T) {
    let stop = AtomicBool::new(false);
    let ready = Barrier::new(sessions as usize + 1);
    thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|session| {
                let (stop, ready) = (&stop, &ready);
                scope.spawn(move || {
                    // Take a worker id before the clock work starts; meet at the barrier even on
                    // failure, so no one waits forever.
                    let client = cluster.try_connect_to("postgres").and_then(|mut client| {
                        client.query_one("SELECT snowflake_nextval()", &[])?;
                        Ok(client)
                    });
                    ready.wait();
                    let mut client = client.unwrap_or_else(|error| {
                        panic!("session {session}: {:?}", error_parts(&error))
                    });
                    let mut run = SessionRun {
                        session,
                        rows: Vec::new(),
                        latencies: Vec::new(),
                    };
                    let deadline = Instant::now() + Duration::from_secs(120);
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        let started = Instant::now();
                        let rows = insert_rows(&mut client, session, run.rows.len() as i64, batch)
                            .unwrap_or_else(|error| {
                                panic!("session {session}: {:?}", error_parts(&error))
                            });
                        run.latencies.push(started.elapsed());
                        run.rows.extend(rows);
                    }
                    run
                })
            })
            .collect();
        ready.wait();
        // Stop the sessions even when `during` panics, so the scope can end.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let result = {
            let _stop = StopOnDrop(&stop);
            during()
        };
        let runs = handles
            .into_iter()
            .map(|handle| handle.join().expect("a generating session panicked"))
            .collect();
        (runs, result)
    })
}

/// Checks every run's IDs strictly increase; returns (batches, median, max) batch latency.
pub fn check_runs(runs: &[SessionRun]) -> (usize, Duration, Duration) {
    let mut latencies: Vec<Duration> = Vec::new();
    for run in runs {
        let ids: Vec<i64> = run.rows.iter().map(|&(id, _)| id).collect();
        assert_strictly_increasing(&format!("session {}", run.session), &ids);
        assert!(!ids.is_empty(), "session {} made no IDs", run.session);
        latencies.extend(&run.latencies);
    }
    latencies.sort_unstable();
    let median = latencies[latencies.len() / 2];
    let max = *latencies.last().unwrap();
    (latencies.len(), median, max)
}

// ---------------------------------------------------------------------------------------------
// Several nodes
// ---------------------------------------------------------------------------------------------

/// Starts one cluster per entry at once (initdb dominates), with `snowflake.node_id` set when
/// the entry is `Some` and every line of `settings` added to postgresql.conf.
pub fn start_clusters(node_ids: &[Option<i32>], settings: &[&str]) -> Vec<Cluster> {
    thread::scope(|scope| {
        let starting: Vec<_> = node_ids
            .iter()
            .map(|node_id| {
                scope.spawn(move || {
                    let mut builder = Cluster::builder();
                    if let Some(node_id) = node_id {
                        builder = builder.setting(&format!("snowflake.node_id = {node_id}"));
                    }
                    for line in settings {
                        builder = builder.setting(line);
                    }
                    builder.start()
                })
            })
            .collect();
        starting
            .into_iter()
            .map(|cluster| cluster.join().expect("start cluster"))
            .collect()
    })
}

/// The fingerprint of sequence `name`'s layout on this node.
pub fn fingerprint(client: &mut Client, name: &str) -> String {
    client
        .query_one(
            "SELECT fingerprint FROM snowflake_sequences WHERE name = $1",
            &[&name],
        )
        .unwrap()
        .get(0)
}

/// Nodes, sessions per node, IDs per second per session and end of time of a sequence.
pub fn capacity(client: &mut Client, sequence: &str) -> (i64, i64, i64, String) {
    let row = client
        .query_one(
            "SELECT nodes, sessions_per_node, ids_per_second_per_session, runs_out_at::text
             FROM snowflake_sequences WHERE name = $1",
            &[&sequence],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

/// `rows` in `elapsed`, for printed measurements: "N rows in T ms (R rows/s)".
pub fn rate(rows: i64, elapsed: Duration) -> String {
    format!(
        "{rows} rows in {:.0} ms ({:.0} rows/s)",
        elapsed.as_secs_f64() * 1e3,
        rows as f64 / elapsed.as_secs_f64()
    )
}

/// The SQLSTATEs in the first column of the README's error tables: the extension's own
/// (`## Errors`) and PostgreSQL's around it (`### Raised by PostgreSQL`, right after).
pub fn readme_error_tables() -> (BTreeSet<String>, BTreeSet<String>) {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let start = readme
        .find("\n## Errors\n")
        .expect("README has an Errors section");
    let section = &readme[start + 1..];
    let section = &section[..section[1..]
        .find("\n## ")
        .map_or(section.len(), |end| end + 1)];
    let (own, postgres) = section
        .split_once("\n### Raised by PostgreSQL\n")
        .expect("README's Errors section has a \"Raised by PostgreSQL\" table");
    let codes = |table: &str| -> BTreeSet<String> {
        table
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .map(|rest| rest[..rest.find('`').unwrap()].to_owned())
            .collect()
    };
    (codes(own), codes(postgres))
}

// ---------------------------------------------------------------------------------------------
// IDs across server boundaries: failover, restore, upgrade (table `ids` with a snowflake default)
// ---------------------------------------------------------------------------------------------

/// Table `ids` as an application has it: the ID is the column default, so every row's ID was
/// issued by the server that inserted it, and the primary key refuses an ID already stored.
pub const DEFAULT_IDS_TABLE: &str = "CREATE EXTENSION snowflake_id;
     CREATE TABLE ids (
         id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
         session int NOT NULL,
         n bigint NOT NULL,
         before timestamptz NOT NULL
     );";

/// The IDs one server issued in one phase of a test, in the order they were made, with how
/// many rows the primary key refused and how far the IDs ran ahead of real time.
#[derive(Clone, Debug, Default)]
pub struct Issued {
    /// What issued them, for messages (e.g. "old primary, insert load").
    pub what: String,
    /// The event between the earlier phases and this one when this phase must continue above
    /// every earlier ID (e.g. "promotion"); `None` within one server's run.
    pub after: Option<String>,
    pub ids: Vec<i64>,
    /// Rows of `ids` whose default ID was already in the table: `ON CONFLICT (id) DO NOTHING`
    /// skipped them, where a plain INSERT fails with a unique violation (23505). Each is an ID
    /// issued twice.
    pub refused: i64,
    /// The largest lead of an ID's time over the real time: its tick start minus the test's
    /// (never faked) clock just after the statement that made it returned, in µs.
    pub max_lead_us: i64,
    pub elapsed: Duration,
}

impl Issued {
    pub fn new(what: &str) -> Issued {
        Issued {
            what: what.to_owned(),
            max_lead_us: i64::MIN,
            ..Issued::default()
        }
    }

    /// A phase that must continue above every ID issued before `event`.
    pub fn after(event: &str, what: &str) -> Issued {
        Issued {
            after: Some(event.to_owned()),
            ..Issued::new(what)
        }
    }

    /// Adds IDs that one statement returned (`real_after_us`: the test's clock after it).
    fn add(&mut self, ids: &[i64], refused: i64, real_after_us: i64) {
        if let Some(&newest) = ids.iter().max() {
            let lead = default_id_unix_ms(newest) * 1000 - real_after_us;
            self.max_lead_us = self.max_lead_us.max(lead);
        }
        self.ids.extend_from_slice(ids);
        self.refused += refused;
    }

    /// Adds the IDs of `other` (e.g. another session's) to these.
    pub fn merge(&mut self, other: Issued) {
        self.ids.extend(other.ids);
        self.refused += other.refused;
        self.max_lead_us = self.max_lead_us.max(other.max_lead_us);
        self.elapsed = self.elapsed.max(other.elapsed);
    }

    pub fn min(&self) -> Option<i64> {
        self.ids.iter().copied().min()
    }

    pub fn max(&self) -> Option<i64> {
        self.ids.iter().copied().max()
    }

    /// One `snowflake_nextval()` in a session of its own: an ID that no table keeps.
    pub fn probe(&mut self, server: &impl Server) {
        let mut client = server.session();
        let id: i64 = client
            .query_one("SELECT snowflake_nextval()", &[])
            .unwrap_or_else(|error| panic!("{}: {:?}", self.what, error_parts(&error)))
            .get(0);
        self.add(&[id], 0, real_now_us());
    }

    /// Every ID stored in table `ids` now (e.g. what a restore or an upgrade brought along).
    pub fn stored(client: &mut Client, what: &str) -> Issued {
        let mut stored = Issued::new(what);
        let ids: Vec<i64> = column(client, "SELECT id FROM ids ORDER BY id");
        stored.add(&ids, 0, real_now_us());
        stored
    }
}

/// Inserts `count` rows into `ids` for `session`, numbered `first + 1 ..= first + count`, each
/// taking its ID from the column default; rows whose ID is already stored are skipped (`ON
/// CONFLICT (id) DO NOTHING`). Returns the IDs stored and how many rows were skipped.
pub fn insert_with_default(
    client: &mut Client,
    session: i32,
    first: i64,
    count: i64,
) -> Result<(Vec<i64>, i64), PgError> {
    let rows = client.query(
        "INSERT INTO ids (before, session, n)
         SELECT clock_timestamp(), $1, $2 + g FROM generate_series(1, $3::bigint) g
         ON CONFLICT (id) DO NOTHING
         RETURNING id",
        &[&session, &first, &count],
    )?;
    let ids: Vec<i64> = rows.iter().map(|row| row.get(0)).collect();
    let refused = count - ids.len() as i64;
    Ok((ids, refused))
}

/// Rows per statement at full speed: a few ticks of one session's IDs.
const FULL_BATCH: i64 = 500;
/// Rows per statement of [`insert_until_past`] while its IDs near earlier ones.
const NEAR_BATCH: i64 = 20;
/// Rows per statement (one every 20 ms) of [`insert_until_past`] far below earlier IDs.
const FAR_BATCH: i64 = 50;

/// One session inserting into `ids`: its connection and what it has made so far.
struct Inserter {
    what: String,
    session: i32,
    client: Client,
    /// Rows inserted or skipped so far (the next row is numbered `made + 1`).
    made: i64,
    issued: Issued,
}

impl Inserter {
    /// Inserts `count` rows ([`insert_with_default`]); panics on an error.
    fn insert(&mut self, count: i64) {
        let (ids, refused) = insert_with_default(&mut self.client, self.session, self.made, count)
            .unwrap_or_else(|error| panic!("{}: {:?}", self.what, error_parts(&error)));
        self.issued.add(&ids, refused, real_now_us());
        self.made += count;
    }

    fn newest(&self) -> Option<i64> {
        self.issued.ids.last().copied()
    }
}

/// Runs `work` in one session per number of `sessions`, all at once, each on a connection of
/// its own; asserts each session's IDs strictly increase and adds them to `issued`.
fn in_sessions(
    server: &impl Server,
    issued: &mut Issued,
    sessions: Range<i32>,
    work: impl Fn(&mut Inserter) + Sync,
) {
    let started = Instant::now();
    let runs: Vec<Issued> = thread::scope(|scope| {
        let handles: Vec<_> = sessions
            .map(|session| {
                let what = format!("{}, session {session}", issued.what);
                let work = &work;
                scope.spawn(move || {
                    let mut inserter = Inserter {
                        issued: Issued::new(&what),
                        what,
                        session,
                        client: server.session(),
                        made: 0,
                    };
                    work(&mut inserter);
                    assert_strictly_increasing(&inserter.what, &inserter.issued.ids);
                    inserter.issued
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for run in runs {
        issued.merge(run);
    }
    issued.elapsed += started.elapsed();
}

/// Sessions `sessions` insert `rows` rows each into `ids` at once (each on a connection of its
/// own, in statements of 500 rows at full speed); asserts each session's IDs strictly increase.
pub fn insert_load(server: &impl Server, issued: &mut Issued, sessions: Range<i32>, rows: i64) {
    in_sessions(server, issued, sessions, |inserter| {
        while inserter.made < rows {
            inserter.insert(FULL_BATCH.min(rows - inserter.made));
        }
    });
}

/// Sessions `sessions` insert into `ids` until each has made `min_rows` rows and its newest ID
/// is above every ID of `earlier`, or `timeout` passes. This is the load that finds a reissue:
/// a server whose IDs start below earlier ones reaches the earlier IDs' ticks as its clock
/// advances, and repeats an ID wherever its counter meets the earlier session's in a tick of
/// the same worker.
///
/// A session's pace depends on where its newest ID is. While some earlier ID lies within 50 ms
/// ahead of (or 2 ms behind) its time: 20-row statements back to back, in every tick, at a
/// lower rate than the 500-row statements of [`insert_load`], so its counter drifts through the
/// earlier session's counter values across those ticks rather than keeping a fixed distance
/// from them. Far below every earlier ID: 50 rows every 20 ms, to keep the row count small.
/// Above every earlier ID: 500-row statements back to back. Asserts each session's IDs strictly
/// increase.
pub fn insert_until_past(
    server: &impl Server,
    issued: &mut Issued,
    sessions: Range<i32>,
    earlier: &[&Issued],
    min_rows: i64,
    timeout: Duration,
) {
    let mut ticks: Vec<i64> = earlier
        .iter()
        .flat_map(|phase| phase.ids.iter().map(|&id| default_id_unix_ms(id)))
        .collect();
    ticks.sort_unstable();
    let past = earlier.iter().filter_map(|phase| phase.max()).max();
    let near_earlier = |id: i64| {
        let newest_ms = default_id_unix_ms(id);
        let first = ticks.partition_point(|&tick| tick < newest_ms - 2);
        first < ticks.len() && ticks[first] <= newest_ms + 50
    };
    let started = Instant::now();
    in_sessions(server, issued, sessions, |inserter| {
        // `None < Some(_)`: no ID made yet is not past anything.
        while started.elapsed() < timeout && (inserter.made < min_rows || inserter.newest() <= past)
        {
            let newest = inserter.newest();
            if newest > past {
                inserter.insert(FULL_BATCH);
            } else if newest.is_none_or(near_earlier) {
                inserter.insert(NEAR_BATCH);
            } else {
                inserter.insert(FAR_BATCH);
                thread::sleep(Duration::from_millis(20));
            }
        }
    });
}

/// The tick, node and worker fields of an ID of the default sequence: two IDs with equal ones
/// differ only in the sequence field.
fn tick_and_worker(id: i64) -> i64 {
    let classic = preset("classic").expect("the 'classic' preset");
    id >> classic.shift(Field::Worker)
}

/// Seconds of a µs duration, for printing.
fn seconds(us: i64) -> String {
    format!("{:.3} s", us as f64 / 1e6)
}

/// Prints every phase (IDs, refused rows, lead over real time, where each phase that follows
/// an event starts relative to the newest earlier ID) and the duplicates, then asserts: no row
/// refused by the primary key, no ID issued twice across all phases, and every phase that
/// follows an event ([`Issued::after`]) above every earlier ID. `test` prefixes the lines.
pub fn assert_no_id_reissued(test: &str, phases: &[&Issued]) {
    let mut all: Vec<i64> = phases.iter().flat_map(|phase| phase.ids.clone()).collect();
    all.sort_unstable();
    let repeated = all.windows(2).filter(|pair| pair[0] == pair[1]).count() as i64;
    let refused: i64 = phases.iter().map(|phase| phase.refused).sum();
    let mut below = Vec::new();
    for (index, phase) in phases.iter().enumerate() {
        let lead = if phase.ids.is_empty() {
            "-".to_owned()
        } else {
            seconds(phase.max_lead_us)
        };
        let mut line = format!(
            "[{test}] {}{}: {} IDs ({} rows refused as duplicates) in {:.1} s, most ahead of real \
             time by {lead}",
            phase
                .after
                .as_ref()
                .map(|event| format!("after {event}: "))
                .unwrap_or_default(),
            phase.what,
            phase.ids.len(),
            phase.refused,
            phase.elapsed.as_secs_f64(),
        );
        let earlier_max = phases[..index].iter().filter_map(|p| p.max()).max();
        if let (Some(event), Some(first), Some(earlier_max)) =
            (&phase.after, phase.min(), earlier_max)
        {
            let gap_us = (default_id_unix_ms(first) - default_id_unix_ms(earlier_max)) * 1000;
            let under = phase.ids.iter().filter(|&&id| id <= earlier_max).count();
            let earlier_slots: HashSet<i64> = phases[..index]
                .iter()
                .flat_map(|p| p.ids.iter().map(|&id| tick_and_worker(id)))
                .collect();
            let sharing = phase
                .ids
                .iter()
                .filter(|&&id| earlier_slots.contains(&tick_and_worker(id)))
                .count();
            line += &format!(
                "; its lowest ID is {} {} the newest earlier ID, {under} of its IDs are not above \
                 it, {sharing} share a tick and worker with an earlier ID",
                seconds(gap_us.abs()),
                if gap_us >= 0 { "after" } else { "before" },
            );
            if first <= earlier_max {
                below.push(format!(
                    "after {event}, {} issued {under} IDs not above the newest earlier ID \
                     {earlier_max} (lowest {first}, {} earlier)",
                    phase.what,
                    seconds(-gap_us)
                ));
            }
        }
        println!("{line}");
    }
    println!(
        "[{test}] duplicates: {} = {refused} rows refused by the primary key + {repeated} IDs \
         returned that equal another returned ID; {} IDs in all",
        refused + repeated,
        all.len()
    );
    assert_eq!(
        refused, 0,
        "[{test}] {refused} rows got a default ID that was already stored (unique violations)"
    );
    assert_eq!(repeated, 0, "[{test}] {repeated} IDs were issued twice");
    assert!(below.is_empty(), "[{test}] {}", below.join("; "));
}

/// Asserts that table `ids` on `server` has `expected` rows (`what`: whose rows they are).
pub fn assert_ids_rows(server: &impl Server, expected: i64, what: &str) {
    let rows = count(&mut server.session(), "SELECT count(*) FROM ids");
    assert_eq!(
        rows, expected,
        "table ids has {rows} rows, not the {expected} {what}"
    );
}

/// The load after a server boundary (`event`, e.g. "promotion"): `server` (`what`) inserts
/// into `ids` until its IDs pass every ID of `earlier` ([`insert_until_past`], sessions 100 and
/// 101, at least 5,000 rows each, at most 45 s), and the table's sessions stay consistent.
/// Returns that load, which must continue above `earlier` ([`Issued::after`]).
pub fn load_after(event: &str, what: &str, server: &impl Server, earlier: &[&Issued]) -> Issued {
    let mut load = Issued::after(event, what);
    insert_until_past(
        server,
        &mut load,
        100..102,
        earlier,
        5_000,
        Duration::from_secs(45),
    );
    assert_table_consistent(&mut server.session());
    load
}

/// Fails over: waits until `standby` has replayed everything `primary` wrote (so every ID in
/// the old primary's table is in the standby's WAL), fast-stops `primary`, promotes `standby`
/// and checks it has every row of `ids` the old primary had.
pub fn fail_over(primary: &mut Cluster, standby: &Cluster) {
    let rows = count(&mut primary.connect(), "SELECT count(*) FROM ids");
    primary.wait_for_standby(standby, Duration::from_secs(30));
    primary.stop("fast");
    standby.promote();
    assert_ids_rows(standby, rows, "rows the old primary had");
}

/// The wall clock of a server started with `faketime_at(CLOCK_FAST)`: 30 s fast.
pub const CLOCK_FAST: &str = "+30s";

/// On `server` (`who`, e.g. "old primary"), whose wall clock has been 30 s fast from its start
/// (`ClusterBuilder::faketime_at(CLOCK_FAST)`): sessions `first_session..+2` insert `rows` rows
/// each, then `set_fake_time("+0")` steps its wall clock back to the real time (as NTP corrects
/// it) and sessions `first_session + 2..+4` insert as many again. The cluster clock never goes
/// back, so the IDs of both loads are ahead of real time. Returns the two loads.
pub fn clock_fast_then_corrected(
    server: &impl Server,
    set_fake_time: impl Fn(&str),
    who: &str,
    first_session: i32,
    rows: i64,
) -> (Issued, Issued) {
    let mut admin = server.session();
    assert_server_clock_offset(&mut admin, 30_000_000);
    let mut fast = Issued::new(&format!("{who}, clock 30 s fast, insert load"));
    insert_load(server, &mut fast, first_session..first_session + 2, rows);
    set_fake_time("+0");
    assert_server_clock_offset(&mut admin, 0);
    let mut corrected = Issued::new(&format!(
        "{who}, clock stepped back 30 s to the real time, insert load"
    ));
    insert_load(
        server,
        &mut corrected,
        first_session + 2..first_session + 4,
        rows,
    );
    (fast, corrected)
}
