//! Nothing a role without the right does moves the extension directory (design §6, "A new
//! connection's first ID"): on 229c10d the `ExecutorStart` hook counted a write of a state
//! relation before PostgreSQL checked its privileges, so a role with no right at all ran one
//! inside an exception block, committed, and untrusted every database's entry: each new
//! connection then paid the full lookup (and waited behind a lock on the catalog). A write
//! counts once PostgreSQL checked its privileges, and only while it can still commit.
//!
//! Each way a role can plan a write of the catalog table is tried (an exception block, `EXPLAIN`
//! with and without `ANALYZE`, a prepared statement, a subtransaction rolled back), by a role with
//! no privilege and by a `pg_write_all_data` member whose write the catalog's guard refuses or
//! that rolls back; the entry stays current and the next connection's first ID is answered
//! from it. A committed change still moves it.

use snowflake_id_cluster_tests::fixtures::next_id;
use snowflake_id_cluster_tests::{Client, Cluster};

/// Whether `shop`'s entry is current, and how many lookups it answered.
fn entry(client: &mut Client) -> (bool, i64) {
    let row = client
        .query_one(
            "SELECT current, answered FROM snowflake_directory() WHERE database = 'shop'",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// A new connection's first ID in `shop`.
fn first_id(cluster: &Cluster) {
    next_id(&mut cluster.connect_to("shop"), "default").unwrap();
}

const DELETE: &str = "DELETE FROM snowflake_id_internal.snowflake_sequence_catalog";
const UPDATE: &str = "UPDATE snowflake_id_internal.snowflake_sequence_catalog SET name = name";

/// `statement` in an exception block that swallows its error.
fn swallowed(statement: &str) -> String {
    format!("DO $$ BEGIN {statement}; EXCEPTION WHEN others THEN NULL; END $$")
}

#[test]
fn refused_and_rolled_back_writes_leave_the_entry_trusted() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE ROLE nobody LOGIN;
             CREATE ROLE writer LOGIN IN ROLE pg_write_all_data;",
        )
        .unwrap();
    // Alone: CREATE DATABASE cannot run in the implicit transaction of a batch.
    admin.batch_execute("CREATE DATABASE shop").unwrap();
    let mut shop = cluster.connect_to("shop");
    shop.batch_execute(
        "CREATE EXTENSION snowflake_id;
         SELECT snowflake_create_sequence('orders');",
    )
    .unwrap();
    // Two connections: the first fills the entry, the second is answered from it.
    first_id(&cluster);
    first_id(&cluster);
    let (current, answered) = entry(&mut shop);
    assert!(current, "the entry is not current after two first IDs");
    assert!(answered >= 1, "no first ID was answered from the entry");

    let attempts = [
        swallowed(DELETE),
        swallowed(UPDATE),
        format!("EXPLAIN {DELETE}"),
        swallowed(&format!("EXECUTE 'EXPLAIN ANALYZE {DELETE}'")),
        format!(
            "PREPARE planned AS {DELETE}; {}; DEALLOCATE planned",
            swallowed("EXECUTE 'EXECUTE planned'")
        ),
        format!(
            "BEGIN; SAVEPOINT attempt; {}; ROLLBACK TO SAVEPOINT attempt; COMMIT",
            swallowed(DELETE)
        ),
        format!(
            "BEGIN; SAVEPOINT attempt; {DELETE} WHERE false; ROLLBACK TO SAVEPOINT attempt; COMMIT"
        ),
    ];
    for role in ["nobody", "writer"] {
        let mut client = cluster.connect_as("shop", role);
        for attempt in &attempts {
            // `EXPLAIN` and a no-row write by a role without the privilege fail as a whole;
            // what matters is what the directory keeps.
            let outcome = client.batch_execute(attempt);
            println!("[{role}] {attempt}: {outcome:?}");
            client.batch_execute("ROLLBACK").unwrap();
            let (current, _) = entry(&mut shop);
            assert!(current, "[{role}] {attempt} moved the directory");
        }
    }
    let (_, before) = entry(&mut shop);
    first_id(&cluster);
    let (current, after) = entry(&mut shop);
    assert!(current);
    assert!(
        after > before,
        "the next first ID was not answered from the entry"
    );

    // A change that commits moves it: the next connection looks the catalog up again.
    shop.batch_execute("SELECT snowflake_drop_sequence('orders')")
        .unwrap();
    let (current, _) = entry(&mut shop);
    assert!(!current, "a committed drop left the entry current");
}
