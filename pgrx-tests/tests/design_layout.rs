//! docs/design.md §7 stays true to the tree: every source file of the glue (`src/`, in its
//! folders) and of the pure core (`crates/snowflake_id_core/src/`) is named in the code-layout
//! section, and every file that section lists exists; the glue's folders stay small (no more
//! than ten files each, no file much over 500 lines, no `unsafe` block over 15 lines); and §7's
//! table of the hooks and callbacks the library puts under PostgreSQL names each one the code
//! installs, with the file that installs it, and nothing else. How the modules use each other:
//! `modules_use_each_other_one_way.rs`. No server is started.

use std::collections::{BTreeMap, BTreeSet};

use snowflake_id_cluster_tests::fixtures::{
    doc_section, leading_identifier, rust_files, rust_sources, without_comments,
};

/// The most files a folder of the glue holds, and the most lines of one of its files.
const FOLDER_FILES: usize = 10;
const FILE_LINES: usize = 550;
/// The most lines of one `unsafe` block of the glue, from `unsafe {` to its `}`.
const UNSAFE_BLOCK_LINES: usize = 15;

/// The code-layout section of docs/design.md.
fn layout_section() -> String {
    doc_section("docs/design.md", "7. Code layout")
}

/// What the section lists: the glue's files, as paths under `src/` (a folder's files are the
/// items nested under its `` - `folder/`: `` item), and the core's modules (the items under
/// `` - `crates/snowflake_id_core/`: ``).
fn listed_items(section: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut glue, mut core) = (BTreeSet::new(), BTreeSet::new());
    let (mut part, mut folder) = ("", String::new());
    for line in section.lines() {
        if let Some(rest) = line.strip_prefix("- `") {
            part = if rest.starts_with("src/`") {
                "glue"
            } else if rest.starts_with("crates/snowflake_id_core/`") {
                "core"
            } else {
                ""
            };
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let Some((name, _)) = line
            .trim_start()
            .strip_prefix("- `")
            .and_then(|rest| rest.split_once("`:"))
        else {
            continue;
        };
        match (part, indent) {
            ("core", 2) => {
                core.insert(name.to_owned());
            }
            ("glue", 2) if name.ends_with('/') => folder = name.to_owned(),
            ("glue", 2) => {
                folder.clear();
                glue.insert(name.to_owned());
            }
            ("glue", 4) => {
                glue.insert(format!("{folder}{name}"));
            }
            _ => {}
        }
    }
    (glue, core)
}

/// The files of the tree the section does not name, and the names it lists that are no file
/// (`glue`: paths under `src/`; `core`: module names).
fn drift(
    section: &str,
    glue: &BTreeSet<String>,
    core: &BTreeSet<String>,
) -> (Vec<String>, Vec<String>) {
    let (listed_glue, listed_core) = listed_items(section);
    let missing = glue
        .difference(&listed_glue)
        .chain(core.difference(&listed_core))
        .cloned()
        .collect();
    let stale = listed_glue
        .difference(glue)
        .chain(listed_core.difference(core))
        .cloned()
        .collect();
    (missing, stale)
}

fn core_modules() -> BTreeSet<String> {
    rust_files("crates/snowflake_id_core/src")
        .into_iter()
        .filter(|name| name != "lib.rs")
        .map(|name| name.trim_end_matches(".rs").to_owned())
        .collect()
}

#[test]
fn every_source_file_is_in_the_code_layout_and_every_listed_file_exists() {
    let glue = rust_files("src");
    let core = core_modules();
    assert!(
        glue.len() >= 10 && glue.iter().any(|file| file.contains('/')) && core.len() >= 6,
        "{glue:?} {core:?}"
    );
    let (missing, stale) = drift(&layout_section(), &glue, &core);
    assert!(missing.is_empty(), "not in docs/design.md §7: {missing:?}");
    assert!(
        stale.is_empty(),
        "listed in docs/design.md §7 but not in the tree: {stale:?}"
    );
}

