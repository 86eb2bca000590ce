//! Attacks on 0.10.0 that the property now closes (docs/design.md §6, the threat model), each
//! as the role that tried it:
//!
//! - a table's owner whose row-level-security policy changes a setting with `set_config`, on a
//!   table a superuser alters: nothing of the owner's runs, the superuser's session keeps its
//!   `search_path` and the owner stays what it was;
//! - a role that has every table privilege on the views (`GRANT ALL ON ALL TABLES IN SCHEMA
//!   public`) changes nothing through them;
//! - the database's owner inserts only catalog rows the extension can serve, so nobody's read of
//!   `snowflake_sequences` fails;
//! - a superuser's `snowflake_raise_floor` refused (the floor relation given to a role that is
//!   not a superuser) leaves the server's floor where it was;
//! - IDs a table's owner planted a day ahead give a WARNING that names that owner, how far ahead
//!   every database's IDs would go, and that accepting is a superuser's decision;
//! - locks that would make other sessions' IDs wait (`LOCK TABLE`, and on 17+ `pg_maintain`'s
//!   `VACUUM FULL`, `CLUSTER`, `REINDEX`) are refused to roles that are not superusers.

use snowflake_id_cluster_tests::fixtures::{cluster_with_tenant, count, failure, text};
use snowflake_id_cluster_tests::{pg_major, Client, Cluster};

/// A cluster with database `shop`, owned by the login role `dbo` (not a superuser), where a
/// superuser created the extension, and the roles `roles` creates; and a superuser's session.
fn shop_of_dbo(roles: &str) -> (Cluster, Client) {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(&format!("CREATE ROLE dbo LOGIN; {roles}"))
        .unwrap();
    // Alone: CREATE DATABASE cannot run in the implicit transaction of a batch.
    admin
        .batch_execute("CREATE DATABASE shop OWNER dbo")
        .unwrap();
    cluster
        .connect_to("shop")
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    (cluster, admin)
}

#[test]
fn a_table_owners_policy_never_runs_in_a_superusers_alter_table() {
    let cluster = cluster_with_tenant(
        "CREATE SCHEMA trap; GRANT USAGE, CREATE ON SCHEMA trap TO tenant;",
            "CREATE TABLE public.policy_runs (who name NOT NULL);
             GRANT INSERT ON public.policy_runs TO PUBLIC;
             CREATE FUNCTION trap.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
             BEGIN
                 BEGIN ALTER ROLE tenant SUPERUSER; EXCEPTION WHEN OTHERS THEN NULL; END;
                 RETURN pg_catalog.now();
             END $$;
             CREATE FUNCTION public.sticky() RETURNS boolean LANGUAGE plpgsql AS $$
             BEGIN
                 INSERT INTO public.policy_runs VALUES (current_user);
                 PERFORM set_config('search_path', 'trap, pg_catalog, public', false);
                 RETURN true;
             END $$;
             CREATE TABLE public.keyed (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), note text);
             INSERT INTO public.keyed (note) VALUES ('a'), ('b');
             ALTER TABLE public.keyed ENABLE ROW LEVEL SECURITY;
             ALTER TABLE public.keyed FORCE ROW LEVEL SECURITY;
             CREATE POLICY everyone ON public.keyed USING (public.sticky());",
    );
    let mut admin = cluster.connect();
    let before = text(&mut admin, "SHOW search_path");
    admin
        .batch_execute("ALTER TABLE public.keyed ADD COLUMN added int")
        .unwrap();
    admin
        .batch_execute("CREATE INDEX ON public.keyed (id)")
        .unwrap();
    let after = text(&mut admin, "SHOW search_path");
    admin.batch_execute("SELECT now()").unwrap();
    let runs = count(&mut admin, "SELECT count(*) FROM public.policy_runs");
    let escalated = count(
        &mut admin,
        "SELECT count(*) FROM pg_roles WHERE rolname = 'tenant' AND rolsuper",
    );
    println!(
        "[policy with set_config] search_path before {before:?}, after {after:?}; the policy \
         ran {runs} times; tenant a superuser: {}",
        escalated > 0
    );
    assert_eq!(after, before, "the owner's setting outlived the command");
    assert_eq!(runs, 0, "the owner's policy ran in the superuser's command");
    assert_eq!(escalated, 0, "the table's owner became a superuser");
}

