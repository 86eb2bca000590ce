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

use pgrx::prelude::*;
use pgrx::spi::OwnedPreparedStatement;
use pgrx::PgList;

use crate::checks::largest_stored_id::{largest_indexed_id, Largest};
use crate::durability::reservation;
use crate::errors;
use crate::ids::backend;
use crate::pg::guards::{Lock, OpenRelation};
use crate::pg::subtransaction;
use crate::pg::system_clock;
use crate::shmem;
use crate::state::catalog::{self, ACCESS_SHARE};

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
    if shmem::try_state().is_none() || !unsafe { may_index_or_set_default(command) } {
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
    if shmem::try_state().is_some() {
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
