//! The floor relation belongs to the extension alone (docs/design.md §5.3): who may name it,
//! raise it and dump it. Tried as an application role and as an operator would:
//!
//! - a database owner who is not a superuser names two sequences like the floor relations in a
//!   database whose extension predates them (0.4.0), sets them 30 days ahead and issues an ID:
//!   no database's IDs move, and the later update names the objects in its way and their owner;
//! - a member of the extension owned by a role that is not a superuser is refused, not read;
//! - a floor relation a superuser took out of the extension moves no IDs, however far ahead;
//! - a database's owner, which may call `snowflake_raise_floor`, can move the IDs of every
//!   database at most the trusted lead (`reserve_ahead` + `idle_renewal` + 60 s) past the wall
//!   clock, however often it calls it, and `±infinity` get 22023;
//! - the database's owner, not a superuser, dumps it with pg_dump (as does a member of
//!   `pg_read_all_data`), and the dump restored into a cluster 10 minutes behind continues
//!   above every stored ID once a superuser accepted its floor (alice, who owns the database,
//!   could have written it).
//!
//! Each prints what it saw (`--nocapture`).

use snowflake_id_cluster_tests::fixtures::{
    assert_no_id_reissued, assert_server_clock_offset, column, command_output, count,
    default_id_unix_ms, failure, insert_load, load_after, real_now_us, text, Issued,
    DEFAULT_IDS_TABLE, MINUTE_US,
};
use snowflake_id_cluster_tests::{Client, Cluster, InDatabase};

/// How far an ID's time is ahead of the real time, in ms (negative: behind).
fn lead_ms(client: &mut Client) -> i64 {
    let id: i64 = client
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap()
        .get(0);
    default_id_unix_ms(id) - real_now_us() / 1000
}

#[test]
fn a_roles_sequences_named_like_the_floor_move_no_ids_and_the_update_names_them() {
    let test = "sequences named like the floor in a 0.4.0 database";
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    for statement in [
        "CREATE ROLE alice LOGIN",
        "CREATE DATABASE shop OWNER alice",
        "CREATE DATABASE other",
    ] {
        admin.batch_execute(statement).unwrap();
    }
    let mut other = cluster.connect_to("other");
    other
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    cluster
        .connect_to("shop")
        .batch_execute(
            "CREATE EXTENSION snowflake_id VERSION '0.1.0';
             ALTER EXTENSION snowflake_id UPDATE TO '0.4.0';",
        )
        .unwrap();

    // The database's owner plants a floor 30 days ahead, written by "another cluster".
    let mut alice = cluster.connect_as("shop", "alice");
    let ahead_us = 30 * 24 * 60 * MINUTE_US;
    alice
        .batch_execute(&format!(
            "CREATE SEQUENCE public.snowflake_floor AS bigint MINVALUE 0;
             CREATE SEQUENCE public.snowflake_floor_writer AS bigint
                 MINVALUE -9223372036854775808;
             SELECT setval('public.snowflake_floor', {});
             SELECT setval('public.snowflake_floor_writer', 42);",
            real_now_us() + ahead_us
        ))
        .unwrap();
    let leads = [lead_ms(&mut alice), lead_ms(&mut other)];
    let mut fresh_session = cluster.connect_to("other");
    let fresh = lead_ms(&mut fresh_session);
    println!(
        "[{test}] after alice's planted floor: IDs lead real time by {} ms (shop), {} ms (other), \
         {fresh} ms (a new session in other)",
        leads[0], leads[1]
    );
    for lead in leads.into_iter().chain([fresh]) {
        assert!(lead.abs() < 2_000, "IDs moved {lead} ms by a planted floor");
    }

    // The update names the object in its way and whose it is; nothing of it is done.
    let mut admin = cluster.connect_to("shop");
    let (code, message, hint) = failure(&mut admin, "ALTER EXTENSION snowflake_id UPDATE");
    println!("[{test}] update: {code} {message} (hint: {hint})");
    assert_eq!(code, "42P07");
    assert!(
        message.contains("public.snowflake_floor") && message.contains("alice"),
        "{message}"
    );
    assert!(hint.contains("Rename or drop"), "{hint}");
    assert_eq!(
        text(
            &mut admin,
            "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'"
        ),
        "0.4.0"
    );

    alice
        .batch_execute("DROP SEQUENCE public.snowflake_floor, public.snowflake_floor_writer")
        .unwrap();
    admin
        .batch_execute("ALTER EXTENSION snowflake_id UPDATE")
        .unwrap();
    let members = count(
        &mut admin,
        "SELECT count(*) FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
         WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
           AND c.relname IN ('snowflake_floor', 'snowflake_floor_writer')",
    );
    assert_eq!(members, 2, "the update made both floor relations members");
    let lead = lead_ms(&mut alice);
    println!("[{test}] after the update: an ID of alice's session leads by {lead} ms");
    assert!(lead.abs() < 2_000);
}

