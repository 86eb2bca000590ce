//! Rows that arrive without their database's floor (docs/design.md §5.3, "Rows that come
//! without the database"): a dump made with `pg_dump -n` or `-t` but without
//! `--extension=snowflake_id`, rows copied from another server. Nothing carries their floor, so
//! new IDs can repeat theirs where this server's clock is behind the one that made them, and no
//! value a role writes into a table may move the floor. `pg_restore` builds a table's keys after
//! its rows: the event trigger `snowflake_id_warn_of_stored_ids_ahead` (sql/) runs
//! `snowflake_stored_ids_ahead_of_new_indexes` at the end of each `CREATE INDEX` and
//! `ALTER TABLE`, which warns, naming whose table it is and a superuser's step, when a valid
//! btree index the command built or touched is led by a column whose default is
//! `snowflake_nextval(['<sequence>'])` and that column's largest ID lies beyond where this
//! database's new IDs begin.
//!
//! A command that can neither build an index nor set a column's default (most of a migration's
//! steps: `ADD COLUMN` without constraints, `DROP COLUMN`, …) is told apart by its parse tree
//! and costs one call that returns; only the others read which objects they touched (one query,
//! planned once per backend).
//!
//! The largest ID is the index's last entry: read through the index access method with the
//! built-in `int8` comparisons, as the role that ran the command, so no role's code runs
//! (no policy, no operator class, no expression of the table's owner) and no role is switched.

use std::cell::RefCell;
use std::ffi::CStr;

use pgrx::prelude::*;
use pgrx::spi::OwnedPreparedStatement;
use pgrx::PgList;

use crate::backend;
use crate::catalog::{self, ACCESS_SHARE};
use crate::citus;
use crate::errors;
use crate::guards::{ActiveSnapshot, Lock, OpenRelation};
use crate::reservation;
use crate::shared_memory;
use crate::subtransaction;
use crate::system_clock;

/// `snowflake_id_internal.stored_ids_ahead_of_new_indexes()`, the event trigger's function
/// (declared in sql/): a WARNING for each index the command built or touched whose leading
/// snowflake column holds IDs beyond where this database's new IDs of its sequence begin, or of
/// a sequence this database does not have. It changes nothing, and a check that cannot run (a
/// corrupted catalog row, say) becomes a WARNING that leaves the command alone.
///
/// # Safety
/// PostgreSQL calls it as an event trigger function: `fcinfo->context`, when it is an
/// `EventTriggerData`, lives for the call.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn snowflake_stored_ids_ahead_of_new_indexes(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls it with a valid fcinfo (see the contract).
    let context = unsafe { (*fcinfo).context };
    // SAFETY: the context is null or a node, whose tag says what it is.
    if !unsafe { pgrx::is_a(context, pg_sys::NodeTag::T_EventTriggerData) } {
        errors::not_called_as_event_trigger().raise();
    }
    // SAFETY: an EventTriggerData, as its tag says, living for the call.
    let command = unsafe { (*context.cast::<pg_sys::EventTriggerData>()).parsetree };
    // SAFETY: the statement that fired the trigger, a parse tree valid for this call.
    if shared_memory::try_state().is_none() || !unsafe { may_index_or_set_default(command) } {
        return pg_sys::Datum::from(0);
    }
    for index in indexes_touched() {
        if let Err(message) = subtransaction::run(|| warn_if_stored_ids_ahead(index)) {
            errors::stored_ids_not_compared(&message).warn();
        }
    }
    pg_sys::Datum::from(0)
}

/// Version-1 calling convention of `snowflake_stored_ids_ahead_of_new_indexes`.
#[no_mangle]
pub extern "C" fn pg_finfo_snowflake_stored_ids_ahead_of_new_indexes(
) -> &'static pg_sys::Pg_finfo_record {
    static VERSION_1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &VERSION_1
}

