//! Sealed by construction (docs/design.md §6, "Privileges" and its threat model; docs/reference.md
//! "Privileges"), checked from the catalog rather than from a list, so that an object added
//! later without the property fails here:
//!
//! - every object that belongs to the extension (`pg_depend`), with the parts PostgreSQL keeps
//!   apart (a view's rule, a table's triggers, constraints, defaults and indexes), depends on
//!   no operator, function, type or collation outside `pg_catalog` and the extension
//!   (PostgreSQL records a dependency on every object but its own built-in ones, so a
//!   look-alike that an expression bound would show), and every
//!   member function whose body is text pins `search_path = pg_catalog, pg_temp`: after `CREATE
//!   EXTENSION` and after the updates from releases 0.1.0 (through every update script) and
//!   0.10.0, in a database whose owner planted look-alikes of every operator, function and type
//!   the extension uses (found in a clean install's dependencies) before either, and no planted
//!   code runs as anybody else;
//!
//! Privileges, from the same catalog: `privileges_match_the_reference.rs`.

use std::collections::BTreeSet;

use snowflake_id_cluster_tests::fixtures::{count, install_release_script, text};
use snowflake_id_cluster_tests::{error_parts, Client, Cluster};

/// The extension's members and the parts of its member relations that PostgreSQL stores as
/// objects of their own, and what each of them depends on in `pg_depend` among operators,
/// functions, types and collations: `(part, referenced object, its namespace, kind)`.
const DEPENDENCIES: &str = "
    WITH extension AS (
        SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'snowflake_id'),
    members AS (
        SELECT d.classid, d.objid FROM pg_catalog.pg_depend d, extension e
         WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid = e.oid AND d.deptype = 'e'),
    member_relations AS (
        SELECT objid AS relid FROM members WHERE classid = 'pg_catalog.pg_class'::pg_catalog.regclass),
    parts AS (
        SELECT classid, objid FROM members
        UNION ALL SELECT 'pg_catalog.pg_rewrite'::pg_catalog.regclass, r.oid
          FROM pg_catalog.pg_rewrite r JOIN member_relations m ON r.ev_class = m.relid
        UNION ALL SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass, t.oid
          FROM pg_catalog.pg_trigger t JOIN member_relations m ON t.tgrelid = m.relid
        UNION ALL SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass, c.oid
          FROM pg_catalog.pg_constraint c JOIN member_relations m ON c.conrelid = m.relid
        UNION ALL SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass, a.oid
          FROM pg_catalog.pg_attrdef a JOIN member_relations m ON a.adrelid = m.relid
        UNION ALL SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, i.indexrelid
          FROM pg_catalog.pg_index i JOIN member_relations m ON i.indrelid = m.relid),
    refs AS (
        SELECT p.classid, p.objid, d.refclassid, d.refobjid
          FROM parts p JOIN pg_catalog.pg_depend d ON d.classid = p.classid AND d.objid = p.objid
         WHERE d.refclassid IN ('pg_catalog.pg_operator'::pg_catalog.regclass,
                                'pg_catalog.pg_proc'::pg_catalog.regclass,
                                'pg_catalog.pg_type'::pg_catalog.regclass,
                                'pg_catalog.pg_collation'::pg_catalog.regclass))
    SELECT DISTINCT
           pg_catalog.pg_describe_object(r.classid, r.objid, 0) AS part,
           pg_catalog.pg_describe_object(r.refclassid, r.refobjid, 0) AS referenced,
           COALESCE(o.oprnamespace, p.pronamespace, t.typnamespace, c.collnamespace)::pg_catalog.regnamespace::text AS namespace,
           EXISTS (SELECT FROM members m WHERE m.classid = r.refclassid AND m.objid = r.refobjid)
             OR EXISTS (SELECT FROM member_relations m WHERE m.relid = t.typrelid) AS own
      FROM refs r
      LEFT JOIN pg_catalog.pg_operator o ON r.refclassid = 'pg_catalog.pg_operator'::pg_catalog.regclass AND o.oid = r.refobjid
      LEFT JOIN pg_catalog.pg_proc p ON r.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid = r.refobjid
      LEFT JOIN pg_catalog.pg_type t ON r.refclassid = 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid = r.refobjid
      LEFT JOIN pg_catalog.pg_collation c ON r.refclassid = 'pg_catalog.pg_collation'::pg_catalog.regclass AND c.oid = r.refobjid
     ORDER BY 1, 2";