/// `REASSIGN OWNED` of the superuser who created the extension to a role that is not a
/// superuser fails as a whole (the extension's event trigger must belong to a superuser), so
/// its objects stay with superusers; a floor relation given to such a role one by one (`ALTER
/// SEQUENCE … OWNER TO`) stops IDs with 55000 until a superuser owns it again.
#[test]
fn a_floor_relation_owned_by_a_role_that_is_not_a_superuser_is_refused() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE ROLE installer LOGIN SUPERUSER;
             CREATE ROLE alice LOGIN;",
        )
        .unwrap();
    cluster
        .connect_as("postgres", "installer")
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let (code, message, _) = failure(&mut admin, "REASSIGN OWNED BY installer TO alice");
    println!("[REASSIGN OWNED to alice] {code} {message}");
    assert_eq!(code, "42501", "{message}");
    let owners: Vec<String> = column(
        &mut admin,
        "SELECT DISTINCT pg_get_userbyid(nspowner)::text FROM pg_namespace
          WHERE nspname = 'snowflake_id_internal'
         UNION
         SELECT DISTINCT pg_get_userbyid(c.relowner)::text FROM pg_class c
          WHERE c.relnamespace = 'snowflake_id_internal'::regnamespace",
    );
    assert_eq!(owners, ["installer"]);

    admin
        .batch_execute("ALTER SEQUENCE snowflake_id_internal.snowflake_floor OWNER TO alice")
        .unwrap();
    let mut session = cluster.connect();
    let (code, message, hint) = failure(&mut session, "SELECT snowflake_nextval()");
    println!("[floor owned by alice] {code} {message} (hint: {hint})");
    assert_eq!(code, "55000");
    assert!(
        message.contains("snowflake_floor") && message.contains("alice"),
        "{message}"
    );
    assert!(hint.contains("OWNER TO"), "{hint}");
    admin
        .batch_execute("ALTER SEQUENCE snowflake_id_internal.snowflake_floor OWNER TO installer")
        .unwrap();
    let id: i64 = session
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap()
        .get(0);
    println!("[given back to installer] the next ID: {id}");
    assert!(id > 0);
}

#[test]
fn a_floor_relation_taken_out_of_the_extension_moves_no_ids() {
    let test = "floor relation taken out of the extension";
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    admin
        .batch_execute(&format!(
            "CREATE EXTENSION snowflake_id;
             ALTER EXTENSION snowflake_id DROP SEQUENCE snowflake_id_internal.snowflake_floor;
             SELECT setval('snowflake_id_internal.snowflake_floor', {});",
            real_now_us() + 30 * 24 * 60 * MINUTE_US
        ))
        .unwrap();
    // Membership is read from the extension's extconfig first (docs/design.md §5.3), which
    // PostgreSQL must have left the relation out of.
    let registered = count(
        &mut admin,
        "SELECT count(*) FROM pg_extension, unnest(extconfig) AS registered
         WHERE extname = 'snowflake_id'
           AND registered = 'snowflake_id_internal.snowflake_floor'::regclass",
    );
    let lead = lead_ms(&mut cluster.connect());
    println!("[{test}] still registered: {registered}; a new session's ID leads by {lead} ms");
    assert_eq!(registered, 0, "extconfig still lists the floor relation");
    assert!(
        lead.abs() < 2_000,
        "IDs moved {lead} ms by a floor that is no member"
    );
}

