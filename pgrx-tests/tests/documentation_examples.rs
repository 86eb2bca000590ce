//! The documentation's SQL runs as it stands, and prints what the pages show: every `sql` block
//! of README.md and docs/*.md, in page order, in a fresh database of a cluster of its own per
//! page (the extension preloaded, the page's settings), through the cluster's own `psql`, as a
//! reader would paste it (a block the page marks as not run names the test that runs it, which
//! must hold a line of it); and as one sitting, README.md then the reference or one guide, every
//! block in the order a reader meets them, in one database (so names cannot collide across
//! pages, and a block that needs something shows it first). Where a page's `sh` block restarts
//! the server (`pg_ctl restart`), the test restarts it before the next `sql` block. A `text` block right after a `sql` block is the output psql prints
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

/// The tests a not-run marker names (`<name>.rs`, `citus/<name>.rs`, or `citus/` for the Citus
/// tests; `fixtures/<name>.rs` for the setup they share), as paths in the repository.
fn tests_named_in(reason: &str) -> Vec<String> {
    reason
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '/'))
        .map(|word| word.trim_end_matches('.'))
        .filter(|word| word.ends_with(".rs") || *word == "citus/")
        .map(|word| match word.starts_with("fixtures/") {
            true => format!("pgrx-tests/src/{word}"),
            false => format!("pgrx-tests/tests/{word}"),
        })
        .collect()
}

/// The source of a test file, or of every file of a test directory.
fn test_source(path: &str) -> std::io::Result<String> {
    let full = workspace_root().join(path);
    if !full.is_dir() {
        return std::fs::read_to_string(full);
    }
    let mut source = String::new();
    for entry in std::fs::read_dir(full)? {
        source.push_str(&std::fs::read_to_string(entry?.path())?);
    }
    Ok(source)
}

/// The statements of a block that tell it apart: its lines without comments, trimmed (also of
/// a final `;`), of at least 24 characters.
fn telling_lines(sql: &str) -> Vec<String> {
    sql.lines()
        .map(|line| {
            let code = line.split("--").next().unwrap_or_default().trim();
            code.trim_end_matches(';').trim_end().to_owned()
        })
        .filter(|line| line.len() >= 24)
        .collect()
}

/// Whether a test's source holds `line` of a page's block: as it stands, or as the SQL of a
/// `format!` line whose `{…}` arguments stand for the page's values (`shard{shard}` for
/// `shard0`).
fn source_holds(source: &str, line: &str) -> bool {
    source.contains(line)
        || source
            .lines()
            .any(|test_line| template_holds(test_line, line))
}

/// Whether a test's source reads the blocks of `section` of `page` (`doc_sql_block` and the
/// like, with both named).
fn reads_section(source: &str, page: &str, section: &str) -> bool {
    source.contains("doc_sql_block")
        && source.contains(&format!("\"{page}\""))
        && source.contains(&format!("\"{section}\""))
}

/// Whether the SQL of `test_line` (after its first `"`, before its last) has `{…}` arguments
/// and its literal pieces between them, in order, make up `line`.
fn template_holds(test_line: &str, line: &str) -> bool {
    let sql = test_line.trim();
    let sql = sql.split_once('"').map_or(sql, |(_, rest)| rest);
    let sql = sql.rsplit_once('"').map_or(sql, |(start, _)| start);
    let sql = sql.trim().trim_end_matches(';').trim_end();
    if !sql.contains('{') {
        return false;
    }
    let mut pieces = Vec::new();
    let mut rest = sql;
    while let Some((piece, after)) = rest.split_once('{') {
        pieces.push(piece);
        rest = after.split_once('}').map_or("", |(_, tail)| tail);
    }
    pieces.push(rest);
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !line.starts_with(first) || !line.ends_with(last) || line.len() < first.len() + last.len() {
        return false;
    }
    let mut middle = &line[first.len()..line.len() - last.len()];
    pieces[1..pieces.len() - 1]
        .iter()
        .all(|piece| match middle.find(piece) {
            Some(at) => {
                middle = &middle[at + piece.len()..];
                true
            }
            None => false,
        })
}

/// Where a block the page marks as not run is run instead: the marker names a test, and that
/// test holds one of the block's telling lines as it stands, or reads the page's blocks of its
/// section (`doc_sql_block`, naming the page and the section).
fn not_run_problems(page: &str, block: &SqlBlock) -> Vec<String> {
    let Some(reason) = &block.not_run else {
        return Vec::new();
    };
    let place = block.place(page);
    let tests = tests_named_in(reason);
    if tests.is_empty() {
        return vec![format!(
            "{place}: its not-run marker names no test that runs it (`<name>.rs` or `citus/`)"
        )];
    }
    let lines = telling_lines(&block.sql);
    for test in &tests {
        match test_source(test) {
            Ok(source)
                if lines.iter().any(|line| source_holds(&source, line))
                    || reads_section(&source, page, &block.section) =>
            {
                return Vec::new()
            }
            Ok(_) => {}
            Err(error) => return vec![format!("{place}: {test}: {error}")],
        }
    }
    vec![format!(
        "{place}: none of {tests:?}, which its marker names, holds a line of it: {lines:?}"
    )]
}

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