#[test]
fn the_layout_check_catches_a_missing_and_a_stale_file() {
    let section = "## 7. Code layout\n- `crates/snowflake_id_core/`: c\n  - `layout`: x\n\
                   - `src/`: g\n  - `lib.rs`: z\n  - `hooks/`: h\n    - `gone.rs`: y\n\
                   - `sql/`: s\n  - `other`: o\n";
    let glue = BTreeSet::from(["lib.rs".to_owned(), "hooks/mod.rs".to_owned()]);
    let core = BTreeSet::from(["layout".to_owned(), "generator".to_owned()]);
    let (missing, stale) = drift(section, &glue, &core);
    assert_eq!(missing, ["hooks/mod.rs", "generator"]);
    assert_eq!(stale, ["hooks/gone.rs"]);
}

/// The glue's folders and files that outgrew the layout: a folder of more than `FOLDER_FILES`
/// files, a file of more than `FILE_LINES` lines, an `unsafe` block of more than
/// `UNSAFE_BLOCK_LINES` lines (as "file:line").
fn oversized(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    let mut per_folder = BTreeMap::<&str, usize>::new();
    for (file, text) in files {
        let folder = file.rsplit_once('/').map_or("", |(folder, _)| folder);
        *per_folder.entry(folder).or_default() += 1;
        let lines = text.lines().count();
        if lines > FILE_LINES {
            found.push(format!("{file}: {lines} lines"));
        }
        for (start, length) in unsafe_blocks(text) {
            if length > UNSAFE_BLOCK_LINES {
                found.push(format!("{file}:{start}: an unsafe block of {length} lines"));
            }
        }
    }
    for (folder, count) in per_folder {
        if !folder.is_empty() && count > FOLDER_FILES {
            found.push(format!("{folder}/: {count} files"));
        }
    }
    found
}

/// Each `unsafe { … }` block of `text` (not an `unsafe fn`, `impl` or `extern`), as its first
/// line (from 1) and its length in lines, its braces counted outside comments.
fn unsafe_blocks(text: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect();
    let mut blocks = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        for (at, _) in line.match_indices("unsafe {") {
            let mut depth = 0i32;
            let mut chars = line[at..].chars().collect::<Vec<_>>();
            let mut end = start;
            'lines: loop {
                for c in chars {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break 'lines;
                            }
                        }
                        _ => {}
                    }
                }
                end += 1;
                match lines.get(end) {
                    Some(next) => chars = next.chars().collect(),
                    None => break,
                }
            }
            blocks.push((start + 1, end - start + 1));
        }
    }
    blocks
}

#[test]
fn the_glue_stays_in_small_folders_of_small_files() {
    let glue = rust_sources("src");
    assert!(
        unsafe_blocks(&glue["lib.rs"]).len() == 1,
        "the scan finds lib.rs's one unsafe block"
    );
    let found = oversized(&glue);
    assert!(
        found.is_empty(),
        "too large for docs/design.md §7: {found:#?}"
    );
}

#[test]
fn the_size_check_catches_a_long_unsafe_block_a_long_file_and_a_full_folder() {
    let long_block = format!(
        "fn f() {{\n    // unsafe {{ in a comment }}\n    unsafe {{\n{}    }}\n    unsafe {{ g() }}\n}}\n",
        "        g();\n".repeat(14)
    );
    assert_eq!(unsafe_blocks(&long_block), [(3, 16), (19, 1)]);
    let mut files = BTreeMap::from([
        ("a/long.rs".to_owned(), "x\n".repeat(FILE_LINES + 1)),
        ("a/block.rs".to_owned(), long_block),
    ]);
    for n in 0..FOLDER_FILES - 1 {
        files.insert(format!("a/f{n}.rs"), String::new());
    }
    assert_eq!(
        oversized(&files),
        [
            "a/block.rs:3: an unsafe block of 16 lines".to_owned(),
            format!("a/long.rs: {} lines", FILE_LINES + 1),
            "a/: 11 files".to_owned(),
        ]
    );
}

