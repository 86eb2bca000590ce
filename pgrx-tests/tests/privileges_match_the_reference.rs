//! Privileges, checked from the catalog against the reference's two tables (docs/reference.md
//! "Privileges"; docs/design.md §6, "Privileges" and its threat model), so that an object added
//! without the documented privileges, or a privileged function without its check, fails here:
//!
//! - after `CREATE EXTENSION` by a superuser whose default privileges (its own, global and `IN
//!   SCHEMA public`) grant everything to a plain role, every member's privileges are exactly the
//!   reference's object table;
//! - after routine grants (a superuser's `GRANT ALL ON ALL FUNCTIONS/TABLES/SEQUENCES IN SCHEMA
//!   public`, a database owner's `GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA …`, which succeeds),
//!   every member function is called by each role class (the database's owner, a role granted
//!   `CREATE` on the database, a table's owner, the role with those grants, members of `pg_write_all_data`, `pg_maintain` on 17+ and
//!   `pg_monitor`, a plain role) and is refused (42501) exactly where the reference's table of
//!   callers says.

use std::collections::{BTreeMap, BTreeSet};

use snowflake_id_cluster_tests::fixtures::workspace_root;
use snowflake_id_cluster_tests::{error_parts, pg_major, Client, Cluster};

/// The reference's "Privileges" section.
fn privileges_section() -> String {
    let reference = std::fs::read_to_string(workspace_root().join("docs/reference.md")).unwrap();
    let start = reference
        .find("### Privileges\n")
        .expect("a Privileges section");
    let rest = &reference[start + 4..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    rest[..end].to_owned()
}

/// The rows of the section's table whose header starts with `header`: each row's cells.
fn table_rows(section: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = section.lines().skip_while(|line| !line.starts_with(header));
    lines.next().expect("the table's header");
    lines
        .skip(1)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The names in backticks in `cell`, each without its schema.
fn quoted_names(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|name| name.rsplit('.').next().unwrap().to_owned())
        .collect()
}

/// Who may call a function, as the reference's table of callers says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Callers {
    Superusers,
    DatabaseOwner,
    DatabaseCreators,
    Everybody,
}

/// The reference's table of callers: function name → who may call it; `Everybody` for the
/// rest.
fn documented_callers() -> BTreeMap<String, Callers> {
    let mut callers = BTreeMap::new();
    for row in table_rows(&privileges_section(), "| function | who may call it |") {
        let who = if row[1].contains("`CREATE` on the database") {
            Callers::DatabaseCreators
        } else if row[1].contains("owner") {
            Callers::DatabaseOwner
        } else if row[1].contains("superusers") {
            Callers::Superusers
        } else {
            assert!(row[1].contains("everybody"), "{row:?}");
            continue;
        };
        for name in quoted_names(&row[0]) {
            callers.insert(name, who);
        }
    }
    assert!(callers.len() >= 6, "{callers:?}");
    callers
}

/// The reference's object table: (kind, name or "*" for every one of the kind) → the privileges
/// of `PUBLIC` and of `pg_database_owner`.
fn documented_privileges() -> BTreeMap<(String, String), (BTreeSet<String>, BTreeSet<String>)> {
    let privileges = |cell: &str| quoted_names(cell).into_iter().collect::<BTreeSet<_>>();
    let mut documented = BTreeMap::new();
    for row in table_rows(&privileges_section(), "| object | everybody") {
        let kind = row[0].split_whitespace().next().unwrap();
        let kind = match kind {
            "schema" => "schema",
            "every" => row[0].split_whitespace().nth(1).unwrap(),
            "table" => "table",
            "sequences" | "sequence" => "sequence",
            "views" | "view" => "view",
            "type" => "type",
            other => panic!("an object kind the test does not know: {other}"),
        };
        let names = if row[0].starts_with("every") {
            vec!["*".to_owned()]
        } else {
            quoted_names(&row[0])
        };
        for name in names {
            documented.insert(
                (kind.to_owned(), name),
                (privileges(&row[1]), privileges(&row[2])),
            );
        }
    }
    documented
}

