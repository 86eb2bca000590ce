//! Installing never harms a running server. A server maps `snowflake_id.so` into every process;
//! an install that rewrote that file in place would make them run the new bytes and crash
//! (seen: the demo's server died with "terminated by signal 4: Illegal instruction" while the
//! test command's `cargo pgrx test` rewrote the library through `sudo cp`).
//!
//! A server with four generating sessions keeps running while (1) a different build of the
//! library (the `#[pg_test]` debug build that `cargo pgrx test pgN` leaves in `target/debug`) is
//! installed the way that step installs it (`scripts/pgrx-sudo/sudo cp`), and (2) the package is
//! installed over it with `apt-get install ./….deb`, as a package upgrade (the Debian package
//! with the version a build of the next commit gets, which apt must take over the installed
//! one). It
//! asserts the postmaster and every session survive and keep issuing IDs after each install,
//! no ID twice, and that after a restart the server runs on the package's library and
//! continues above. Finally the package the test command installed is put back as it was.

use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{
    assert_table_consistent, check_runs, clone_head, command_output, commit_at, count,
    debian_package_version_of, dpkg_version_compares, extension_crate_version, generate_while,
    head_commit_time, insert_batch, package_file_version, package_path, real_now_us,
    workspace_root, IDS_TABLE,
};
use snowflake_id_cluster_tests::{pg_config, pg_major, Cluster};

/// Runs `program args…`, panicking with its output on failure.
fn run(program: &Path, args: &[&str]) {
    if let Err(failure) = command_output(program, args) {
        panic!("{failure}");
    }
}

/// Installs `package` with `install_package` of scripts/safe-install.sh.
fn install_package(package: &Path) -> Result<(), String> {
    let script = workspace_root().join("scripts/safe-install.sh");
    command_output(
        "bash",
        &[
            "-c",
            "source \"$1\" && install_package \"$2\"",
            "install_package",
            script.to_str().unwrap(),
            package.to_str().unwrap(),
        ],
    )
    .map(drop)
}

/// The library of the `#[pg_test]` build for this major, as `cargo pgrx test` packaged it
/// before installing it.
fn test_build_library() -> PathBuf {
    let library = workspace_root()
        .join(format!("target/debug/snowflake_id-pg{}", pg_major()))
        .join(pg_config("--pkglibdir").strip_prefix("/").unwrap())
        .join("snowflake_id.so");
    assert!(
        library.is_file(),
        "{} is missing: run `cargo pgrx test pg{}` first (scripts/test.sh does)",
        library.display(),
        pg_major()
    );
    library
}

/// The same Debian package with the version a build of the next commit gets
/// (`debian_package_version` of scripts/common.sh in a scratch clone with one more commit, made
/// now: after the installed package was built, also from a tree with uncommitted changes), so
/// that installing it is the package upgrade a rebuild is.
fn rebuilt_package(package: &Path, directory: &Path) -> (PathBuf, String) {
    let tree = clone_head(directory);
    let now = real_now_us() / 1_000_000;
    commit_at(&tree, now.max(head_commit_time(&tree)) + 1);
    let rebuilt_version = debian_package_version_of(&tree);
    let installed_version = package_file_version(package);
    assert!(
        dpkg_version_compares(&rebuilt_version, "gt", &installed_version),
        "a rebuild's version {rebuilt_version} does not sort above {installed_version}"
    );
    let root = directory.join("deb-root");
    let dpkg_deb = Path::new("dpkg-deb");
    run(
        dpkg_deb,
        &[
            "--raw-extract",
            package.to_str().unwrap(),
            root.to_str().unwrap(),
        ],
    );
    let control = root.join("DEBIAN/control");
    let text = std::fs::read_to_string(&control).unwrap();
    let bumped = text.replace(
        &format!("\nVersion: {installed_version}\n"),
        &format!("\nVersion: {rebuilt_version}\n"),
    );
    assert_ne!(
        bumped,
        text,
        "no Version: {installed_version} in {}",
        control.display()
    );
    std::fs::write(&control, bumped).unwrap();
    let rebuilt = directory.join("rebuilt.deb");
    run(
        dpkg_deb,
        &[
            "--root-owner-group",
            "--build",
            root.to_str().unwrap(),
            rebuilt.to_str().unwrap(),
        ],
    );
    (rebuilt, rebuilt_version)
}

