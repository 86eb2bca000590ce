//! The extension's state is out of every ordinary role's reach (docs/design.md §6, "The
//! extension's own schema"; docs/reference.md "Privileges"), tried with real roles as a
//! database's owner, an application role and a tenant of a managed service would:
//! - a database owner who renames `public` and plants look-alikes of the extension's objects
//!   runs no code as anybody else, and changes no sequence, default or decoding;
//! - routine bulk grants and default privileges reach none of the state; `pg_write_all_data`
//!   can write it, but a layout changed in place is refused, and a floor value beyond the
//!   trusted lead stops that database's IDs (no other database's) until a superuser accepts it;
//! - the database owner's own dump, restored by itself into a database where a superuser
//!   created the extension, carries the floor.
//!
//! The tests find the state through the extension's membership, not by its schema's name, so
//! that each runs against 0.9.0 too (whose state lived in the extension's schema, `public`),
//! where each fails.

use snowflake_id_cluster_tests::fixtures::{
    assert_server_clock_offset, cluster_with_tenant, count, default_id_unix_ms, extension_relation,
    failure, min_new_id, real_now_us, text, MINUTE_US,
};
use snowflake_id_cluster_tests::{Client, Cluster};

/// Milliseconds an ID of `'default'` from a new session leads the real time.
fn lead_ms(client: &mut Client) -> i64 {
    let id: i64 = client
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap()
        .get(0);
    default_id_unix_ms(id) - real_now_us() / 1000
}

fn is_superuser(admin: &mut Client, role: &str) -> bool {
    admin
        .query_one("SELECT rolsuper FROM pg_roles WHERE rolname = $1", &[&role])
        .unwrap()
        .get(0)
}

/// What the owner plants after renaming `public`: a new `public` with look-alikes of the
/// catalog table `{catalog}` (whose trigger tries to make the owner a superuser), of the
/// functions privileged code called, and of the row type with node and worker swapped; and a
/// serial column to convert. `escalate()` records every call made as another role.
const PLANTS: &str = r#"
    CREATE SCHEMA public;
    GRANT USAGE, CREATE ON SCHEMA public TO PUBLIC;
    CREATE TABLE public.foreign_calls (caller name NOT NULL, what text NOT NULL);
    GRANT INSERT ON public.foreign_calls TO PUBLIC;
    CREATE FUNCTION public.escalate(what text) RETURNS void VOLATILE LANGUAGE plpgsql AS $$
    BEGIN
        IF current_user <> 'shop_owner' THEN
            INSERT INTO public.foreign_calls VALUES (current_user, what);
        END IF;
        BEGIN
            ALTER ROLE shop_owner SUPERUSER;
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
    END $$;
    CREATE TABLE public.snowflake_sequence_catalog (LIKE {catalog} INCLUDING ALL);
    GRANT ALL ON public.snowflake_sequence_catalog TO PUBLIC;
    CREATE FUNCTION public.planted_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.escalate('catalog trigger'); RETURN NEW; END $$;
    CREATE TRIGGER planted BEFORE INSERT OR DELETE ON public.snowflake_sequence_catalog
        FOR EACH ROW EXECUTE FUNCTION public.planted_trigger();
    CREATE FUNCTION public.snowflake_min_id(timestamptz, text DEFAULT 'default') RETURNS bigint
        LANGUAGE plpgsql AS $$ BEGIN PERFORM public.escalate('snowflake_min_id'); RETURN 0; END $$;
    CREATE FUNCTION public.snowflake_max_id(timestamptz, text DEFAULT 'default') RETURNS bigint
        LANGUAGE plpgsql AS $$ BEGIN PERFORM public.escalate('snowflake_max_id'); RETURN 9223372036854775807; END $$;
    CREATE FUNCTION public.snowflake_nextval(text DEFAULT 'default') RETURNS bigint
        LANGUAGE plpgsql AS $$ BEGIN PERFORM public.escalate('snowflake_nextval'); RETURN 1; END $$;
    CREATE FUNCTION old_public.snowflake_nextval(varchar) RETURNS bigint
        LANGUAGE plpgsql AS $$ BEGIN PERFORM public.escalate('snowflake_nextval(varchar)'); RETURN 1; END $$;
    CREATE TYPE public.snowflake_parts AS (ts timestamptz, worker integer, node integer,
                                           sequence integer, gene integer);
    CREATE TABLE old_public.serials (id serial PRIMARY KEY, note text);
    INSERT INTO old_public.serials (note) SELECT 'before' FROM generate_series(1, 10);"#;

