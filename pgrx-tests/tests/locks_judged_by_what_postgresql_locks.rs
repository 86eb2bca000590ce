//! A lock that would make other sessions' IDs wait is a superuser's, however the command reaches
//! the state (src/checks/locks.rs, design §6): PostgreSQL's `LOCK TABLE` of a view locks the
//! view's base relations in the same mode, checking the view owner's rights, so on 229c10d a
//! `pg_write_all_data` member's own view over the catalog table, a view over that view, and the
//! extension's own `snowflake_sequences` (for a role with a superuser's routine `GRANT ALL ON ALL
//! TABLES IN SCHEMA public`) each held the catalog table in `ACCESS EXCLUSIVE` mode and stalled
//! every new connection of the database for as long as the transaction lasted.
//!
//! The relations are derived from the catalog: every relation of the database that depends,
//! directly or not, on a state relation (views' rules, inheritance), locked by each role class
//! of the reference's privileges table in `SHARE` mode and stronger, plainly and through an
//! exception block: each refused with 42501, and nothing left holding a lock on the state. A
//! path no command-level check looks at (a foreign key to the catalog table, allowed by a
//! superuser's grant of `REFERENCES`) is refused by what the command locked.

use snowflake_id_cluster_tests::fixtures::{failure, next_id};
use snowflake_id_cluster_tests::{pg_major, Client, Cluster};

/// Every relation that depends, directly or not, on a relation of `snowflake_id_internal`
/// (through a view's `SELECT` rule or inheritance), as the catalogs say.
const RELATIONS_OVER_THE_STATE: &str = "
    WITH RECURSIVE over(relation) AS (
        SELECT oid FROM pg_class
         WHERE relnamespace = 'snowflake_id_internal'::regnamespace
      UNION
        SELECT next.relation FROM over, LATERAL (
            SELECT rule.ev_class
              FROM pg_depend AS dependency
              JOIN pg_rewrite AS rule ON rule.oid = dependency.objid
             WHERE dependency.classid = 'pg_rewrite'::regclass
               AND dependency.refclassid = 'pg_class'::regclass
               AND dependency.refobjid = over.relation
               AND rule.ev_type = '1'
          UNION ALL
            SELECT inhrelid FROM pg_inherits WHERE inhparent = over.relation
        ) AS next(relation))
    SELECT relation::regclass::text FROM over
     WHERE relation NOT IN (SELECT oid FROM pg_class
                             WHERE relnamespace = 'snowflake_id_internal'::regnamespace)
     ORDER BY 1";

/// How many locks this session holds on the state that make IDs wait.
const BLOCKING_LOCKS_HELD: &str = "
    SELECT count(*) FROM pg_locks
     WHERE pid = pg_backend_pid() AND locktype = 'relation'
       AND relation IN (SELECT oid FROM pg_class
                         WHERE relnamespace = 'snowflake_id_internal'::regnamespace)
       AND mode NOT IN ('AccessShareLock', 'RowShareLock', 'RowExclusiveLock',
                        'ShareUpdateExclusiveLock')";

/// A cluster with database `shop` (owned by `dbo`, not a superuser) holding the extension, a
/// view over a view over the catalog table, a view that reads a floor relation in a sub-query,
/// owned by a `pg_write_all_data` member; the role classes of the reference's table; and a
/// superuser's session in `shop`.
fn shop() -> (Cluster, Client, Vec<&'static str>) {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE ROLE dbo LOGIN;
             CREATE ROLE writer LOGIN IN ROLE pg_write_all_data;
             CREATE ROLE granted LOGIN;
             CREATE ROLE plain LOGIN;",
        )
        .unwrap();
    // Those PostgreSQL lets lock through the views first: on 229c10d the first lock went through.
    let mut roles = vec!["granted", "writer", "dbo", "plain"];
    if pg_major() >= 17 {
        admin
            .batch_execute("CREATE ROLE maintainer LOGIN IN ROLE pg_maintain")
            .unwrap();
        roles.push("maintainer");
    }
    admin
        .batch_execute("CREATE DATABASE shop OWNER dbo")
        .unwrap();
    let mut shop = cluster.connect_to("shop");
    shop.batch_execute(
        "CREATE EXTENSION snowflake_id;
         CREATE VIEW public.layouts AS
             SELECT * FROM snowflake_id_internal.snowflake_sequence_catalog;
         CREATE VIEW public.layout_names AS SELECT name FROM public.layouts;
         CREATE VIEW public.floor_set AS
             SELECT 1 AS set WHERE EXISTS (SELECT FROM snowflake_id_internal.snowflake_floor);
         ALTER VIEW public.layouts OWNER TO writer;
         ALTER VIEW public.layout_names OWNER TO writer;
         ALTER VIEW public.floor_set OWNER TO writer;
         GRANT ALL ON ALL TABLES IN SCHEMA public TO granted;",
    )
    .unwrap();
    (cluster, shop, roles)
}