/// Member functions whose body is text (every language but C and internal) without
/// `search_path = pg_catalog, pg_temp`.
const UNPINNED_FUNCTIONS: &str = "
    SELECT p.oid::pg_catalog.regprocedure::text
      FROM pg_catalog.pg_depend d
      JOIN pg_catalog.pg_extension e ON d.refobjid = e.oid AND e.extname = 'snowflake_id'
      JOIN pg_catalog.pg_proc p ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid = d.objid
      JOIN pg_catalog.pg_language l ON l.oid = p.prolang
     WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
       AND l.lanname NOT IN ('c', 'internal')
       AND NOT COALESCE(p.proconfig @> '{\"search_path=pg_catalog, pg_temp\"}', false)
     ORDER BY 1";

/// The operators and functions that the extension's stored expressions call (views' rules,
/// defaults, constraints, index expressions, trigger conditions, SQL-standard function bodies),
/// read from their node trees (`:opno`, `:funcid`): PostgreSQL records no dependency on its own
/// built-in objects, so `pg_depend` does not list them. As `CREATE` look-alikes need them:
/// operators by name; functions with argument names, types, how many have defaults, and the
/// result type (those with pseudo-type arguments or results left out: a look-alike in PL/pgSQL
/// cannot take them).
const USED_FROM_PG_CATALOG: &str = "
    WITH member_relations AS (
        SELECT d.objid AS relid FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
         WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
           AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass),
    trees AS (
        SELECT r.ev_action::text AS tree
          FROM pg_catalog.pg_rewrite r JOIN member_relations m ON r.ev_class = m.relid
        UNION ALL SELECT a.adbin::text
          FROM pg_catalog.pg_attrdef a JOIN member_relations m ON a.adrelid = m.relid
        UNION ALL SELECT c.conbin::text
          FROM pg_catalog.pg_constraint c JOIN member_relations m ON c.conrelid = m.relid
        UNION ALL SELECT COALESCE(i.indexprs::text, '') || COALESCE(i.indpred::text, '')
          FROM pg_catalog.pg_index i JOIN member_relations m ON i.indrelid = m.relid
        UNION ALL SELECT t.tgqual::text
          FROM pg_catalog.pg_trigger t JOIN member_relations m ON t.tgrelid = m.relid),
    called AS (
        SELECT 'operator' AS kind, found[1]::pg_catalog.oid AS oid
          FROM trees, pg_catalog.regexp_matches(trees.tree, ':opno (\\d+)', 'g') AS found
        UNION
        SELECT 'function', found[1]::pg_catalog.oid
          FROM trees, pg_catalog.regexp_matches(trees.tree, ':funcid (\\d+)', 'g') AS found)
    SELECT DISTINCT 'operator', o.oprname::text, NULL::text[], NULL::text[], 0, NULL::text
      FROM called c JOIN pg_catalog.pg_operator o ON c.kind = 'operator' AND o.oid = c.oid
    UNION
    SELECT DISTINCT 'function', p.proname::text, COALESCE(p.proargnames[1:p.pronargs], '{}'),
           ARRAY(SELECT pg_catalog.format_type(a, NULL) FROM pg_catalog.unnest(p.proargtypes) a),
           p.pronargdefaults::int, pg_catalog.format_type(p.prorettype, NULL)
      FROM called c JOIN pg_catalog.pg_proc p ON c.kind = 'function' AND p.oid = c.oid
     WHERE p.pronamespace = 'pg_catalog'::pg_catalog.regnamespace AND p.provariadic = 0
       AND NOT EXISTS (SELECT FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[] || p.prorettype) a
                        JOIN pg_catalog.pg_type t ON t.oid = a WHERE t.typtype = 'p')
    ORDER BY 1, 2";

/// The argument types look-alikes are made for: every pair for operators, every one in each
/// argument's place for functions.
const TYPES: [&str; 10] = [
    "smallint",
    "integer",
    "bigint",
    "numeric",
    "double precision",
    "text",
    "name",
    "oid",
    "timestamp with time zone",
    "interval",
];