/// Whether `command` (a `CREATE INDEX` or an `ALTER TABLE`) may build an index or give a
/// column a default: every `CREATE INDEX`; an `ALTER TABLE` with a subcommand that adds an
/// index, a primary key, a unique or exclusion constraint (or a column with one), sets a
/// column's default, changes a column's type or attaches a partition. A node of another kind is
/// taken as one that may.
///
/// # Safety
/// `command` is a valid parse tree.
unsafe fn may_index_or_set_default(command: *mut pg_sys::Node) -> bool {
    use pg_sys::AlterTableType as Subcommand;
    // SAFETY: `command` is null or a valid node (see the contract), whose tag is read first.
    if !unsafe { pgrx::is_a(command, pg_sys::NodeTag::T_AlterTableStmt) } {
        return true;
    }
    // SAFETY: an AlterTableStmt, as its tag says.
    let subcommands = unsafe { (*command.cast::<pg_sys::AlterTableStmt>()).cmds };
    // SAFETY: the statement's list of subcommands (null when empty).
    let subcommands = unsafe { PgList::<pg_sys::AlterTableCmd>::from_pg(subcommands) };
    let may = subcommands.iter_ptr().any(|subcommand| {
        // SAFETY: each element of the list is a valid AlterTableCmd.
        let subcommand = unsafe { &*subcommand };
        let definition = subcommand.def;
        match subcommand.subtype {
            Subcommand::AT_AddColumn => {
                // SAFETY: the definition is null or a valid node, whose tag is read first.
                let is_column = unsafe { pgrx::is_a(definition, pg_sys::NodeTag::T_ColumnDef) };
                // SAFETY: a ColumnDef, as its tag says.
                is_column && unsafe { column_builds_an_index(definition.cast()) }
            }
            // SAFETY: the definition is null or a valid node.
            Subcommand::AT_AddConstraint => unsafe { builds_an_index(definition) },
            Subcommand::AT_ColumnDefault => !definition.is_null(),
            Subcommand::AT_AddIndex
            | Subcommand::AT_ReAddIndex
            | Subcommand::AT_AddIndexConstraint
            | Subcommand::AT_AlterColumnType
            | Subcommand::AT_AttachPartition => true,
            _ => false,
        }
    });
    may
}

/// Whether a new column's definition builds an index (a default alone does not matter: the
/// new column is filled with new IDs, none ahead of the floor).
///
/// # Safety
/// `column` is a valid `ColumnDef` of a raw parse tree.
unsafe fn column_builds_an_index(column: *mut pg_sys::ColumnDef) -> bool {
    // SAFETY: a valid ColumnDef (see the contract).
    let constraints = unsafe { (*column).constraints };
    // SAFETY: its list of constraint nodes (null when empty).
    unsafe { PgList::<pg_sys::Node>::from_pg(constraints) }
        .iter_ptr()
        // SAFETY: each element of the list is a valid node.
        .any(|constraint| unsafe { builds_an_index(constraint) })
}

/// Whether `node` is a constraint that builds an index: a primary key, a unique or an
/// exclusion constraint.
///
/// # Safety
/// `node` is null or a valid node.
unsafe fn builds_an_index(node: *mut pg_sys::Node) -> bool {
    use pg_sys::ConstrType as Kind;
    // SAFETY: `node` is null or a valid node (see the contract), whose tag is read first.
    let is_constraint = unsafe { pgrx::is_a(node, pg_sys::NodeTag::T_Constraint) };
    is_constraint
        && matches!(
            // SAFETY: a Constraint, as its tag says.
            unsafe { (*node.cast::<pg_sys::Constraint>()).contype },
            Kind::CONSTR_PRIMARY | Kind::CONSTR_UNIQUE | Kind::CONSTR_EXCLUSION
        )
}

