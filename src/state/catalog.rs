//! The extension's catalog table of sequence layouts (made by the install script in `sql/`):
//! reading, creating and dropping sequences, and telling other backends when it changes (their
//! `sequence_cache` notices it).

use std::ffi::CStr;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::prelude::*;
use pgrx::spi::SpiHeapTupleData;
use pgrx::PgTupleDesc;
use snowflake_id_core::layout::Layout;

use crate::errors;
use crate::pg::guards::{Lock, OpenRelation};
use crate::pg::timestamps;

/// The catalog table, by OID, and the schema the extension was created in (where its
/// user-facing functions and views are). No name is kept: SQL that names either reads the
/// name from the OID when it runs, so a schema renamed since (its owner may be the
/// database's owner) cannot send it elsewhere.
#[derive(Clone, Copy)]
pub struct CatalogTable {
    oid: pg_sys::Oid,
    extension_namespace: pg_sys::Oid,
}

impl CatalogTable {
    /// The catalog table `oid` of the extension created in schema `extension_namespace`.
    pub fn new(oid: pg_sys::Oid, extension_namespace: pg_sys::Oid) -> CatalogTable {
        CatalogTable {
            oid,
            extension_namespace,
        }
    }

    pub fn oid(&self) -> pg_sys::Oid {
        self.oid
    }

    /// The table's name, schema-qualified and quoted for SQL text, as it is called now.
    pub fn qualified_name(&self) -> String {
        relation_name(self.oid)
    }

    /// The table's owner (the superuser who created the extension): privileged functions write
    /// the table as this role (`privileges::as_owner`).
    pub fn owner(&self) -> pg_sys::Oid {
        relation_owner(self.oid)
    }

    /// The schema of the extension's user-facing functions and views, quoted for SQL text and
    /// messages, as it is called now.
    pub fn extension_schema(&self) -> String {
        // SAFETY: a syscache lookup inside a transaction: a palloc'd copy of the name, or null.
        let name = unsafe { pg_sys::get_namespace_name(self.extension_namespace) };
        // SAFETY: `name` is null or that copy.
        unsafe { quoted(name) }
    }
}

/// The owner of `relation`, which exists, from its relcache entry; the relation stays locked
/// (`ACCESS SHARE`) to the end of the transaction, so the answer holds that long.
pub fn relation_owner(relation: pg_sys::Oid) -> pg_sys::Oid {
    OpenRelation::open(relation, ACCESS_SHARE, Lock::KeptToTransactionEnd)
        .class()
        .relowner
}

/// `name`, quoted for SQL text ("?" for a null pointer: an object dropped under us).
///
/// # Safety
/// `name` is null or a NUL-terminated string valid for this call.
pub unsafe fn quoted(name: *const std::ffi::c_char) -> String {
    if name.is_null() {
        return "?".to_owned();
    }
    // SAFETY: as the caller promises; quote_identifier only reads it.
    let quoted = unsafe { pg_sys::quote_identifier(name) };
    // SAFETY: `name` itself or a palloc'd quoted copy, NUL-terminated.
    unsafe { CStr::from_ptr(quoted) }
        .to_string_lossy()
        .into_owned()
}

/// `schema.name`, each quoted for SQL text.
///
/// # Safety
/// `name` is null or a NUL-terminated string valid for this call; `namespace` any OID.
pub unsafe fn qualified(namespace: pg_sys::Oid, name: *const std::ffi::c_char) -> String {
    // SAFETY: a syscache lookup inside a transaction: a palloc'd copy of the name, or null.
    let schema = unsafe { pg_sys::get_namespace_name(namespace) };
    // SAFETY: `schema` is null or that copy.
    let schema = unsafe { quoted(schema) };
    // SAFETY: as the caller promises.
    let name = unsafe { quoted(name) };
    format!("{schema}.{name}")
}

/// The relation's name, schema-qualified and quoted, as it is called now.
pub fn relation_name(relation: pg_sys::Oid) -> String {
    // SAFETY: a syscache lookup inside a transaction (InvalidOid when the relation is gone).
    let namespace = unsafe { pg_sys::get_rel_namespace(relation) };
    // SAFETY: as above: a palloc'd copy of the name, or null.
    let name = unsafe { pg_sys::get_rel_name(relation) };
    // SAFETY: `name` is null or that copy.
    unsafe { qualified(namespace, name) }
}

