//! No two modules of the glue (`src/`) or of the core (`crates/snowflake_id_core/src/`) use each
//! other, directly or through others, test modules included (docs/design.md §7: each file
//! builds on the ones below it); and each type's inherent `impl` is beside its definition, so no
//! behaviour hides in a module the cycle check cannot see it in. The whole-cluster tests' crate
//! (`pgrx-tests/src/`) is checked for cycles folder by folder. No server is started.

use std::collections::{BTreeMap, BTreeSet};

use snowflake_id_cluster_tests::fixtures::{leading_identifier, rust_sources, without_comments};

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
    let glue = module_uses(&rust_sources("src"));
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
    let tests = by_top_folder(module_uses(&rust_sources("pgrx-tests/src")));
    assert!(
        tests
            .get("exporters")
            .is_some_and(|used| used.contains("fixtures") && used.contains("host")),
        "a folder is counted as one module: {tests:?}"
    );
    let core = module_uses(&rust_sources("crates/snowflake_id_core/src"));
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
        let files = rust_sources(dir);
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
