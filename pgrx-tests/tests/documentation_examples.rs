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
use std::process::Command;

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

/// How a page marks a block that is not run: the paragraph right before the block starts with
/// this and ends with `*`; the rest is the reason.
const NOT_RUN: &str = "*Not run by the tests: ";

/// A line of expected output that stands for any number of printed lines.
const ELISION: &str = "...";

/// A run of at least this many digits is an ID (today's IDs of the classic, sharded and pgedge
/// layouts have 18 or 19; a day's width of the default sequence, 362387865600000, has 15).
const ID_DIGITS: usize = 16;

/// The database each page runs in.
const DATABASE: &str = "docs";

/// One `sql` block of a page, with what the page says around it.
#[derive(Debug)]
struct SqlBlock {
    /// Its number among the page's `sql` blocks, from 1.
    number: usize,
    /// The line of its opening fence.
    line: usize,
    /// The second-level heading it is under ("" before the first).
    section: String,
    /// The nearest heading above it, of any level.
    heading: String,
    /// Its text, a list item's indentation removed.
    sql: String,
    /// The reason the page gives for not running it.
    not_run: Option<String>,
    /// The `text` block right after it: what psql prints for it.
    expected: Option<String>,
}

impl SqlBlock {
    /// Where it is, for messages.
    fn place(&self, page: &str) -> String {
        format!(
            "{page}, ```sql block {} (line {}, under \"{}\")",
            self.number, self.line, self.heading
        )
    }
}

/// A page's `sql` blocks, and where it breaks the conventions.
struct ParsedPage {
    blocks: Vec<SqlBlock>,
    problems: Vec<String>,
}

/// A fenced block being read.
struct Fence {
    language: String,
    indent: usize,
    line: usize,
    lines: Vec<String>,
    not_run: Option<String>,
    /// The index of the `sql` block whose output this `text` block is.
    output_of: Option<usize>,
}

fn parse_page(page: &str) -> ParsedPage {
    let text = std::fs::read_to_string(workspace_root().join(page))
        .unwrap_or_else(|error| panic!("{page}: {error}"));
    parse_markdown(page, &text)
}