// Every statement below runs under the caller's search_path, so it names every function,
// operator and type by schema (or uses SQL syntax that always means pg_catalog's): an object in
// a schema the caller put first can neither change the answer nor call back into the extension.

/// The schema that holds the extension's state and the functions its privileged code calls
/// (sql/snowflake_id--0.9.0--0.10.0.sql creates it, so only superusers own or can create
/// anything in it).
pub const INTERNAL_SCHEMA: &CStr = c"snowflake_id_internal";
/// The catalog table's name in that schema, and its primary key's.
pub const CATALOG_TABLE_NAME: &CStr = c"snowflake_sequence_catalog";
pub const CATALOG_KEY_NAME: &CStr = c"snowflake_sequence_catalog_pkey";

/// The lock a reader of a relation takes (`ACCESS SHARE`).
pub const ACCESS_SHARE: pg_sys::LOCKMODE = pg_sys::AccessShareLock as pg_sys::LOCKMODE;

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

/// Which version of a sequence's catalog row was read: a sequence dropped and created again has
/// a new row (another inserting transaction or another place), even with an equal layout.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RowVersion {
    inserted_by: pg_sys::TransactionId,
    block: u32,
    offset: u16,
}

impl RowVersion {
    /// Whether this backend's transaction (or one of its subtransactions) inserted the row:
    /// not committed yet, so not for other sessions to rely on.
    pub fn inserted_by_this_transaction(&self) -> bool {
        // SAFETY: asks about a transaction id; any value is allowed.
        unsafe { pg_sys::TransactionIdIsCurrentTransactionId(self.inserted_by) }
    }
}

/// The longest sequence name, in bytes (PostgreSQL's identifier limit).
pub const MAX_NAME_BYTES: usize = 63;

/// Whether `name` can name a sequence: 1 to `MAX_NAME_BYTES` bytes.
pub fn name_fits(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_BYTES
}

/// The layout of sequence `name` and its row's version, or None when no such sequence exists:
/// without SQL (see `find`), one probe of the catalog table's primary key, or a read of the
/// table when it has one page (a new connection's first ID then opens no index).
pub fn load_layout(catalog: &CatalogTable, name: &str) -> Option<(Layout, RowVersion)> {
    // The catalog table, which `find` found in this transaction (and locked), is closed
    // before the row is judged; nothing read from it outlives the close.
    let found = {
        let table = OpenRelation::table(catalog.oid, ACCESS_SHARE, Lock::ReleasedAtClose);
        // SAFETY: `table` is the catalog table, open.
        unsafe { stored_row(table.as_ptr(), name) }
    };
    let (layout, version, edited) = found?;
    if edited {
        errors::stored_layout_edited(name).raise();
    }
    if let Err(problem) = layout.validate() {
        errors::stored_layout_invalid(name, &problem).raise();
    }
    Some((layout, version))
}

/// The row of sequence `name` in the catalog table `table`: its layout as stored, its version,
/// and whether an UPDATE made it; None when there is none.
///
/// # Safety
/// `table` is the catalog table, open inside a transaction.
unsafe fn stored_row(table: pg_sys::Relation, name: &str) -> Option<(Layout, RowVersion, bool)> {
    // SAFETY: `table` is open (see the contract), so its relcache entry is valid.
    let descriptor = unsafe { (*table).rd_att };
    // SAFETY: the catalog table's descriptor, inside a transaction.
    let mut key = unsafe { name_key(descriptor, name) };
    // SAFETY: `table` is open.
    let index = unsafe { name_index(table) };
    // SAFETY: `table` is open and `index` its primary key or none; `key` lives until the scan
    // ends.
    let scan = unsafe {
        pg_sys::systable_beginscan(
            table,
            index,
            index != pg_sys::InvalidOid,
            std::ptr::null_mut(),
            1,
            &mut key,
        )
    };
    // SAFETY: the scan just begun; the row it returns stays valid until the scan ends.
    let row = unsafe { pg_sys::systable_getnext(scan) };
    let found = (!row.is_null()).then(|| {
        // SAFETY: a row of the catalog table, read before the scan ends.
        let layout = unsafe { stored_layout(row, descriptor) };
        // SAFETY: as above.
        let version = unsafe { row_version(row) };
        // SAFETY: as above.
        (layout, version, unsafe { updated(row) })
    });
    // SAFETY: ends the scan begun above, once; nothing read from its row is used after.
    unsafe { pg_sys::systable_endscan(scan) };
    found
}

