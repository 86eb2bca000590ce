//! Every message a session can get from the extension, reviewable as text (issue 65): psql runs
//! `pgrx-tests/messages/messages.sql` (one statement per case of the reference's error table
//! a session can reach) echoing each statement, with every error's SQLSTATE, DETAIL and HINT
//! (`VERBOSITY verbose`, its source `LOCATION:` lines left out), and the output must equal
//! `pgrx-tests/messages/messages.out` line for line, times and IDs aside. A changed message or
//! hint fails here until the expected file is changed with it, so each shows in the diff. The
//! script reaches every SQLSTATE of the reference's error table but three a session on a sound
//! server cannot (each shown by the test named beside it).
//! `SNOWFLAKE_ID_BLESS=1` writes the output to the expected file instead (then read the diff).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use snowflake_id_cluster_tests::fixtures::doc_examples::{
    replace_ids, replace_times, without_psql_prefix,
};
use snowflake_id_cluster_tests::fixtures::reference_error_tables;
use snowflake_id_cluster_tests::Cluster;

/// The SQLSTATEs of the reference's error table that no statement of a session on a sound
/// server reaches, and where each is shown instead.
const NOT_REACHED_BY_A_SESSION: [(&str, &str); 3] = [
    (
        "42P07",
        "an update from 0.4.0 or earlier over a taken name (floor_belongs_to_the_extension.rs)",
    ),
    (
        "58030",
        "a reservation file that cannot be written (reservation_file.rs breaks the data directory)",
    ),
    (
        "XX000",
        "an internal error: no statement is meant to reach it",
    ),
];

/// The SQLSTATEs of the messages (`ERROR:  22023: …`, `WARNING:  01000: …`) in `output`.
fn sqlstates_in(output: &str) -> BTreeSet<String> {
    output
        .lines()
        .filter_map(|line| {
            let rest = line
                .strip_prefix("ERROR:  ")
                .or_else(|| line.strip_prefix("WARNING:  "))?;
            let (code, _) = rest.split_once(": ")?;
            (code.len() == 5).then(|| code.to_owned())
        })
        .collect()
}

fn messages_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("messages")
}

/// psql's output of `script`, standard error merged into standard output in order as
/// pg_regress runs it, as the comparison sees it: without the `LOCATION:` lines (Rust source
/// lines, which move with every edit), each time `<time>` and each ID `<id>`.
fn run_script(cluster: &Cluster, script: &PathBuf) -> String {
    let output_file = cluster.socket_dir().join("messages.raw");
    let output = std::fs::File::create(&output_file).unwrap();
    let status = Command::new(cluster.program("psql"))
        .args(["--no-psqlrc", "--echo-all", "--quiet"])
        .args(["--set", "VERBOSITY=verbose", "--set", "SHOW_CONTEXT=never"])
        .arg("--host")
        .arg(cluster.socket_dir())
        .args(["--port", &cluster.port().to_string()])
        .args(["--username", "postgres", "--dbname", "postgres"])
        .arg("--file")
        .arg(script)
        .env("PGTZ", "UTC")
        .env("PGDATESTYLE", "ISO, YMD")
        .stdout(Stdio::from(output.try_clone().unwrap()))
        .stderr(Stdio::from(output))
        .status()
        .expect("run psql");
    assert!(status.success(), "psql failed: {status}");
    let raw = std::fs::read_to_string(&output_file).unwrap();
    raw.lines()
        .filter(|line| !line.starts_with("LOCATION:"))
        .map(|line| replace_ids(&replace_times(without_psql_prefix(line))) + "\n")
        .collect()
}

#[test]
fn every_message_a_session_can_get_matches_the_golden_file() {
    let cluster = Cluster::builder().start();
    let actual = run_script(&cluster, &messages_dir().join("messages.sql"));
    let expected_path = messages_dir().join("messages.out");
    if std::env::var_os("SNOWFLAKE_ID_BLESS").is_some() {
        std::fs::write(&expected_path, &actual).unwrap();
        println!("wrote {}", expected_path.display());
        return;
    }
    let (own, _raised_by_postgres) = reference_error_tables();
    let mut shown = sqlstates_in(&actual);
    shown.extend(NOT_REACHED_BY_A_SESSION.map(|(code, _)| code.to_owned()));
    assert_eq!(
        shown, own,
        "the script's messages (with {NOT_REACHED_BY_A_SESSION:?}) are not the reference's error table"
    );
    let expected = std::fs::read_to_string(&expected_path)
        .unwrap_or_else(|error| panic!("{}: {error}", expected_path.display()));
    let errors = actual.matches("\nERROR:  ").count();
    assert!(
        errors >= 40,
        "only {errors} errors in the output:\n{actual}"
    );
    let differing: Vec<String> = expected
        .lines()
        .zip(actual.lines())
        .enumerate()
        .filter(|(_, (want, got))| want != got)
        .map(|(at, (want, got))| format!("line {}:\n- {want}\n+ {got}", at + 1))
        .collect();
    assert!(
        differing.is_empty() && expected.lines().count() == actual.lines().count(),
        "the messages differ from {} ({} lines expected, {} got; first differences below; \
         run with SNOWFLAKE_ID_BLESS=1 to write the new output, then review its diff):\n{}",
        expected_path.display(),
        expected.lines().count(),
        actual.lines().count(),
        differing
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