/// The objects of the command that fired the trigger, as PostgreSQL collected them: relations
/// only, each index as itself and each table as its indexes.
fn indexes_touched() -> Vec<pg_sys::Oid> {
    thread_local! {
        static TOUCHED_RELATIONS: RefCell<Option<OwnedPreparedStatement>> =
            const { RefCell::new(None) };
    }
    // Every name is qualified: the plan is made under the caller's search_path.
    const QUERY: &str =
        "SELECT DISTINCT c.objid FROM pg_catalog.pg_event_trigger_ddl_commands() c \
                         WHERE c.classid OPERATOR(pg_catalog.=) \
                               'pg_catalog.pg_class'::pg_catalog.regclass \
                           AND c.object_type OPERATOR(pg_catalog.=) \
                               ANY ('{table,index}'::pg_catalog.text[])";
    let relations: Vec<pg_sys::Oid> = TOUCHED_RELATIONS.with_borrow_mut(|kept| {
        Spi::connect(|client| {
            if kept.is_none() {
                *kept = Some(client.prepare(QUERY, &[])?.keep());
            }
            let statement = kept.as_ref().expect("prepared above");
            client
                .select(statement, None, &[])?
                .map(|row| row.get::<pg_sys::Oid>(1))
                .collect::<Result<Vec<_>, _>>()
                .map(|oids| oids.into_iter().flatten().collect())
        })
        .unwrap_or_else(|error| {
            errors::internal(format!(
                "could not read the objects of the command that fired the event trigger: {error}"
            ))
            .raise()
        })
    });
    let mut indexes: Vec<pg_sys::Oid> = relations.into_iter().flat_map(indexes_of).collect();
    // A partitioned table and its partitions' indexes may both be reported.
    indexes.sort_unstable_by_key(|index| index.to_u32());
    indexes.dedup();
    indexes
}

/// `snowflake_id_internal.warn_of_stored_ids_ahead(index oid, seq text)`, which the PL/pgSQL
/// event trigger function of 0.10.0 and 0.11.0 calls for each candidate index (their update
/// scripts declare it; the update to 0.12.0 drops it). A database not updated yet runs it with
/// this library, between the package's install and `ALTER EXTENSION snowflake_id UPDATE`: it
/// checks `index` as 0.12.0's trigger does (`seq` is the sequence the caller read from the same
/// column default, which the check reads itself).
#[pg_extern(sql = false)]
fn warn_of_stored_ids_ahead(index: pg_sys::Oid, _seq: &str) {
    if shared_memory::try_state().is_some() {
        warn_if_stored_ids_ahead(index);
    }
}

/// A WARNING when the column that leads `index` has a default of `snowflake_nextval(seq)` and
/// its largest ID ends after the time from which this database issues IDs of `seq`, or when
/// `seq` does not exist here. It learns something of the table's rows, so it answers only a
/// role with the rights of the table's owner (the one whose command fired the trigger), and only
/// for an index it can read without running anybody's code.
fn warn_if_stored_ids_ahead(index: pg_sys::Oid) {
    let Some(Largest {
        table,
        owner,
        column,
        sequence: seq,
        id,
    }) = largest_indexed_id(index)
    else {
        return;
    };
    let catalog = backend::catalog_table();
    let Some((layout, _)) = catalog::load_layout(&catalog, &seq) else {
        // Rows of a sequence this database does not have (a partial dump brings no catalog
        // rows): their IDs cannot be placed, so the step is said without its time.
        errors::stored_ids_of_a_missing_sequence(&table, &column, &seq).warn();
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
        errors::stored_ids_ahead(&column, &owner, &seq, stored_until, new_from, wall, limit).warn();
    }
}

