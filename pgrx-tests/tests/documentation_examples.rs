//! The documentation's SQL runs as it stands, and prints what the pages show: every `sql` block
//! of README.md and docs/*.md, in page order, in a fresh database of a cluster of its own per
//! page (the extension preloaded, the page's settings), through the cluster's own `psql`, as a
//! reader would paste it. A `text` block right after a `sql` block is the output psql prints
//! for it, compared ignoring IDs, times and alignment. A block that must not run says so on the
//! page, in the paragraph right before it (`*Not run by the tests: <reason>.*`), and a block that
//! another test runs with a setup of its own is named in [`RUN_ELSEWHERE`] with that test, which
//! must still name the block. A `sql` block that is none of these runs here, so none is skipped
//! without a word; the conventions are in docs/contributing.md, "Documentation examples".
//!
//! Why psql rather than the postgres crate: psql sends each statement on its own, in autocommit,
//! as a reader's session does (one simple-protocol call would run a whole block in one implicit
//! transaction, so a block that ends in an expected error would roll back its earlier
//! statements), and it prints results and errors in the format the pages show.

use std::collections::{BTreeMap, BTreeSet};

use snowflake_id_cluster_tests::fixtures::doc_examples::{
    markdown_pages, normalised, output_matches, parse_page, psql, shows_error, SqlBlock,
};
use snowflake_id_cluster_tests::fixtures::workspace_root;
use snowflake_id_cluster_tests::Cluster;

/// A page with `sql` blocks, and how the test sets up its database.
struct Page {
    /// The page's path in the repository.
    path: &'static str,
    /// `postgresql.conf` lines of the page's cluster, beside the preload line.
    settings: &'static [&'static str],
    /// The page's own first block runs `CREATE EXTENSION snowflake_id`; otherwise the test runs
    /// it before the page's first block.
    creates_extension: bool,
}

/// Every page that has `sql` blocks (a test below checks that none is missing).
const PAGES: &[Page] = &[
    Page {
        path: "README.md",
        settings: &[],
        creates_extension: true,
    },
    Page {
        path: "docs/clients.md",
        settings: &[],
        creates_extension: false,
    },
    Page {
        path: "docs/design.md",
        settings: &[],
        creates_extension: true,
    },
    Page {
        path: "docs/monitoring.md",
        settings: &[],
        creates_extension: false,
    },
    Page {
        path: "docs/partitioning.md",
        settings: &[],
        creates_extension: false,
    },
    Page {
        path: "docs/reference.md",
        settings: &[],
        creates_extension: false,
    },
    Page {
        // The guide gives every cluster a node id of its own.
        path: "docs/sharding.md",
        settings: &["snowflake_id.node_id = 1"],
        creates_extension: false,
    },
];

/// `sql` blocks that another test runs, as they stand on the page, with what they need (a
/// restart, pg_partman, a standby, an exporter): this test skips them.
struct RunElsewhere {
    page: &'static str,
    /// The second-level heading the blocks are under (as `fixtures::doc_section` reads it).
    section: &'static str,
    /// The first `sql` block of the section that contains this text, or every `sql` block of
    /// the section.
    block: Option<&'static str>,
    /// The test that runs it: its source must name the page, the section and this text.
    test: &'static str,
}

const RUN_ELSEWHERE: &[RunElsewhere] = &[
    RunElsewhere {
        // A restart with the node id set, between its two statements.
        page: "README.md",
        section: "Choose a layout",
        block: Some("snowflake_convert_column('orders', 'id', 'orders')"),
        test: "pgrx-tests/tests/node_id.rs",
    },
    RunElsewhere {
        // The schema `ext` of the section's database, then both exporters.
        page: "docs/monitoring.md",
        section: "Running an exporter",
        block: Some("CREATE ROLE monitor"),
        test: "pgrx-tests/tests/monitoring.rs",
    },
    // pg_partman's own table `events`, in a database without the native section's one.
    RunElsewhere {
        page: "docs/partitioning.md",
        section: "pg_partman",
        block: Some("partman.create_parent"),
        test: "pgrx-tests/tests/pg_partman.rs",
    },
    RunElsewhere {
        page: "docs/partitioning.md",
        section: "pg_partman",
        block: Some("partman.run_maintenance"),
        test: "pgrx-tests/tests/pg_partman.rs",
    },
    RunElsewhere {
        page: "docs/partitioning.md",
        section: "pg_partman",
        block: Some("generate_series(1, 30)"),
        test: "pgrx-tests/tests/pg_partman.rs",
    },
    RunElsewhere {
        page: "docs/partitioning.md",
        section: "pg_partman",
        block: Some("now() + interval '7 days'"),
        test: "pgrx-tests/tests/pg_partman.rs",
    },
    RunElsewhere {
        page: "docs/partitioning.md",
        section: "pg_partman",
        block: Some("SET retention"),
        test: "pgrx-tests/tests/pg_partman.rs",
    },
    RunElsewhere {
        // A standby, restarts without the library and crashes.
        page: "docs/reference.md",
        section: "Removing snowflake_id",
        block: None,
        test: "pgrx-tests/tests/removal.rs",
    },
];

