//! What more than one test file uses, beside the clusters themselves (the crate root): the
//! repository's root, short queries, the table `ids` that the fault tests fill and the checks on
//! it (no ID repeats, each session's IDs strictly increase), sessions that generate while
//! something else happens, the clock and the reservation as the server sees them,
//! `snowflake_stats()`, and several clusters started at once with their sequences' layouts.
//!
//! Constants of the ID format (the default sequence's layout and epoch, the reservation file's
//! name and text) come from the pure core, `snowflake_id_core`, never copied here.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use snowflake_id_core::layout::{preset, Field};
use snowflake_id_core::reservation;

use crate::{error_parts, wait_until, Client, Cluster, PgError};

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

/// The installed version of the extension in `client`'s database.
pub fn extension_version(client: &mut Client) -> String {
    text(
        client,
        "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'",
    )
}

/// How many worker slots live sessions hold (rows of `snowflake_workers`).
pub fn slots_in_use(client: &mut Client) -> i64 {
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
/// the calling thread once all sessions hold their slots) returns; panics on any error.
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
                    // Claim the slot before the clock work starts; meet at the barrier even on
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
