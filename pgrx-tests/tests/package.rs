//! The package of the major under test (`scripts/build-package.sh`): the Debian package
//! `postgresql-<major>-snowflake-id` for Debian's and PGDG's layout, which lintian finds clean.
//! It is installed by dpkg on the installation of that major (`postgresql-<major>`, Debian's
//! for 15, the test setup's local package for 17 and 18, in the same layout), the installed
//! extension files are the package's, unchanged since (`scripts/test.sh` installs it before the
//! cluster tests, so they all run against the packaged artifact), and the packaged extension
//! works on a fresh cluster, also one made by postgresql-common's `pg_createcluster`. The package
//! of a later build carries a version that dpkg and apt sort above the installed one.

use snowflake_id_cluster_tests::fixtures::{
    clone_head, command_output, commit_at, count, debian_package_version_of, dpkg_version_compares,
    extension_crate_version, extension_version, git_in, head_commit_time, package_file_version,
    package_path, workspace_root,
};
use snowflake_id_cluster_tests::{free_port, pg_config, pg_major, Cluster};

/// Runs a command, asserts success, returns its stdout.
fn run(program: &str, args: &[&str]) -> String {
    command_output(program, args).unwrap_or_else(|failure| {
        panic!(
            "{failure}\n(scripts/test.sh builds and installs the package: bash \
             scripts/build-package.sh {major}, then dpkg -i)",
            major = pg_major()
        )
    })
}

/// The extension's files in the installation under test: library, control file, install
/// script, and the 0.1.0 release's install script (with the update scripts, it creates the
/// extension at any release, to restore that release's dumps).
/// The extension's installed files where the server finds them, by their real paths: the 16 here
/// (PyPI's wheel) finds its Debian-layout directories through symbolic links.
fn extension_files(version: &str) -> [String; 4] {
    let real = |option: &str| std::fs::canonicalize(pg_config(option)).unwrap();
    let extension = format!("{}/extension", real("--sharedir").display());
    [
        format!("{}/snowflake_id.so", real("--pkglibdir").display()),
        format!("{extension}/snowflake_id.control"),
        format!("{extension}/snowflake_id--{version}.sql"),
        format!("{extension}/snowflake_id--0.1.0.sql"),
    ]
}