/// The database each page runs in.
const DATABASE: &str = "docs";

/// The blocks of `page` that [`RUN_ELSEWHERE`] names (block number → the test), and every entry
/// that no longer fits: no such block, a test file that does not name the page, the section or
/// the block's text, a block that the page also marks as not run or shows output for.
fn run_elsewhere(page: &str, blocks: &[SqlBlock]) -> (BTreeMap<usize, &'static str>, Vec<String>) {
    let mut tests = BTreeMap::new();
    let mut problems = Vec::new();
    for entry in RUN_ELSEWHERE.iter().filter(|entry| entry.page == page) {
        let what = format!(
            "RUN_ELSEWHERE entry ({page}, \"{}\", {:?}, {})",
            entry.section, entry.block, entry.test
        );
        let in_section = blocks.iter().filter(|block| block.section == entry.section);
        let chosen: Vec<&SqlBlock> = match entry.block {
            Some(text) => in_section
                .filter(|block| block.sql.contains(text))
                .take(1)
                .collect(),
            None => in_section.collect(),
        };
        if chosen.is_empty() {
            problems.push(format!("{what}: no such ```sql block on the page"));
        }
        match std::fs::read_to_string(workspace_root().join(entry.test)) {
            Ok(source) => {
                let named = [Some(entry.page), Some(entry.section), entry.block];
                for missing in named
                    .into_iter()
                    .flatten()
                    .filter(|text| !source.contains(text))
                {
                    problems.push(format!("{what}: the test does not name {missing:?}"));
                }
            }
            Err(error) => problems.push(format!("{what}: {error}")),
        }
        for block in chosen {
            if let Some(reason) = &block.not_run {
                problems.push(format!(
                    "{what}: the page marks {} as not run ({reason})",
                    block.place(page)
                ));
            }
            if block.expected.is_some() {
                problems.push(format!(
                    "{what}: {} shows output that no test compares",
                    block.place(page)
                ));
            }
            tests.insert(block.number, entry.test);
        }
    }
    (tests, problems)
}

