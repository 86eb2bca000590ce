//! The reference's error table (docs/reference.md) lists exactly the SQLSTATEs the extension's code can raise: the
//! constructors in `src/errors/` (every Rust raise goes through them) and the `USING ERRCODE`
//! clauses of the hand-written SQL in `sql/`. Condition names are mapped to SQLSTATEs with the
//! server's own `utils/errcodes.h`, so the table cannot drift from the code in either direction.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use snowflake_id_cluster_tests::fixtures::{reference_error_tables, rust_sources, workspace_root};
use snowflake_id_cluster_tests::pg_config;

/// `ERRCODE_NAME` → SQLSTATE, from `#define ERRCODE_NAME MAKE_SQLSTATE('2','2','0','2','3')`.
fn sqlstates_by_name() -> BTreeMap<String, String> {
    let header = pg_config("--includedir-server").join("utils/errcodes.h");
    let text = fs::read_to_string(&header).unwrap_or_else(|e| panic!("{header:?}: {e}"));
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("#define ERRCODE_")?;
            let (name, value) = rest.split_once(" MAKE_SQLSTATE(")?;
            let code: String = value.chars().filter(char::is_ascii_alphanumeric).collect();
            Some((format!("ERRCODE_{name}"), code))
        })
        .collect()
}

/// Every `ERRCODE_*` identifier in `text`.
fn errcode_identifiers(text: &str) -> BTreeSet<String> {
    text.match_indices("ERRCODE_")
        .map(|(at, _)| {
            text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

/// The SQLSTATEs the code raises, each with where it was found.
fn raised_by_code(root: &Path) -> BTreeMap<String, String> {
    let by_name = sqlstates_by_name();
    let sqlstate = |name: &str, place: &str| -> (String, String) {
        let code = by_name
            .get(name)
            .unwrap_or_else(|| panic!("{name} ({place}) is not in errcodes.h"));
        (code.clone(), format!("{name} in {place}"))
    };
    let mut raised = BTreeMap::new();
    for (file, text) in rust_sources("src") {
        let place = format!("src/{file}");
        if place.starts_with("src/errors/") {
            raised.extend(
                errcode_identifiers(&text)
                    .iter()
                    .map(|name| sqlstate(name, &place)),
            );
        } else if !place.starts_with("src/tests/") {
            assert!(
                !text.contains("PgSqlErrorCode") && !text.contains("ErrorReport"),
                "{place} raises an error itself; every error belongs in src/errors/"
            );
        }
    }
    for entry in fs::read_dir(root.join("sql")).unwrap() {
        let path = entry.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        let file = format!("sql/{}", path.file_name().unwrap().to_string_lossy());
        for (at, _) in text.match_indices("ERRCODE = '") {
            let condition = &text[at + "ERRCODE = '".len()..];
            let condition = &condition[..condition.find('\'').unwrap()];
            let name = format!("ERRCODE_{}", condition.to_ascii_uppercase());
            raised.insert(sqlstate(&name, &file).0, format!("{condition} in {file}"));
        }
    }
    raised
}

#[test]
fn reference_error_table_lists_exactly_the_sqlstates_the_code_raises() {
    let root = workspace_root();
    let raised = raised_by_code(&root);
    let (listed, _raised_by_postgres) = reference_error_tables();
    println!("raised by the code: {raised:#?}");
    assert!(
        raised.len() >= 15,
        "found only {} SQLSTATEs in the code: is the scan broken?",
        raised.len()
    );
    let missing: Vec<_> = raised
        .iter()
        .filter(|(code, _)| !listed.contains(*code))
        .collect();
    let stale: Vec<_> = listed
        .iter()
        .filter(|code| !raised.contains_key(*code))
        .collect();
    assert!(
        missing.is_empty(),
        "the reference's error table misses {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "the reference's error table lists {stale:?}, which the code never raises"
    );
}
