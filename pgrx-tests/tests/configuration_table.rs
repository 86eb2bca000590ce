//! The reference's configuration table (docs/reference.md, "Configuration") lists exactly the
//! parameters the extension registers (`src/pg/gucs.rs`), each with the default and the context
//! the server reports in `pg_settings`, and every range `a–b` its text gives is the parameter's
//! bounds: the table cannot drift from the code in either direction.

use std::collections::BTreeMap;

use snowflake_id_cluster_tests::fixtures::doc_section;
use snowflake_id_cluster_tests::Cluster;

/// A parameter as the reference's table or the server gives it.
#[derive(Debug, PartialEq, Eq)]
struct Parameter {
    /// As the reference writes it: `1s`, `500ms`, `-1`.
    default: String,
    context: String,
}

/// The rows of the reference's table: name → its default, its context and its text.
fn reference_table() -> BTreeMap<String, (Parameter, String)> {
    doc_section("docs/reference.md", "Configuration")
        .lines()
        .filter(|line| line.starts_with("| `snowflake_id."))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 4, "a row of four cells: {line}");
            let backticked = |cell: &str| cell.split('`').nth(1).unwrap_or_default().to_owned();
            let parameter = Parameter {
                default: backticked(cells[1]),
                context: cells[2].to_owned(),
            };
            (backticked(cells[0]), (parameter, cells[3].to_owned()))
        })
        .collect()
}

/// A boot value as the reference (and `SHOW`) writes it: milliseconds in whole minutes as
/// `<n>min`, in whole seconds as `<n>s`.
fn as_written(value: &str, unit: &str) -> String {
    match (unit, value.parse::<i64>()) {
        ("ms", Ok(ms)) if ms != 0 && ms % 60_000 == 0 => format!("{}min", ms / 60_000),
        ("ms", Ok(ms)) if ms != 0 && ms % 1000 == 0 => format!("{}s", ms / 1000),
        ("ms", _) => format!("{value}ms"),
        _ => value.to_owned(),
    }
}

/// The ranges `a–b` (digits, an en dash, digits) in `text`.
fn ranges(text: &str) -> Vec<(String, String)> {
    text.split('(')
        .filter_map(|part| {
            let (low, rest) = part.split_once('–')?;
            let high: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let low = low.trim();
            (!high.is_empty() && !low.is_empty() && low.chars().all(|c| c.is_ascii_digit()))
                .then(|| (low.to_owned(), high))
        })
        .collect()
}

#[test]
fn the_references_configuration_table_is_what_the_server_registers() {
    let cluster = Cluster::builder().start();
    let rows = cluster
        .connect()
        .query(
            "SELECT name, boot_val, coalesce(unit, ''), context, min_val, max_val
             FROM pg_catalog.pg_settings WHERE name LIKE 'snowflake\\_id.%' ORDER BY name",
            &[],
        )
        .unwrap();
    let registered: BTreeMap<String, (Parameter, (String, String))> = rows
        .iter()
        .map(|row| {
            let (boot, unit): (String, String) = (row.get(1), row.get(2));
            let parameter = Parameter {
                default: as_written(&boot, &unit),
                context: row.get(3),
            };
            (row.get(0), (parameter, (row.get(4), row.get(5))))
        })
        .collect();
    let table = reference_table();
    assert_eq!(
        registered.keys().collect::<Vec<_>>(),
        table.keys().collect::<Vec<_>>(),
        "the parameters the server registers, and those the reference's table lists"
    );
    for (name, (parameter, bounds)) in &registered {
        let (documented, text) = &table[name];
        assert_eq!(
            parameter, documented,
            "{name}: the server, then the reference"
        );
        for range in ranges(text) {
            assert_eq!(
                &range, bounds,
                "{name}: a range in its text, then its bounds"
            );
        }
    }
    assert!(
        ranges(&table["snowflake_id.wal_rmgr_id"].1).contains(&("129".into(), "255".into())),
        "the range check reads the reference's ranges"
    );
    println!("{} parameters: {registered:?}", registered.len());
}