/// What the database owner plants before the extension exists: a function that tries to make
/// it a superuser and records who ran it, and look-alikes in `public` of every operator and
/// function of `pg_catalog` that a clean install's objects depend on, each calling it.
fn plants(used: &[UsedObject]) -> Vec<String> {
    let mut statements = vec![
        "CREATE TABLE public.foreign_calls (caller name NOT NULL, what text NOT NULL)".to_owned(),
        "GRANT INSERT ON public.foreign_calls TO PUBLIC".to_owned(),
        "CREATE FUNCTION public.escalate(what text) RETURNS void VOLATILE LANGUAGE plpgsql AS $$
         BEGIN
             IF current_user <> 'dbo' THEN
                 INSERT INTO public.foreign_calls VALUES (current_user, what);
             END IF;
             BEGIN
                 ALTER ROLE dbo SUPERUSER;
             EXCEPTION WHEN OTHERS THEN NULL;
             END;
         END $$"
            .to_owned(),
    ];
    let mut signatures = BTreeSet::new();
    let mut trap = |name: &str, arguments: &[String], returns: &str| {
        let signature = format!("{name}({})", arguments.join(", "));
        if !signatures.insert(signature.clone()) {
            return None;
        }
        Some(format!(
            "CREATE FUNCTION public.{signature} RETURNS {returns} VOLATILE LANGUAGE plpgsql AS $$
             BEGIN PERFORM public.escalate('{}'); RETURN NULL; END $$",
            name.replace('\'', "''")
        ))
    };
    for object in used {
        match object {
            UsedObject::Operator(name) => {
                for left in TYPES {
                    for right in TYPES {
                        // Comparisons answer a boolean, so an expression that binds one still
                        // plans, as it would for an attacker.
                        let comparison = ["=", "<>", "<", ">", "<=", ">="].contains(&name.as_str());
                        let returns = if comparison { "boolean" } else { left };
                        let function =
                            format!("planted_{left}_{right}_{returns}").replace(' ', "_");
                        if let Some(create) = trap(
                            &format!("\"{function}\""),
                            &[left.to_owned(), right.to_owned()],
                            returns,
                        ) {
                            statements.push(create);
                        }
                        statements.push(format!(
                            "CREATE OPERATOR public.{name} (LEFTARG = {left}, RIGHTARG = {right}, \
                             FUNCTION = public.\"{function}\")"
                        ));
                    }
                }
            }
            UsedObject::Function {
                name,
                argument_names,
                argument_types,
                defaults,
                returns,
            } => {
                for place in 0..argument_types.len() {
                    for substitute in TYPES {
                        let arguments: Vec<String> = argument_types
                            .iter()
                            .enumerate()
                            .map(|(index, original)| {
                                let kind = if index == place { substitute } else { original };
                                let named = argument_names
                                    .get(index)
                                    .filter(|name| !name.is_empty())
                                    .map_or(String::new(), |name| format!("\"{name}\" "));
                                let default = if index >= argument_types.len() - defaults {
                                    " DEFAULT NULL"
                                } else {
                                    ""
                                };
                                format!("{named}{kind}{default}")
                            })
                            .collect();
                        statements.extend(trap(&format!("\"{name}\""), &arguments, returns));
                    }
                }
            }
        }
    }
    statements
}

/// An operator or function of `pg_catalog` the extension's objects use.
enum UsedObject {
    Operator(String),
    Function {
        name: String,
        argument_names: Vec<String>,
        argument_types: Vec<String>,
        defaults: usize,
        returns: String,
    },
}

fn used_from_pg_catalog(client: &mut Client) -> Vec<UsedObject> {
    client
        .query(USED_FROM_PG_CATALOG, &[])
        .unwrap()
        .iter()
        .map(|row| {
            let name: String = row.get(1);
            if row.get::<_, String>(0) == "operator" {
                UsedObject::Operator(name)
            } else {
                UsedObject::Function {
                    name,
                    argument_names: row.get(2),
                    argument_types: row.get(3),
                    defaults: row.get::<_, i32>(4) as usize,
                    returns: row.get(5),
                }
            }
        })
        .collect()
}

