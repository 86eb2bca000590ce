//! Reading sequence layouts from the extension's catalog table (`sql/bootstrap.sql`).

use pgrx::prelude::*;

use crate::errors::raise;
use crate::layout::Layout;

/// The extension's schema, quoted for use in SQL text.
pub fn extension_schema() -> String {
    let schema = Spi::get_one::<String>(
        "SELECT quote_ident(n.nspname) FROM pg_catalog.pg_extension e \
         JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
         WHERE e.extname = 'snowflake_id'",
    );
    match schema {
        Ok(Some(schema)) => schema,
        _ => raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            "extension \"snowflake_id\" is not installed in this database".into(),
            Some("Run CREATE EXTENSION snowflake_id;".into()),
        ),
    }
}

/// The layout of sequence `name`, or None when no such sequence exists.
pub fn load_layout(schema: &str, name: &str) -> Option<Layout> {
    let query = format!(
        "SELECT time_bits, node_bits, worker_bits, sequence_bits, gene_bits, time_unit_us, \
                (extract(epoch FROM epoch) * 1000000)::bigint \
         FROM {schema}.snowflake_sequence_catalog WHERE name = $1"
    );
    let row = Spi::connect(|client| {
        let table = client.select(&query, Some(1), &[name.into()])?;
        if table.is_empty() {
            return Ok(None);
        }
        let row = table.first();
        let width = |ordinal| -> Result<u8, pgrx::spi::Error> {
            Ok(row.get::<i32>(ordinal)?.unwrap_or(-1).clamp(-1, 255) as u8)
        };
        Ok::<_, pgrx::spi::Error>(Some(Layout {
            time_bits: width(1)?,
            node_bits: width(2)?,
            worker_bits: width(3)?,
            sequence_bits: width(4)?,
            gene_bits: width(5)?,
            time_unit_us: row.get::<i64>(6)?.unwrap_or(0),
            epoch_unix_us: row.get::<i64>(7)?.unwrap_or(i64::MIN),
        }))
    })
    .unwrap_or_else(|error| {
        raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("could not read snowflake sequence \"{name}\": {error}"),
            None,
        )
    })?;
    if let Err(problem) = row.validate() {
        raise(
            PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
            format!("snowflake sequence \"{name}\" has an invalid layout: {problem}"),
            Some("The catalog table was changed by hand; recreate the sequence.".into()),
        );
    }
    Some(row)
}
