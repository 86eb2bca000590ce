//! docs/design.md §7 stays true to the tree: every source file of the glue (`src/`, in its
//! folders) and of the pure core (`crates/snowflake_id_core/src/`) is named in the code-layout
//! section, and every file that section lists exists; the glue's folders stay small (no more
//! than ten files each, no file much over 500 lines, no `unsafe` block over 15 lines); no two
//! modules of the glue or of the core use each other, directly or through others, test modules
//! included, and each type's inherent `impl` is beside its definition, so no behaviour hides in
//! a module the cycle check cannot see it in (the whole-cluster tests' crate, `pgrx-tests/src/`,
//! is checked for cycles folder by folder); and §7's table of the hooks and callbacks the library
//! puts under PostgreSQL names each one the code installs, with the file that installs it, and
//! nothing else. No server is started.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most files a folder of the glue holds, and the most lines of one of its files.
const FOLDER_FILES: usize = 10;
const FILE_LINES: usize = 550;
/// The most lines of one `unsafe` block of the glue, from `unsafe {` to its `}`.
const UNSAFE_BLOCK_LINES: usize = 15;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Rust files under `dir` (of the repository), as paths relative to it, in every folder.
fn rust_files(dir: &str) -> BTreeSet<String> {
    fn walk(root: &Path, relative: &Path, found: &mut BTreeSet<String>) {
        let here = root.join(relative);
        for entry in std::fs::read_dir(&here).unwrap_or_else(|error| panic!("{here:?}: {error}")) {
            let name = entry.unwrap().file_name();
            let path = relative.join(&name);
            if root.join(&path).is_dir() {
                walk(root, &path, found);
            } else if name.to_string_lossy().ends_with(".rs") {
                found.insert(path.to_string_lossy().into_owned());
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(&repository().join(dir), Path::new(""), &mut found);
    found
}

/// Each Rust file under `dir`, with its text.
fn sources(dir: &str) -> BTreeMap<String, String> {
    rust_files(dir)
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(repository().join(dir).join(&file)).unwrap();
            (file, text)
        })
        .collect()
}

/// The code-layout section of docs/design.md.
fn layout_section() -> String {
    let text = std::fs::read_to_string(repository().join("docs/design.md")).unwrap();
    let start = text.find("## 7. Code layout").expect("design.md has §7");
    let end = text[start..].find("\n## 8.").expect("§8 follows §7") + start;
    text[start..end].to_owned()
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
    let glue = sources("src");
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

/// A file's module path in its crate: `a/b.rs` is `a::b`, `a/mod.rs` is `a`, `lib.rs` the
/// crate root (empty).
fn module_of(file: &str) -> String {
    let path = file.trim_end_matches(".rs");
    if path == "lib" {
        return String::new();
    }
    path.strip_suffix("/mod").unwrap_or(path).replace('/', "::")
}

/// The modules of the crate whose sources are in `files` and the modules each uses: its
/// `crate::…` paths (in `use` groups too, nested), its `super::…` paths, and in a folder's
/// `mod.rs` the `child::…` paths of the modules it declares; each path is the module it names
/// (the longest of its prefixes that is a module). The crate root (`lib.rs`) is left out.
fn module_uses(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.keys().map(|file| module_of(file)).collect();
    let resolve = |path: &[String]| {
        (1..=path.len())
            .rev()
            .map(|length| path[..length].join("::"))
            .find(|module| modules.contains(module))
    };
    files
        .iter()
        .map(|(file, text)| (module_of(file), file, text))
        .filter(|(module, _, _)| !module.is_empty())
        .map(|(module, file, text)| {
            let code = without_comments(text);
            let own: Vec<String> = module.split("::").map(str::to_owned).collect();
            let parent = &own[..own.len() - 1];
            let mut paths = Vec::new();
            for (at, _) in code.match_indices("crate::") {
                if !preceded_by_identifier(&code, at) {
                    paths.extend(expand_paths(Vec::new(), &code[at + "crate::".len()..]));
                }
            }
            for (at, _) in code.match_indices("super::") {
                // `use super::*` is a test module's look at its own file.
                let glob = code[at + "super::".len()..].starts_with('*');
                if !preceded_by_identifier(&code, at) && !glob {
                    paths.extend(expand_paths(parent.to_vec(), &code[at + "super::".len()..]));
                }
            }
            if file.ends_with("mod.rs") {
                for child in declared_modules(&code) {
                    let pattern = format!("{child}::");
                    for (at, _) in code.match_indices(&pattern) {
                        if !preceded_by_identifier(&code, at) {
                            paths.extend(expand_paths(own.clone(), &code[at..]));
                        }
                    }
                }
            }
            let used = paths
                .iter()
                .filter_map(|path| resolve(path))
                .filter(|used| !used.is_empty() && *used != module)
                .collect();
            (module, used)
        })
        .collect()
}

/// `uses` with each module counted as its top folder (`a::b` as `a`).
fn by_top_folder(uses: BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |module: &str| module.split("::").next().unwrap_or_default().to_owned();
    let mut folded = BTreeMap::<String, BTreeSet<String>>::new();
    for (module, used) in uses {
        let entry = folded.entry(top(&module)).or_default();
        entry.extend(used.iter().map(|used| top(used)));
    }
    for (module, used) in folded.iter_mut() {
        used.remove(module);
    }
    folded
}

/// Whether the text before `at` ends in an identifier character (`my_crate::` is no `crate::`).
fn preceded_by_identifier(code: &str, at: usize) -> bool {
    code[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The names of the modules `code` declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_modules(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line.strip_prefix("pub(crate) ").unwrap_or(line);
            let rest = rest.strip_prefix("pub ").unwrap_or(rest);
            rest.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_owned)
        })
        .collect()
}

/// The paths a reference names, whose text after `prefix` is `rest`: `a::b::C` one, a group
/// `a::{b, c::{d, e}}` one per item, over several lines (each path's segments, `self` left out).
fn expand_paths(prefix: Vec<String>, rest: &str) -> Vec<Vec<String>> {
    let mut path = prefix;
    let mut rest = rest.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            return group_items(group)
                .into_iter()
                .flat_map(|item| expand_paths(path.clone(), item))
                .collect();
        }
        let name = leading_identifier(rest);
        if name.is_empty() {
            return vec![path];
        }
        rest = &rest[name.len()..];
        if name != "self" {
            path.push(name);
        }
        match rest.strip_prefix("::") {
            Some(more) => rest = more.trim_start(),
            None => return vec![path],
        }
    }
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
    let glue = module_uses(&sources("src"));
    assert!(
        glue.get("ids::backend")
            .is_some_and(|used| used.contains("shmem") && used.contains("state::catalog")),
        "the scan finds `use crate::…` paths down to their files: {glue:?}"
    );
    assert!(
        glue.get("errors")
            .is_some_and(|used| used.contains("errors::floor")),
        "a folder's index uses its children: {glue:?}"
    );
    let tests = by_top_folder(module_uses(&sources("pgrx-tests/src")));
    assert!(
        tests
            .get("exporters")
            .is_some_and(|used| used.contains("fixtures") && used.contains("host")),
        "a folder is counted as one module: {tests:?}"
    );
    let core = module_uses(&sources("crates/snowflake_id_core/src"));
    for (dir, uses) in [
        ("src", glue),
        ("crates/snowflake_id_core/src", core),
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
    let files = BTreeMap::from([
        ("lib.rs".to_owned(), "mod a;\nmod errors;".to_owned()),
        (
            "a/mod.rs".to_owned(),
            "pub mod b;\npub mod c;\npub use c::Thing;\n// crate::gone\n\
             use crate::{\n    errors::{self, floor::Hint},\n    a::b, // crate::gone\n};"
                .to_owned(),
        ),
        (
            "a/b.rs".to_owned(),
            "use super::c;\nlet x = crate::errors::E;".to_owned(),
        ),
        ("a/c.rs".to_owned(), "use my_crate::a::b;".to_owned()),
        (
            "errors/mod.rs".to_owned(),
            "mod floor;\npub use floor::*;".to_owned(),
        ),
        ("errors/floor.rs".to_owned(), "use super::Error;".to_owned()),
    ]);
    let found = module_uses(&files);
    let set = |names: &[&str]| names.iter().map(|name| name.to_string()).collect();
    assert_eq!(
        found["a"],
        set(&["a::b", "a::c", "errors", "errors::floor"])
    );
    assert_eq!(found["a::b"], set(&["a::c", "errors"]));
    assert_eq!(found["a::c"], set(&[]));
    assert_eq!(found["errors::floor"], set(&["errors"]));
    assert_eq!(
        find_cycle(&found),
        Some(vec![
            "errors".into(),
            "errors::floor".into(),
            "errors".into()
        ])
    );
    assert_eq!(
        by_top_folder(found)["a"],
        set(&["errors"]),
        "folded into folders"
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

/// (file, type name) pairs.
type FileTypes = BTreeSet<(String, String)>;

/// The types each file defines (`struct`, `enum`, `union`, `trait`, `type`), and the inherent
/// `impl` blocks each writes for a type (`impl<…> Type<…> {`, not `impl Trait for Type`), as
/// (file, type) pairs.
fn definitions_and_inherent_impls(files: &BTreeMap<String, String>) -> (FileTypes, FileTypes) {
    const DEFINING: [&str; 5] = ["struct ", "enum ", "union ", "trait ", "type "];
    let (mut defined, mut implemented) = (BTreeSet::new(), BTreeSet::new());
    for (file, text) in files {
        let code = without_comments(text);
        let lines: Vec<&str> = code.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            let mut item = line.trim_start();
            for visibility in ["pub(crate) ", "pub(super) ", "pub ", "unsafe "] {
                item = item.strip_prefix(visibility).unwrap_or(item);
            }
            if let Some(rest) = DEFINING.iter().find_map(|kind| item.strip_prefix(kind)) {
                defined.insert((file.clone(), leading_identifier(rest)));
            }
            if !(item.starts_with("impl ") || item.starts_with("impl<")) {
                continue;
            }
            let header: String = lines[at..]
                .to_vec()
                .join(" ")
                .split('{')
                .next()
                .unwrap_or_default()
                .to_owned();
            if header.contains(" for ") {
                continue;
            }
            let after_generics = skip_generics(header["impl".len()..].trim_start());
            let path = after_generics.trim_start().trim_start_matches('&');
            let last = path
                .split('<')
                .next()
                .unwrap_or_default()
                .rsplit("::")
                .next()
                .unwrap_or_default()
                .trim();
            implemented.insert((file.clone(), leading_identifier(last)));
        }
    }
    (defined, implemented)
}

/// `text` after a leading `<…>` (balanced), or `text` itself.
fn skip_generics(text: &str) -> &str {
    if !text.starts_with('<') {
        return text;
    }
    let mut depth = 0;
    for (at, c) in text.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return &text[at + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}

/// The inherent impls written in a file other than the one that defines their type.
fn impls_away_from_their_type(files: &BTreeMap<String, String>) -> Vec<String> {
    let (defined, implemented) = definitions_and_inherent_impls(files);
    implemented
        .iter()
        .filter(|(file, name)| {
            defined.iter().any(|(_, defined_name)| defined_name == name)
                && !defined.contains(&(file.clone(), name.clone()))
        })
        .map(|(file, name)| format!("impl {name} in {file}"))
        .collect()
}

#[test]
fn each_type_has_its_behaviour_beside_its_definition() {
    for dir in ["src", "crates/snowflake_id_core/src"] {
        let files = sources(dir);
        let (defined, implemented) = definitions_and_inherent_impls(&files);
        assert!(
            defined.len() >= 10 && implemented.len() >= 10,
            "the scan finds types and impls in {dir}: {defined:?} {implemented:?}"
        );
        let away = impls_away_from_their_type(&files);
        assert!(
            away.is_empty(),
            "inherent impls away from their type's definition in {dir}: {away:?}"
        );
    }
}

#[test]
fn the_impl_check_catches_behaviour_away_from_its_type() {
    let files = BTreeMap::from([
        (
            "shmem/mod.rs".to_owned(),
            "pub struct SharedState {}\nimpl SharedState {}\n\
             pub(crate) enum Kind { A }\nimpl std::fmt::Display for Kind {}"
                .to_owned(),
        ),
        (
            "durability/reservation.rs".to_owned(),
            "pub struct ClusterReservation<'a>(&'a SharedState);\n\
             impl<'a> ClusterReservation<'a> {}\nimpl crate::shmem::SharedState {\n}\n\
             impl protocol::DurableReservation\n    for ClusterReservation<'_> {}"
                .to_owned(),
        ),
    ]);
    assert_eq!(
        impls_away_from_their_type(&files),
        ["impl SharedState in durability/reservation.rs"]
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
    let installed = installed_hooks(&sources("src"));
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