/// Runs the `sql` blocks of `path` in order in a fresh database of a new cluster with the
/// page's settings, but those the page marks as not run and those [`RUN_ELSEWHERE`] names, and
/// compares what psql prints with each `text` block; panics at the first block that fails or
/// prints something else, naming the page, the heading and the block.
fn run_page(path: &str) {
    let page = PAGES
        .iter()
        .find(|page| page.path == path)
        .unwrap_or_else(|| panic!("{path} is not in PAGES"));
    let parsed = parse_page(path);
    let (elsewhere, rot) = run_elsewhere(path, &parsed.blocks);
    let problems: Vec<String> = parsed.problems.into_iter().chain(rot).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(!parsed.blocks.is_empty(), "{path} has no ```sql block");
    let to_run: Vec<&SqlBlock> = parsed
        .blocks
        .iter()
        .filter(|block| block.not_run.is_none() && !elsewhere.contains_key(&block.number))
        .collect();
    for block in &parsed.blocks {
        if let Some(reason) = &block.not_run {
            println!("{}: not run: {reason}", block.place(path));
        } else if let Some(test) = elsewhere.get(&block.number) {
            println!("{}: run by {test}", block.place(path));
        }
    }
    if to_run.is_empty() {
        return;
    }
    let mut builder = Cluster::builder();
    for &setting in page.settings {
        builder = builder.setting(setting);
    }
    let cluster = builder.start();
    cluster
        .connect()
        .batch_execute(&format!("CREATE DATABASE {DATABASE}"))
        .unwrap();
    if !page.creates_extension {
        cluster
            .connect_to(DATABASE)
            .batch_execute("CREATE EXTENSION snowflake_id")
            .unwrap();
    }
    for block in to_run {
        let place = block.place(path);
        let printed = psql(
            &cluster,
            DATABASE,
            &block.sql,
            &format!("documentation-block-{}.sql", block.number),
        );
        let expects_error = block.expected.as_deref().is_some_and(shows_error);
        if !printed.success && !expects_error {
            panic!(
                "{place} failed:\n--- block ---\n{}\n--- psql printed ---\n{}\n{}",
                block.sql,
                printed.text,
                cluster.log_tail()
            );
        }
        match &block.expected {
            Some(expected) => {
                let (want, got) = (normalised(expected), normalised(&printed.text));
                assert!(
                    output_matches(&want, &got),
                    "{place}: psql printed something else than the ```text block after it\n\
                     --- block ---\n{}\n--- the page shows ---\n{expected}\n\
                     --- psql printed ---\n{}\n\
                     --- compared (IDs, times and spacing replaced) ---\n{}\n--- with ---\n{}",
                    block.sql,
                    printed.text,
                    want.join("\n"),
                    got.join("\n")
                );
                println!("{place}: ran, printed what the page shows");
            }
            None => println!("{place}: ran"),
        }
    }
}

#[test]
fn every_sql_block_of_the_docs_is_run_here_run_by_a_named_test_or_marked_not_run() {
    let source = std::fs::read_to_string(
        workspace_root().join("pgrx-tests/tests/documentation_examples.rs"),
    )
    .expect("read this test's source");
    let mut problems = Vec::new();
    let mut with_sql = BTreeSet::new();
    for path in markdown_pages() {
        let parsed = parse_page(&path);
        problems.extend(parsed.problems);
        if parsed.blocks.is_empty() {
            continue;
        }
        if !PAGES.iter().any(|page| page.path == path) {
            problems.push(format!("{path} has ```sql blocks but is not in PAGES"));
        }
        if !source.contains(&format!("run_page(\"{path}\")")) {
            problems.push(format!("no test here calls run_page(\"{path}\")"));
        }
        let (elsewhere, rot) = run_elsewhere(&path, &parsed.blocks);
        problems.extend(rot);
        let not_run = parsed
            .blocks
            .iter()
            .filter(|block| block.not_run.is_some())
            .count();
        let compared = parsed
            .blocks
            .iter()
            .filter(|block| block.expected.is_some())
            .count();
        println!(
            "{path}: {} ```sql blocks: {} run here ({compared} with their output compared), {} \
             run by another test, {not_run} marked not run",
            parsed.blocks.len(),
            parsed
                .blocks
                .len()
                .saturating_sub(elsewhere.len() + not_run),
            elsewhere.len()
        );
        with_sql.insert(path);
    }
    for page in PAGES {
        if !with_sql.contains(page.path) {
            problems.push(format!("{} is in PAGES but has no ```sql block", page.path));
        }
    }
    for entry in RUN_ELSEWHERE {
        if !with_sql.contains(entry.page) {
            problems.push(format!(
                "RUN_ELSEWHERE names {}, which has no ```sql block",
                entry.page
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn readme_sql_runs_in_order_and_prints_what_it_shows() {
    run_page("README.md");
}

#[test]
fn client_guide_sql_runs_in_order_and_prints_what_it_shows() {
    run_page("docs/clients.md");
}

#[test]
fn design_sql_runs_in_order_and_prints_what_it_shows() {
    run_page("docs/design.md");
}

#[test]
fn monitoring_guide_sql_runs_in_order_and_prints_what_it_shows() {
    run_page("docs/monitoring.md");
}

#[test]
fn partitioning_guide_sql_runs_in_order_and_prints_what_it_shows() {
    run_page("docs/partitioning.md");
}

#[test]
fn reference_sql_runs_in_order_and_prints_what_it_shows() {
    run_page("docs/reference.md");
}

#[test]
fn sharding_guide_sql_runs_in_order_and_prints_what_it_shows() {
    run_page("docs/sharding.md");
}