/// The indexes of relation `relation`: itself when it is an index, its indexes when it is a
/// table, and for a partitioned index or table those of every partition below it, which the
/// command built or attached without reporting them (none when it no longer exists).
fn indexes_of(relation: pg_sys::Oid) -> Vec<pg_sys::Oid> {
    // SAFETY: a syscache lookup of a relation, inside a transaction.
    match unsafe { pg_sys::get_rel_relkind(relation) } as u8 {
        pg_sys::RELKIND_INDEX => vec![relation],
        pg_sys::RELKIND_RELATION => indexes_of_table(relation),
        pg_sys::RELKIND_PARTITIONED_TABLE | pg_sys::RELKIND_PARTITIONED_INDEX => {
            partitions_below(relation)
                .into_iter()
                .flat_map(indexes_of)
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The indexes of table `table` (none when it no longer exists).
fn indexes_of_table(table: pg_sys::Oid) -> Vec<pg_sys::Oid> {
    let Some(opened) = OpenRelation::try_open(table, ACCESS_SHARE, Lock::KeptToTransactionEnd)
    else {
        return Vec::new();
    };
    // SAFETY: the table is open; the list returned is a copy.
    let list = unsafe { pg_sys::RelationGetIndexList(opened.as_ptr()) };
    // SAFETY: that list of OIDs (null when empty), copied out before it is freed.
    let indexes = unsafe { PgList::<pg_sys::Oid>::from_pg(list) }
        .iter_oid()
        .collect();
    // SAFETY: the copy, freed once.
    unsafe { pg_sys::list_free(list) };
    indexes
}

unsafe extern "C-unwind" {
    /// catalog/pg_inherits.h (15 to 18), which pgrx's bindings leave out: the relation and
    /// every descendant, each locked in `lockmode`. Called through pgrx's FFI guard, as its
    /// bindings are.
    fn find_all_inheritors(
        parent: pg_sys::Oid,
        lockmode: pg_sys::LOCKMODE,
        parents: *mut *mut pg_sys::List,
    ) -> *mut pg_sys::List;
}

/// The leaves below a partitioned table or index: the partitions (or their indexes) at every
/// level, each locked for reading as the command already holds it.
fn partitions_below(relation: pg_sys::Oid) -> Vec<pg_sys::Oid> {
    // SAFETY: PostgreSQL's walk of pg_inherits inside a transaction, no parents asked for.
    let walk = || unsafe { find_all_inheritors(relation, ACCESS_SHARE, std::ptr::null_mut()) };
    // SAFETY: a PostgreSQL call, whose ERROR the boundary turns into a Rust panic.
    let list = unsafe { pg_sys::ffi::pg_guard_ffi_boundary(walk) };
    // SAFETY: the list it returns (the relation first, then every descendant), copied out.
    let members: Vec<pg_sys::Oid> = unsafe { PgList::<pg_sys::Oid>::from_pg(list) }
        .iter_oid()
        .collect();
    // SAFETY: that list, a palloc'd one of this call's, freed once.
    unsafe { pg_sys::list_free(list) };
    members
        .into_iter()
        .filter(|&member| member != relation)
        .filter(|&member| {
            matches!(
                // SAFETY: a syscache lookup of a relation, inside a transaction.
                unsafe { pg_sys::get_rel_relkind(member) } as u8,
                pg_sys::RELKIND_RELATION | pg_sys::RELKIND_INDEX
            )
        })
        .collect()
}

/// The largest ID an index holds, and where.
struct Largest {
    /// The table's name, schema-qualified, and its column's, each quoted for SQL text.
    table: String,
    column: String,
    /// The table owner's name, quoted.
    owner: String,
    /// The snowflake sequence the column's default draws from.
    sequence: String,
    id: i64,
}

/// The built-in operator family of btree's integer comparisons (`integer_ops`), whose `int8`
/// operator class is `bigint`'s default.
const INTEGER_BTREE_FAMILY: u32 = 1976;

/// The largest non-NULL value in the column that leads `index`, when `index` is a valid btree
/// index without a predicate whose first key is a `bigint` column under the built-in integer
/// comparisons with a default of `snowflake_nextval(<a constant>)`, its table is not one that
/// Citus distributes (its rows are on the workers), and the current role has the rights of the
/// table's owner; None otherwise, and for an empty column.
fn largest_indexed_id(index: pg_sys::Oid) -> Option<Largest> {
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