#[test]
fn a_database_owners_raise_moves_every_database_at_most_a_minute_past_the_wall_clock() {
    let test = "snowflake_raise_floor by the owner of one database";
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    for statement in [
        "CREATE ROLE cutover LOGIN",
        "CREATE DATABASE moved OWNER cutover",
        "CREATE DATABASE bystander",
    ] {
        admin.batch_execute(statement).unwrap();
    }
    let mut moved_admin = cluster.connect_to("moved");
    moved_admin
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let mut bystander = cluster.connect_to("bystander");
    bystander
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let mut cutover = cluster.connect_as("moved", "cutover");

    for (argument, what) in [
        ("clock_timestamp() + interval '23 hours'", "23 h ahead"),
        // The trusted lead: reserve_ahead + idle_renewal + 60 s, 6 min 1 s by default.
        ("clock_timestamp() + interval '362 seconds'", "362 s ahead"),
        ("'infinity'", "infinity"),
        ("'-infinity'", "-infinity"),
    ] {
        let (code, message, _) = failure(
            &mut cutover,
            &format!("SELECT snowflake_raise_floor({argument})"),
        );
        println!("[{test}] {what}: {code} {message}");
        assert_eq!(code, "22023", "{what}: {message}");
    }
    // Repeated calls at the bound: the wall clock, not a clock the calls move, bounds each.
    for _ in 0..10 {
        cutover
            .batch_execute(
                "SELECT snowflake_raise_floor(clock_timestamp() + interval '359 seconds')",
            )
            .unwrap();
    }
    let (code, _, _) = failure(
        &mut cutover,
        "SELECT snowflake_raise_floor(clock_timestamp() + interval '362 seconds')",
    );
    assert_eq!(code, "22023", "the bound did not move with the raises");
    let lead = lead_ms(&mut bystander);
    println!("[{test}] after 10 raises to +359 s: IDs of another database lead by {lead} ms");
    assert!(
        (355_000..=362_000).contains(&lead),
        "IDs of another database lead real time by {lead} ms"
    );
}

#[test]
fn the_database_owner_dumps_it_and_the_dump_carries_the_floor() {
    let test = "pg_dump by the database's owner";
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    for statement in [
        "CREATE ROLE alice LOGIN",
        "CREATE ROLE reader LOGIN IN ROLE pg_read_all_data",
        "CREATE DATABASE shop OWNER alice",
    ] {
        admin.batch_execute(statement).unwrap();
    }
    cluster
        .connect_to("shop")
        .batch_execute(DEFAULT_IDS_TABLE.split_inclusive(';').next().unwrap())
        .unwrap();
    let mut alice = cluster.connect_as("shop", "alice");
    alice
        .batch_execute(DEFAULT_IDS_TABLE.split_once(';').unwrap().1)
        .unwrap();
    let shop = InDatabase {
        cluster: &cluster,
        database: "shop",
    };
    let mut before = Issued::new("shop, alice's table");
    insert_load(&shop, &mut before, 0..2, 5_000);

    let dump = cluster.dump_as("shop", "alice");
    let by_reader = cluster.dump_as("shop", "reader");
    let list = |dump: &std::path::Path| {
        command_output(
            cluster.program("pg_restore"),
            &["--list", &dump.display().to_string()],
        )
        .unwrap()
    };
    for (who, dump) in [("alice", &dump), ("reader", &by_reader)] {
        let entries = list(dump);
        let floor = entries
            .lines()
            .filter(|line| line.contains("SEQUENCE SET") && line.contains("snowflake_floor"))
            .count();
        println!("[{test}] {who}'s dump: {floor} SEQUENCE SET entries of the floor relations");
        assert_eq!(
            floor, 2,
            "{who}'s dump carries both floor relations:\n{entries}"
        );
    }

    let new = Cluster::builder().faketime_at("-10m").start();
    let mut admin = new.connect();
    assert_server_clock_offset(&mut admin, -10 * MINUTE_US);
    for statement in [
        "CREATE ROLE alice LOGIN",
        "CREATE DATABASE shop OWNER alice",
    ] {
        admin.batch_execute(statement).unwrap();
    }
    let restored = new.pg_restore(&dump, "shop", &["--exit-on-error"]);
    assert!(
        restored.status.success(),
        "restore of alice's dump: {}",
        String::from_utf8_lossy(&restored.stderr)
    );
    // alice owns the database, so she could have written the floor her dump restored: 10
    // minutes ahead of this server's clock, beyond the trusted lead, it waits for a superuser.
    let (code, message, _) = failure(
        &mut new.connect_as("shop", "alice"),
        "SELECT snowflake_nextval()",
    );
    println!("[{test}] before a superuser accepts the floor: {code} {message}");
    assert_eq!(code, "55000", "{message}");
    new.connect_to("shop")
        .batch_execute("SELECT snowflake_accept_floor()")
        .unwrap();
    let after = load_after(
        "the restore of alice's dump into a cluster 10 min behind",
        "new cluster, insert load",
        &InDatabase {
            cluster: &new,
            database: "shop",
        },
        &[&before],
    );
    assert_no_id_reissued(test, &[&before, &after]);
}