#[test]
fn a_database_owner_who_renames_public_runs_no_code_as_another_role() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    for statement in [
        "CREATE ROLE shop_owner LOGIN",
        "CREATE ROLE migrator LOGIN",
        "CREATE DATABASE shop OWNER shop_owner",
    ] {
        admin.batch_execute(statement).unwrap();
    }
    let mut shop_admin = cluster.connect_to("shop");
    shop_admin
        .batch_execute(
            // The migration role creates sequences as a member of the database's owner.
            "CREATE EXTENSION snowflake_id;
             GRANT shop_owner TO migrator;",
        )
        .unwrap();
    // A session that used the extension before the rename (it looked up the schema then),
    // on worker id 1 (another session holds 0), so that a swapped node and worker would show.
    let mut holder = cluster.connect_to("shop");
    holder.batch_execute("SELECT snowflake_nextval()").unwrap();
    let mut migrator = cluster.connect_as("shop", "migrator");
    let id: i64 = migrator
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap()
        .get(0);
    assert!(id > 0);

    let mut owner = cluster.connect_as("shop", "shop_owner");
    owner
        .batch_execute("ALTER SCHEMA public RENAME TO old_public")
        .unwrap();
    let catalog = extension_relation(&mut shop_admin, "snowflake_sequence_catalog");
    owner
        .batch_execute(&PLANTS.replace("{catalog}", &catalog))
        .unwrap();

    // The migration role creates a sequence: the catalog the function writes is the
    // extension's, by OID, never the planted table.
    migrator
        .batch_execute("SELECT old_public.snowflake_create_sequence('orders', preset => 'js53')")
        .unwrap();
    let real_rows = count(
        &mut shop_admin,
        &format!("SELECT count(*) FROM {catalog} WHERE name = 'orders'"),
    );
    assert_eq!(
        real_rows, 1,
        "the new sequence is in the extension's catalog"
    );
    let id: i64 = migrator
        .query_one("SELECT old_public.snowflake_nextval('orders')", &[])
        .unwrap()
        .get(0);
    assert!(id > 0);

    // A superuser converts the owner's serial column the documented way, with the planted
    // public first in its search_path.
    let mut superuser = cluster.connect_to("shop");
    let converted = text(
        &mut superuser,
        "SELECT old_public.snowflake_convert_column('old_public.serials', 'id')",
    );
    println!("[planted public] {converted}");
    let default = text(
        &mut superuser,
        "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef
          WHERE adrelid = 'old_public.serials'::regclass",
    );
    assert_eq!(default, "old_public.snowflake_nextval('default'::text)");
    let calls_real = count(
        &mut superuser,
        "SELECT count(*) FROM pg_attrdef ad JOIN pg_depend d
             ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
            AND d.refobjid = 'old_public.snowflake_nextval(text)'::regprocedure
          WHERE ad.adrelid = 'old_public.serials'::regclass",
    );
    assert_eq!(
        calls_real, 1,
        "the default calls the extension's snowflake_nextval"
    );
    superuser
        .batch_execute("INSERT INTO old_public.serials (note) VALUES ('after')")
        .unwrap();

    // Decoding, in the session that looked the schema up before the rename and in a new one
    // whose search_path finds the planted type first: node and worker where they belong.
    for (who, client) in [
        ("old session", &mut migrator),
        ("new session", &mut superuser),
    ] {
        let row = client
            .query_one(
                "WITH made AS (SELECT old_public.snowflake_nextval() AS id)
                 SELECT (d).node, (d).worker, ((id >> 12) & 1023)::int
                   FROM made, LATERAL (SELECT old_public.snowflake_decode(id) AS d) AS decoded",
                &[],
            )
            .unwrap();
        let (node, worker, expected): (i32, i32, i32) = (row.get(0), row.get(1), row.get(2));
        println!("[planted public] {who}: node {node}, worker {worker} (expected {expected})");
        assert!(expected > 0, "{who}: on worker id 0, a swap would not show");
        assert_eq!((node, worker), (0, expected), "{who}");
    }

    let foreign_calls = text(
        &mut superuser,
        "SELECT coalesce(string_agg(caller || ': ' || what, ', '), 'none') FROM public.foreign_calls",
    );
    println!("[planted public] the owner's code run as others: {foreign_calls}");
    assert_eq!(foreign_calls, "none");
    assert!(
        !is_superuser(&mut admin, "shop_owner"),
        "the owner became a superuser"
    );
}

