//! Statements about the tree stay true (issue 65): the install script's header names the
//! crate's version and each update script's the two versions of its file name, and every path
//! of the repository that a document, a script or a comment cites exists, and so does a file
//! each names in backquotes by its name or its path in a folder (`backend.rs`,
//! `hooks/shmem.rs`). On 229c10d `sql/snowflake_id--0.12.0.sql` began "snowflake_id 0.11.0", and design.md and
//! `layout_properties.rs` cited `sql/bootstrap.sql`, long gone. No server is started.

use std::path::Path;
use std::process::Command;

use snowflake_id_cluster_tests::fixtures::{extension_crate_version, workspace_root};

fn first_line(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path:?}: {error}"));
    text.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn the_scripts_headers_name_their_versions() {
    let version = extension_crate_version();
    let install = workspace_root().join(format!("sql/snowflake_id--{version}.sql"));
    let header = first_line(&install);
    assert!(
        header.starts_with(&format!("-- snowflake_id {version}:")),
        "{install:?} begins {header:?}, not with the crate's version {version}"
    );
    for entry in std::fs::read_dir(workspace_root().join("sql")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(versions) = name
            .strip_prefix("snowflake_id--")
            .and_then(|rest| rest.strip_suffix(".sql"))
        else {
            continue;
        };
        if let Some((from, to)) = versions.split_once("--") {
            let header = first_line(&path);
            assert!(
                header.starts_with(&format!("-- snowflake_id {from} → {to}:")),
                "{name} begins {header:?}"
            );
        }
    }
}

/// Where the tree's own paths start: a citation is one of these, `/`, and path characters.
const ROOTS: [&str; 11] = [
    "src/",
    "sql/",
    "docs/",
    "pgrx-tests/",
    "crates/",
    "scripts/",
    "bench/",
    "monitoring/",
    "packaging/",
    ".ci/",
    ".config/",
];

fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./+-".contains(c)
}

/// The repository paths `text` cites: a root at the start of a word (or after `../`, a link
/// from a file one folder down), then path characters, less a trailing `.` or `/`; not a
/// pattern (followed by `<`, `{`, `*` or `$`).
fn cited_paths(text: &str) -> Vec<String> {
    let mut cited = Vec::new();
    for root in ROOTS {
        for (at, _) in text.match_indices(root) {
            let head = text[..at].strip_suffix("../").unwrap_or(&text[..at]);
            let before = head.chars().next_back();
            if before.is_some_and(|c| path_char(c) || c == '<') {
                continue;
            }
            let rest = &text[at..];
            let end = rest.find(|c: char| !path_char(c)).unwrap_or(rest.len());
            if rest[end..].starts_with(['<', '{', '*', '$']) {
                continue;
            }
            let path = rest[..end].trim_end_matches(['.', '/']);
            if path.len() > root.len() {
                cited.push(path.to_owned());
            }
        }
    }
    cited
}

/// The Rust files `text` names in backquotes by their name alone or by a path below a folder
/// that is not a root (`` `backend.rs` ``, `` `hooks/shmem.rs` ``): each must end the path of
/// some file of the tree.
fn cited_file_names(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| {
            quoted.ends_with(".rs")
                && quoted.len() > ".rs".len()
                && quoted
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_/.".contains(c))
                && !ROOTS.iter().any(|root| quoted.starts_with(root))
        })
        .map(str::to_owned)
        .collect()
}

/// Files whose citations are the tree of their day (the changelog, released SQL scripts and
/// the fixtures that keep them, this file's examples of stale ones), or not of this tree
/// (vendored sources, Cargo's feature names `crate/feature`).
fn keeps_history_or_cites_elsewhere(file: &str, version: &str) -> bool {
    file == "CHANGELOG.md"
        || file == "pgrx-tests/tests/statements_name_what_exists.rs"
        || file.ends_with("Cargo.toml")
        || file.starts_with("vendor/")
        || file.starts_with("bench/results/")
        || (file.starts_with("sql/snowflake_id--") && !file.ends_with(&format!("--{version}.sql")))
        || (file.starts_with("pgrx-tests/fixtures/") && file.ends_with(".sql"))
}

#[test]
fn every_path_a_document_script_or_comment_cites_exists() {
    let listed = Command::new("git")
        .args(["ls-files"])
        .current_dir(workspace_root())
        .output()
        .expect("git ls-files");
    assert!(listed.status.success());
    let files = String::from_utf8(listed.stdout).unwrap();
    let version = extension_crate_version();
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in files.lines() {
        let cites = [".md", ".rs", ".sh", ".py", ".toml", ".sql", ".yaml", ".c"];
        if !cites.iter().any(|ext| file.ends_with(ext))
            || keeps_history_or_cites_elsewhere(file, &version)
        {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(workspace_root().join(file)) else {
            continue;
        };
        for path in cited_paths(&text) {
            checked += 1;
            if !workspace_root().join(&path).exists() {
                missing.push(format!("{file} cites {path}"));
            }
        }
        let examples = [
            "pgrx-tests/tests/design_layout.rs",
            "pgrx-tests/tests/modules_use_each_other_one_way.rs",
        ];
        if examples.contains(&file) {
            continue; // their checks' own examples name files of no tree
        }
        for name in cited_file_names(&text) {
            checked += 1;
            let ending = format!("/{name}");
            if !files
                .lines()
                .any(|tracked| tracked == name || tracked.ends_with(&ending))
            {
                missing.push(format!("{file} cites {name}"));
            }
        }
    }
    assert!(
        checked > 500,
        "only {checked} citations found: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "cited paths that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_citation_scan_finds_paths_and_skips_patterns() {
    let text = "see `src/backend.rs`, (../docs/design.md#7) and sql/snowflake_id--<v>.sql, \
                not mysrc/x.rs nor results/pg<major>/latest.md; the dir pgrx-tests/tests/.";
    assert_eq!(
        cited_paths(text),
        ["src/backend.rs", "docs/design.md", "pgrx-tests/tests"]
    );
    let text = "`hooks/shmem.rs` and `backend.rs` (not `src/lib.rs`, `x.rs;` or `.rs`)";
    assert_eq!(cited_file_names(text), ["hooks/shmem.rs", "backend.rs"]);
}