/// Every member of the extension with a privileges column (an array type and a relation's row
/// type, members from PostgreSQL 17 on, have their element's and their relation's): kind, name (without schema), and
/// the privileges of `PUBLIC` and of `pg_database_owner`, and of any other role but the
/// owner (`role: PRIVILEGE`).
const MEMBER_PRIVILEGES: &str = "
    WITH members AS (
        SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
         WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'),
    objects AS (
        SELECT 'function' AS kind, p.proname::text AS name, p.proacl AS acl, p.proowner AS owner
          FROM members m JOIN pg_catalog.pg_proc p
            ON m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid = m.objid
        UNION ALL
        SELECT CASE r.relkind WHEN 'r' THEN 'table' WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view'
                    ELSE r.relkind::text END, r.relname::text, r.relacl, r.relowner
          FROM members m JOIN pg_catalog.pg_class r
            ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND r.oid = m.objid
        UNION ALL
        SELECT 'schema', n.nspname::text, n.nspacl, n.nspowner
          FROM members m JOIN pg_catalog.pg_namespace n
            ON m.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND n.oid = m.objid
        UNION ALL
        SELECT 'type', t.typname::text, t.typacl, t.typowner
          FROM members m JOIN pg_catalog.pg_type t
            ON m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid = m.objid
         WHERE t.typelem = 0 AND t.typrelid = 0)
    SELECT o.kind, o.name,
           ARRAY(SELECT DISTINCT a.privilege_type FROM pg_catalog.aclexplode(o.acl) a
                  WHERE a.grantee = 0 ORDER BY 1),
           ARRAY(SELECT DISTINCT a.privilege_type FROM pg_catalog.aclexplode(o.acl) a
                  WHERE a.grantee = 'pg_database_owner'::pg_catalog.regrole ORDER BY 1),
           ARRAY(SELECT DISTINCT pg_catalog.pg_get_userbyid(a.grantee) || ': ' || a.privilege_type
                   FROM pg_catalog.aclexplode(o.acl) a
                  WHERE a.grantee NOT IN (0, o.owner, 'pg_database_owner'::pg_catalog.regrole)
                  ORDER BY 1),
           o.acl IS NULL
      FROM objects o
     ORDER BY 1, 2";

/// What default privileges a superuser may have set long before it creates the extension:
/// everything for `plain`, its own, global, and in schema `public`.
const HOSTILE_DEFAULTS: &str = "
    ALTER DEFAULT PRIVILEGES FOR ROLE admin GRANT ALL ON SCHEMAS TO plain;
    ALTER DEFAULT PRIVILEGES FOR ROLE admin GRANT ALL ON FUNCTIONS TO plain;
    ALTER DEFAULT PRIVILEGES FOR ROLE admin GRANT ALL ON TABLES TO plain;
    ALTER DEFAULT PRIVILEGES FOR ROLE admin GRANT ALL ON SEQUENCES TO plain;
    ALTER DEFAULT PRIVILEGES FOR ROLE admin GRANT ALL ON TYPES TO plain;
    ALTER DEFAULT PRIVILEGES FOR ROLE admin IN SCHEMA public GRANT ALL ON TABLES TO plain;
    ALTER DEFAULT PRIVILEGES FOR ROLE admin IN SCHEMA public GRANT ALL ON FUNCTIONS TO plain;";

/// The role classes of the threat model (docs/design.md §6), made in a cluster.
fn role_classes() -> Vec<&'static str> {
    let mut roles = vec![
        "dbo",
        "creator",
        "table_owner",
        "granted",
        "writer",
        "monitor",
        "plain",
    ];
    if pg_major() >= 17 {
        roles.push("maintainer");
    }
    roles
}