/// The bulk grants a superuser DBA gives application roles, and default privileges set before
/// the extension was created.
const ROUTINE_GRANTS: &str = "
    CREATE ROLE app LOGIN;
    CREATE ROLE etl LOGIN;
    GRANT pg_write_all_data TO etl;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO app;
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON SEQUENCES TO app;
    ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO app;
    ALTER DEFAULT PRIVILEGES GRANT ALL ON SEQUENCES TO app;
    CREATE EXTENSION snowflake_id;
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO app;
    GRANT SELECT, UPDATE, USAGE ON ALL SEQUENCES IN SCHEMA public TO app;
    SELECT snowflake_create_sequence('web', 'js53');";

#[test]
fn routine_grants_reach_no_state_and_pg_write_all_data_moves_no_other_database() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin.batch_execute(ROUTINE_GRANTS).unwrap();
    admin.batch_execute("CREATE DATABASE bystander").unwrap();
    cluster
        .connect_to("bystander")
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();

    let catalog = extension_relation(&mut admin, "snowflake_sequence_catalog");
    let floor = extension_relation(&mut admin, "snowflake_floor");
    let floor_writer = extension_relation(&mut admin, "snowflake_floor_writer");
    let mut app = cluster.connect_as("postgres", "app");
    let ahead = real_now_us() + 10 * 24 * 60 * MINUTE_US;
    for statement in [
        format!("UPDATE {catalog} SET epoch = epoch + interval '10 s' WHERE name = 'web'"),
        format!("DELETE FROM {catalog}"),
        format!(
            "INSERT INTO {catalog} \
             SELECT 'planted', preset, epoch, time_unit_us, time_bits, node_bits, worker_bits, \
                    sequence_bits, gene_bits, created_at \
             FROM {catalog} WHERE name = 'web'"
        ),
        format!("SELECT setval('{floor}', {ahead})"),
        format!("SELECT setval('{floor_writer}', 42)"),
    ] {
        let (code, message, _) = failure(&mut app, &statement);
        println!("[routine grants] app: {statement}: {code} {message}");
        assert_eq!(code, "42501", "{statement}: {message}");
    }

    // pg_write_all_data may write every table: the catalog's guard refuses an UPDATE or a
    // DELETE that is not the extension's (inserting is creating a sequence: it changes none).
    let mut etl = cluster.connect_as("postgres", "etl");
    for statement in [
        format!("UPDATE {catalog} SET epoch = epoch + interval '10 s' WHERE name = 'web'"),
        format!("DELETE FROM {catalog} WHERE name = 'web'"),
    ] {
        let (code, message, _) = failure(&mut etl, &statement);
        println!("[pg_write_all_data] {statement}: {code} {message}");
        assert_eq!(code, "55000", "{statement}: {message}");
    }
    assert!(count(&mut admin, "SELECT snowflake_nextval('web')") > 0);
    // A row changed in place past the guard (only a superuser can: triggers off for the
    // session) is refused when read.
    admin
        .batch_execute(&format!(
            "SET session_replication_role = replica;
             UPDATE {catalog} SET epoch = epoch + interval '10 s' WHERE name = 'web';
             RESET session_replication_role;"
        ))
        .unwrap();
    let (code, message, hint) = failure(&mut cluster.connect(), "SELECT snowflake_nextval('web')");
    println!("[a superuser past the guard] edited layout: {code} {message} (hint: {hint})");
    assert_eq!(code, "XX001");
    assert!(message.contains("changed in place"), "{message}");

    // … and the floor: beyond the trusted lead, this database's IDs stop (in a session that
    // read it before: a new one takes a value its own cluster is named as having written as
    // covered already); no other database moves.
    let mut watcher = cluster.connect();
    assert!(lead_ms(&mut watcher).abs() < 2_000);
    etl.batch_execute(&format!("SELECT setval('{floor}', {ahead})"))
        .unwrap();
    // A new tick (the watcher's next ID could otherwise fall in the tick it used last).
    let (code, message, hint) = failure(
        &mut watcher,
        "SELECT pg_sleep(0.01); SELECT snowflake_nextval()",
    );
    println!("[pg_write_all_data] floor 10 days ahead: {code} {message} (hint: {hint})");
    assert_eq!(code, "55000");
    assert!(message.contains(&floor), "{message}");
    assert!(hint.contains("snowflake_accept_floor()"), "{hint}");
    let bystander_lead = lead_ms(&mut cluster.connect_to("bystander"));
    println!("[pg_write_all_data] the other database's IDs lead by {bystander_lead} ms");
    assert!(bystander_lead.abs() < 2_000, "{bystander_lead} ms");
    // The hint's other step, as it stands: a superuser sets the floor back to where this
    // server's own IDs end (snowflake_stats()), and this database's IDs continue.
    let set_back = hint
        .split("this server's own IDs end: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no set-back step in the hint: {hint}"));
    admin.batch_execute(set_back).unwrap();
    let lead_after = lead_ms(&mut watcher);
    println!("[pg_write_all_data] after the hint's {set_back}: IDs lead by {lead_after} ms");
    assert!(lead_after.abs() < 2_000, "{lead_after} ms");

    // A value within the trusted lead is taken: at most reserve_ahead + idle_renewal + 60 s ahead.
    let within = real_now_us() + 30_000_000;
    admin
        .batch_execute(&format!("SELECT setval('{floor}', {within})"))
        .unwrap();
    watcher.batch_execute("SELECT pg_sleep(0.01)").unwrap();
    // Compared with the value planted, not with the test's clock after round trips: the IDs
    // continue from it, at most a few seconds on however slow the machine.
    let id: i64 = watcher
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap()
        .get(0);
    let above_ms = default_id_unix_ms(id) - within / 1000;
    println!("[pg_write_all_data] floor set 30 s ahead: the next ID is {above_ms} ms above it");
    assert!((0..5_000).contains(&above_ms), "{above_ms} ms");

    // What the reference says a restart does to a value beyond the lead that names this server
    // as its writer (set with setval alone): a session that read the floor before stops, but
    // no ID of this server lies above what it reserved, so after a restart (as in every new
    // session) the value is taken as covered and IDs continue at the wall clock, no step needed.
    etl.batch_execute(&format!("SELECT setval('{floor}', {ahead})"))
        .unwrap();
    let (code, _, _) = failure(
        &mut watcher,
        "SELECT pg_sleep(0.01); SELECT snowflake_nextval()",
    );
    assert_eq!(code, "55000");
    drop((watcher, etl, app, admin));
    let mut cluster = cluster;
    cluster.stop("fast");
    cluster.start();
    let lead_after_restart = lead_ms(&mut cluster.connect());
    println!(
        "[pg_write_all_data] floor 10 days ahead, after a restart: IDs lead by \
         {lead_after_restart} ms (the superuser's floor above was 30 s ahead)"
    );
    assert!(lead_after_restart < 60_000, "{lead_after_restart} ms");
}