/// The `sql` blocks of the Markdown `text` of `page`, in order, each with its marker and its
/// expected output; and every break of the conventions: a marker that is not right before a
/// `sql` block, a block right after a `sql` block that is not its `text` output, output after
/// a block that is not run.
fn parse_markdown(page: &str, text: &str) -> ParsedPage {
    let mut blocks: Vec<SqlBlock> = Vec::new();
    let mut problems = Vec::new();
    let mut section = String::new();
    let mut heading = String::new();
    // The paragraph being read, and the one before it while only blank lines followed it.
    let mut paragraph: Vec<String> = Vec::new();
    let mut previous_paragraph: Vec<String> = Vec::new();
    // The `sql` block that only blank lines have followed so far.
    let mut after_sql: Option<usize> = None;
    let mut fence: Option<Fence> = None;
    let mut markers_seen = 0;
    let mut markers_used = 0;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim();
        if fence.is_some() {
            if trimmed == "```" {
                let closed = fence.take().expect("a fenced block is open");
                let body = closed.lines.join("\n");
                if closed.language == "sql" {
                    blocks.push(SqlBlock {
                        number: blocks.len() + 1,
                        line: closed.line,
                        section: section.clone(),
                        heading: heading.clone(),
                        sql: body,
                        not_run: closed.not_run,
                        expected: None,
                    });
                    after_sql = Some(blocks.len() - 1);
                } else {
                    if let Some(owner) = closed.output_of {
                        blocks[owner].expected = Some(body);
                    }
                    after_sql = None;
                }
                paragraph.clear();
                previous_paragraph.clear();
            } else if let Some(open) = fence.as_mut() {
                open.lines.push(unindent(line, open.indent));
            }
            continue;
        }
        if let Some(language) = trimmed.strip_prefix("```") {
            let language = language.trim().to_owned();
            let before = if paragraph.is_empty() {
                &previous_paragraph
            } else {
                &paragraph
            };
            let before = before.join(" ");
            let not_run = before
                .strip_prefix(NOT_RUN)
                .and_then(|rest| rest.strip_suffix('*'))
                .map(|reason| reason.trim().to_owned());
            let mut output_of = None;
            if let Some(owner) = after_sql {
                if language == "text" {
                    output_of = Some(owner);
                    if let Some(reason) = &blocks[owner].not_run {
                        problems.push(format!(
                            "{}: output after a block that is not run ({reason})",
                            blocks[owner].place(page)
                        ));
                    }
                } else if language != "sql" {
                    problems.push(format!(
                        "{}: the ```{language} block right after it (line {number}) is no \
                         expected output: write the output as a ```text block, or introduce it \
                         with a sentence",
                        blocks[owner].place(page)
                    ));
                }
            }
            if let Some(reason) = &not_run {
                markers_used += 1;
                if language != "sql" {
                    problems.push(format!(
                        "{page}, line {number}: a not-run marker before a ```{language} block"
                    ));
                } else if reason.is_empty() {
                    problems.push(format!(
                        "{page}, line {number}: a not-run marker gives no reason"
                    ));
                }
            }
            after_sql = None;
            fence = Some(Fence {
                language,
                indent: line.len() - line.trim_start().len(),
                line: number,
                lines: Vec::new(),
                not_run,
                output_of,
            });
            continue;
        }
        if trimmed.is_empty() {
            if !paragraph.is_empty() {
                previous_paragraph = std::mem::take(&mut paragraph);
            }
            continue;
        }
        after_sql = None;
        previous_paragraph.clear();
        if trimmed.starts_with('#') {
            heading = trimmed.trim_start_matches('#').trim().to_owned();
            if let Some(title) = trimmed.strip_prefix("## ") {
                section = title.trim().to_owned();
            }
            paragraph.clear();
            continue;
        }
        if trimmed.starts_with(NOT_RUN.trim_end()) {
            markers_seen += 1;
        }
        paragraph.push(trimmed.to_owned());
    }
    if fence.is_some() {
        problems.push(format!("{page}: a fenced block is not closed"));
    }
    if markers_seen != markers_used {
        problems.push(format!(
            "{page}: {markers_seen} paragraphs start with \"{}\" but {markers_used} are right \
             before a fenced block and end with '*'",
            NOT_RUN.trim_end()
        ));
    }
    ParsedPage { blocks, problems }
}

/// `line` of a fenced block whose fence is indented by `indent` (a list item's), without that
/// indentation.
fn unindent(line: &str, indent: usize) -> String {
    match line.get(..indent) {
        Some(prefix) if prefix.trim().is_empty() => line[indent..].to_owned(),
        _ => line.trim_start().to_owned(),
    }
}