/// A shop database owned by `dbo`, where superuser `admin` (with hostile default privileges)
/// created the extension.
fn shop(cluster: &Cluster) {
    let mut postgres = cluster.connect();
    postgres
        .batch_execute(
            "CREATE ROLE admin SUPERUSER LOGIN;
             CREATE ROLE dbo LOGIN; CREATE ROLE table_owner LOGIN; CREATE ROLE granted LOGIN;
             CREATE ROLE writer LOGIN IN ROLE pg_write_all_data;
             CREATE ROLE monitor LOGIN IN ROLE pg_monitor;
             CREATE ROLE plain LOGIN; CREATE ROLE reporting LOGIN;
             CREATE ROLE creator LOGIN;",
        )
        .unwrap();
    // Alone: CREATE DATABASE cannot run in the implicit transaction of a batch.
    postgres
        .batch_execute("CREATE DATABASE shop OWNER dbo")
        .unwrap();
    postgres
        .batch_execute("GRANT CREATE ON DATABASE shop TO creator")
        .unwrap();
    if pg_major() >= 17 {
        postgres
            .batch_execute("CREATE ROLE maintainer LOGIN IN ROLE pg_maintain")
            .unwrap();
    }
    let mut admin = cluster.connect_as("shop", "admin");
    admin.batch_execute(HOSTILE_DEFAULTS).unwrap();
    admin
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
}

#[test]
fn under_hostile_default_privileges_every_member_has_the_documented_privileges() {
    let cluster = Cluster::builder().start();
    shop(&cluster);
    let documented = documented_privileges();
    let mut admin = cluster.connect_as("shop", "admin");
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for row in admin.query(MEMBER_PRIVILEGES, &[]).unwrap() {
        let (kind, name): (String, String) = (row.get(0), row.get(1));
        let public: BTreeSet<String> = row.get::<_, Vec<String>>(2).into_iter().collect();
        let owner_role: BTreeSet<String> = row.get::<_, Vec<String>>(3).into_iter().collect();
        let others: Vec<String> = row.get(4);
        let expected = documented
            .get(&(kind.clone(), name.clone()))
            .or_else(|| documented.get(&(kind.clone(), "*".to_owned())));
        let Some((public_expected, owner_expected)) = expected else {
            mismatches.push(format!("{kind} {name}: not in the reference's table"));
            continue;
        };
        checked += 1;
        if row.get::<_, bool>(5) {
            mismatches.push(format!(
                "{kind} {name}: default privileges, not set by the script"
            ));
        }
        if (&public, &owner_role) != (public_expected, owner_expected) || !others.is_empty() {
            mismatches.push(format!(
                "{kind} {name}: PUBLIC {public:?}, pg_database_owner {owner_role:?}, others \
                 {others:?}; the reference: {public_expected:?}, {owner_expected:?}"
            ));
        }
    }
    println!("{checked} members checked against the reference's table");
    assert!(checked >= 30, "only {checked} members");
    assert!(mismatches.is_empty(), "{mismatches:#?}");
    // The schema the plain role was to get CREATE on by default privileges.
    let error = cluster
        .connect_as("shop", "plain")
        .batch_execute("CREATE TABLE snowflake_id_internal.planted (x int)")
        .expect_err("plain creates nothing in the extension's schema");
    assert_eq!(error_parts(&error).0, "42501");
}

/// Arguments every member function can be called with (a value of each argument's type): the
/// call reaches the function's body, where a privileged function checks its caller.
fn sample_argument(type_name: &str) -> &'static str {
    match type_name {
        "text" => "'default'::text",
        "timestamp with time zone" => "pg_catalog.now()",
        "interval" => "'1 ms'::interval",
        "integer" => "1",
        "bigint" => "1::bigint",
        "regclass" => "'pg_temp.probe'::regclass",
        "name" => "'id'::name",
        "oid" => "0::oid",
        other => panic!("no sample value of type {other}"),
    }
}