/// The owner's database on the old cluster: created by a superuser's `CREATE EXTENSION`, its
/// table filled by the owner.
fn tenant_database(cluster: &Cluster) -> i64 {
    let mut admin = cluster.connect();
    for statement in [
        "CREATE ROLE tenant LOGIN",
        "CREATE DATABASE tenant_db OWNER tenant",
    ] {
        admin.batch_execute(statement).unwrap();
    }
    cluster
        .connect_to("tenant_db")
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('web', 'js53');",
        )
        .unwrap();
    let mut tenant = cluster.connect_as("tenant_db", "tenant");
    tenant
        .batch_execute(
            "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
             INSERT INTO orders (item) SELECT 'dumped' FROM generate_series(1, 20000);
             CREATE TABLE visits (id bigint PRIMARY KEY DEFAULT snowflake_nextval('web'));
             INSERT INTO visits SELECT FROM generate_series(1, 100);",
        )
        .unwrap();
    tenant
        .query_one("SELECT max(id) FROM orders", &[])
        .unwrap()
        .get(0)
}

/// Restores the tenant's dump of `old` as the tenant into a database of `new` where a
/// superuser created the extension first; pg_restore's errors.
fn restore_as_tenant(old: &Cluster, new: &Cluster) -> String {
    let dump = old.dump_as("tenant_db", "tenant");
    let mut admin = new.connect();
    for statement in [
        "CREATE ROLE tenant LOGIN",
        "CREATE DATABASE tenant_db OWNER tenant",
    ] {
        admin.batch_execute(statement).unwrap();
    }
    new.connect_to("tenant_db")
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let restored = new.pg_restore_as(&dump, "tenant_db", "tenant", &[]);
    String::from_utf8_lossy(&restored.stderr).into_owned()
}

/// 20,000 new rows of the tenant's `orders`: the smallest new ID.
fn first_new_order(tenant: &mut Client) -> i64 {
    min_new_id(
        tenant,
        "INSERT INTO orders (item) SELECT 'new' FROM generate_series(1, 20000)",
    )
}

