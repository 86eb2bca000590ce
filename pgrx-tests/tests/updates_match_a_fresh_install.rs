//! One install script, written as the current design, and update scripts that only update: the
//! extension updated from every release (created at that release through the scripts the
//! package ships) is the same, object by object, as a fresh install of the current version: the
//! same members with the same definitions, owners, privileges, comments, dependencies and
//! configuration tables. Derived from the catalog and from `sql/`, so an object added to one
//! path and not the other fails here.

use snowflake_id_cluster_tests::fixtures::{
    extension_crate_version, extension_differences, extension_objects, extension_version,
    released_versions, workspace_root,
};
use snowflake_id_cluster_tests::Cluster;

#[test]
fn an_update_from_every_release_matches_a_fresh_install() {
    let current = extension_crate_version();
    let releases = released_versions();
    assert_eq!(releases.first().map(String::as_str), Some("0.1.0"));
    assert_eq!(releases.last(), Some(&current), "sql/ updates to {current}");
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE DATABASE fresh").unwrap();
    let mut fresh = cluster.connect_to("fresh");
    fresh
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let expected = extension_objects(&mut fresh);
    let mut problems = Vec::new();
    for version in releases.iter().filter(|version| **version != current) {
        let database = format!("from_{}", version.replace('.', "_"));
        admin
            .batch_execute(&format!("CREATE DATABASE {database}"))
            .unwrap();
        let mut updated = cluster.connect_to(&database);
        updated
            .batch_execute(&format!(
                "CREATE EXTENSION snowflake_id VERSION '{version}'"
            ))
            .unwrap_or_else(|error| panic!("create the extension at {version}: {error}"));
        assert_eq!(extension_version(&mut updated), *version);
        updated
            .batch_execute("ALTER EXTENSION snowflake_id UPDATE")
            .unwrap_or_else(|error| panic!("update from {version}: {error}"));
        assert_eq!(extension_version(&mut updated), current);
        let differences = extension_differences(
            &format!("updated from {version}"),
            &extension_objects(&mut updated),
            "fresh install",
            &expected,
        );
        println!(
            "{version} -> {current}: {} differences in {} objects",
            differences.len(),
            expected.len()
        );
        problems.extend(differences);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The install script defines each object once: no statement of its own (unindented; what a
/// function's body does is indented) is a `CREATE OR REPLACE`, `DROP` or `ALTER` of something
/// it created (a second `CREATE` of one object would fail to install), so it reads as what the
/// current version is.
#[test]
fn the_install_script_creates_each_object_once() {
    let script = std::fs::read_to_string(workspace_root().join(format!(
        "sql/snowflake_id--{}.sql",
        extension_crate_version()
    )))
    .unwrap();
    let statements: Vec<&str> = script
        .lines()
        .filter(|line| {
            line.starts_with("CREATE OR REPLACE")
                || line.starts_with("DROP ")
                || line.starts_with("ALTER FUNCTION")
                || line.starts_with("ALTER TABLE")
                || line.starts_with("ALTER SEQUENCE")
                || line.starts_with("ALTER VIEW")
        })
        .collect();
    assert!(
        statements.is_empty(),
        "the install script redefines what it created:\n{}",
        statements.join("\n")
    );
}
