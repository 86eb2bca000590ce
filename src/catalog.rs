//! The extension's catalog table of sequence layouts (`sql/bootstrap.sql`): reading, creating
//! and dropping sequences, and telling other backends when it changes (their
//! `sequence_cache` notices it).

use pgrx::prelude::*;
use pgrx::spi::SpiHeapTupleData;
use snowflake_id_core::layout::Layout;

use crate::errors;
use crate::timestamps;

/// Where the catalog table is: its schema (quoted for SQL text) and its OID.
#[derive(Clone)]
pub struct CatalogTable {
    pub schema: String,
    oid: pg_sys::Oid,
}

impl CatalogTable {
    pub fn oid(&self) -> pg_sys::Oid {
        self.oid
    }
}

// Every statement below runs under the caller's search_path, so it names every function,
// operator and type by schema (or uses SQL syntax that always means pg_catalog's): an object in
// a schema the caller put first can neither change the answer nor call back into the extension.

/// Finds the catalog table of this database's extension; raises 42704 when it is not installed.
pub fn locate() -> CatalogTable {
    find().unwrap_or_else(|| errors::extension_not_installed().raise())
}

/// The catalog table of this database's extension, or None when it is not installed here.
pub fn find() -> Option<CatalogTable> {
    // A read-only select: Spi::get_* would mark the transaction as writing and take a
    // transaction id, which a hot standby or a parallel worker cannot do.
    let found = Spi::connect(|client| {
        let table = client.select(
            "SELECT pg_catalog.quote_ident(n.nspname), c.oid FROM pg_catalog.pg_extension e \
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace \
             JOIN pg_catalog.pg_class c ON c.relnamespace OPERATOR(pg_catalog.=) n.oid \
                  AND c.relname OPERATOR(pg_catalog.=) 'snowflake_sequence_catalog'::pg_catalog.name \
             WHERE e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name",
            Some(1),
            &[],
        )?;
        if table.is_empty() {
            return Ok(None);
        }
        table.first().get_two::<String, pg_sys::Oid>().map(Some)
    });
    match found {
        Ok(Some((Some(schema), Some(oid)))) => Some(CatalogTable { schema, oid }),
        _ => None,
    }
}

/// The columns of a catalog row that make its layout, in the order `layout_of_row` reads them
/// from ordinal `first` on.
const LAYOUT_COLUMNS: &str =
    "time_bits, node_bits, worker_bits, sequence_bits, gene_bits, time_unit_us, epoch";

/// The layout in the `LAYOUT_COLUMNS` of `row`, starting at ordinal `first`.
fn layout_of_row(row: &SpiHeapTupleData, first: usize) -> Result<Layout, pgrx::spi::Error> {
    let width = |ordinal| -> Result<u8, pgrx::spi::Error> {
        Ok(row.get::<i32>(ordinal)?.unwrap_or(-1).clamp(0, 255) as u8)
    };
    Ok(Layout {
        time_bits: width(first)?,
        node_bits: width(first + 1)?,
        worker_bits: width(first + 2)?,
        sequence_bits: width(first + 3)?,
        gene_bits: width(first + 4)?,
        time_unit_us: row.get::<i64>(first + 5)?.unwrap_or(0),
        epoch_unix_us: row
            .get::<TimestampWithTimeZone>(first + 6)?
            .map_or(i64::MIN, timestamps::unix_us),
    })
}

/// The layout of sequence `name`, or None when no such sequence exists.
pub fn load_layout(catalog: &CatalogTable, name: &str) -> Option<Layout> {
    let query = format!(
        "SELECT {LAYOUT_COLUMNS} FROM {}.snowflake_sequence_catalog \
         WHERE name OPERATOR(pg_catalog.=) $1",
        catalog.schema
    );
    let layout = Spi::connect(|client| {
        let Some(row) = client.select(&query, Some(1), &[name.into()])?.next() else {
            return Ok(None);
        };
        layout_of_row(&row, 1).map(Some)
    })
    .unwrap_or_else(|error| {
        errors::internal(format!(
            "could not read snowflake sequence \"{name}\": {error}"
        ))
        .raise()
    })?;
    if let Err(problem) = layout.validate() {
        errors::stored_layout_invalid(name, &problem).raise();
    }
    Some(layout)
}

/// Every sequence of the catalog: name, preset and layout, in name order.
pub fn all_sequences(catalog: &CatalogTable) -> Vec<(String, String, Layout)> {
    let query = format!(
        "SELECT name, COALESCE(preset, ''), {LAYOUT_COLUMNS} \
         FROM {}.snowflake_sequence_catalog ORDER BY name",
        catalog.schema
    );
    Spi::connect(|client| {
        client
            .select(&query, None, &[])?
            .map(|row| {
                let name = row.get::<String>(1)?.unwrap_or_default();
                let preset = row.get::<String>(2)?.unwrap_or_default();
                Ok((name, preset, layout_of_row(&row, 3)?))
            })
            .collect::<Result<Vec<_>, pgrx::spi::Error>>()
    })
    .unwrap_or_else(|error| {
        errors::internal(format!("could not read the snowflake sequences: {error}")).raise()
    })
}

/// Inserts a validated layout; raises 42710 when the name is taken.
pub fn insert(catalog: &CatalogTable, name: &str, preset: &str, layout: &Layout) {
    let query = format!(
        "INSERT INTO {}.snowflake_sequence_catalog \
             (name, preset, epoch, time_unit_us, time_bits, node_bits, worker_bits, \
              sequence_bits, gene_bits) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (name) DO NOTHING",
        catalog.schema
    );
    let args = [
        name.into(),
        preset.into(),
        timestamps::timestamptz(layout.epoch_unix_us)
            .unwrap_or_else(|| errors::time_out_of_range(name).raise())
            .into(),
        layout.time_unit_us.into(),
        i32::from(layout.time_bits).into(),
        i32::from(layout.node_bits).into(),
        i32::from(layout.worker_bits).into(),
        i32::from(layout.sequence_bits).into(),
        i32::from(layout.gene_bits).into(),
    ];
    let inserted = Spi::connect_mut(|client| client.update(&query, None, &args).map(|t| t.len()))
        .unwrap_or_else(|error| {
            errors::internal(format!(
                "could not create snowflake sequence \"{name}\": {error}"
            ))
            .raise()
        });
    if inserted == 0 {
        errors::sequence_exists(name).raise();
    }
    announce_change(catalog);
}

/// Deletes sequence `name`; returns whether it existed.
pub fn delete(catalog: &CatalogTable, name: &str) -> bool {
    let query = format!(
        "DELETE FROM {}.snowflake_sequence_catalog WHERE name OPERATOR(pg_catalog.=) $1",
        catalog.schema
    );
    let deleted =
        Spi::connect_mut(|client| client.update(&query, None, &[name.into()]).map(|t| t.len()))
            .unwrap_or_else(|error| {
                errors::internal(format!(
                    "could not drop snowflake sequence \"{name}\": {error}"
                ))
                .raise()
            });
    if deleted > 0 {
        announce_change(catalog);
    }
    deleted > 0
}

/// Queues a relcache invalidation of the catalog table: at commit every backend's callback
/// fires (at its next transaction), and a rollback sends nothing.
fn announce_change(catalog: &CatalogTable) {
    // SAFETY: queues an invalidation message for an existing relation inside a transaction.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(catalog.oid) };
}