#[test]
fn every_relation_over_the_state_is_locked_only_by_superusers() {
    let (cluster, mut shop, roles) = shop();
    let relations: Vec<String> = shop
        .query(RELATIONS_OVER_THE_STATE, &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    println!("relations over the state: {relations:?}");
    for expected in [
        "floor_set",
        "layout_names",
        "layouts",
        "snowflake_sequences",
    ] {
        assert!(
            relations.iter().any(|relation| relation == expected),
            "{expected} is not found over the state: {relations:?}"
        );
    }
    for role in &roles {
        let mut client = cluster.connect_as("shop", role);
        // A view of the role's own, over the extension's view, lives only in its session.
        client
            .batch_execute("CREATE TEMPORARY VIEW own AS SELECT * FROM public.snowflake_sequences")
            .unwrap();
        let own = vec!["own".to_string()];
        for relation in relations.iter().chain(&own) {
            for mode in ["SHARE", "EXCLUSIVE", "ACCESS EXCLUSIVE"] {
                let lock = format!("LOCK TABLE {relation} IN {mode} MODE");
                let (code, message, _) = failure(&mut client, &format!("BEGIN; {lock}"));
                println!("[{role}] {lock}: {code} {message}");
                assert_eq!(code, "42501", "[{role}] {lock}: {message}");
                assert!(
                    message.contains("snowflake_id's state"),
                    "[{role}] {lock}: refused by PostgreSQL, not judged: {message}"
                );
                client.batch_execute("ROLLBACK").unwrap();
                // Refused inside an exception block: the block goes on, holding nothing.
                client
                    .batch_execute(&format!(
                        "BEGIN;
                         DO $$ BEGIN {lock}; RAISE 'not refused';
                         EXCEPTION WHEN insufficient_privilege THEN NULL; END $$;"
                    ))
                    .unwrap_or_else(|error| panic!("[{role}] {lock} in a block: {error}"));
                let held: i64 = client.query_one(BLOCKING_LOCKS_HELD, &[]).unwrap().get(0);
                assert_eq!(
                    held, 0,
                    "[{role}] {lock} in a block left a lock on the state"
                );
                client.batch_execute("ROLLBACK").unwrap();
            }
        }
        // pg_dump's lock, which leaves IDs alone, goes through.
        client
            .batch_execute(
                "BEGIN;
                 LOCK TABLE public.snowflake_sequences IN ACCESS SHARE MODE;
                 LOCK TABLE own IN ACCESS SHARE MODE;
                 COMMIT;",
            )
            .unwrap();
    }
    // A superuser may.
    shop.batch_execute("BEGIN; LOCK TABLE public.layout_names IN ACCESS EXCLUSIVE MODE; ROLLBACK;")
        .unwrap();
    next_id(&mut cluster.connect_to("shop"), "default").unwrap();
}

/// A command no check of a statement's shape looks at: a foreign key to the catalog table takes
/// a `SHARE ROW EXCLUSIVE` lock on it. With a superuser's grant of `REFERENCES` PostgreSQL lets
/// the role add one; the lock it took refuses the command, which leaves nothing behind.
#[test]
fn a_lock_no_check_foresaw_is_refused_by_what_it_locked() {
    let (cluster, mut shop, _) = shop();
    shop.batch_execute(
        "GRANT REFERENCES ON snowflake_id_internal.snowflake_sequence_catalog TO plain;
         CREATE TABLE public.uses (sequence text);
         ALTER TABLE public.uses OWNER TO plain;",
    )
    .unwrap();
    let mut plain = cluster.connect_as("shop", "plain");
    let (code, message, _) = failure(
        &mut plain,
        "ALTER TABLE public.uses ADD FOREIGN KEY (sequence)
             REFERENCES snowflake_id_internal.snowflake_sequence_catalog (name)",
    );
    println!("foreign key: {code} {message}");
    assert_eq!(code, "42501", "{message}");
    assert!(message.contains("snowflake_sequence_catalog"), "{message}");
    let constraints: i64 = shop
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = 'public.uses'::regclass",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(constraints, 0, "the refused command left its foreign key");
}
