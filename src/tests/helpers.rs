//! What the `#[pg_test]` files (`ids.rs`, `sequences.rs`, `catalog.rs`, `convert_column.rs`,
//! `partitions.rs`) share: one value of a query, the error of a statement, a new sequence.

use pgrx::prelude::*;

/// The one value `sql` returns (not NULL).
pub(crate) fn one<T: FromDatum + IntoDatum>(sql: &str) -> T {
    Spi::get_one::<T>(sql)
        .expect(sql)
        .expect("query returned NULL")
}

/// Runs `sql` in a subtransaction and returns "SQLSTATE: message | hint" of the error it raises.
pub(crate) fn error_of(sql: &str) -> String {
    // Created once per session, so it still works after SET ROLE.
    Spi::run(
        "DO $do$ BEGIN
         IF to_regprocedure('pg_temp.error_of(text)') IS NULL THEN
             CREATE FUNCTION pg_temp.error_of(statement text) RETURNS text
             LANGUAGE plpgsql AS $fn$
             DECLARE hint text;
             BEGIN
                 EXECUTE statement;
                 RETURN 'no error';
             EXCEPTION WHEN OTHERS THEN
                 GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
                 RETURN SQLSTATE || ': ' || SQLERRM || ' | ' || hint;
             END $fn$;
         END IF;
         END $do$",
    )
    .expect("create error_of");
    Spi::get_one_with_args::<String>("SELECT pg_temp.error_of($1)", &[sql.into()])
        .expect("error_of")
        .expect("error_of returned NULL")
}

/// `snowflake_create_sequence(<sql_args>)`.
pub(crate) fn create(sql_args: &str) {
    Spi::run(&format!("SELECT snowflake_create_sequence({sql_args})")).unwrap();
}