#[test]
fn the_owners_own_dump_restored_by_itself_carries_the_floor() {
    let old = Cluster::builder().start();
    let max_stored = tenant_database(&old);
    let new = Cluster::builder().faketime_at("-40s").start();
    assert_server_clock_offset(&mut new.connect(), -40_000_000);
    let errors = restore_as_tenant(&old, &new);
    println!("[tenant restore, clock 40 s behind] pg_restore said: {errors}");
    let mut tenant = new.connect_as("tenant_db", "tenant");
    let min_new = first_new_order(&mut tenant);
    println!("[tenant restore, clock 40 s behind] newest stored {max_stored}, first new {min_new}");
    assert!(min_new > max_stored, "new IDs among the restored ones");
    assert!(
        !errors.contains("snowflake_floor") && !errors.contains("snowflake_sequence_catalog"),
        "{errors}"
    );
    // The sequence a superuser created there came with the dump (a catalog row the owner's
    // restore inserted), with its layout.
    let fingerprint = |cluster: &Cluster| {
        text(
            &mut cluster.connect_to("tenant_db"),
            "SELECT fingerprint FROM snowflake_sequences WHERE name = 'web'",
        )
    };
    assert_eq!(fingerprint(&new), fingerprint(&old));
    let above = count(
        &mut tenant,
        "WITH added AS (INSERT INTO visits SELECT FROM generate_series(1, 100) RETURNING id)
         SELECT count(*) FROM added WHERE id > (SELECT max(id) FROM visits)",
    );
    assert_eq!(above, 100, "new IDs of 'web' above the restored ones");
}

#[test]
fn a_floor_beyond_the_trusted_lead_waits_for_a_superuser() {
    let old = Cluster::builder().start();
    let max_stored = tenant_database(&old);
    let new = Cluster::builder().faketime_at("-10m").start();
    assert_server_clock_offset(&mut new.connect(), -10 * MINUTE_US);
    restore_as_tenant(&old, &new);
    let mut tenant = new.connect_as("tenant_db", "tenant");
    let (code, message, hint) = failure(
        &mut tenant,
        "INSERT INTO orders (item) VALUES ('too early')",
    );
    println!("[tenant restore, clock 10 min behind] {code} {message} (hint: {hint})");
    assert_eq!(code, "55000");
    let (code, _, _) = failure(&mut tenant, "SELECT snowflake_accept_floor()");
    assert_eq!(code, "42501", "the tenant may not accept its own floor");
    new.connect_to("tenant_db")
        .batch_execute("SELECT snowflake_accept_floor()")
        .unwrap();
    let min_new = first_new_order(&mut tenant);
    println!("[accepted] newest stored {max_stored}, first new {min_new}");
    assert!(min_new > max_stored, "new IDs among the restored ones");
}

/// The WARNING of IDs stored ahead of the floor (an index built over a snowflake column, as
/// `pg_restore` builds keys after rows) reads the table as its owner in a security-restricted
/// operation: a role with the owner's rights and more (a member of it) that builds the index
/// runs none of the owner's code (a row-level-security policy) with its own rights, and the
/// value the owner planted 30 s ahead moves no ID: it is only reported.
#[test]
fn an_index_over_planted_ids_runs_no_owner_code_as_another_role_and_moves_no_id() {
    let cluster = cluster_with_tenant(
        "CREATE ROLE dba LOGIN; GRANT tenant TO dba;",
        "CREATE TABLE public.foreign_calls (caller name NOT NULL);
             GRANT INSERT ON public.foreign_calls TO PUBLIC;
             CREATE FUNCTION public.record_caller() RETURNS boolean LANGUAGE plpgsql AS $$
             BEGIN
                 IF current_user <> 'tenant' THEN
                     INSERT INTO public.foreign_calls VALUES (current_user);
                 END IF;
                 RETURN true;
             END $$;
             CREATE TABLE public.planted (id bigint DEFAULT snowflake_nextval(), note text);
             INSERT INTO public.planted (id) VALUES (snowflake_max_id(now() + interval '30 s'));
             ALTER TABLE public.planted ENABLE ROW LEVEL SECURITY;
             ALTER TABLE public.planted FORCE ROW LEVEL SECURITY;
             CREATE POLICY everyone ON public.planted USING (public.record_caller());",
    );
    let mut admin = cluster.connect();
    cluster
        .connect_as("postgres", "dba")
        .batch_execute("CREATE INDEX ON public.planted (id)")
        .unwrap();
    let logged = cluster.server_log();
    assert!(
        logged.contains("public.planted.id holds IDs of snowflake sequence \"default\""),
        "no WARNING in the server log"
    );
    let foreign_calls = text(
        &mut admin,
        "SELECT coalesce(string_agg(caller::text, ', '), 'none') FROM public.foreign_calls",
    );
    println!("[index over planted IDs] the owner's code run as others: {foreign_calls}");
    assert_eq!(foreign_calls, "none");
    let lead = lead_ms(&mut cluster.connect());
    println!("[index over planted IDs] a new session's IDs lead by {lead} ms");
    assert!(lead.abs() < 2_000, "{lead} ms");
}