/// Installs a rebuilt package as its users do, `apt-get install ./….deb`, and checks that apt
/// replaced the installed package with it (not "already the newest version").
fn apt_get_install(package: &Path, version: &str) -> Result<(), String> {
    command_output(
        "env",
        &[
            "DEBIAN_FRONTEND=noninteractive",
            "apt-get",
            "install",
            "--yes",
            package.to_str().unwrap(),
        ],
    )?;
    let name = format!("postgresql-{}-snowflake-id", pg_major());
    let installed = command_output("dpkg-query", &["--show", "--showformat=${Version}", &name])?;
    if installed != version {
        return Err(format!("apt-get left {name} {installed}, not {version}"));
    }
    Ok(())
}

#[test]
fn running_server_survives_installs_of_other_builds_and_package_upgrades() {
    let package = package_path(&extension_crate_version());
    assert!(package.is_file(), "{} is missing", package.display());
    let installed = pg_config("--pkglibdir").join("snowflake_id.so");
    let other_build = test_build_library();
    assert_ne!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(&other_build).unwrap(),
        "the test build must differ from the installed library"
    );
    let scratch = tempfile_dir();
    let (upgrade, upgrade_version) = rebuilt_package(&package, &scratch);
    let _restore = RestorePackage(package.clone());

    let mut cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client.batch_execute(IDS_TABLE).unwrap();
    let postmaster = cluster.postmaster_pid();

    let (runs, installs_done_us) = generate_while(&cluster, 4, 100, || {
        let mut done_us = Vec::new();
        sleep(Duration::from_secs(1));
        run(
            &workspace_root().join("scripts/pgrx-sudo/sudo"),
            &[
                "cp",
                other_build.to_str().unwrap(),
                installed.to_str().unwrap(),
            ],
        );
        assert_eq!(
            std::fs::read(&installed).unwrap(),
            std::fs::read(&other_build).unwrap(),
            "the sudo shim did not install the test build"
        );
        done_us.push(real_now_us());
        sleep(Duration::from_secs(2));
        apt_get_install(&upgrade, &upgrade_version).unwrap();
        done_us.push(real_now_us());
        sleep(Duration::from_secs(2));
        done_us
    });
    let (batches, _, _) = check_runs(&runs);
    let last_install_us = *installs_done_us.last().unwrap();
    for run in &runs {
        let after = run
            .rows
            .iter()
            .filter(|&&(_, before)| before > last_install_us);
        assert!(
            after.count() > 0,
            "session {} issued no ID after the last install",
            run.session
        );
    }
    assert_eq!(
        cluster.postmaster_pid(),
        postmaster,
        "the postmaster changed"
    );
    let log = cluster.server_log();
    assert!(
        !log.contains("terminated by signal") && !log.contains("reinitializing"),
        "a server process crashed during the installs:\n{}",
        cluster.log_tail()
    );
    let during = assert_table_consistent(&mut client);
    println!(
        "PostgreSQL {}: 4 sessions, {batches} batches, {during} IDs, none twice, across the \
         test build (scripts/pgrx-sudo/sudo cp) and the rebuilt package {upgrade_version} \
         (apt-get install ./{}); postmaster {postmaster} never restarted",
        pg_major(),
        upgrade.display()
    );

    // New backends of the same postmaster, then a restart that loads the package's library.
    let highest = count(&mut client, "SELECT max(id) FROM ids");
    insert_batch(&mut cluster.connect(), 10, 0, 1000).unwrap();
    drop(client);
    cluster.stop("fast");
    cluster.start();
    let mut client = cluster.connect();
    let after_restart = insert_batch(&mut client, 11, 0, 1000).unwrap();
    assert!(after_restart.iter().all(|&id| id > highest));
    let total = assert_table_consistent(&mut client);
    println!("after a restart on the installed package: {total} IDs in all, none twice");

    std::fs::remove_dir_all(&scratch).unwrap();
}

/// Puts the package the test command installed back in place when the test ends, also when it
/// fails, so the tests after it run on the packaged build.
struct RestorePackage(PathBuf);

impl Drop for RestorePackage {
    fn drop(&mut self) {
        // No panic here: this also runs while a failed test unwinds.
        if let Err(failure) = install_package(&self.0) {
            eprintln!("could not reinstall {}: {failure}", self.0.display());
        }
    }
}

/// A new, empty scratch directory.
fn tempfile_dir() -> PathBuf {
    let directory =
        std::env::temp_dir().join(format!("snowflake-install-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}