/// A scan key that finds `name` in the column `name` of the catalog table (described by
/// `descriptor`), under the column's collation, which ordered its primary key. The column is
/// found in the descriptor: a syscache probe per column would cost a new connection's first ID
/// more than the rest of the look-up.
///
/// # Safety
/// `descriptor` is the catalog table's, inside a transaction (the key's text is palloc'd).
unsafe fn name_key(descriptor: pg_sys::TupleDesc, name: &str) -> pg_sys::ScanKeyData {
    // SAFETY: a valid descriptor (see the contract), borrowed for this call.
    let columns = unsafe { PgTupleDesc::from_pg_unchecked(descriptor) };
    let name_column = columns
        .iter()
        .find(|column| !column.is_dropped() && column.name() == "name")
        .unwrap_or_else(|| {
            errors::internal("the snowflake sequence catalog has no column \"name\"".into()).raise()
        });
    // SAFETY: copies `name`'s bytes (a name fits an i32 length) into a palloc'd text.
    let text = unsafe { pg_sys::cstring_to_text_with_len(name.as_ptr().cast(), name.len() as i32) };
    let mut key = pg_sys::ScanKeyData::default();
    // SAFETY: fills `key` with a text comparison of that column to the copy.
    unsafe {
        pg_sys::ScanKeyEntryInitialize(
            &mut key,
            0,
            name_column.num(),
            pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
            pg_sys::InvalidOid,
            name_column.attcollation,
            pg_sys::Oid::from(pg_sys::F_TEXTEQ),
            pg_sys::Datum::from(text),
        )
    };
    key
}

/// The index to find a name in the catalog table `table` by: its primary key, or none (the
/// table read whole) while it has one page, so that a new connection's first ID opens no index.
///
/// # Safety
/// `table` is open inside a transaction.
unsafe fn name_index(table: pg_sys::Relation) -> pg_sys::Oid {
    // SAFETY: `table` is open (see the contract).
    let blocks =
        unsafe { pg_sys::RelationGetNumberOfBlocksInFork(table, pg_sys::ForkNumber::MAIN_FORKNUM) };
    if blocks <= 1 {
        return pg_sys::InvalidOid;
    }
    // SAFETY: as above; it fills rd_pkindex, the primary key's index, and returns a copy of
    // the list.
    let indexes = unsafe { pg_sys::RelationGetIndexList(table) };
    // SAFETY: that copy, freed once.
    unsafe { pg_sys::list_free(indexes) };
    // SAFETY: `table` is open, so its relcache entry is valid.
    unsafe { (*table).rd_pkindex }
}

/// Which version of its row a catalog row is: the transaction that inserted it and its place.
///
/// # Safety
/// `row` is a heap tuple read by a scan that has not ended.
unsafe fn row_version(row: pg_sys::HeapTuple) -> RowVersion {
    // SAFETY: `row` is valid (see the contract).
    let place = unsafe { (*row).t_self };
    // SAFETY: as above.
    let header = unsafe { (*row).t_data };
    // SAFETY: a scanned row's header, valid while the scan lasts.
    let header = unsafe { &*header };
    // SAFETY: a heap tuple's header holds its inserting transaction in `t_heap`.
    let inserted_by = unsafe { header.t_choice.t_heap.t_xmin };
    let (block, offset) = pgrx::itemptr::item_pointer_get_both(place);
    RowVersion {
        inserted_by,
        block,
        offset,
    }
}

/// Whether an UPDATE made this row version. The extension only inserts and deletes rows (a
/// layout never changes): a row made by UPDATE was edited by hand, whatever layout it holds.
///
/// # Safety
/// As for [`row_version`].
unsafe fn updated(row: pg_sys::HeapTuple) -> bool {
    // SAFETY: `row` is valid (see the contract).
    let header = unsafe { (*row).t_data };
    // SAFETY: a scanned row's header, valid while the scan lasts.
    unsafe { (*header).t_infomask & pg_sys::HEAP_UPDATED as u16 != 0 }
}