/// README.md and every docs/*.md.
fn markdown_pages() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(workspace_root().join("docs"))
        .expect("read docs/")
        .map(|entry| {
            entry
                .expect("an entry of docs/")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    let mut pages = vec!["README.md".to_owned()];
    pages.extend(docs);
    pages
}

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

/// What psql printed for a block: whether it succeeded, and its standard output followed by its
/// standard error (messages, without psql's `psql:<file>:<line>: ` prefix).
struct Printed {
    success: bool,
    text: String,
}

/// Runs `sql` with the cluster's psql in `database`: statements one at a time in autocommit,
/// stopping at the first error, results without row-count footers, notices left out
/// (`client_min_messages = warning`), errors without their context lines.
fn psql(cluster: &Cluster, database: &str, sql: &str, file_name: &str) -> Printed {
    let file = cluster.socket_dir().join(file_name);
    std::fs::write(&file, sql).unwrap_or_else(|error| panic!("write {}: {error}", file.display()));
    let output = Command::new(cluster.program("psql"))
        .args(["--no-psqlrc", "--quiet"])
        .args(["--set", "ON_ERROR_STOP=1", "--set", "SHOW_CONTEXT=never"])
        .args(["--pset", "footer=off"])
        .arg("--host")
        .arg(cluster.socket_dir())
        .args(["--port", &cluster.port().to_string()])
        .args(["--username", "postgres", "--dbname", database])
        .arg("--file")
        .arg(file)
        .env("PGOPTIONS", "-c client_min_messages=warning")
        .output()
        .unwrap_or_else(|error| panic!("run psql: {error}"));
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    for line in String::from_utf8_lossy(&output.stderr).lines() {
        text.push('\n');
        text.push_str(without_psql_prefix(line));
    }
    Printed {
        success: output.status.success(),
        text,
    }
}

/// A line psql wrote to standard error, without the `psql:<file>:<line>: ` it puts before a
/// message of the server.
fn without_psql_prefix(line: &str) -> &str {
    line.strip_prefix("psql:")
        .and_then(|rest| rest.split_once(": "))
        .map_or(line, |(_, message)| message)
}

/// `text` as the comparison sees it, line by line: every timestamp (a date and a time of day,
/// with or without fraction and UTC offset) becomes `<time>` and every run of [`ID_DIGITS`] or
/// more digits `<id>`; runs of spaces and runs of `-` become one (so alignment and the length of
/// a header's rule do not matter); lines are trimmed, and blank lines left out.
fn normalised(text: &str) -> Vec<String> {
    text.lines()
        .map(normalised_line)
        .filter(|line| !line.is_empty())
        .collect()
}

fn normalised_line(line: &str) -> String {
    let replaced = replace_ids(&replace_times(line));
    let mut out = String::new();
    let mut previous = None;
    for c in replaced.trim().chars() {
        let c = if c.is_whitespace() { ' ' } else { c };
        if (c == ' ' || c == '-') && previous == Some(c) {
            continue;
        }
        out.push(c);
        previous = Some(c);
    }
    out
}

fn replace_times(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        let starts_number = at == 0 || !bytes[at - 1].is_ascii_digit();
        match timestamp_length(&bytes[at..]) {
            Some(length) if starts_number => {
                out.push_str(&line[copied..at]);
                out.push_str("<time>");
                at += length;
                copied = at;
            }
            _ => at += 1,
        }
    }
    out.push_str(&line[copied..]);
    out
}

/// The length of the timestamp at the start of `text` (`2026-11-22 03:16:00`, then an optional
/// `.71` and an optional `+00` or `+05:30`), if one is there.
fn timestamp_length(text: &[u8]) -> Option<usize> {
    const SHAPE: &[u8] = b"0000-00-00 00:00:00";
    if text.len() < SHAPE.len() {
        return None;
    }
    let fits = text.iter().zip(SHAPE).all(|(have, want)| {
        if *want == b'0' {
            have.is_ascii_digit()
        } else {
            have == want
        }
    });
    if !fits {
        return None;
    }
    let digits = |from: usize| {
        text.get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let mut end = SHAPE.len();
    if text.get(end).copied() == Some(b'.') && digits(end + 1) > 0 {
        end += 1 + digits(end + 1);
    }
    if matches!(text.get(end).copied(), Some(b'+' | b'-')) && digits(end + 1) == 2 {
        end += 3;
        if text.get(end).copied() == Some(b':') && digits(end + 1) == 2 {
            end += 3;
        }
    }
    Some(end)
}

fn replace_ids(line: &str) -> String {
    let mut out = String::new();
    let mut digits = String::new();
    for c in line.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        push_number(&mut out, &mut digits);
        out.push(c);
    }
    push_number(&mut out, &mut digits);
    out
}

/// Appends the run of `digits` to `out`, as `<id>` when it is one, and empties it.
fn push_number(out: &mut String, digits: &mut String) {
    if digits.len() >= ID_DIGITS {
        out.push_str("<id>");
    } else {
        out.push_str(digits);
    }
    digits.clear();
}

/// Whether the `printed` lines are the `expected` ones, where a line [`ELISION`] of `expected`
/// stands for any number of lines (none too).
fn output_matches(expected: &[String], printed: &[String]) -> bool {
    // reachable[j]: the expected lines so far match the first j printed lines.
    let mut reachable = vec![false; printed.len() + 1];
    reachable[0] = true;
    for line in expected {
        let mut next = vec![false; printed.len() + 1];
        if line == ELISION {
            let mut any = false;
            for (slot, was) in next.iter_mut().zip(&reachable) {
                any |= *was;
                *slot = any;
            }
        } else {
            for (j, printed_line) in printed.iter().enumerate() {
                if reachable[j] && printed_line == line {
                    next[j + 1] = true;
                }
            }
        }
        reachable = next;
    }
    reachable[printed.len()]
}

