//! docs/design.md §7 stays true to the tree: every source file of the glue (`src/`) and of the
//! pure core (`crates/snowflake_id_core/src/`) is named in the code-layout section, and every
//! file that section lists exists. No server is started.

use std::collections::BTreeSet;
use std::path::Path;

/// The file names (`*.rs`) in `dir`, relative to the repository.
fn rust_files(dir: &str) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_dir(root.join(dir))
        .unwrap_or_else(|error| panic!("{dir}: {error}"))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .collect()
}

/// The code-layout section of docs/design.md.
fn layout_section() -> String {
    let design = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/design.md");
    let text = std::fs::read_to_string(&design).unwrap();
    let start = text.find("## 7. Code layout").expect("design.md has §7");
    let end = text[start..].find("\n## 8.").expect("§8 follows §7") + start;
    text[start..end].to_owned()
}

/// The names the section lists as nested items (`  - \`name\`:`), i.e. the files of the core
/// (as module names) and of `src/` (as file names).
fn listed_items(section: &str) -> BTreeSet<String> {
    section
        .lines()
        .filter_map(|line| line.strip_prefix("  - `"))
        .filter_map(|rest| rest.split_once("`:").map(|(name, _)| name.to_owned()))
        .collect()
}

/// The files of the tree the section does not name, and the names it lists that are no file
/// (`glue`: file names; `core`: module names).
fn drift(
    section: &str,
    glue: &BTreeSet<String>,
    core: &BTreeSet<String>,
) -> (Vec<String>, Vec<String>) {
    let listed = listed_items(section);
    let missing = glue
        .iter()
        .chain(core)
        .filter(|name| !listed.contains(*name))
        .cloned()
        .collect();
    let stale = listed
        .iter()
        .filter(|name| !glue.contains(*name) && !core.contains(*name))
        .cloned()
        .collect();
    (missing, stale)
}

#[test]
fn every_source_file_is_in_the_code_layout_and_every_listed_file_exists() {
    let glue = rust_files("src");
    let core: BTreeSet<String> = rust_files("crates/snowflake_id_core/src")
        .into_iter()
        .filter(|name| name != "lib.rs")
        .map(|name| name.trim_end_matches(".rs").to_owned())
        .collect();
    assert!(glue.len() >= 10 && core.len() >= 6, "{glue:?} {core:?}");
    let (missing, stale) = drift(&layout_section(), &glue, &core);
    assert!(missing.is_empty(), "not in docs/design.md §7: {missing:?}");
    assert!(
        stale.is_empty(),
        "listed in docs/design.md §7 but not in the tree: {stale:?}"
    );
}

#[test]
fn the_layout_check_catches_a_missing_and_a_stale_file() {
    let section = "## 7. Code layout\n  - `layout`: x\n  - `gone.rs`: y\n  - `lib.rs`: z\n";
    let glue = BTreeSet::from(["lib.rs".to_owned()]);
    let core = BTreeSet::from(["layout".to_owned(), "generator".to_owned()]);
    let (missing, stale) = drift(section, &glue, &core);
    assert_eq!(missing, ["generator"]);
    assert_eq!(stale, ["gone.rs"]);
}
