//! docs/design.md §7 stays true to the tree: every source file of the glue (`src/`) and of the
//! pure core (`crates/snowflake_id_core/src/`) is named in the code-layout section, and every
//! file that section lists exists; and no two modules of the glue (`src/`), of the core or of
//! the whole-cluster tests' crate (`pgrx-tests/src/`) use each other, directly or through others
//! (§7: each file builds on the ones below it), test modules included; and §7's table of the
//! hooks and callbacks the library puts under PostgreSQL names each one the code installs, with
//! the file that installs it, and nothing else. No server is started.

use std::collections::{BTreeMap, BTreeSet};
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

/// The modules of the crate whose sources are in `dir` and the modules each names
/// (`crate::<module>`), from the files' text: each top-level file is a module, with the files
/// of its submodules in the directory of its name (`errors.rs` and `errors/`), and so is each
/// directory with a `mod.rs` (all its files, as one).
fn module_uses(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let mut uses: BTreeMap<String, BTreeSet<String>> = rust_files(dir)
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(root.join(&file)).unwrap();
            let module = file.trim_end_matches(".rs").to_owned();
            let mut used = used_modules(&text);
            let submodules = root.join(&module);
            if submodules.is_dir() {
                for inner in rust_files(&format!("{dir}/{module}")) {
                    let text = std::fs::read_to_string(submodules.join(inner)).unwrap();
                    used.extend(used_modules(&text));
                }
            }
            (module, used)
        })
        .collect();
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if path.join("mod.rs").is_file() {
            let module = path.file_name().unwrap().to_string_lossy().into_owned();
            let inner = format!("{dir}/{module}");
            let used = rust_files(&inner)
                .iter()
                .flat_map(|file| used_modules(&std::fs::read_to_string(path.join(file)).unwrap()))
                .collect();
            uses.insert(module, used);
        }
    }
    uses
}

/// The `crate::<module>` names in `text`, outside comments: in paths, in `use` (re-exports
/// too), and each item of a group, `use crate::{a, b::c, d::{e, f}}`, over several lines.
fn used_modules(text: &str) -> BTreeSet<String> {
    let code = without_comments(text);
    let leading_name = |path: &str| leading_identifier(path.trim_start());
    let mut used = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => used.extend(group_items(group).into_iter().map(leading_name)),
            None => {
                used.insert(leading_name(rest));
            }
        }
    }
    used.retain(|name| !name.is_empty() && name != "self");
    used
}

/// `text` with each line's `//` comment cut off.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifier `text` begins with (empty if none).
fn leading_identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The items of a `use` group whose text follows its `{`, split at its own commas (nested
/// groups stay inside their item), up to its `}`.
fn group_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..at]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// A cycle among `uses` (module → the modules it uses), as the path around it, if any.
fn find_cycle(uses: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        uses: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|on_path| on_path == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module.to_owned());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_owned());
        for used in uses.get(module).into_iter().flatten() {
            if used != module {
                if let Some(cycle) = visit(used, uses, path, done) {
                    return Some(cycle);
                }
            }
        }
        path.pop();
        done.insert(module.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    uses.keys()
        .find_map(|module| visit(module, uses, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_uses_another_that_uses_it_back() {
    let glue = module_uses("src");
    assert!(
        glue.get("backend")
            .is_some_and(|used| used.contains("shared_memory")),
        "the scan finds `use crate::…` lines: {glue:?}"
    );
    let tests = module_uses("pgrx-tests/src");
    assert!(
        tests
            .get("fixtures")
            .is_some_and(|used| used.contains("fixtures")),
        "a directory module's files are scanned: {tests:?}"
    );
    for (dir, uses) in [
        ("src", glue),
        (
            "crates/snowflake_id_core/src",
            module_uses("crates/snowflake_id_core/src"),
        ),
        ("pgrx-tests/src", tests),
    ] {
        assert_eq!(
            find_cycle(&uses),
            None,
            "a cycle among the modules of {dir}"
        );
    }
}

#[test]
fn the_cycle_check_catches_a_cycle() {
    let uses = |edges: &[(&str, &str)]| {
        let mut map = BTreeMap::<String, BTreeSet<String>>::new();
        for (from, to) in edges {
            map.entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
        map
    };
    assert_eq!(
        used_modules("use crate::errors;\n// crate::gone\nlet x = crate::gucs::X.get();"),
        BTreeSet::from(["errors".to_owned(), "gucs".to_owned()])
    );
    assert_eq!(
        used_modules(
            "use crate::{\n    backend::{self, Worker},\n    catalog, // crate::gone\n    \
             gucs::X,\n};\npub use crate::timestamps::format;\nuse crate::{self as root};"
        ),
        BTreeSet::from([
            "backend".to_owned(),
            "catalog".to_owned(),
            "gucs".to_owned(),
            "timestamps".to_owned()
        ])
    );
    assert_eq!(
        find_cycle(&uses(&[("a", "b"), ("b", "c"), ("a", "c")])),
        None
    );
    assert_eq!(
        find_cycle(&uses(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

/// The hooks and callbacks the code installs, as (name, file): an assignment to a PostgreSQL
/// hook (`pg_sys::<name>_hook = Some(…)`), a call of PostgreSQL's registration functions
/// (`Register…`, `CacheRegister…`, `before_shmem_exit`, `on_shmem_exit`, `on_proc_exit`), of
/// pgrx's `register_xact_callback` / `register_subxact_callback`, or a `BackgroundWorkerBuilder`.
fn installed_hooks(files: &[(String, String)]) -> BTreeSet<(String, String)> {
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
    let files: Vec<(String, String)> = rust_files("src")
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(root.join(&file)).unwrap();
            (file, text)
        })
        .collect();
    let installed = installed_hooks(&files);
    assert!(
        installed.contains(&(
            "ExecutorStart_hook".to_owned(),
            "extension_directory.rs".to_owned()
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
    let files = [(
        "a.rs".to_owned(),
        "unsafe { pg_sys::ExecutorRun_hook = Some(run);\n// pg_sys::planner_hook = Some(p);\n\
         pg_sys::RegisterXactCallback(Some(cb), null); pg_sys::XLogRegisterData(d, 8) }\nlet prev = pg_sys::ExecutorRun_hook;\n\
         register_xact_callback(PgXactCallbackEvent::Commit, || {});"
            .to_owned(),
    )];
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
