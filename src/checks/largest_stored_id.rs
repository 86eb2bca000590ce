//! The largest ID an index holds (docs/design.md §5.3, "Rows that come without the database"),
//! for the stored-IDs check (`stored_ids.rs`): the index's last entry, read through the index
//! access method with the built-in `int8` comparisons, as the role that ran the command, so no
//! role's code runs and no role is switched; and the sequence its column's default draws from,
//! read from the table's relcache entry.

use std::ffi::CStr;

use pgrx::prelude::*;
use pgrx::PgList;

use crate::pg::guards::{ActiveSnapshot, Lock, OpenRelation};
use crate::state::catalog::{self, ACCESS_SHARE};
use crate::state::citus;

/// The largest ID an index holds, and where.
pub struct Largest {
    /// The table's name, schema-qualified, and its column's, each quoted for SQL text.
    pub table: String,
    pub column: String,
    /// The table owner's name, quoted.
    pub owner: String,
    /// The snowflake sequence the column's default draws from.
    pub sequence: String,
    pub id: i64,
}

/// The built-in operator family of btree's integer comparisons (`integer_ops`), whose `int8`
/// operator class is `bigint`'s default.
const INTEGER_BTREE_FAMILY: u32 = 1976;

/// The largest non-NULL value in the column that leads `index`, when `index` is a valid btree
/// index without a predicate whose first key is a `bigint` column under the built-in integer
/// comparisons with a default of `snowflake_nextval(<a constant>)`, its table is not one that
/// Citus distributes (its rows are on the workers), and the current role has the rights of the
/// table's owner; None otherwise, and for an empty column.
pub fn largest_indexed_id(index: pg_sys::Oid) -> Option<Largest> {
    let index_relation = OpenRelation::try_open(index, ACCESS_SHARE, Lock::ReleasedAtClose)?;
    let (table, first_key) = plain_int8_key(&index_relation)?;
    let table_relation = OpenRelation::table(table, ACCESS_SHARE, Lock::ReleasedAtClose);
    let table_row = table_relation.class();
    let owner = table_row.relowner;
    // SAFETY: a syscache lookup of a column of a table that is open, inside a transaction.
    if unsafe { pg_sys::get_atttype(table, first_key) } != pg_sys::INT8OID {
        return None;
    }
    // SAFETY: a plain read of this backend's current role.
    let role = unsafe { pg_sys::GetUserId() };
    // SAFETY: a role membership check (syscache), inside a transaction.
    if !unsafe { pg_sys::has_privs_of_role(role, owner) } {
        return None;
    }
    // SAFETY: the table is open and locked.
    let sequence = unsafe { snowflake_default_of(table_relation.as_ptr(), first_key) }
        .filter(|_| !citus::distributes(table))?;
    // SAFETY: the checks above establish `last_entry`'s contract: both relations open and
    // locked, a btree index on the table whose first key is this `bigint` column.
    let id = unsafe { last_entry(table_relation.as_ptr(), index_relation.as_ptr(), first_key) }?;
    // SAFETY: the table's name, a NUL-terminated NameData in the row copied above.
    let table_name =
        unsafe { catalog::qualified(table_row.relnamespace, table_row.relname.data.as_ptr()) };
    // SAFETY: a syscache lookup of a column that exists (an error otherwise): a palloc'd copy.
    let column = unsafe { pg_sys::get_attname(table, first_key, false) };
    // SAFETY: a syscache lookup of the owner (an error when gone): a palloc'd copy of the name.
    let owner = unsafe { pg_sys::GetUserNameFromId(owner, false) };
    Some(Largest {
        table: table_name,
        // SAFETY: the copy of the column's name.
        column: unsafe { catalog::quoted(column) },
        // SAFETY: the copy of the owner's name.
        owner: unsafe { catalog::quoted(owner) },
        sequence,
        id,
    })
}

