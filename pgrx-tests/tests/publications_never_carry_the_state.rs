//! No publication carries the extension's catalog table (src/checks/publications.rs, design §6): a
//! logical apply worker writes its subscriber's tables with no executor plan and no row trigger
//! of ours, so neither the subscriber's extension directory nor its sessions would follow a
//! change it applied there (on 229c10d, with `copy_data = false`, a sequence re-created on the
//! publisher kept its old layout on the subscriber, and one dropped there kept issuing). Every
//! way a publication can come to hold the table is refused with 0A000 and a hint, however it is
//! spelled, and the command leaves nothing behind; publishing one's own tables works, in both
//! directions between two nodes, and each node's sequences stay its own.

use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::failure;
use snowflake_id_cluster_tests::{wait_until, Client, Cluster};

/// The publications of the connection's database.
fn publications(client: &mut Client) -> Vec<String> {
    client
        .query("SELECT pubname::text FROM pg_publication ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// `sql` fails with 0A000, a message naming the catalog table, and the hint.
fn refused(client: &mut Client, sql: &str) {
    let (code, message, hint) = failure(client, sql);
    assert_eq!(code, "0A000", "{sql}: {message}");
    assert!(
        message.contains(".snowflake_sequence_catalog"),
        "{sql}: {message}"
    );
    assert!(hint.contains("FOR TABLE"), "{sql}: {hint}");
}

#[test]
fn every_way_to_publish_the_catalog_table_is_refused() {
    let server = Cluster::builder().setting("wal_level = logical").start();
    let mut admin = server.connect();
    admin
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), note text);
             CREATE SCHEMA other;",
        )
        .unwrap();
    refused(&mut admin, "CREATE PUBLICATION everything FOR ALL TABLES");
    refused(
        &mut admin,
        "CREATE PUBLICATION internal FOR TABLES IN SCHEMA snowflake_id_internal",
    );
    refused(
        &mut admin,
        "SET search_path = snowflake_id_internal;
         CREATE PUBLICATION named FOR TABLE snowflake_sequence_catalog",
    );
    admin.batch_execute("RESET search_path").unwrap();
    assert!(publications(&mut admin).is_empty());

    admin
        .batch_execute("CREATE PUBLICATION mine FOR TABLE events, TABLES IN SCHEMA other")
        .unwrap();
    refused(
        &mut admin,
        "ALTER PUBLICATION mine ADD TABLE snowflake_id_internal.snowflake_sequence_catalog",
    );
    refused(
        &mut admin,
        "ALTER PUBLICATION mine ADD TABLES IN SCHEMA snowflake_id_internal",
    );
    refused(
        &mut admin,
        "ALTER PUBLICATION mine SET TABLES IN SCHEMA snowflake_id_internal",
    );
    // The catalog table moved to another schema (by a superuser) is still the table.
    refused(
        &mut admin,
        "ALTER TABLE snowflake_id_internal.snowflake_sequence_catalog SET SCHEMA other",
    );
    let tables: Vec<String> = admin
        .query(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables
             WHERE pubname = 'mine' ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(tables, ["public.events"]);

    // A database that publishes all its tables cannot take the extension in.
    admin.batch_execute("CREATE DATABASE shop").unwrap();
    let mut shop = server.connect_to("shop");
    shop.batch_execute("CREATE PUBLICATION everything FOR ALL TABLES")
        .unwrap();
    refused(&mut shop, "CREATE EXTENSION snowflake_id");
    let installed: i64 = shop
        .query_one(
            "SELECT count(*) FROM pg_extension WHERE extname = 'snowflake_id'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        installed, 0,
        "the refused CREATE EXTENSION left the extension"
    );
}

/// Two nodes publish their own table to each other (`FOR TABLE`, without the state); a sequence
/// re-created and dropped on one never changes the other's catalog.
#[test]
fn nodes_that_publish_their_own_tables_keep_their_own_sequences() {
    let nodes: Vec<Cluster> = (0..2)
        .map(|_| {
            Cluster::builder()
                .setting("wal_level = logical")
                .setting("max_replication_slots = 10")
                .setting("max_wal_senders = 10")
                .start()
        })
        .collect();
    let mut admins: Vec<Client> = nodes.iter().map(Cluster::connect).collect();
    for (index, admin) in admins.iter_mut().enumerate() {
        admin
            .batch_execute(&format!(
                "CREATE EXTENSION snowflake_id;
                 SELECT snowflake_create_sequence('lr', preset => 'js53');
                 CREATE TABLE events_{index} (id bigint PRIMARY KEY, note text);
                 CREATE PUBLICATION from_{index} FOR TABLE events_{index};"
            ))
            .unwrap();
    }
    for (index, admin) in admins.iter_mut().enumerate() {
        let other = 1 - index;
        admin
            .batch_execute(&format!(
                "CREATE TABLE events_{other} (id bigint PRIMARY KEY, note text)"
            ))
            .unwrap();
        // Alone: CREATE SUBSCRIPTION that creates its slot runs outside a transaction block.
        admin
            .batch_execute(&format!(
                "CREATE SUBSCRIPTION to_{other} CONNECTION '{}'
                   PUBLICATION from_{other} WITH (copy_data = false)",
                nodes[other].conninfo("postgres")
            ))
            .unwrap();
    }
    admins[0]
        .batch_execute(
            "SELECT snowflake_drop_sequence('lr');
             SELECT snowflake_create_sequence('lr', preset => 'classic');
             INSERT INTO events_0 VALUES (snowflake_nextval('lr'), 'classic');",
        )
        .unwrap();
    admins[1]
        .batch_execute(
            "SELECT snowflake_drop_sequence('lr');
             INSERT INTO events_1 VALUES (1, 'dropped');",
        )
        .unwrap();
    for (index, admin) in admins.iter_mut().enumerate() {
        let other = 1 - index;
        let arrived = wait_until(Duration::from_secs(60), || {
            let rows: i64 = admin
                .query_one(&format!("SELECT count(*) FROM events_{other}"), &[])
                .unwrap()
                .get(0);
            rows == 1
        });
        assert!(arrived, "node {index} never got node {other}'s row");
    }
    // Each node's catalog is what its own sessions made of it: node 0's classic "lr", none on
    // node 1, whatever the rows that crossed.
    let on = |cluster: &Cluster| -> Vec<String> {
        cluster
            .connect()
            .query(
                "SELECT name || ':' || preset FROM snowflake_sequences WHERE name = 'lr'",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    assert_eq!(on(&nodes[0]), ["lr:classic"]);
    assert!(on(&nodes[1]).is_empty());
    for (index, admin) in admins.iter_mut().enumerate() {
        let other = 1 - index;
        admin
            .batch_execute(&format!("DROP SUBSCRIPTION to_{other}"))
            .unwrap();
    }
}
