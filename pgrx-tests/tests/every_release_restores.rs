//! A dump of a database at any release since 0.4.0 restores into the current package by the
//! reference's steps (Upgrading, "Restoring a dump of an older release"): the database is
//! populated at that release (created through the scripts the package ships), dumped by its
//! superuser and by its owner, and restored into a cluster whose clock is ten minutes behind:
//! `CREATE EXTENSION snowflake_id VERSION '{version}'`, the dump, `ALTER EXTENSION snowflake_id
//! UPDATE`, then the steps the reference gives for that release (0.4.0's dumps carry no floor;
//! a floor ahead of the clock waits for a superuser). New IDs then lie above every restored one,
//! in every restored table. What the releases themselves allowed is held too: before 0.10.0 a
//! superuser restores (the owner could not write the extension's state), and from 0.5.0 to
//! 0.8.0 the owner's pg_dump fails (it could not read the floor relations).

use snowflake_id_cluster_tests::fixtures::{
    column, extension_crate_version, extension_version, failure, released_versions, version_numbers,
};
use snowflake_id_cluster_tests::{Client, Cluster};

/// The oldest release whose dumps the reference says how to restore.
const OLDEST: [u32; 3] = [0, 4, 0];

/// The releases this test restores from, oldest first: every one since [`OLDEST`].
fn releases_to_restore() -> Vec<String> {
    released_versions()
        .into_iter()
        .filter(|version| !before(version, OLDEST))
        .collect()
}

/// The reference's step after restoring a dump of 0.4.0 (Upgrading, "Restoring a dump of an
/// older release"), as it stands there, for this test's two tables.
const NO_FLOOR_IN_THE_DUMP: &str = "
SELECT setval('snowflake_id_internal.snowflake_floor',
              (EXTRACT(epoch FROM greatest((SELECT snowflake_timestamp(max(id), 'orders') FROM orders),
                                           (SELECT snowflake_timestamp(max(id)) FROM events))
                                  + interval '1 second') * 1000000)::bigint);
SELECT snowflake_accept_floor();";

/// Whether `version` is older than `than`.
fn before(version: &str, than: [u32; 3]) -> bool {
    version_numbers(version)[..] < than[..]
}

/// Releases 0.5.0 to 0.8.0 had the floor relations (a dump reads them) and granted nobody but
/// superusers to read them.
fn floor_unreadable_by_the_owner(version: &str) -> bool {
    !before(version, [0, 5, 0]) && before(version, [0, 9, 0])
}

/// The newest ID of each table the owner filled.
fn newest_ids(client: &mut Client) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT (SELECT max(id) FROM orders), (SELECT max(id) FROM events)",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

