//! The package of the major under test (`scripts/build-package.sh`): for PostgreSQL 15 the Debian
//! package `postgresql-15-snowflake-id`, for the source-built 17 and 18 a tarball. The installed
//! extension files are the package's, unchanged since (`scripts/test.sh` installs it before the
//! cluster tests, so they all run against the packaged artifact), and the packaged extension
//! works on a fresh cluster.

use snowflake_id_cluster_tests::fixtures::{
    command_output, count, extension_crate_version, extension_version, package_path,
};
use snowflake_id_cluster_tests::{pg_config, pg_major, Cluster};

/// Runs a command, asserts success, returns its stdout.
fn run(program: &str, args: &[&str]) -> String {
    command_output(program, args).unwrap_or_else(|failure| {
        panic!(
            "{failure}\n(scripts/test.sh builds and installs the package: bash \
             scripts/build-package.sh {major}, then dpkg -i or tar --extract)",
            major = pg_major()
        )
    })
}

/// The extension's files in the installation under test: library, control file, install script.
fn extension_files(version: &str) -> [String; 3] {
    let extension = format!("{}/extension", pg_config("--sharedir").display());
    [
        format!("{}/snowflake_id.so", pg_config("--pkglibdir").display()),
        format!("{extension}/snowflake_id.control"),
        format!("{extension}/snowflake_id--{version}.sql"),
    ]
}

#[test]
fn installed_extension_files_belong_to_the_package() {
    let version = extension_crate_version();
    let files = extension_files(&version);
    let control_text = std::fs::read_to_string(&files[1]).unwrap();
    assert!(
        control_text.contains(&format!("default_version = '{version}'")),
        "{}:\n{control_text}",
        files[1]
    );
    if pg_major() == 15 {
        installed_files_belong_to_the_debian_package(&version, &files);
    } else {
        installed_files_are_the_tarballs(&version, &files);
    }
}

/// PostgreSQL 15: the files belong to the installed Debian package of this version, unchanged.
fn installed_files_belong_to_the_debian_package(version: &str, files: &[String]) {
    const PACKAGE: &str = "postgresql-15-snowflake-id";
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
    for file in files {
        let owner = run("dpkg", &["-S", file]);
        assert_eq!(owner.trim(), format!("{PACKAGE}: {file}"), "dpkg -S {file}");
    }
    // None of the package's files was changed since it was installed (dpkg --verify compares
    // them with the package's md5sums): the cluster tests run against the packaged build, not a
    // later `cargo pgrx install`. (Other scripts, e.g. an older version's install script that
    // the update test puts there, may sit beside them: CREATE EXTENSION does not read them.)
    let changed = run("dpkg", &["--verify", PACKAGE]);
    assert_eq!(
        changed, "",
        "installed files differ from the package (dpkg --verify): replaced since, e.g. by `cargo \
         pgrx install`? Reinstall: dpkg -i target/package/{PACKAGE}_{version}_*.deb"
    );
    println!("{PACKAGE} {version} installed; owns {files:?}; files verified");
}

/// The source-built majors: the tarball holds the extension's files and nothing else, and the
/// installed files are byte for byte the tarball's (`tar --compare`).
fn installed_files_are_the_tarballs(version: &str, files: &[String]) {
    let tarball = package_path(version);
    let tarball = tarball.to_str().unwrap();
    let mut listed: Vec<String> = run("tar", &["--list", "--gzip", "--file", tarball])
        .lines()
        .map(|line| format!("/{line}"))
        .collect();
    listed.sort();
    for file in files {
        assert!(listed.contains(file), "{tarball} lacks {file}: {listed:#?}");
    }
    let library_dir = pg_config("--pkglibdir");
    let extension_dir = pg_config("--sharedir").join("extension");
    for file in &listed {
        let path = std::path::Path::new(file);
        assert!(
            (path.parent() == Some(&library_dir) || path.parent() == Some(&extension_dir))
                && path
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("snowflake_id"),
            "{tarball} holds {file}, not a file of the extension"
        );
    }
    let differences = run(
        "tar",
        &["--compare", "--gzip", "--file", tarball, "--directory", "/"],
    );
    assert_eq!(differences, "", "installed files differ from {tarball}");
    println!("{tarball}: installed files verified: {files:?}");
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