#[test]
fn grants_on_the_views_change_nothing_through_them() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE ROLE app LOGIN;
             CREATE EXTENSION snowflake_id;
             GRANT ALL ON ALL TABLES IN SCHEMA public TO app;",
        )
        .unwrap();
    // Every view of the extension, from the catalog: none is updatable.
    let updatable = text(
        &mut admin,
        "SELECT COALESCE(string_agg(c.relname, ', '), 'none')
           FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
          WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
            AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id')
            AND c.relkind = 'v' AND pg_relation_is_updatable(c.oid, true) <> 0",
    );
    assert_eq!(updatable, "none", "updatable views");
    let mut app = cluster.connect_as("postgres", "app");
    for statement in [
        "INSERT INTO snowflake_sequences (name, time_bits) VALUES ('x', 41)",
        "UPDATE snowflake_sequences SET time_bits = 40",
        "DELETE FROM snowflake_sequences",
    ] {
        let (code, message, _) = failure(&mut app, statement);
        println!("[view] {statement}: {code} {message}");
        // Not automatically updatable (0.10.0's view was: the guard or a NOT NULL stopped it).
        assert_eq!(code, "55000", "{statement}: {message}");
        assert!(
            message.contains("view \"snowflake_sequences\""),
            "{statement}: {message}"
        );
    }
    assert_eq!(
        count(&mut admin, "SELECT count(*) FROM snowflake_sequences"),
        1
    );
}

#[test]
fn the_catalog_takes_only_rows_it_can_serve() {
    let (cluster, _) = shop_of_dbo("CREATE ROLE reader LOGIN");
    let mut owner = cluster.connect_as("shop", "dbo");
    let columns = "(name, preset, epoch, time_unit_us, time_bits, node_bits, worker_bits, \
                   sequence_bits, gene_bits, created_at)";
    for (what, row) in [
        (
            "a zero time unit",
            "('zero', 'classic', '2025-01-01', 0, 41, 0, 10, 12, 0, now())",
        ),
        (
            "an empty name",
            "('', 'classic', '2025-01-01', 1000, 41, 0, 10, 12, 0, now())",
        ),
        (
            "bits that do not fit",
            "('wide', 'classic', '2025-01-01', 1000, 60, 0, 10, 12, 0, now())",
        ),
    ] {
        let (code, message, _) = failure(
            &mut owner,
            &format!("INSERT INTO snowflake_id_internal.snowflake_sequence_catalog {columns} VALUES {row}"),
        );
        println!("[catalog row with {what}] {code} {message}");
        assert_eq!(code, "23514", "{what}: {message}");
    }
    // A row that can be served is taken, as a restore adds one.
    owner
        .batch_execute(&format!(
            "INSERT INTO snowflake_id_internal.snowflake_sequence_catalog {columns} \
             VALUES ('restored', 'js53', '2025-01-01', 10000, 38, 0, 7, 8, 0, now())"
        ))
        .unwrap();
    let names = text(
        &mut cluster.connect_as("shop", "reader"),
        "SELECT string_agg(name || ' ' || ids_per_tick, ', ' ORDER BY name) FROM snowflake_sequences",
    );
    assert_eq!(names, "default 4096, restored 256");
}

#[test]
fn a_refused_raise_of_the_floor_moves_nothing() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE ROLE someone LOGIN;
             CREATE EXTENSION snowflake_id;
             SELECT snowflake_nextval();
             ALTER SEQUENCE snowflake_id_internal.snowflake_floor OWNER TO someone;",
        )
        .unwrap();
    let (code, message, _) = failure(
        &mut admin,
        "SELECT snowflake_raise_floor(clock_timestamp() + interval '30 s')",
    );
    // Renewals keep the floor about a second ahead (or none is set yet); the refused raise
    // would have put it 30 s ahead.
    let moved: bool = admin
        .query_one(
            "SELECT COALESCE(durable_floor > clock_timestamp() + interval '20 s', false)
               FROM snowflake_stats()",
            &[],
        )
        .unwrap()
        .get(0);
    println!("[raise refused] {code} {message}; the server's floor moved: {moved}");
    assert_eq!(code, "55000", "{message}");
    assert!(!moved, "a refused raise moved the server's floor");
}

