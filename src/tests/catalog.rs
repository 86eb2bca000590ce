//! `#[pg_test]`s of the catalog table of sequence layouts: read-only for ordinary roles, and a
//! layout written into it by hand validated when it is read.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use crate::tests::helpers::{error_of, one};
    use pgrx::prelude::*;

    #[pg_test]
    fn catalog_is_read_only_for_ordinary_roles() {
        Spi::run("CREATE ROLE snowflake_test_user; SET ROLE snowflake_test_user").unwrap();
        let error = error_of("DELETE FROM snowflake_id_internal.snowflake_sequence_catalog");
        assert!(error.starts_with("42501: permission denied"), "{error}");
        assert!(one::<i64>("SELECT snowflake_nextval()") > 0);
        Spi::run("RESET ROLE").unwrap();
    }

    /// The catalog table has no CHECK constraints (a new connection's first ID would read
    /// pg_constraint): its guard trigger refuses an invalid row (23514), and one a superuser
    /// writes past it (triggers off) is validated when it is read: it makes no ID and decodes
    /// none.
    #[pg_test]
    fn a_layout_edited_by_hand_is_refused_when_read() {
        let hand_written = [
            (
                "t_wide",
                "1000, 50, 0, 10, 12, 0",
                "the widths add up to 72 bits",
            ),
            (
                "t_unit",
                "5000, 41, 0, 10, 12, 0",
                "the time unit of 5000 microseconds is not allowed",
            ),
            (
                "t_no_sequence",
                "1000, 41, 0, 10, 0, 0",
                "the sequence field needs at least 1 bit",
            ),
        ];
        for (name, widths, problem) in hand_written {
            let insert = format!(
                "INSERT INTO snowflake_id_internal.snowflake_sequence_catalog (name, epoch, time_unit_us, time_bits,
                     node_bits, worker_bits, sequence_bits, gene_bits, created_at)
                 VALUES ('{name}', '2025-01-01 00:00:00+00', {widths}, now())"
            );
            let refused = error_of(&insert);
            assert!(
                refused.starts_with(&format!(
                    "23514: new row of snowflake_id_internal.snowflake_sequence_catalog for \
                     snowflake sequence \"{name}\" is refused: {problem}"
                )),
                "{refused}"
            );
            Spi::run(&format!(
                "SET LOCAL session_replication_role = replica; {insert}; \
                 SET LOCAL session_replication_role = origin"
            ))
            .unwrap();
            let expected =
                format!("XX001: snowflake sequence \"{name}\" has an invalid layout: {problem}");
            for call in [
                format!("SELECT snowflake_nextval('{name}')"),
                format!("SELECT snowflake_decode(1, '{name}')"),
            ] {
                let error = error_of(&call);
                assert!(error.starts_with(&expected), "{call}: {error}");
                assert!(
                    error.ends_with(
                        "| The catalog table was changed by hand; recreate the sequence."
                    ),
                    "{error}"
                );
            }
        }
        // A valid row written by hand is a sequence like any other.
        Spi::run(
            "INSERT INTO snowflake_id_internal.snowflake_sequence_catalog (name, epoch, time_unit_us, time_bits,
                 node_bits, worker_bits, sequence_bits, gene_bits, created_at)
             VALUES ('t_hand', '2025-01-01 00:00:00+00', 1000, 41, 0, 10, 12, 0, now())",
        )
        .unwrap();
        assert!(one::<i64>("SELECT snowflake_nextval('t_hand')") > 0);
    }
}
