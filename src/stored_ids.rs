//! Rows that arrive without their database's floor (docs/design.md §5.3, "Rows that come
//! without the database"): a dump made with `pg_dump -n` or `-t` but without
//! `--extension=snowflake_id`, rows copied from another server. Nothing carries their floor, so
//! new IDs can repeat theirs where this server's clock is behind the one that made them, and no
//! value a role writes into a table may move the floor. `pg_restore` builds a table's keys after
//! its rows: the event trigger `snowflake_id_warn_of_stored_ids_ahead` (sql/) calls
//! `warn_of_stored_ids_ahead` for each valid btree index led by a column whose default is
//! `snowflake_nextval(['<sequence>'])`, which warns, naming whose table it is and a
//! superuser's step, when the column's largest ID lies beyond where this database's new IDs
//! begin.
//!
//! The largest ID is the index's last entry: read through the index access method with the
//! built-in `int8` comparisons, as the role that ran the command, so no role's code runs
//! (no policy, no operator class, no expression of the table's owner) and no role is switched.

use pgrx::prelude::*;

use crate::backend;
use crate::catalog;
use crate::errors;
use crate::reservation;
use crate::shared_memory;
use crate::system_clock;

/// `snowflake_id_internal.warn_of_stored_ids_ahead(index oid, seq text)`, declared in sql/
/// for the event trigger: a WARNING when the largest ID in the column that leads `index` ends
/// after the time from which this database issues IDs of `seq`, or when `seq` does not exist
/// here. It changes nothing. It learns something of the table's rows, so it answers only a
/// role with the rights of the table's owner (the one whose command fired the trigger), and
/// only for an index it can read without running anybody's code.
#[pg_extern(sql = false)]
fn warn_of_stored_ids_ahead(index: pg_sys::Oid, seq: &str) {
    if shared_memory::try_state().is_none() {
        return;
    }
    let Some(Largest {
        table,
        owner,
        column,
        id,
    }) = largest_indexed_id(index)
    else {
        return;
    };
    let catalog = backend::catalog_table();
    let Some((layout, _)) = catalog::load_layout(&catalog, seq) else {
        // Rows of a sequence this database does not have (a partial dump brings no catalog
        // rows): their IDs cannot be placed, so the step is said without its time.
        errors::stored_ids_of_a_missing_sequence(&table, &column, seq).warn();
        return;
    };
    let Ok(parts) = layout.decompose(id) else {
        return;
    };
    let stored_until = layout.tick_start_unix_us(parts.tick.saturating_add(1));
    let new_from = backend::issued_or_covered_until();
    if stored_until > new_from {
        let (wall, _) = system_clock::wall_and_monotonic_us();
        let limit = reservation::renewal_policy().trusted_lead();
        let column = format!("{table}.{column}");
        errors::stored_ids_ahead(&column, &owner, seq, stored_until, new_from, wall, limit).warn();
    }
}

/// The largest ID an index holds, and where.
struct Largest {
    /// The table's name, schema-qualified, and its column's, each quoted for SQL text.
    table: String,
    column: String,
    /// The table owner's name, quoted.
    owner: String,
    id: i64,
}

/// The built-in operator family of btree's integer comparisons (`integer_ops`), whose `int8`
/// operator class is `bigint`'s default.
const INTEGER_BTREE_FAMILY: u32 = 1976;