#[test]
fn ids_a_tenant_planted_ahead_are_reported_as_the_tenants_with_the_cost_of_accepting_them() {
    let cluster = cluster_with_tenant(
        "",
        "CREATE TABLE public.planted (id bigint DEFAULT snowflake_nextval(), note text);
         INSERT INTO public.planted (id) VALUES (snowflake_max_id(now() + interval '1 day'));
         CREATE INDEX ON public.planted (id);",
    );
    let logged = cluster.server_log();
    let warning = logged
        .lines()
        .skip_while(|line| !line.contains("public.planted.id holds IDs"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    println!("[planted a day ahead] {warning}");
    assert!(
        warning.contains("HINT:"),
        "no WARNING with a hint: {warning}"
    );
    for said in [
        "a table of role tenant",
        "every database of this server",
        "only a superuser decides",
        "s ahead of its wall clock",
    ] {
        assert!(
            warning.contains(said),
            "the hint does not say {said:?}: {warning}"
        );
    }
}

/// Locks that would make other sessions' IDs wait are a superuser's: a `pg_write_all_data`
/// member (`LOCK TABLE … IN ACCESS EXCLUSIVE MODE` on the catalog table, which its `UPDATE`
/// allows) and, from PostgreSQL 17, a `pg_maintain` member (`LOCK`, `VACUUM FULL`, `CLUSTER`,
/// `REINDEX`) get 42501 on the extension's relations; `pg_dump`'s `ACCESS SHARE` lock, taken by
/// the database's owner, and maintenance of the whole database go through.
#[test]
fn locks_that_stop_ids_are_for_superusers_only() {
    let (cluster, mut admin) = shop_of_dbo("CREATE ROLE writer LOGIN IN ROLE pg_write_all_data");
    let mut roles = vec![(
        "writer",
        vec![
            "LOCK TABLE snowflake_id_internal.snowflake_sequence_catalog IN ACCESS EXCLUSIVE MODE",
            "LOCK TABLE snowflake_id_internal.snowflake_sequence_catalog IN SHARE MODE",
        ],
    )];
    if pg_major() >= 17 {
        admin
            .batch_execute("CREATE ROLE maintainer LOGIN IN ROLE pg_maintain")
            .unwrap();
        roles.push((
            "maintainer",
            vec![
                "LOCK TABLE snowflake_id_internal.snowflake_sequence_catalog",
                "VACUUM FULL snowflake_id_internal.snowflake_sequence_catalog",
                "CLUSTER snowflake_id_internal.snowflake_sequence_catalog \
                 USING snowflake_sequence_catalog_pkey",
                "REINDEX TABLE snowflake_id_internal.snowflake_sequence_catalog",
                "REINDEX INDEX snowflake_id_internal.snowflake_sequence_catalog_pkey",
                "REINDEX SCHEMA snowflake_id_internal",
            ],
        ));
    }
    for (role, statements) in &roles {
        let mut client = cluster.connect_as("shop", role);
        for statement in statements {
            // LOCK needs a transaction block; the others refuse one.
            let sql = if statement.starts_with("LOCK") {
                format!("BEGIN; {statement}; COMMIT")
            } else {
                statement.to_string()
            };
            let (code, message, _) = failure(&mut client, &sql);
            println!("[{role}] {statement}: {code} {message}");
            assert_eq!(code, "42501", "{role}: {statement}: {message}");
            client.batch_execute("ROLLBACK").unwrap();
        }
        // What pg_dump takes, and a lock that leaves IDs alone, go through.
        client
            .batch_execute(
                "BEGIN;
                 LOCK TABLE snowflake_id_internal.snowflake_sequence_catalog IN ACCESS SHARE MODE;
                 COMMIT;",
            )
            .unwrap();
    }
    // The database's owner dumps its database: pg_dump's lock goes through.
    cluster
        .connect_as("shop", "dbo")
        .batch_execute(
            "BEGIN;
             LOCK TABLE snowflake_id_internal.snowflake_sequence_catalog IN ACCESS SHARE MODE;
             COMMIT;",
        )
        .unwrap();
    if pg_major() >= 17 {
        // Maintenance of the whole database processes the catalog table like any other.
        cluster
            .connect_as("shop", "maintainer")
            .batch_execute("VACUUM FULL")
            .unwrap();
    }
    assert!(
        cluster
            .connect_to("shop")
            .query_one("SELECT snowflake_nextval()", &[])
            .unwrap()
            .get::<_, i64>(0)
            > 0
    );
}