/// Dependencies of the extension's objects outside `pg_catalog` and the extension, and member
/// functions with a text body and no pinned search_path, in `client`'s database.
fn unsealed(client: &mut Client) -> (Vec<String>, Vec<String>) {
    client
        .batch_execute("SET search_path = pg_catalog, pg_temp")
        .unwrap();
    let foreign: Vec<String> = client
        .query(DEPENDENCIES, &[])
        .unwrap()
        .iter()
        .filter(|row| row.get::<_, String>(2) != "pg_catalog" && !row.get::<_, bool>(3))
        .map(|row| format!("{} -> {}", row.get::<_, String>(0), row.get::<_, String>(1)))
        .collect();
    let unpinned = client
        .query(UNPINNED_FUNCTIONS, &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    (foreign, unpinned)
}

/// What a superuser does routinely in a database whose extension is installed: read the views,
/// create and drop a sequence, take IDs, build an index over a snowflake column of a table of
/// the database's owner (the event trigger).
const ROUTINE: &str = "
    SET search_path = public;
    SELECT * FROM snowflake_sequences;
    SELECT * FROM snowflake_workers;
    SELECT snowflake_create_sequence('probe', preset => 'js53');
    SELECT snowflake_nextval('probe'), snowflake_nextval(), (snowflake_decode(snowflake_nextval())).*;
    SELECT snowflake_drop_sequence('probe');
    SELECT snowflake_min_id(now()), snowflake_max_id(now()), snowflake_timestamp(snowflake_nextval());
    SELECT * FROM snowflake_stats();
    CREATE INDEX ON public.owned_ids (id);
    ALTER TABLE public.owned_ids ADD COLUMN added int;";

#[test]
fn no_member_depends_on_a_name_a_role_controls_after_any_install_or_update() {
    let cluster = Cluster::builder().start();
    let mut admin = cluster.connect();
    install_release_script("0.10.0");
    admin.batch_execute("CREATE ROLE dbo LOGIN").unwrap();
    admin.batch_execute("CREATE DATABASE reference").unwrap();
    // A clean install's dependencies name what to plant.
    let mut reference = cluster.connect_to("reference");
    reference
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let used = used_from_pg_catalog(&mut reference);
    let plants = plants(&used);
    let names: Vec<&str> = used
        .iter()
        .map(|object| match object {
            UsedObject::Operator(name) | UsedObject::Function { name, .. } => name.as_str(),
        })
        .collect();
    println!(
        "{} operators and functions of pg_catalog used ({names:?}); {} statements plant \
         look-alikes",
        used.len(),
        plants.len()
    );
    assert!(used.len() >= 10, "too few dependencies found to plant");

    for (database, install) in [
        ("fresh", vec!["CREATE EXTENSION snowflake_id"]),
        (
            "from_0_1_0",
            vec![
                "CREATE EXTENSION snowflake_id VERSION '0.1.0'",
                "ALTER EXTENSION snowflake_id UPDATE",
            ],
        ),
        (
            "from_0_10_0",
            vec![
                "CREATE EXTENSION snowflake_id VERSION '0.10.0'",
                "ALTER EXTENSION snowflake_id UPDATE",
            ],
        ),
    ] {
        admin
            .batch_execute(&format!("CREATE DATABASE {database} OWNER dbo"))
            .unwrap();
        let mut owner = cluster.connect_as(database, "dbo");
        for statement in &plants {
            if let Err(error) = owner.batch_execute(statement) {
                panic!("{statement}: {error:?}");
            }
        }
        let mut superuser = cluster.connect_to(database);
        for statement in &install {
            superuser.batch_execute(statement).unwrap_or_else(|error| {
                panic!("[{database}] {statement}: {:?}", error_parts(&error))
            });
        }
        owner
            .batch_execute(
                "CREATE TABLE public.owned_ids (id bigint DEFAULT snowflake_nextval(), note text);
                 INSERT INTO public.owned_ids (note) VALUES ('one'), ('two');",
            )
            .unwrap();
        superuser.batch_execute(ROUTINE).unwrap_or_else(|error| {
            panic!("[{database}] routine steps: {:?}", error_parts(&error))
        });
        let (foreign, unpinned) = unsealed(&mut superuser);
        let calls = text(
            &mut superuser,
            "SELECT COALESCE(pg_catalog.string_agg(caller || ': ' || what, ', '), 'none')
               FROM public.foreign_calls",
        );
        let escalated = count(
            &mut superuser,
            "SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = 'dbo' AND rolsuper",
        );
        println!(
            "[{database}] dependencies outside pg_catalog and the extension: {foreign:?}; \
             functions without a pinned search_path: {unpinned:?}; the owner's code run by \
             others: {calls}"
        );
        assert!(foreign.is_empty(), "[{database}] {foreign:#?}");
        assert!(unpinned.is_empty(), "[{database}] {unpinned:#?}");
        assert_eq!(calls, "none", "[{database}]");
        assert_eq!(escalated, 0, "[{database}] the owner became a superuser");
    }
}