/// The hooks and callbacks the code installs, as (name, file): an assignment to a PostgreSQL
/// hook (`pg_sys::<name>_hook = Some(…)`), a call of PostgreSQL's registration functions
/// (`Register…`, `CacheRegister…`, `before_shmem_exit`, `on_shmem_exit`, `on_proc_exit`), of
/// pgrx's `register_xact_callback` / `register_subxact_callback`, or a `BackgroundWorkerBuilder`.
fn installed_hooks(files: &BTreeMap<String, String>) -> BTreeSet<(String, String)> {
    const EXITS: [&str; 3] = ["before_shmem_exit", "on_shmem_exit", "on_proc_exit"];
    const PGRX: [&str; 3] = [
        "register_xact_callback(",
        "register_subxact_callback(",
        "BackgroundWorkerBuilder::new(",
    ];
    let mut found = BTreeSet::new();
    for (file, text) in files {
        let code = without_comments(text);
        for (at, _) in code.match_indices("pg_sys::") {
            let rest = &code[at + "pg_sys::".len()..];
            let name = leading_identifier(rest);
            let after = rest[name.len()..].trim_start();
            let hook = name.ends_with("_hook") && after.starts_with("= Some(");
            let registers = (name.starts_with("Register")
                || name.starts_with("CacheRegister")
                || EXITS.contains(&name.as_str()))
                && after.starts_with('(');
            if hook || registers {
                found.insert((name, file.clone()));
            }
        }
        for call in PGRX {
            if code.contains(call) {
                found.insert((
                    call.split(['(', ':']).next().unwrap().to_owned(),
                    file.clone(),
                ));
            }
        }
    }
    found
}

/// The rows of §7's table of what the library puts under PostgreSQL, as (name, file).
fn listed_hooks(section: &str) -> BTreeSet<(String, String)> {
    section
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("| `"))
        .filter_map(|row| {
            let (name, rest) = row.split_once("` | `")?;
            let (file, _) = rest.split_once("` |")?;
            Some((name.to_owned(), file.to_owned()))
        })
        .collect()
}

#[test]
fn every_hook_the_library_installs_is_in_the_code_layout_with_its_file() {
    let installed = installed_hooks(&rust_sources("src"));
    assert!(
        installed.contains(&(
            "ExecutorStart_hook".to_owned(),
            "hooks/executor_start.rs".to_owned()
        )) && installed.len() >= 10,
        "the scan finds the hooks: {installed:?}"
    );
    let listed = listed_hooks(&layout_section());
    let unlisted: Vec<_> = installed.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&installed).collect();
    assert!(
        unlisted.is_empty(),
        "installed but not in docs/design.md §7's table of hooks: {unlisted:?}"
    );
    assert!(
        stale.is_empty(),
        "in docs/design.md §7's table of hooks but not installed there: {stale:?}"
    );
}

#[test]
fn the_hook_check_catches_a_new_hook_and_a_moved_one() {
    let files = BTreeMap::from([(
        "a.rs".to_owned(),
        "unsafe { pg_sys::ExecutorRun_hook = Some(run);\n// pg_sys::planner_hook = Some(p);\n\
         pg_sys::RegisterXactCallback(Some(cb), null); pg_sys::XLogRegisterData(d, 8) }\nlet prev = pg_sys::ExecutorRun_hook;\n\
         register_xact_callback(PgXactCallbackEvent::Commit, || {});"
            .to_owned(),
    )]);
    let section =
        "  | `ExecutorRun_hook` | `b.rs` | x |\n  | `RegisterXactCallback` | `a.rs` | y |";
    let installed = installed_hooks(&files);
    let pair = |name: &str, file: &str| (name.to_owned(), file.to_owned());
    assert_eq!(
        installed,
        BTreeSet::from([
            pair("ExecutorRun_hook", "a.rs"),
            pair("RegisterXactCallback", "a.rs"),
            pair("register_xact_callback", "a.rs"),
        ])
    );
    let listed = listed_hooks(section);
    assert_eq!(
        installed.difference(&listed).collect::<Vec<_>>(),
        [
            &pair("ExecutorRun_hook", "a.rs"),
            &pair("register_xact_callback", "a.rs")
        ]
    );
    assert_eq!(
        listed.difference(&installed).collect::<Vec<_>>(),
        [&pair("ExecutorRun_hook", "b.rs")]
    );
}