/// The value of column `column` of a catalog row, found by name in the row's descriptor (a
/// syscache probe per column would cost a new connection's first ID more than the rest of the
/// look-up); None when the column is missing or NULL.
///
/// # Safety
/// `row` is a tuple of the catalog table whose descriptor is `descriptor`, valid for the call.
unsafe fn stored_value(
    row: pg_sys::HeapTuple,
    descriptor: pg_sys::TupleDesc,
    column: &str,
) -> Option<pg_sys::Datum> {
    // SAFETY: a valid descriptor (see the contract), borrowed for this call.
    unsafe { PgTupleDesc::from_pg_unchecked(descriptor) }
        .iter()
        .find(|attribute| !attribute.is_dropped() && attribute.name() == column)
        .and_then(|attribute| NonZeroUsize::new(attribute.num().max(0) as usize))
        // SAFETY: `row` is a tuple of that descriptor, valid for the call.
        .and_then(|number| unsafe { pgrx::heap_getattr_raw(row, number, descriptor) })
}

/// The layout a catalog row holds, as stored (not validated): a missing or NULL field reads as
/// a value no layout has.
///
/// # Safety
/// As for [`stored_value`].
pub unsafe fn stored_layout(row: pg_sys::HeapTuple, descriptor: pg_sys::TupleDesc) -> Layout {
    // SAFETY: see the contract.
    let value = |column| unsafe { stored_value(row, descriptor, column) };
    let width = |column| {
        value(column).map_or(u8::MAX, |datum| {
            // SAFETY: the catalog's width columns are integers.
            unsafe { i32::from_datum(datum, false) }
                .unwrap_or(-1)
                .clamp(0, 255) as u8
        })
    };
    Layout {
        time_bits: width("time_bits"),
        node_bits: width("node_bits"),
        worker_bits: width("worker_bits"),
        sequence_bits: width("sequence_bits"),
        gene_bits: width("gene_bits"),
        time_unit_us: value("time_unit_us")
            // SAFETY: time_unit_us is a bigint.
            .and_then(|datum| unsafe { i64::from_datum(datum, false) })
            .unwrap_or(0),
        epoch_unix_us: value("epoch")
            // SAFETY: epoch is a timestamptz.
            .and_then(|datum| unsafe { TimestampWithTimeZone::from_datum(datum, false) })
            .map_or(i64::MIN, timestamps::unix_us),
    }
}

/// The name a catalog row holds (None when NULL).
///
/// # Safety
/// As for [`stored_value`].
pub unsafe fn stored_name(row: pg_sys::HeapTuple, descriptor: pg_sys::TupleDesc) -> Option<String> {
    // SAFETY: see the contract.
    let value = unsafe { stored_value(row, descriptor, "name") }?;
    // SAFETY: the name column is text.
    unsafe { String::from_datum(value, false) }
}

/// Every sequence of the catalog: name, preset and layout, in name order.
pub fn all_sequences(catalog: &CatalogTable) -> Vec<(String, String, Layout)> {
    let query = format!(
        "SELECT name, COALESCE(preset, ''), {LAYOUT_COLUMNS} \
         FROM {} ORDER BY name",
        catalog.qualified_name()
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
        "INSERT INTO {} \
             (name, preset, epoch, time_unit_us, time_bits, node_bits, worker_bits, \
              sequence_bits, gene_bits, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, pg_catalog.now()) \
         ON CONFLICT (name) DO NOTHING",
        catalog.qualified_name()
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

/// Set while this backend's `delete` writes the catalog table: the table's guard trigger lets
/// that write through and refuses every other UPDATE and DELETE (`catalog_guard`).
static DELETING: AtomicBool = AtomicBool::new(false);

/// Whether this backend's `delete` is writing the catalog table now.
pub fn deleting() -> bool {
    DELETING.load(Ordering::Relaxed)
}

/// Deletes sequence `name`; returns whether it existed (the extension directory sees the
/// write, `extension_directory.rs`).
pub fn delete(catalog: &CatalogTable, name: &str) -> bool {
    let query = format!(
        "DELETE FROM {} WHERE name OPERATOR(pg_catalog.=) $1",
        catalog.qualified_name()
    );
    DELETING.store(true, Ordering::Relaxed);
    let deleted = PgTryBuilder::new(|| {
        Spi::connect_mut(|client| client.update(&query, None, &[name.into()]).map(|t| t.len()))
    })
    .finally(|| DELETING.store(false, Ordering::Relaxed))
    .execute()
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
