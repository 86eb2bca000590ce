//! The extension's catalog table of sequence layouts (`sql/bootstrap.sql`): reading, creating
//! and dropping sequences, and telling other backends when it changes.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use pgrx::prelude::*;

use crate::errors::raise;
use crate::layout::Layout;

/// Where the catalog table is: its schema (quoted for SQL text) and its OID.
#[derive(Clone)]
pub struct CatalogTable {
    pub schema: String,
    oid: pg_sys::Oid,
}

/// Set by the relcache callback when the catalog table may have changed (a sequence was
/// created or dropped and committed, or the extension was dropped).
static CHANGED: AtomicBool = AtomicBool::new(false);
/// OID of the catalog table the callback watches (0 until looked up).
static WATCHED_OID: AtomicU32 = AtomicU32::new(0);
static CALLBACK_REGISTERED: AtomicBool = AtomicBool::new(false);

/// Whether the catalog changed since the last call (clears the flag).
pub fn take_changed() -> bool {
    CHANGED.load(Ordering::Relaxed) && CHANGED.swap(false, Ordering::Relaxed)
}

/// Finds the catalog table and starts watching it for changes.
pub fn locate() -> CatalogTable {
    // A read-only select: Spi::get_* would mark the transaction as writing and take a
    // transaction id, which a hot standby or a parallel worker cannot do.
    let found = Spi::connect(|client| {
        let table = client.select(
            "SELECT quote_ident(n.nspname), c.oid FROM pg_catalog.pg_extension e \
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
             JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid \
                                        AND c.relname = 'snowflake_sequence_catalog' \
             WHERE e.extname = 'snowflake_id'",
            Some(1),
            &[],
        )?;
        if table.is_empty() {
            return Ok(None);
        }
        table.first().get_two::<String, pg_sys::Oid>().map(Some)
    });
    let Ok(Some((Some(schema), Some(oid)))) = found else {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
            "extension \"snowflake_id\" is not installed in this database".into(),
            Some("Run CREATE EXTENSION snowflake_id;".into()),
        )
    };
    WATCHED_OID.store(oid.to_u32(), Ordering::Relaxed);
    if !CALLBACK_REGISTERED.swap(true, Ordering::Relaxed) {
        // SAFETY: registers a plain function for the life of this backend; PostgreSQL calls
        // it while processing invalidation messages, and it only stores to atomics.
        unsafe {
            pg_sys::CacheRegisterRelcacheCallback(
                Some(on_relcache_invalidation),
                pg_sys::Datum::from(0),
            )
        };
    }
    CatalogTable { schema, oid }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_relcache_invalidation(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let watched = WATCHED_OID.load(Ordering::Relaxed);
    if relid == pg_sys::InvalidOid || relid.to_u32() == watched {
        CHANGED.store(true, Ordering::Relaxed);
    }
}

/// The layout of sequence `name`, or None when no such sequence exists.
pub fn load_layout(catalog: &CatalogTable, name: &str) -> Option<Layout> {
    let query = format!(
        "SELECT time_bits, node_bits, worker_bits, sequence_bits, gene_bits, time_unit_us, \
                (extract(epoch FROM epoch) * 1000000)::bigint \
         FROM {}.snowflake_sequence_catalog WHERE name = $1",
        catalog.schema
    );
    let layout = Spi::connect(|client| {
        let table = client.select(&query, Some(1), &[name.into()])?;
        if table.is_empty() {
            return Ok(None);
        }
        let row = table.first();
        let width = |ordinal| -> Result<u8, pgrx::spi::Error> {
            Ok(row.get::<i32>(ordinal)?.unwrap_or(-1).clamp(0, 255) as u8)
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
    if let Err(problem) = layout.validate() {
        raise(
            PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
            format!("snowflake sequence \"{name}\" has an invalid layout: {problem}"),
            Some("The catalog table was changed by hand; recreate the sequence.".into()),
        );
    }
    Some(layout)
}

/// Inserts a validated layout; raises 42710 when the name is taken.
pub fn insert(catalog: &CatalogTable, name: &str, preset: &str, layout: &Layout) {
    let query = format!(
        "INSERT INTO {}.snowflake_sequence_catalog \
             (name, preset, epoch, time_unit_us, time_bits, node_bits, worker_bits, \
              sequence_bits, gene_bits) \
         VALUES ($1, $2, to_timestamp($3::float8 / 1e6), $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (name) DO NOTHING",
        catalog.schema
    );
    let args = [
        name.into(),
        preset.into(),
        layout.epoch_unix_us.into(),
        layout.time_unit_us.into(),
        i32::from(layout.time_bits).into(),
        i32::from(layout.node_bits).into(),
        i32::from(layout.worker_bits).into(),
        i32::from(layout.sequence_bits).into(),
        i32::from(layout.gene_bits).into(),
    ];
    let inserted = Spi::connect_mut(|client| client.update(&query, None, &args).map(|t| t.len()))
        .unwrap_or_else(|error| {
            raise(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!("could not create snowflake sequence \"{name}\": {error}"),
                None,
            )
        });
    if inserted == 0 {
        raise(
            PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
            format!("snowflake sequence \"{name}\" already exists"),
            Some("Choose another name; a layout never changes once created.".into()),
        );
    }
    announce_change(catalog);
}

/// Deletes sequence `name`; returns whether it existed.
pub fn delete(catalog: &CatalogTable, name: &str) -> bool {
    let query = format!(
        "DELETE FROM {}.snowflake_sequence_catalog WHERE name = $1",
        catalog.schema
    );
    let deleted =
        Spi::connect_mut(|client| client.update(&query, None, &[name.into()]).map(|t| t.len()))
            .unwrap_or_else(|error| {
                raise(
                    PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                    format!("could not drop snowflake sequence \"{name}\": {error}"),
                    None,
                )
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
