//! No session waits on the reservation's fsync (docs/design.md §5.1, "Extending"). The
//! reservation is renewed ahead of need by one backend under a conditional lock, while the
//! others go on under the current one; a backend waits only when less than half a window is left,
//! which steady load never reaches.
//!
//! The server runs on a deliberately slow disk of known speed: its data directory is on the
//! memory file system, where a real fsync costs nothing, and every fsync() and fdatasync() of its
//! processes sleeps 20 ms first (`fixtures/slow_fsync.c`, LD_PRELOAD), with `fsync = on`. (On the
//! machine's own disk, one stall of a few hundred ms, as CI once met, is a wait the design allows:
//! `reserve_ahead` must stay well above a renewal's time.) Four sessions
//! generate while another samples `pg_stat_activity` as fast as it can. With the default
//! `snowflake_id.reserve_ahead` (1 s) no sample may show a backend waiting on the extension's LWLock
//! (wait event `LWLock` / `snowflake_id`). A control phase shows the sampler would see such waits:
//! with `reserve_ahead = 40ms` a renewal (three slow fsyncs) outlasts the three eighths between
//! the two marks, so sessions must wait, and samples must show it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::{
    assert_table_consistent, check_runs, command_output, count, generate_while, stats, text,
    workspace_root, IDS_TABLE,
};
use snowflake_id_cluster_tests::{wait_until, within_tries, Cluster};

const FSYNC_DELAY_US: &str = "20000";
const SAMPLING: Duration = Duration::from_secs(6);
const SAMPLING_CAP: Duration = Duration::from_secs(60);

/// Builds `fixtures/slow_fsync.c` into a shared library the server user can load.
fn slow_fsync_library() -> PathBuf {
    let library =
        std::env::temp_dir().join(format!("snowflake-slow-fsync-{}.so", std::process::id()));
    let source = workspace_root().join("pgrx-tests/fixtures/slow_fsync.c");
    command_output(
        "cc",
        &[
            "-shared",
            "-fPIC",
            "-O2",
            "-o",
            library.to_str().unwrap(),
            source.to_str().unwrap(),
            "-ldl",
        ],
    )
    .unwrap_or_else(|failure| panic!("{failure}"));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o755)).unwrap();
    library
}

/// What the sampler saw: samples taken, and samples in which some backend waited on the
/// extension's LWLock.
struct Waits {
    samples: usize,
    waiting: usize,
}

/// Samples `pg_stat_activity` for `SAMPLING`, as fast as one session can.
fn sample_waits(cluster: &Cluster) -> Waits {
    let mut client = cluster.connect();
    let statement = client
        .prepare(
            "SELECT count(*) FROM pg_stat_activity
             WHERE wait_event_type = 'LWLock' AND wait_event = 'snowflake_id'",
        )
        .unwrap();
    let mut waits = Waits {
        samples: 0,
        waiting: 0,
    };
    // At least SAMPLING long and 1,000 samples, however slow the machine (within a bound).
    let started = Instant::now();
    while started.elapsed() < SAMPLING || (waits.samples < 1000 && started.elapsed() < SAMPLING_CAP)
    {
        let waiting: i64 = client.query_one(&statement, &[]).unwrap().get(0);
        waits.samples += 1;
        if waiting > 0 {
            waits.waiting += 1;
        }
    }
    waits
}

/// Generates with four sessions while sampling; returns (batches, median and max batch latency,
/// reservation writes, what the sampler saw).
fn generate_and_sample(cluster: &Cluster) -> (usize, Duration, Duration, i64, Waits) {
    let writes_before = stats(&mut cluster.connect()).reservation_writes;
    let (runs, waits) = generate_while(cluster, 4, 50, || sample_waits(cluster));
    let (batches, median, max) = check_runs(&runs);
    let writes = stats(&mut cluster.connect()).reservation_writes - writes_before;
    (batches, median, max, writes, waits)
}

#[test]
fn no_session_waits_on_the_reservation_with_a_slow_fsync() {
    let library = slow_fsync_library();
    let cluster = Cluster::builder()
        .in_memory()
        .server_env("LD_PRELOAD", library.to_str().unwrap())
        .server_env("SLOW_FSYNC_US", FSYNC_DELAY_US)
        .setting("fsync = on")
        .setting("synchronous_commit = off")
        .start();
    let mut client = cluster.connect();
    client.batch_execute(IDS_TABLE).unwrap();

    // Whether the reservation worker renews in time depends on it getting the CPU: on a
    // machine so busy that it does not for 375 ms, sessions wait, as they must. So a try with
    // waits is repeated (each reported); a renewal that is late every time still fails.
    let test = "reserve_ahead 1s, fsync +20 ms, 4 sessions";
    within_tries(test, 3, || {
        let (batches, median, max, writes, waits) = generate_and_sample(&cluster);
        println!(
            "reserve_ahead 1s, fsync +{FSYNC_DELAY_US} µs: {batches} batches of 50 IDs, latency \
             median {median:?}, max {max:?}; {writes} reservation writes; {} of {} samples with \
             a session waiting on the reservation lock",
            waits.waiting, waits.samples
        );
        assert!(waits.samples >= 1000, "only {} samples", waits.samples);
        if writes >= 4 && waits.waiting == 0 {
            return Ok(());
        }
        // The next try's sessions number their rows from 1 again.
        assert_table_consistent(&mut client);
        client.batch_execute("TRUNCATE ids").unwrap();
        Err(format!(
            "{writes} reservation writes (at least 4 wanted), {} samples with a session \
             waiting on the reservation lock under steady load (none wanted)",
            waits.waiting
        ))
    });

    let first = assert_table_consistent(&mut client);
    // The control phase's sessions number their rows from 1 again: a table of their own.
    client
        .batch_execute(
            "ALTER TABLE ids RENAME TO ids_first;
             CREATE TABLE ids (LIKE ids_first INCLUDING ALL);",
        )
        .unwrap();

    // Control: a window so short that a renewal outlasts the three eighths between the marks.
    // (Two statements: ALTER SYSTEM cannot run in the implicit block of a multi-statement query.)
    client
        .batch_execute("ALTER SYSTEM SET snowflake_id.reserve_ahead = '40ms'")
        .unwrap();
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    let reloaded = wait_until(Duration::from_secs(60), || {
        text(&mut cluster.connect(), "SHOW snowflake_id.reserve_ahead") == "40ms"
    });
    assert!(reloaded, "the server did not take reserve_ahead = 40ms");
    // The worker takes it at its next wake, a sixteenth of the old window later.
    std::thread::sleep(Duration::from_millis(200));
    let (batches, median, max, writes, waits) = generate_and_sample(&cluster);
    println!(
        "control, reserve_ahead 40ms: {batches} batches, latency median {median:?}, max {max:?}; \
         {writes} reservation writes; {} of {} samples with a session waiting on the lock",
        waits.waiting, waits.samples
    );
    assert!(
        waits.waiting > 0,
        "the sampler saw no wait even where sessions must wait: it could not see one at all"
    );
    let second = assert_table_consistent(&mut client);
    let shared = count(
        &mut client,
        "SELECT count(*) FROM ids JOIN ids_first USING (id)",
    );
    assert_eq!(shared, 0, "IDs issued in both phases");
    println!("{first} + {second} IDs, none twice");
    std::fs::remove_file(&library).unwrap();
}