/// Every member function but trigger functions, as a call with sample arguments, with its
/// name.
fn member_calls(client: &mut Client) -> Vec<(String, String)> {
    client
        .query(
            "SELECT p.proname::text, p.pronamespace::pg_catalog.regnamespace::text,
                    ARRAY(SELECT pg_catalog.format_type(a, NULL) FROM pg_catalog.unnest(p.proargtypes) a)
               FROM pg_catalog.pg_depend d
               JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
               JOIN pg_catalog.pg_proc p ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                                        AND p.oid = d.objid
              WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                AND d.deptype = 'e'
                AND p.prorettype NOT IN ('pg_catalog.trigger'::pg_catalog.regtype,
                                         'pg_catalog.event_trigger'::pg_catalog.regtype)
              ORDER BY 2, 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| {
            let (name, schema): (String, String) = (row.get(0), row.get(1));
            let arguments: Vec<String> = row.get(2);
            let arguments: Vec<&str> = arguments.iter().map(|a| sample_argument(a)).collect();
            let call = format!("SELECT {schema}.{name}({})", arguments.join(", "));
            (name, call)
        })
        .collect()
}

/// Whether `role` is one that `callers` serves.
fn serves(callers: Callers, role: &str) -> bool {
    match callers {
        Callers::Everybody => true,
        Callers::DatabaseOwner => role == "dbo",
        Callers::DatabaseCreators => role == "dbo" || role == "creator",
        Callers::Superusers => false,
    }
}

#[test]
fn every_function_answers_each_role_class_as_the_reference_says() {
    let cluster = Cluster::builder().start();
    shop(&cluster);
    let mut admin = cluster.connect_as("shop", "admin");
    // Routine grants: a superuser's bulk grants, and a table of a table owner.
    admin
        .batch_execute(
            "GRANT ALL ON ALL FUNCTIONS IN SCHEMA public TO granted;
             GRANT ALL ON ALL TABLES IN SCHEMA public TO granted;
             GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO granted;
             GRANT CREATE ON SCHEMA public TO table_owner;",
        )
        .unwrap();
    cluster
        .connect_as("shop", "table_owner")
        .batch_execute(
            "CREATE TABLE public.orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval());",
        )
        .unwrap();
    // The database owner's routine grants succeed (they may warn that it granted nothing new).
    cluster
        .connect_as("shop", "dbo")
        .batch_execute(
            "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO reporting;
             GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA snowflake_id_internal TO reporting;",
        )
        .unwrap_or_else(|error| panic!("the owner's routine grant: {:?}", error_parts(&error)));

    let callers = documented_callers();
    let calls = member_calls(&mut admin);
    assert!(calls.len() >= 25, "only {} functions", calls.len());
    let mut wrong = Vec::new();
    let mut refused = 0;
    for role in role_classes() {
        let mut client = cluster.connect_as("shop", role);
        client
            .batch_execute("CREATE TEMP TABLE probe (id int)")
            .unwrap();
        for (name, call) in &calls {
            let who = callers.get(name).copied().unwrap_or(Callers::Everybody);
            client.batch_execute("BEGIN").unwrap();
            let outcome = client.batch_execute(call);
            client.batch_execute("ROLLBACK").unwrap();
            let denied = match &outcome {
                Ok(()) => false,
                Err(error) => {
                    let (code, message, _) = error_parts(error);
                    code == "42501" && message.starts_with("permission denied for function")
                }
            };
            refused += usize::from(denied);
            if denied == serves(who, role) {
                wrong.push(format!(
                    "{role}: {call}: {} (the reference: {who:?})",
                    outcome.map_or_else(|e| format!("{:?}", error_parts(&e)), |()| "ok".into())
                ));
            }
        }
    }
    println!(
        "{} functions called by {} role classes: {refused} refusals, {} outcomes unlike the \
         reference",
        calls.len(),
        role_classes().len(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}
