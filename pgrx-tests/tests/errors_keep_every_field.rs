//! An error raised under the library's hooks reaches the client with every field it has without
//! the library (src/hooks/unguarded.rs): a unique violation, a foreign-key violation and a syntax
//! error, each through a plain statement, `EXECUTE` of a prepared statement, `CALL`, `COPY`
//! and `DO`, and PL/pgSQL's `GET STACKED DIAGNOSTICS` after a unique violation inside `CALL`,
//! compared field by field (severity, SQLSTATE, message, detail, hint, position, internal
//! query and position, context, schema, table, column, data type, constraint, and the
//! reporting file, line and routine) between a server that preloads the library, with the
//! extension created, and one that does not. On 229c10d, through `EXECUTE`, `CALL`, `COPY` and
//! `DO` the position, context and object names were lost.

use std::io::Write;

use snowflake_id_cluster_tests::{Client, Cluster, PgError};

const SETUP: &str = "
    CREATE TABLE parent (id bigint PRIMARY KEY);
    CREATE TABLE child (id bigint PRIMARY KEY, parent bigint REFERENCES parent);
    INSERT INTO parent VALUES (1);
    INSERT INTO child VALUES (1, 1);
    CREATE PROCEDURE duplicate() LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO child VALUES (1, 1); END $$;
    CREATE PROCEDURE orphan() LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO child VALUES (2, 99); END $$;
    CREATE PROCEDURE misspelt() LANGUAGE plpgsql AS $$
    BEGIN EXECUTE 'SELEC 1'; END $$;
    CREATE FUNCTION misspelt_query() RETURNS int LANGUAGE plpgsql AS $$
    BEGIN EXECUTE 'SELEC 1'; RETURN 1; END $$;
    CREATE PROCEDURE diagnosed(INOUT report text DEFAULT NULL) LANGUAGE plpgsql AS $$
    DECLARE
        constraint_name text; table_name text; schema_name text; context text;
    BEGIN
        CALL duplicate();
    EXCEPTION WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS constraint_name = CONSTRAINT_NAME, table_name = TABLE_NAME,
                                schema_name = SCHEMA_NAME, context = PG_EXCEPTION_CONTEXT;
        report := concat_ws(' | ', constraint_name, table_name, schema_name, context);
    END $$;
";

/// What each case runs; `Copy` rows go through `COPY child FROM STDIN`.
enum Case {
    Batch(&'static str),
    Copy(&'static str),
}

const CASES: &[(&str, Case)] = &[
    (
        "unique, plain",
        Case::Batch("INSERT INTO child VALUES (1, 1)"),
    ),
    (
        "unique, EXECUTE",
        Case::Batch("PREPARE dup AS INSERT INTO child VALUES (1, 1); EXECUTE dup"),
    ),
    ("unique, CALL", Case::Batch("CALL duplicate()")),
    ("unique, COPY", Case::Copy("1\t1\n")),
    (
        "unique, DO",
        Case::Batch("DO $$ BEGIN INSERT INTO child VALUES (1, 1); END $$"),
    ),
    (
        "foreign key, plain",
        Case::Batch("INSERT INTO child VALUES (2, 99)"),
    ),
    (
        "foreign key, EXECUTE",
        Case::Batch("PREPARE orphan_row AS INSERT INTO child VALUES (2, 99); EXECUTE orphan_row"),
    ),
    ("foreign key, CALL", Case::Batch("CALL orphan()")),
    ("foreign key, COPY", Case::Copy("2\t99\n")),
    (
        "foreign key, DO",
        Case::Batch("DO $$ BEGIN INSERT INTO child VALUES (2, 99); END $$"),
    ),
    ("syntax, plain", Case::Batch("SELEC 1")),
    (
        "syntax, EXECUTE",
        Case::Batch("PREPARE misspelt AS SELECT misspelt_query(); EXECUTE misspelt"),
    ),
    ("syntax, CALL", Case::Batch("CALL misspelt()")),
    // An option COPY's own statement refuses, with its position.
    (
        "syntax, COPY",
        Case::Batch("COPY child FROM STDIN WITH (FORMAT bogus)"),
    ),
    (
        "syntax, DO",
        Case::Batch("DO $$ BEGIN EXECUTE 'SELEC 1'; END $$"),
    ),
];

/// Every field of `error` that the server sent, as text.
fn fields(error: &PgError) -> String {
    let db = error
        .as_db_error()
        .unwrap_or_else(|| panic!("not a server error: {error}"));
    format!(
        "severity {:?}\ncode {:?}\nmessage {:?}\ndetail {:?}\nhint {:?}\nposition {:?}\n\
         context {:?}\nschema {:?}\ntable {:?}\ncolumn {:?}\ndatatype {:?}\nconstraint {:?}\n\
         file {:?}\nline {:?}\nroutine {:?}",
        db.severity(),
        db.code(),
        db.message(),
        db.detail(),
        db.hint(),
        db.position(),
        db.where_(),
        db.schema(),
        db.table(),
        db.column(),
        db.datatype(),
        db.constraint(),
        db.file(),
        db.line(),
        db.routine(),
    )
}

/// The error of `case` on a fresh connection to `cluster`, every field.
fn error_of(cluster: &Cluster, case: &Case) -> String {
    let mut client: Client = cluster.connect();
    let error = match case {
        Case::Batch(sql) => client.batch_execute(sql).expect_err("the case must fail"),
        Case::Copy(rows) => {
            let mut writer = client.copy_in("COPY child FROM STDIN").unwrap();
            writer.write_all(rows.as_bytes()).unwrap();
            writer.finish().expect_err("the copy must fail")
        }
    };
    fields(&error)
}

#[test]
fn errors_under_the_hooks_keep_every_field() {
    let with = Cluster::builder().start();
    let without = Cluster::builder().without_preload().start();
    with.connect()
        .batch_execute(&format!("CREATE EXTENSION snowflake_id; {SETUP}"))
        .unwrap();
    without.connect().batch_execute(SETUP).unwrap();
    let mut differing = Vec::new();
    for (name, case) in CASES {
        let (preloaded, plain) = (error_of(&with, case), error_of(&without, case));
        if preloaded != plain {
            differing.push(format!(
                "{name}:\n with the library:\n{preloaded}\n without:\n{plain}"
            ));
        }
    }
    assert!(differing.is_empty(), "{}", differing.join("\n\n"));

    let report = |cluster: &Cluster| -> String {
        cluster
            .connect()
            .query_one("CALL diagnosed()", &[])
            .unwrap()
            .get(0)
    };
    let (preloaded, plain) = (report(&with), report(&without));
    assert!(plain.contains("child_pkey | child | public"), "{plain}");
    assert_eq!(preloaded, plain, "GET STACKED DIAGNOSTICS inside CALL");
}
