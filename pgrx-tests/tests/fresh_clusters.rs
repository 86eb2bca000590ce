//! What every other test stands on: a fresh cluster is what initdb makes. The harness copies
//! one initdb per installation (pgrx-tests/src/initdb_template.rs) instead of running initdb
//! for each cluster; a copy must have the catalog initdb writes, start and recover from a crash
//! like it, and have a system identifier of its own, since the extension tells clusters apart
//! by it (docs/design.md §5.3).

use std::collections::HashSet;

use snowflake_id_cluster_tests::{Client, Cluster};

/// The system identifier and a digest of the catalog: every relation with its OID and kind,
/// every database with its encoding and locale, and whether data checksums are on.
fn identity_and_catalog(client: &mut Client) -> (i64, String) {
    let row = client
        .query_one(
            "SELECT (SELECT system_identifier FROM pg_control_system()),
                    md5((SELECT string_agg(format('%s %s %s', oid, relname, relkind), ','
                                           ORDER BY oid) FROM pg_class)
                        || (SELECT string_agg(format('%s %s %s %s', datname,
                                                     pg_encoding_to_char(encoding), datcollate,
                                                     datctype), ',' ORDER BY datname)
                            FROM pg_database)
                        || current_setting('data_checksums'))",
            &[],
        )
        .expect("read the system identifier and the catalog");
    (row.get(0), row.get(1))
}

#[test]
fn copies_of_the_initdb_template_have_initdb_s_catalog_and_identifiers_of_their_own() {
    let mut copies: Vec<Cluster> = (0..3).map(|_| Cluster::builder().start()).collect();
    // A server environment gives a cluster an initdb of its own (the harness runs initdb under
    // it): the reference.
    let initdb = Cluster::builder()
        .server_env("SNOWFLAKE_TEST_OWN_INITDB", "1")
        .start();
    let (initdb_identifier, initdb_catalog) = identity_and_catalog(&mut initdb.connect());

    let mut identifiers = HashSet::from([initdb_identifier]);
    for (number, copy) in copies.iter_mut().enumerate() {
        // A crash: the restart replays the WAL, whose segment headers must carry the copy's
        // identifier.
        copy.connect()
            .batch_execute(
                "CREATE TABLE written_before_the_crash (n int);
                 INSERT INTO written_before_the_crash VALUES (1);",
            )
            .expect("write before the crash");
        copy.stop("immediate");
        copy.start();
        let mut client = copy.connect();
        let (identifier, catalog) = identity_and_catalog(&mut client);
        let rows: i64 = client
            .query_one("SELECT count(*) FROM written_before_the_crash", &[])
            .expect("read after the crash")
            .get(0);
        assert_eq!(rows, 1, "copy {number} lost a committed row in the crash");
        client
            .batch_execute("DROP TABLE written_before_the_crash")
            .expect("drop the table");
        let (_, catalog_without_table) = identity_and_catalog(&mut client);
        assert_ne!(catalog, catalog_without_table, "the digest sees a table");
        assert_eq!(
            catalog_without_table, initdb_catalog,
            "copy {number}'s catalog is not initdb's"
        );
        assert!(
            identifiers.insert(identifier),
            "copy {number} has the system identifier {identifier} of another fresh cluster"
        );
    }
}
