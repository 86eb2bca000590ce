//! Every function a user calls describes itself where PostgreSQL shows it (`\df+`,
//! `obj_description`), with the one-line description of the reference's table of functions
//! (docs/reference.md, "SQL reference"): on 229c10d 21 of 23 had none, and
//! `snowflake_worker_slots()` was not in the reference at all. Checked from the catalog after a
//! fresh install and after the update from 0.13.0: each member function outside
//! `snowflake_id_internal` has a description, each is a row of the table, and each row is one.

use std::collections::BTreeSet;

use snowflake_id_cluster_tests::fixtures::workspace_root;
use snowflake_id_cluster_tests::{Client, Cluster};

/// The descriptions of the reference's table of functions.
fn documented() -> BTreeSet<String> {
    let reference = std::fs::read_to_string(workspace_root().join("docs/reference.md")).unwrap();
    let rows: Vec<String> = reference
        .lines()
        .skip_while(|line| !line.starts_with("| function | what it does |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split('|')
                .nth(1)
                .unwrap()
                .trim()
                .to_owned()
        })
        .collect();
    assert!(
        rows.len() >= 24,
        "the table of functions has {} rows",
        rows.len()
    );
    rows.into_iter().collect()
}

/// Each member function outside `snowflake_id_internal`, with its description (None: none).
fn described(client: &mut Client) -> Vec<(String, Option<String>)> {
    client
        .query(
            "SELECT p.oid::regprocedure::text, obj_description(p.oid, 'pg_proc')
               FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
              WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
                AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id')
                AND p.pronamespace <> 'snowflake_id_internal'::regnamespace
              ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

fn assert_described_as_documented(client: &mut Client, how: &str) {
    let documented = documented();
    let functions = described(client);
    assert!(functions.len() >= 24, "{how}: {functions:?}");
    let mut seen = BTreeSet::new();
    for (function, description) in &functions {
        let description = description
            .as_deref()
            .unwrap_or_else(|| panic!("{how}: {function} has no description"));
        assert!(
            documented.contains(description),
            "{how}: {function}'s description {description:?} is not a row of the reference's \
             table of functions"
        );
        seen.insert(description.to_owned());
    }
    let undescribed: Vec<_> = documented.difference(&seen).collect();
    assert!(
        undescribed.is_empty(),
        "{how}: rows of the reference's table no function carries: {undescribed:?}"
    );
}

#[test]
fn every_function_carries_the_references_description() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE DATABASE updated").unwrap();
    admin
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    assert_described_as_documented(&mut admin, "a fresh install");

    let mut updated = cluster.connect_to("updated");
    updated
        .batch_execute(
            "CREATE EXTENSION snowflake_id VERSION '0.13.0';
             ALTER EXTENSION snowflake_id UPDATE;",
        )
        .unwrap();
    assert_described_as_documented(&mut updated, "the update from 0.13.0");
}