/// The page `path` of [`PAGES`].
fn page(path: &str) -> &'static Page {
    PAGES
        .iter()
        .find(|page| page.path == path)
        .unwrap_or_else(|| panic!("{path} is not in PAGES"))
}

/// The `sql` blocks of `path` that run here (not those the page marks as not run, nor those
/// [`RUN_ELSEWHERE`] names), after checking the page's conventions, and whether the page ends
/// by restarting the server; prints what is skipped and why.
fn blocks_to_run(path: &str) -> (Vec<SqlBlock>, bool) {
    let parsed = parse_page(path);
    let (elsewhere, rot) = run_elsewhere(path, &parsed.blocks);
    let problems: Vec<String> = parsed.problems.into_iter().chain(rot).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(!parsed.blocks.is_empty(), "{path} has no ```sql block");
    for block in &parsed.blocks {
        if let Some(reason) = &block.not_run {
            println!("{}: not run: {reason}", block.place(path));
        } else if let Some(test) = elsewhere.get(&block.number) {
            println!("{}: run by {test}", block.place(path));
        }
    }
    let to_run = parsed
        .blocks
        .into_iter()
        .filter(|block| block.not_run.is_none() && !elsewhere.contains_key(&block.number))
        .collect();
    (to_run, parsed.restart_at_end)
}

/// A new cluster with `settings` and the database [`DATABASE`] in it.
fn cluster_with_database(settings: &[&str]) -> Cluster {
    let mut builder = Cluster::builder();
    for &setting in settings {
        builder = builder.setting(setting);
    }
    let cluster = builder.start();
    cluster
        .connect()
        .batch_execute(&format!("CREATE DATABASE {DATABASE}"))
        .unwrap();
    cluster
}

/// Runs `blocks` of `path` in order in [`DATABASE`] through psql, restarting the server where
/// the page tells the reader to (also after the last block, when `restart_at_end`), and
/// compares what psql prints with each `text` block; panics at the first block that fails or
/// prints something else, naming the page, the heading and the block.
fn run_blocks(cluster: &mut Cluster, path: &str, (blocks, restart_at_end): &(Vec<SqlBlock>, bool)) {
    for block in blocks {
        let place = block.place(path);
        if block.restart_before {
            cluster.stop("fast");
            cluster.start();
            println!("{place}: the server restarted first, as the page says");
        }
        let printed = psql(
            cluster,
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
    if *restart_at_end {
        cluster.stop("fast");
        cluster.start();
        println!("{path}: the server restarted after the last block, as the page says");
    }
}

/// Runs the `sql` blocks of `path` in order in a fresh database of a new cluster with the
/// page's settings (but those not run here).
fn run_page(path: &str) {
    let page = page(path);
    let to_run = blocks_to_run(path);
    if to_run.0.is_empty() {
        return;
    }
    let mut cluster = cluster_with_database(page.settings);
    if !page.creates_extension {
        cluster
            .connect_to(DATABASE)
            .batch_execute("CREATE EXTENSION snowflake_id")
            .unwrap();
    }
    run_blocks(&mut cluster, path, &to_run);
}

/// The pages a reader goes through in one sitting, in this order (the README links them so).
const ONE_SITTING: [&str; 6] = [
    "README.md",
    "docs/reference.md",
    "docs/partitioning.md",
    "docs/monitoring.md",
    "docs/clients.md",
    "docs/sharding.md",
];

/// A reader's sitting: the `sql` blocks of [`ONE_SITTING`]'s pages, in the order the reader
/// meets them, in one database of one cluster that has only the preload line (every other
/// setting and restart is the pages' own, as the reader makes them). Nothing here creates a
/// table, a sequence or the extension: what a block needs, a block before it shows, and no page
/// creates a name another already made.
fn walk(pages: &[&str]) {
    for then in &pages[1..] {
        assert!(
            !page(then).creates_extension,
            "{then} creates the extension, which {} already created",
            pages[0]
        );
    }
    let mut cluster = cluster_with_database(&[]);
    for path in pages {
        let to_run = blocks_to_run(path);
        println!("-- {path}: {} blocks", to_run.0.len());
        run_blocks(&mut cluster, path, &to_run);
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
        for block in &parsed.blocks {
            problems.extend(not_run_problems(&path, block));
        }
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
fn a_reader_of_the_readme_the_reference_and_the_guides_runs_every_block_in_one_database() {
    walk(&ONE_SITTING);
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
