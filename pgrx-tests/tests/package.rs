//! The Debian package: the installed extension files belong to `postgresql-15-snowflake-id` (as
//! `scripts/test.sh` installs it with `dpkg -i` before the cluster tests, they all run against
//! the packaged artifact), they are unchanged since, and the packaged extension works on a
//! fresh cluster.

use std::process::Command;

use snowflake_id_cluster_tests::fixtures::{count, extension_crate_version, extension_version};
use snowflake_id_cluster_tests::{pg_config, Cluster};

const PACKAGE: &str = "postgresql-15-snowflake-id";

/// Runs a command, asserts success, returns its stdout.
fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("run {program}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{program} {args:?}: {}\nstdout: {stdout}\nstderr: {}\n(scripts/test.sh builds and installs \
         the package: bash scripts/build-deb.sh && dpkg -i target/debian/{PACKAGE}_*.deb)",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn installed_extension_files_belong_to_the_package() {
    let version = extension_crate_version();
    let status = run(
        "dpkg-query",
        &[
            "--show",
            "--showformat=${Status}|${Version}|${Architecture}|${Depends}",
            PACKAGE,
        ],
    );
    let architecture = run("dpkg", &["--print-architecture"]);
    assert_eq!(
        status,
        format!(
            "install ok installed|{version}|{}|postgresql-15",
            architecture.trim()
        ),
        "the installed package is not the one of this source tree"
    );

    let library = format!("{}/snowflake_id.so", pg_config("--pkglibdir").display());
    let extension = format!("{}/extension", pg_config("--sharedir").display());
    let control = format!("{extension}/snowflake_id.control");
    let script = format!("{extension}/snowflake_id--{version}.sql");
    for file in [&library, &control, &script] {
        let owner = run("dpkg", &["-S", file]);
        assert_eq!(owner.trim(), format!("{PACKAGE}: {file}"), "dpkg -S {file}");
    }
    let control_text = std::fs::read_to_string(&control).unwrap();
    assert!(
        control_text.contains(&format!("default_version = '{version}'")),
        "{control}:\n{control_text}"
    );
    // None of the package's files was changed since it was installed (dpkg --verify compares
    // them with the package's md5sums): the cluster tests run against the packaged build, not a
    // later `cargo pgrx install`. (Other scripts, e.g. an older version's install script that
    // the update test puts there, may sit beside them: CREATE EXTENSION does not read them.)
    let changed = run("dpkg", &["--verify", PACKAGE]);
    assert_eq!(
        changed, "",
        "installed files differ from the package (dpkg --verify): replaced since, e.g. by `cargo \
         pgrx install`? Reinstall: dpkg -i target/debian/{PACKAGE}_{version}_*.deb"
    );
    println!("{PACKAGE} {version} installed; owns {library}, {control}, {script}; files verified");
}

#[test]
fn packaged_extension_works_on_a_fresh_cluster() {
    let version = extension_crate_version();
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);",
        )
        .unwrap();
    assert_eq!(extension_version(&mut client), version);

    let rows = client
        .query(
            "INSERT INTO orders (item) VALUES ('book'), ('pen'), ('lamp')
             RETURNING id, (snowflake_decode(id)).*,
                       abs(extract(epoch FROM (snowflake_decode(id)).ts - clock_timestamp()))::float8
                           AS age",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), 3);
    let ids: Vec<i64> = rows.iter().map(|row| row.get("id")).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    for row in &rows {
        let (node, gene): (i32, i32) = (row.get("node"), row.get("gene"));
        let age: f64 = row.get("age");
        assert_eq!((node, gene), (0, 0));
        assert!(age < 60.0, "decoded time {age} s away from now");
    }
    assert_eq!(count(&mut client, "SELECT count(*) FROM orders"), 3);
    println!("packaged snowflake_id {version} on a fresh cluster: inserted and decoded {ids:?}");
}
