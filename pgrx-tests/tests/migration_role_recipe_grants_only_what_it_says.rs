//! The reference's recipe for a migration role (docs/reference.md, "Privileges") grants what it
//! says and nothing else (design §6): on 229c10d it ran `GRANT <the database's owner> TO
//! app_owner`, which in a database owned by `postgres` (the demo's, `createdb` as postgres,
//! most installers') made `app_owner` a member of a superuser, so `SET ROLE postgres` gave it
//! `rolsuper`. Creating and dropping sequences now serve the roles with `CREATE` on the
//! database, as `CREATE SCHEMA` does.
//!
//! The recipe's block runs word for word, through psql, in a database a superuser owns; then
//! `app_owner` is a member of no role, no superuser, holds `CREATE` on that database and no
//! privilege of any other kind anywhere, creates and drops sequences, and may neither raise the
//! floor nor become `postgres`. Taking the grant back takes the right back.

use snowflake_id_cluster_tests::fixtures::doc_examples::{parse_page, psql};
use snowflake_id_cluster_tests::fixtures::failure;
use snowflake_id_cluster_tests::Cluster;

/// The reference's `sql` block that makes the migration role.
fn recipe() -> String {
    let page = parse_page("docs/reference.md");
    let blocks: Vec<_> = page
        .blocks
        .into_iter()
        .filter(|block| block.heading == "Privileges" && block.sql.contains("app_owner"))
        .collect();
    assert_eq!(blocks.len(), 1, "one recipe block under Privileges");
    blocks[0].sql.clone()
}

#[test]
fn the_recipe_in_a_database_a_superuser_owns_grants_only_creating_sequences() {
    let cluster = Cluster::builder().start();
    cluster
        .connect()
        .batch_execute("CREATE DATABASE shop")
        .unwrap();
    let mut shop = cluster.connect_to("shop");
    shop.batch_execute("CREATE EXTENSION snowflake_id").unwrap();
    let owner_is_superuser: bool = shop
        .query_one(
            "SELECT rolsuper FROM pg_roles
              WHERE oid = (SELECT datdba FROM pg_database WHERE datname = 'shop')",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(owner_is_superuser);

    let printed = psql(&cluster, "shop", &recipe(), "recipe.sql");
    println!("{}", printed.text);
    assert!(printed.success, "the recipe failed: {}", printed.text);

    let (superuser, memberships): (bool, i64) = {
        let row = shop
            .query_one(
                "SELECT rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication OR rolbypassrls,
                        (SELECT count(*) FROM pg_auth_members WHERE member = r.oid)
                   FROM pg_roles r WHERE rolname = 'app_owner'",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(!superuser, "app_owner gained a role attribute");
    assert_eq!(memberships, 0, "app_owner became a member of a role");
    // Every privilege granted to app_owner by name, on any object of the database or the
    // cluster: CREATE on shop, nothing else.
    let granted: Vec<String> = shop
        .query(
            "SELECT kind || ' ' || name || ': ' || privilege FROM (
                 SELECT 'database' AS kind, datname::text AS name, (aclexplode(datacl)).*
                   FROM pg_database
                 UNION ALL
                 SELECT 'relation', oid::regclass::text, (aclexplode(relacl)).* FROM pg_class
                 UNION ALL
                 SELECT 'function', oid::regprocedure::text, (aclexplode(proacl)).* FROM pg_proc
                 UNION ALL
                 SELECT 'schema', nspname::text, (aclexplode(nspacl)).* FROM pg_namespace
                 UNION ALL
                 SELECT 'type', typname::text, (aclexplode(typacl)).* FROM pg_type
             ) AS acl(kind, name, grantor, grantee, privilege, grantable)
              WHERE grantee = 'app_owner'::regrole ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(granted, ["database shop: CREATE"]);
    let defaults: i64 = shop
        .query_one("SELECT count(*) FROM pg_default_acl", &[])
        .unwrap()
        .get(0);
    assert_eq!(defaults, 0);

    // What the grant is for, as app_owner itself (it can log in for this test only).
    shop.batch_execute("ALTER ROLE app_owner LOGIN").unwrap();
    let mut app = cluster.connect_as("shop", "app_owner");
    app.batch_execute(
        "SELECT snowflake_create_sequence('invoices');
         SELECT snowflake_drop_sequence('migration_ids');",
    )
    .unwrap();
    let (code, message, _) = failure(&mut app, "SET ROLE postgres");
    assert_eq!(code, "42501", "{message}");
    let (code, message, _) = failure(
        &mut app,
        "SELECT snowflake_raise_floor(clock_timestamp() + interval '1 s')",
    );
    assert_eq!(code, "42501", "{message}");

    shop.batch_execute("REVOKE CREATE ON DATABASE shop FROM app_owner")
        .unwrap();
    let mut app = cluster.connect_as("shop", "app_owner");
    let (code, message, _) = failure(&mut app, "SELECT snowflake_create_sequence('later')");
    assert_eq!(code, "42501", "{message}");
    assert!(message.contains("CREATE on the database"), "{message}");
}