/// Whether `expected` output shows an error: the block is then expected to fail with it.
fn shows_error(expected: &str) -> bool {
    expected
        .lines()
        .any(|line| line.trim_start().starts_with("ERROR:"))
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
fn the_conventions_are_read_as_contributing_md_describes_them() {
    let page = "\
# Title

## First

```sql
SELECT 1;
```

```text
 ?column?
----------
        1
```

*Not run by the tests: it needs
two lines.*

   ```sql
   SELECT 2;
   ```

### Deeper

```sql
SELECT 3;
```

```
not compared
```

*Not run by the tests: stray.*

Prose.
";
    let parsed = parse_markdown("test.md", page);
    let blocks = &parsed.blocks;
    assert_eq!(blocks.len(), 3, "{blocks:#?}");
    assert_eq!(
        (blocks[0].section.as_str(), blocks[0].heading.as_str()),
        ("First", "First")
    );
    assert_eq!(
        blocks[0].expected.as_deref(),
        Some(" ?column?\n----------\n        1")
    );
    assert_eq!(blocks[1].sql, "SELECT 2;");
    assert_eq!(blocks[1].not_run.as_deref(), Some("it needs two lines."));
    assert_eq!(
        (blocks[2].section.as_str(), blocks[2].heading.as_str()),
        ("First", "Deeper")
    );
    assert!(blocks[2].not_run.is_none() && blocks[2].expected.is_none());
    assert_eq!(parsed.problems.len(), 2, "{:#?}", parsed.problems);
    assert!(
        parsed.problems[0].contains("```sql block 3"),
        "{:?}",
        parsed.problems
    );
    assert!(
        parsed.problems[1].contains("2 paragraphs"),
        "{:?}",
        parsed.problems
    );
}

#[test]
fn the_comparison_ignores_ids_times_and_spacing_and_nothing_else() {
    let page = [
        "         id         |             ts",
        "--------------------+----------------------------",
        " 251548198760349698 | 2026-11-26 03:22:44.124+00",
        "",
        " count",
        "-------",
        "     2",
    ]
    .join("\n");
    let printed = [
        " id | ts",
        "----+----",
        " 251600000000000001 | 2026-11-27 10:00:00+05:30",
        "",
        " count",
        "-------",
        "     2",
        "",
    ]
    .join("\n");
    assert!(output_matches(&normalised(&page), &normalised(&printed)));
    let other_count = printed.replace("     2", "     3");
    assert!(!output_matches(
        &normalised(&page),
        &normalised(&other_count)
    ));
    // Shorter numbers are compared: a day's width, a worker, a count.
    assert_eq!(normalised("362387865600000"), ["362387865600000"]);
    assert_eq!(
        normalised("x 2026-11-22 03:16:00.71+00 | 250096955256995841 | 0"),
        ["x <time> | <id> | 0"]
    );
    assert_eq!(normalised("ERROR:  a  b"), ["ERROR: a b"]);
    // `...` stands for any number of lines, none too.
    let elided = normalised("...\n count\n-------\n     2");
    assert!(output_matches(&elided, &normalised(&printed)));
    assert!(output_matches(
        &elided,
        &normalised(" count\n-------\n     2")
    ));
    assert!(!output_matches(
        &elided,
        &normalised(" count\n-------\n     2\n extra")
    ));
    assert!(output_matches(
        &normalised("a\n...\nb\n...\n"),
        &normalised("a\nx\ny\nb")
    ));
    assert!(shows_error("ERROR:  boom\nDETAIL:  why"));
    assert!(!shows_error(" count\n-------\n 0"));
    assert_eq!(
        without_psql_prefix("psql:/tmp/d/documentation-block-3.sql:2: ERROR:  boom"),
        "ERROR:  boom"
    );
    assert_eq!(without_psql_prefix("DETAIL:  why"), "DETAIL:  why");
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