/// The table of `index` and the column that leads it, when `index` is a valid btree index
/// without a predicate whose first key is a column under the built-in integer comparisons of
/// `bigint`; read from its relcache entry.
fn plain_int8_key(index: &OpenRelation) -> Option<(pg_sys::Oid, pg_sys::AttrNumber)> {
    let class = index.class();
    // SAFETY: the index is open, so its relcache entry is valid; nothing below rebuilds it.
    let entry = unsafe { &*index.as_ptr() };
    if class.relkind != pg_sys::RELKIND_INDEX as std::ffi::c_char || entry.rd_index.is_null() {
        return None;
    }
    // SAFETY: an index's pg_index row, non-null, valid while it is open.
    let form = unsafe { &*entry.rd_index };
    // SAFETY: the row's key columns, of which an index has at least one.
    let first_key = unsafe { form.indkey.values.as_slice(1) }[0];
    let plain = first_key > 0
        && form.indisvalid
        && class.relam == pg_sys::BTREE_AM_OID
        // SAFETY: an index's operator families, one per key column.
        && unsafe { *entry.rd_opfamily } == pg_sys::Oid::from(INTEGER_BTREE_FAMILY)
        // SAFETY: an index's key columns' input types, one per key column.
        && unsafe { *entry.rd_opcintype } == pg_sys::INT8OID
        // SAFETY: the index's pg_index tuple, whose column indpred is read.
        && unsafe {
            pg_sys::heap_attisnull(
                entry.rd_indextuple,
                pg_sys::Anum_pg_index_indpred as i32,
                std::ptr::null_mut(),
            )
        };
    plain.then_some((form.indrelid, first_key))
}