/// The largest non-NULL value in the column that leads `index`, when `index` is a valid btree
/// index without a predicate whose first key is a `bigint` column under the built-in integer
/// comparisons, and the current role has the rights of the table's owner; None otherwise, and
/// for an empty column.
fn largest_indexed_id(index: pg_sys::Oid) -> Option<Largest> {
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    // SAFETY: relations opened and locked here are closed below in the order they were opened;
    // the index's fields are read from its relcache entry while it is open; the scan, its key
    // and slot live until `index_endscan` and `ExecDropSingleTupleTableSlot`; the value is a
    // by-value int8 copied out of the slot before it is dropped.
    unsafe {
        let index_relation = pg_sys::try_relation_open(index, lock);
        if index_relation.is_null() {
            return None;
        }
        let form = (*index_relation).rd_index;
        let is_index =
            (*(*index_relation).rd_rel).relkind == pg_sys::RELKIND_INDEX as std::ffi::c_char;
        let first_key = if is_index && !form.is_null() {
            (*form).indkey.values.as_slice(1)[0]
        } else {
            0
        };
        let plain = first_key > 0
            && (*form).indisvalid
            && (*(*index_relation).rd_rel).relam == pg_sys::BTREE_AM_OID
            && *(*index_relation).rd_opfamily == pg_sys::Oid::from(INTEGER_BTREE_FAMILY)
            && *(*index_relation).rd_opcintype == pg_sys::INT8OID
            && pg_sys::heap_attisnull(
                (*index_relation).rd_indextuple,
                pg_sys::Anum_pg_index_indpred as i32,
                std::ptr::null_mut(),
            );
        if !plain {
            pg_sys::relation_close(index_relation, lock);
            return None;
        }
        let table_relation = pg_sys::table_open((*form).indrelid, lock);
        let owner = (*(*table_relation).rd_rel).relowner;
        let column_type = pg_sys::get_atttype((*form).indrelid, first_key);
        let largest = (pg_sys::has_privs_of_role(pg_sys::GetUserId(), owner)
            && column_type == pg_sys::INT8OID)
            .then(|| last_entry(table_relation, index_relation, first_key))
            .flatten()
            .map(|id| Largest {
                table: catalog::qualified(
                    (*(*table_relation).rd_rel).relnamespace,
                    (*(*table_relation).rd_rel).relname.data.as_ptr(),
                ),
                column: catalog::quoted(pg_sys::get_attname((*form).indrelid, first_key, false)),
                owner: catalog::quoted(pg_sys::GetUserNameFromId(owner, false)),
                id,
            });
        pg_sys::table_close(table_relation, lock);
        pg_sys::relation_close(index_relation, lock);
        largest
    }
}

/// The last non-NULL entry of the first key of `index` (the first one for a descending key),
/// visible to the active snapshot, read from its heap tuple's column `column`.
///
/// # Safety
/// `table` and `index` are open and locked, `index` a btree index on `table` whose first key is
/// the `bigint` column `column`, inside a transaction with an active snapshot.
unsafe fn last_entry(
    table: pg_sys::Relation,
    index: pg_sys::Relation,
    column: pg_sys::AttrNumber,
) -> Option<i64> {
    // SAFETY: see the function's contract; the scan key asks btree for non-NULL entries only
    // (SK_SEARCHNOTNULL), which it supports, so NULLs sorted last are skipped.
    unsafe {
        let mut not_null = pg_sys::ScanKeyData::default();
        pg_sys::ScanKeyEntryInitialize(
            &mut not_null,
            (pg_sys::SK_ISNULL | pg_sys::SK_SEARCHNOTNULL) as i32,
            1,
            0, // InvalidStrategy: a test for NULL, not a comparison
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::Datum::from(0),
        );
        let snapshot = pg_sys::GetActiveSnapshot();
        #[cfg(feature = "pg18")]
        let scan = pg_sys::index_beginscan(table, index, snapshot, std::ptr::null_mut(), 1, 0);
        #[cfg(not(feature = "pg18"))]
        let scan = pg_sys::index_beginscan(table, index, snapshot, 1, 0);
        pg_sys::index_rescan(scan, &mut not_null, 1, std::ptr::null_mut(), 0);
        let descending = *(*index).rd_indoption & pg_sys::INDOPTION_DESC as i16 != 0;
        let direction = if descending {
            pg_sys::ScanDirection::ForwardScanDirection
        } else {
            pg_sys::ScanDirection::BackwardScanDirection
        };
        let slot = pg_sys::table_slot_create(table, std::ptr::null_mut());
        let id = pg_sys::index_getnext_slot(scan, direction, slot).then(|| {
            let mut should_free = false;
            let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut should_free);
            let number = std::num::NonZeroUsize::new(column as usize)?;
            let datum = pgrx::heap_getattr_raw(tuple, number, (*table).rd_att)?;
            let id = i64::from_datum(datum, false);
            if should_free {
                pg_sys::heap_freetuple(tuple);
            }
            id
        });
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::index_endscan(scan);
        id.flatten()
    }
}
