//! The callgrind cost script (`bench/costs.py`, docs/benchmarks.md "Instructions, counted") runs
//! on the major under test: with `--quick` it starts its own throwaway cluster, counts a new
//! backend's first ID, DDL with and without the extension, statements under the hooks with and
//! without the library, and the cost per ID, and prints its table: the header naming the
//! PostgreSQL and extension versions, every row, and numbers in every cell that holds one.
//! Nothing here asserts a figure: benchmarks never fail on a cost.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use snowflake_id_cluster_tests::fixtures::workspace_root;
use snowflake_id_cluster_tests::{pg_config, pg_major, postgres_bin_dir};

/// A scratch directory removed when the test ends, passed or not.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The number of a cell: "563.6k" (thousands), "1,581.4k", "389.4", "1.78×", or the number after
/// the last ": " of "nextval() CACHE 1: 316.3k".
fn number(cell: &str) -> f64 {
    let figure = cell.rsplit(": ").next().unwrap();
    let digits = figure.trim_end_matches(['k', '×']).replace(',', "");
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number in the cell {cell:?}"))
}

/// The rows the table must have on this major: every first ID in both databases, both DDL
/// pairs, every per-ID function and the loop (uuidv7() from 18 on, pgEdge's where installed).
fn expected_labels(major: u32, pgedge: bool) -> Vec<String> {
    let optional = |name: &'static str, present: bool| present.then_some(name);
    let first_ids: Vec<&str> = [
        Some("snowflake_nextval()"),
        Some("snowflake_nextval('wide')"),
        Some("nextval() CACHE 1"),
        optional("pgEdge snowflake.nextval()", pgedge),
        Some("gen_random_uuid()"),
        optional("uuidv7()", major >= 18),
    ]
    .into_iter()
    .flatten()
    .collect();
    let per_id: Vec<&str> = [
        Some("snowflake_nextval()"),
        Some("snowflake_nextval('wide')"),
        Some("random()"),
        Some("nextval() CACHE 1"),
        optional("pgEdge snowflake.nextval()", pgedge),
        optional("uuidv7()", major >= 18),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut labels = Vec::new();
    for tables in [0, 500] {
        labels.extend(
            first_ids
                .iter()
                .map(|f| format!("first ID, {tables} keyed tables: {f}")),
        );
    }
    labels.push("DDL per pair: ALTER TABLE ADD COLUMN + DROP COLUMN".into());
    labels.push("DDL per pair: CREATE INDEX + DROP INDEX".into());
    labels.push("per statement: single-row UPDATE (ExecutorStart hook)".into());
    labels.push("per statement: CREATE TABLE (ProcessUtility hook)".into());
    labels.extend(per_id.iter().map(|f| format!("per ID above the loop: {f}")));
    labels.push("per ID: count(*) only (the loop)".into());
    labels
}

#[test]
fn the_quick_cost_script_prints_a_row_of_numbers_for_every_figure() {
    let valgrind = Command::new("valgrind").arg("--version").output();
    assert!(
        valgrind.is_ok_and(|output| output.status.success()),
        "bench/costs.py needs valgrind: apt-get install valgrind (bash bench/run.sh costs installs it)"
    );
    let major = pg_major();
    let pgedge = pg_config("--sharedir")
        .join("extension/snowflake.control")
        .exists();
    let scratch =
        Scratch(std::env::temp_dir().join(format!("snowflake-costs-{}", std::process::id())));
    let results = scratch.0.join("results");
    let output = Command::new("python3")
        .arg(workspace_root().join("bench/costs.py"))
        .arg("--bindir")
        .arg(postgres_bin_dir())
        .arg("--dir")
        .arg(scratch.0.join("cluster"))
        .arg("--results")
        .arg(&results)
        .arg("--quick")
        .output()
        .expect("run python3 bench/costs.py");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}{stderr}");
    assert!(
        output.status.success(),
        "python3 bench/costs.py --quick: {}\n{stdout}\n{stderr}",
        output.status
    );

    let header = stdout
        .lines()
        .find(|line| line.starts_with("# Callgrind costs: PostgreSQL "))
        .expect("the table's header line");
    assert!(
        header.starts_with(&format!("# Callgrind costs: PostgreSQL {major}.")),
        "{header}"
    );
    assert!(header.contains(", snowflake_id "), "{header}");
    assert!(
        stdout.contains("\n| figure | instructions | against | ratio | target | met |\n"),
        "no header row:\n{stdout}"
    );
    let rows: HashMap<&str, Vec<&str>> = stdout
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| figure "))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            (cells[0], cells[1..].to_vec())
        })
        .collect();
    let labels = expected_labels(major, pgedge);
    assert_eq!(rows.len(), labels.len(), "rows:\n{stdout}");
    for label in &labels {
        let cells = rows
            .get(label.as_str())
            .unwrap_or_else(|| panic!("no row {label:?}:\n{stdout}"));
        let [value, against, ratio, target, met] = cells.as_slice() else {
            panic!("row {label:?} has {} cells, not 6", cells.len() + 1);
        };
        assert!(number(value).is_finite(), "{label}: {value}");
        if !label.starts_with("per ID: ") {
            assert!(number(against) > 0.0, "{label}: {against}");
            assert!(number(ratio).is_finite(), "{label}: {ratio}");
        }
        assert!(
            (*target == "–") == (*met == "–") && ["yes", "no", "–"].contains(met),
            "{label}: target {target}, met {met}"
        );
    }
    // The report it wrote is the table it printed.
    let written = std::fs::read_to_string(results.join("costs.md")).expect("costs.md");
    assert!(stdout.contains(&written), "costs.md is not what it printed");
    assert!(results.join("costs.json").exists());
}