#[test]
fn installed_extension_files_belong_to_the_package() {
    let version = extension_crate_version();
    let package_version = package_file_version(&package_path(&version));
    let files = extension_files(&version);
    let control_text = std::fs::read_to_string(&files[1]).unwrap();
    assert!(
        control_text.contains(&format!("default_version = '{version}'")),
        "{}:\n{control_text}",
        files[1]
    );
    // Debian's layout, whoever built the server.
    let major = pg_major();
    assert_eq!(
        files[0],
        format!("/usr/lib/postgresql/{major}/lib/snowflake_id.so")
    );
    assert_eq!(
        files[1],
        format!("/usr/share/postgresql/{major}/extension/snowflake_id.control")
    );
    let package = format!("postgresql-{major}-snowflake-id");
    let status = run(
        "dpkg-query",
        &[
            "--show",
            "--showformat=${Status}|${Version}|${Architecture}",
            &package,
        ],
    );
    let architecture = run("dpkg", &["--print-architecture"]);
    assert_eq!(
        status,
        format!(
            "install ok installed|{package_version}|{}",
            architecture.trim()
        ),
        "the installed package is not the one of this source tree"
    );
    // It depends on the server's package and on the C libraries its library links, and dpkg
    // installed it with those dependencies met.
    let depends = run(
        "dpkg-query",
        &["--show", "--showformat=${Depends}", &package],
    );
    assert!(
        depends.starts_with(&format!("postgresql-{major}, libc6 (>= ")),
        "{package} depends on {depends}"
    );
    let server = run(
        "dpkg-query",
        &[
            "--show",
            "--showformat=${Status}",
            &format!("postgresql-{major}"),
        ],
    );
    assert_eq!(server, "install ok installed", "postgresql-{major}");
    for file in &files {
        let owner = run("dpkg", &["-S", file]);
        assert_eq!(owner.trim(), format!("{package}: {file}"), "dpkg -S {file}");
    }
    // None of the package's files was changed since it was installed (dpkg --verify compares
    // them with the package's md5sums): the cluster tests run against the packaged build, not a
    // later `cargo pgrx install`. (Other scripts, e.g. an older version's install script that
    // the update test puts there, may sit beside them: CREATE EXTENSION does not read them.)
    let changed = run("dpkg", &["--verify", &package]);
    assert_eq!(
        changed, "",
        "installed files differ from the package (dpkg --verify): replaced since, e.g. by `cargo \
         pgrx install`? Reinstall: dpkg -i target/package/{package}_{version}_*.deb"
    );
    // The documentation comes with it: the README and every page of docs/, as in the tree.
    let documentation = format!("/usr/share/doc/{package}");
    let mut pages = vec!["README.md".to_owned()];
    for entry in std::fs::read_dir(workspace_root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    for page in &pages {
        let file = format!("{documentation}/{page}.gz");
        let owner = run("dpkg", &["-S", &file]);
        assert_eq!(owner.trim(), format!("{package}: {file}"), "dpkg -S {file}");
    }
    println!(
        "{package} {package_version} (extension {version}) installed; depends on {depends}; \
         owns {files:?} and {} pages of documentation; verified",
        pages.len()
    );
}

/// Every release the CHANGELOG names can be checked out by its tag: `scripts/tag-releases.sh`,
/// run in a scratch clone (which has the repository's tags), tags each one `v<version>`,
/// annotated, on the commit that set Cargo.toml's version to it, keeps the tags already there
/// (it fails on one elsewhere), and a build of the newest tag carries the plain version.
#[test]
fn every_changelog_release_has_an_annotated_tag_where_its_version_was_set() {
    let scratch = std::env::temp_dir().join(format!("snowflake-tags-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let tree = clone_head(&scratch);
    let tagged = std::process::Command::new("bash")
        .arg(tree.join("scripts/tag-releases.sh"))
        .env("GIT_COMMITTER_NAME", "snowflake_id tests")
        .env("GIT_COMMITTER_EMAIL", "tests@localhost")
        .output()
        .expect("run scripts/tag-releases.sh");
    let listing = String::from_utf8_lossy(&tagged.stdout).into_owned();
    assert!(
        tagged.status.success(),
        "{listing}{}",
        String::from_utf8_lossy(&tagged.stderr)
    );
    let changelog = std::fs::read_to_string(tree.join("CHANGELOG.md")).unwrap();
    let releases: Vec<&str> = changelog
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .filter_map(|heading| heading.split(' ').next())
        .filter(|version| version.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert!(releases.contains(&extension_crate_version().as_str()));
    for release in &releases {
        let tag = format!("v{release}");
        assert_eq!(
            git_in(&tree, &["cat-file", "-t", &tag]),
            "tag",
            "{tag} is annotated"
        );
        let version_line = format!("version = \"{release}\"");
        let at_tag = git_in(&tree, &["show", &format!("{tag}:Cargo.toml")]);
        assert!(at_tag.contains(&version_line), "{tag}'s Cargo.toml");
        let parent = git_in(
            &tree,
            &["log", "-1", "--format=%P", &format!("{tag}^{{commit}}")],
        );
        if let Some(parent) = parent.split(' ').next().filter(|p| !p.is_empty()) {
            let before = git_in(&tree, &["show", &format!("{parent}:Cargo.toml")]);
            assert!(
                !before.contains(&version_line),
                "{tag} is not where {release} was set"
            );
        }
    }
    let newest = releases[0];
    git_in(&tree, &["checkout", "--quiet", &format!("v{newest}")]);
    assert_eq!(
        debian_package_version_of(&tree),
        newest,
        "a build of v{newest}"
    );
    println!("{listing}");
    std::fs::remove_dir_all(&scratch).unwrap();
}

/// A build from the release tag carries the release's version; a build of any later commit, or
/// of changed files, a version that sorts above the release and above every earlier build, and
/// below the next releases, as Debian's conventions for snapshots want: installing a rebuild
/// (`apt-get install ./…deb`) replaces the installed package instead of keeping it as "already
/// the newest version". Computed by `scripts/common.sh` in a scratch clone, as a build there would.
#[test]
fn package_versions_of_later_builds_sort_above_the_release_and_below_the_next() {
    let release = extension_crate_version();
    let (major, minor, patch) = {
        let parts: Vec<u64> = release.split('.').map(|p| p.parse().unwrap()).collect();
        (parts[0], parts[1], parts[2])
    };
    let next_releases = [
        format!("{major}.{minor}.{}", patch + 1),
        format!("{major}.{}.0", minor + 1),
        format!("{}.0.0", major + 1),
    ];
    let scratch = std::env::temp_dir().join(format!("snowflake-versions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let tree = clone_head(&scratch);

    git_in(&tree, &["tag", "--force", &format!("v{release}")]);
    assert_eq!(debian_package_version_of(&tree), release, "the release tag");

    let mut builds = vec![release.clone()];
    commit_at(&tree, head_commit_time(&tree) + 1);
    builds.push(debian_package_version_of(&tree));
    commit_at(&tree, head_commit_time(&tree) + 1);
    builds.push(debian_package_version_of(&tree));
    std::fs::write(tree.join("README.md"), "changed, not committed\n").unwrap();
    builds.push(debian_package_version_of(&tree));
    // A build of changed files a second later: the build time is part of its version.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    builds.push(debian_package_version_of(&tree));
    assert!(builds[3].contains(".dirty"), "{builds:?}");
    for pair in builds.windows(2) {
        assert!(
            dpkg_version_compares(&pair[1], "gt", &pair[0]),
            "{} does not sort above {}",
            pair[1],
            pair[0]
        );
    }
    for build in &builds[1..] {
        for next in &next_releases {
            assert!(
                dpkg_version_compares(build, "lt", next),
                "{build} does not sort below {next}"
            );
        }
    }
    std::fs::remove_dir_all(&scratch).unwrap();
    println!(
        "release {release}, then {:?}; all below {next_releases:?}",
        &builds[1..]
    );
}

/// The installation under test works with postgresql-common's cluster tools as Debian's own
/// packages do: `pg_createcluster` makes a cluster that preloads the library, `pg_ctlcluster`
/// starts it, and `psql -p <port>` (postgresql-common's wrapper, running this major's psql)
/// reaches it through Debian's socket directory with no `-h`, where the extension works. (The
/// source-built 17 and 18 once looked for the socket in /tmp.)
#[test]
fn pg_createcluster_and_pg_ctlcluster_clusters_run_the_extension() {
    let major = pg_major().to_string();
    let name = format!("snowflake_test_{}", std::process::id());
    let port = free_port().to_string();
    let _drop = DroppedCluster(major.clone(), name.clone());
    run(
        "pg_createcluster",
        &[
            "--port",
            &port,
            "-o",
            "listen_addresses=",
            "-o",
            "shared_preload_libraries=snowflake_id",
            &major,
            &name,
        ],
    );
    run("pg_ctlcluster", &[&major, &name, "start"]);
    let output = run(
        "runuser",
        &[
            "-u",
            "postgres",
            "--",
            "psql",
            "-p",
            &port,
            "-X",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            "CREATE EXTENSION snowflake_id",
            "-c",
            "SELECT current_setting('server_version_num')::int / 10000,
                    current_setting('unix_socket_directories'),
                    (snowflake_decode(snowflake_nextval())).node",
        ],
    );
    assert_eq!(
        output.lines().last(),
        Some(format!("{major}|/var/run/postgresql|0").as_str()),
        "{output}"
    );
    println!("pg_createcluster {major} {name} -p {port}; psql -p {port}: {output}");
}

/// Stops and drops a cluster of postgresql-common when the test ends, also when it fails.
struct DroppedCluster(String, String);

impl Drop for DroppedCluster {
    fn drop(&mut self) {
        if let Err(failure) = command_output("pg_dropcluster", &["--stop", &self.0, &self.1]) {
            eprintln!("pg_dropcluster {} {}: {failure}", self.0, self.1);
        }
    }
}

/// Debian's package checker finds neither an error nor a warning in the package.
#[test]
fn lintian_finds_nothing_wrong_with_the_package() {
    let package = package_path(&extension_crate_version());
    let package = package.to_str().unwrap();
    let findings = run("lintian", &["--fail-on", "error,warning", package]);
    println!("lintian {package}: {findings}");
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

/// The source archive for PGXN (`scripts/build-source-archive.sh`): every file of the tree under
/// one directory, with a META.json at its top that gives PGXN's required fields (meta spec
/// 1.0.0) and this version, read by PostgreSQL's own JSON parser.
#[test]
fn the_pgxn_source_archive_carries_a_meta_json_of_this_version() {
    let version = extension_crate_version();
    let script = workspace_root().join("scripts/build-source-archive.sh");
    let built = run("bash", &[script.to_str().unwrap()]);
    let archive = workspace_root().join(built.lines().last().expect("the archive's path"));
    let listing = run(
        "python3",
        &["-m", "zipfile", "--list", archive.to_str().unwrap()],
    );
    let top = format!("snowflake_id-{version}/");
    for file in [
        "META.json",
        "Cargo.toml",
        "snowflake_id.control",
        "src/lib.rs",
        "LICENSE",
    ] {
        assert!(
            listing.contains(&format!("{top}{file} ")),
            "{} lacks {top}{file}:\n{listing}",
            archive.display()
        );
    }
    let meta = std::fs::read_to_string(workspace_root().join("META.json")).unwrap();
    let cluster = Cluster::builder().start();
    let row = cluster
        .connect()
        .query_one(
            "SELECT m->>'name', m->>'version', m->>'license', m->'meta-spec'->>'version',
                    m->'provides'->'snowflake_id'->>'version',
                    m->'provides'->'snowflake_id'->>'file',
                    length(m->>'abstract') > 0 AND length(m->>'maintainer') > 0
             FROM (SELECT $1::text::jsonb AS m) AS meta",
            &[&meta],
        )
        .unwrap();
    let fields: (String, String, String, String, String, String, bool) = (
        row.get(0),
        row.get(1),
        row.get(2),
        row.get(3),
        row.get(4),
        row.get(5),
        row.get(6),
    );
    assert_eq!(
        fields,
        (
            "snowflake_id".to_owned(),
            version.clone(),
            "postgresql".to_owned(),
            "1.0.0".to_owned(),
            version.clone(),
            format!("sql/snowflake_id--{version}.sql"),
            true
        ),
        "META.json"
    );
    assert!(listing.contains(&format!("{top}sql/snowflake_id--{version}.sql ")));
    println!("{}: META.json of {version}", archive.display());
}