/// The sequence that column `column` of `table` draws its default from, when the default is a
/// call of this extension's `snowflake_nextval(text)` with a constant or with none: read from
/// the table's relcache entry, without SQL.
///
/// # Safety
/// `table` is open and locked inside a transaction.
unsafe fn snowflake_default_of(
    table: pg_sys::Relation,
    column: pg_sys::AttrNumber,
) -> Option<String> {
    // SAFETY: `table` is open (see the contract), so its relcache entry is valid.
    let descriptor = unsafe { (*table).rd_att };
    // SAFETY: an open relation's descriptor.
    let constraints = unsafe { (*descriptor).constr };
    if constraints.is_null() {
        return None;
    }
    // SAFETY: the descriptor's constraints, non-null.
    let constraints = unsafe { &*constraints };
    if constraints.defval.is_null() {
        return None;
    }
    // SAFETY: the descriptor's defaults: `num_defval` entries at a non-null `defval`.
    let defaults =
        unsafe { std::slice::from_raw_parts(constraints.defval, constraints.num_defval.into()) };
    let default = defaults.iter().find(|default| default.adnum == column)?;
    // SAFETY: a default's expression as PostgreSQL stored it (nodeToString), read anew.
    let expression = unsafe { pg_sys::stringToNode(default.adbin) }.cast::<pg_sys::Node>();
    // SAFETY: `expression` is null or a valid node, whose tag is read first.
    if !unsafe { pgrx::is_a(expression, pg_sys::NodeTag::T_FuncExpr) } {
        return None;
    }
    // SAFETY: a FuncExpr, as its tag says.
    let call = unsafe { &*expression.cast::<pg_sys::FuncExpr>() };
    if !is_snowflake_nextval(call.funcid) {
        return None;
    }
    // `snowflake_nextval()` is stored without its argument (the planner adds the declared
    // default, 'default', to the call).
    // SAFETY: the call's list of argument nodes (null when empty).
    let arguments = unsafe { PgList::<pg_sys::Node>::from_pg(call.args) };
    let argument = match arguments.len() {
        0 => return Some("default".to_owned()),
        1 => arguments.get_ptr(0)?,
        _ => return None,
    };
    // SAFETY: an element of the list, a valid node.
    if unsafe { (*argument).type_ } != pg_sys::NodeTag::T_Const {
        return None;
    }
    // SAFETY: a Const, as its tag says.
    let constant = unsafe { &*argument.cast::<pg_sys::Const>() };
    if constant.constisnull || constant.consttype != pg_sys::TEXTOID {
        return None;
    }
    // SAFETY: a non-null `text` constant; the result is a palloc'd copy.
    let text = unsafe { pg_sys::text_to_cstring(constant.constvalue.cast_mut_ptr()) };
    // SAFETY: that copy, NUL-terminated.
    Some(
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Whether function `function` is this extension's `snowflake_nextval(text)`: its name and
/// arity, and its membership of the extension (a role's function of that name is not it).
fn is_snowflake_nextval(function: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup by OID inside a transaction: a palloc'd copy, or null.
    let name = unsafe { pg_sys::get_func_name(function) };
    !name.is_null()
        // SAFETY: that copy, NUL-terminated.
        && unsafe { CStr::from_ptr(name) } == c"snowflake_nextval"
        // SAFETY: a syscache lookup by OID inside a transaction.
        && unsafe { pg_sys::get_func_nargs(function) } == 1
        // SAFETY: a scan of pg_depend inside a transaction.
        && unsafe { pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, function) }
            // SAFETY: a catalog lookup of a static name inside a transaction (missing_ok).
            == unsafe { pg_sys::get_extension_oid(c"snowflake_id".as_ptr(), true) }
}

/// The last non-NULL entry of the first key of `index` (the first one for a descending key),
/// visible to a snapshot taken now, read from its heap tuple's column `column`.
///
/// # Safety
/// `table` and `index` are open and locked, `index` a btree index on `table` whose first key is
/// the `bigint` column `column`, inside a transaction.
unsafe fn last_entry(
    table: pg_sys::Relation,
    index: pg_sys::Relation,
    column: pg_sys::AttrNumber,
) -> Option<i64> {
    let mut not_null = pg_sys::ScanKeyData::default();
    // SAFETY: fills `not_null` to ask btree for non-NULL entries only (SK_SEARCHNOTNULL, which
    // it supports), so NULLs sorted last are skipped.
    unsafe {
        pg_sys::ScanKeyEntryInitialize(
            &mut not_null,
            (pg_sys::SK_ISNULL | pg_sys::SK_SEARCHNOTNULL) as i32,
            1,
            0, // InvalidStrategy: a test for NULL, not a comparison
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::Datum::from(0),
        )
    };
    // A snapshot of now: the command's own rows (a table rewritten by ALTER COLUMN … TYPE)
    // are not visible to the one it ran with, which the event trigger inherits.
    let now = ActiveSnapshot::of_now();
    let snapshot = now.get();
    // SAFETY: both relations are open and locked (see the contract), and the snapshot is
    // active until the scan ends below.
    #[cfg(feature = "pg18")]
    let scan =
        unsafe { pg_sys::index_beginscan(table, index, snapshot, std::ptr::null_mut(), 1, 0) };
    // SAFETY: as above.
    #[cfg(not(feature = "pg18"))]
    let scan = unsafe { pg_sys::index_beginscan(table, index, snapshot, 1, 0) };
    // SAFETY: the scan just begun, with one key on the index's first column.
    unsafe { pg_sys::index_rescan(scan, &mut not_null, 1, std::ptr::null_mut(), 0) };
    // SAFETY: `index` is open, so its relcache entry is valid.
    let options = unsafe { (*index).rd_indoption };
    // SAFETY: an index's options, one per key column.
    let descending = unsafe { *options } & pg_sys::INDOPTION_DESC as i16 != 0;
    let direction = if descending {
        pg_sys::ScanDirection::ForwardScanDirection
    } else {
        pg_sys::ScanDirection::BackwardScanDirection
    };
    // SAFETY: a slot for rows of `table`, which is open; dropped below.
    let slot = unsafe { pg_sys::table_slot_create(table, std::ptr::null_mut()) };
    // SAFETY: the scan and the slot above; the entry's row is fetched into the slot.
    let id = unsafe { pg_sys::index_getnext_slot(scan, direction, slot) }.then(|| {
        let mut should_free = false;
        // SAFETY: the slot holds the row just fetched.
        let tuple = unsafe { pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut should_free) };
        let number = std::num::NonZeroUsize::new(column as usize)?;
        // SAFETY: `table` is open, so its relcache entry is valid.
        let descriptor = unsafe { (*table).rd_att };
        // SAFETY: a row of `table`, described by its descriptor.
        let datum = unsafe { pgrx::heap_getattr_raw(tuple, number, descriptor) }?;
        // SAFETY: the column is a `bigint` (see the contract).
        let id = unsafe { i64::from_datum(datum, false) };
        if should_free {
            // SAFETY: the copy ExecFetchSlotHeapTuple made, freed once.
            unsafe { pg_sys::heap_freetuple(tuple) };
        }
        id
    });
    // SAFETY: the slot created above, dropped once.
    unsafe { pg_sys::ExecDropSingleTupleTableSlot(slot) };
    // SAFETY: the scan begun above, ended once.
    unsafe { pg_sys::index_endscan(scan) };
    drop(now);
    id.flatten()
}