#[test]
fn a_dump_of_every_release_since_0_4_0_restores_by_the_documented_steps() {
    let releases = releases_to_restore();
    assert_eq!(releases.first().map(String::as_str), Some("0.4.0"));
    assert_eq!(releases.last(), Some(&extension_crate_version()));
    let old = Cluster::builder().start();
    // One new cluster per dumper: accepting a floor raises the whole server's, so each cluster
    // meets every release's floor above the one it accepted before.
    let new_clusters = [
        Cluster::builder().faketime_at("-10m").start(),
        Cluster::builder().faketime_at("-10m").start(),
    ];
    for cluster in [&old, &new_clusters[0], &new_clusters[1]] {
        cluster
            .connect()
            .batch_execute("CREATE ROLE shop_owner LOGIN")
            .unwrap();
    }
    for version in &releases {
        let database = format!("shop_{}", version.replace('.', "_"));
        old.connect()
            .batch_execute(&format!("CREATE DATABASE {database} OWNER shop_owner"))
            .unwrap();
        old.connect_to(&database)
            .batch_execute(&format!(
                "CREATE EXTENSION snowflake_id VERSION '{version}';
                 SELECT snowflake_create_sequence('orders', 'js53');"
            ))
            .unwrap_or_else(|error| panic!("{version}: {error}"));
        let mut owner = old.connect_as(&database, "shop_owner");
        owner
            .batch_execute(
                "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval('orders'), item text);
                 CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), kind text);
                 INSERT INTO orders (item) SELECT 'before' FROM generate_series(1, 2000);
                 INSERT INTO events (kind) SELECT 'before' FROM generate_series(1, 2000);",
            )
            .unwrap_or_else(|error| panic!("{version}: {error}"));
        let (orders, events) = newest_ids(&mut owner);
        for (dumper, new) in ["postgres", "shop_owner"].into_iter().zip(&new_clusters) {
            let dump = match old.try_dump_with(&database, dumper, &[]) {
                Ok(dump) => dump,
                Err(failure) => {
                    // Before 0.9.0 only superusers could read the floor relations, which
                    // every dump of the database reads (the reference: dump such a database
                    // as a superuser, or update it first).
                    println!("[{version}, dumped by {dumper}] pg_dump: {failure}");
                    assert!(
                        dumper == "shop_owner" && floor_unreadable_by_the_owner(version),
                        "{version} by {dumper}: {failure}"
                    );
                    // (PostgreSQL 18's pg_dump words it "user may lack SELECT privilege".)
                    assert!(
                        failure.contains("snowflake_floor")
                            && (failure.contains("permission denied")
                                || failure.contains("lack SELECT privilege")),
                        "{failure}"
                    );
                    continue;
                }
            };
            assert!(!floor_unreadable_by_the_owner(version) || dumper == "postgres");
            // Before 0.10.0 the database's owner could not write the extension's state: a
            // superuser restores such a dump, whoever made it.
            let restorer = if before(version, [0, 10, 0]) {
                "postgres"
            } else {
                dumper
            };
            let target = format!("{database}_by_{dumper}");
            new.connect()
                .batch_execute(&format!("CREATE DATABASE {target} OWNER shop_owner"))
                .unwrap();
            let mut superuser = new.connect_to(&target);
            superuser
                .batch_execute(&format!(
                    "CREATE EXTENSION snowflake_id VERSION '{version}'"
                ))
                .unwrap();
            let restored = new.pg_restore_as(&dump, &target, restorer, &[]);
            let said = String::from_utf8_lossy(&restored.stderr).into_owned();
            println!("[{version}, dumped by {dumper}, restored by {restorer}] pg_restore: {said}");
            if restorer == "postgres" {
                assert!(restored.status.success(), "{said}");
            } else {
                // The routine errors of a restore by a role that does not own the extension.
                assert!(
                    said.lines()
                        .filter(|line| line.contains("ERROR"))
                        .all(|line| line.contains("must be owner of extension")),
                    "{said}"
                );
            }
            superuser
                .batch_execute("ALTER EXTENSION snowflake_id UPDATE")
                .unwrap();
            assert_eq!(extension_version(&mut superuser), extension_crate_version());
            if version == "0.4.0" {
                // 0.4.0 had no floor relation, so its dumps carry no floor: the reference's
                // step sets it above the newest restored ID of every keyed table.
                superuser.batch_execute(NO_FLOOR_IN_THE_DUMP).unwrap();
            }
            let sequences: Vec<String> = column(
                &mut superuser,
                "SELECT name FROM snowflake_sequences ORDER BY name",
            );
            assert_eq!(sequences, ["default", "orders"], "{version} by {dumper}");
            let mut app = new.connect_as(&target, "shop_owner");
            let insert = "INSERT INTO orders (item) VALUES ('after') RETURNING id";
            if version != "0.4.0" {
                // The dump's floor is ten minutes ahead of this server's clock, in a database
                // whose owner may write it: IDs wait for a superuser (the reference's step).
                let (code, message, _) = failure(&mut app, insert);
                assert_eq!(code, "55000", "{version} by {dumper}: {message}");
                superuser
                    .batch_execute("SELECT snowflake_accept_floor();")
                    .unwrap();
            }
            let first_order: i64 = app.query_one(insert, &[]).unwrap().get(0);
            let first_event: i64 = app
                .query_one(
                    "INSERT INTO events (kind) VALUES ('after') RETURNING id",
                    &[],
                )
                .unwrap()
                .get(0);
            println!(
                "[{version}, dumped by {dumper}] newest restored {orders}, {events}; \
                 first new {first_order}, {first_event}"
            );
            assert!(
                first_order > orders && first_event > events,
                "{version} by {dumper}: new IDs among the restored ones"
            );
        }
    }
}
