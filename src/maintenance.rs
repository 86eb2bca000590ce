//! The extension's state under PostgreSQL's lock-taking commands (docs/design.md §6, the threat
//! model): a session's first ID reads the catalog table and each new floor write locks the
//! floor relations, so a lock that conflicts with those reads and writes, held or only queued,
//! makes every other session of the database wait. PostgreSQL lets roles that are not
//! superusers take such locks on them: `pg_maintain` and the `MAINTAIN` privilege (17+:
//! `LOCK TABLE`, `VACUUM FULL`, `CLUSTER`, `REINDEX`), and `pg_write_all_data` members
//! (`LOCK TABLE … IN ACCESS EXCLUSIVE MODE` on the catalog table, through `UPDATE`). A
//! utility hook refuses those commands (42501) when they name a relation of the extension's
//! own schema and the caller is not a superuser. Lighter locks (`pg_dump`'s `ACCESS SHARE`)
//! and maintenance of the whole database (which takes each relation's lock for as long as its
//! few pages take) go through.

use std::ffi::CStr;

use once_cell::sync::OnceCell;
use pgrx::prelude::*;
use pgrx::PgList;

use crate::catalog;
use crate::errors;
use crate::publications;
use crate::unguarded;

/// The hook installed before ours, called after the check (set once, as `citus.rs` does).
static PREVIOUS_PROCESS_UTILITY_HOOK: OnceCell<pg_sys::ProcessUtility_hook_type> = OnceCell::new();

/// Installs the utility hook (from `_PG_init`, while preloading).
pub fn install_hook() {
    // SAFETY: `_PG_init` runs once per process before any query; the previous hook is kept and
    // called, so other extensions' hooks keep working.
    unsafe {
        PREVIOUS_PROCESS_UTILITY_HOOK.get_or_init(|| pg_sys::ProcessUtility_hook);
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

#[pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    statement: *mut pg_sys::PlannedStmt,
    query: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    environment: *mut pg_sys::QueryEnvironment,
    destination: *mut pg_sys::DestReceiver,
    completion: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: PostgreSQL passes a planned utility statement; superuser() reads this backend's
    // cached role.
    if !unsafe { pg_sys::superuser() } {
        if let Some(relation) = unsafe { blocking_the_state((*statement).utilityStmt) } {
            errors::maintenance_of_the_state(&relation).raise();
        }
    }
    // SAFETY: the statement's node tag, read before the command runs (it may change the tree).
    let publishes = unsafe { (*statement).utilityStmt.as_ref() }
        .is_some_and(|node| publications::may_publish_the_state(node.type_));
    // SAFETY: PostgreSQL's own arguments, passed on unchanged; nothing of this frame needs
    // dropping, so an error below leaves by PostgreSQL's longjmp with all its fields
    // (`unguarded.rs`).
    unsafe {
        match PREVIOUS_PROCESS_UTILITY_HOOK.get().copied().flatten() {
            Some(previous) => previous(
                statement,
                query,
                read_only_tree,
                context,
                params,
                environment,
                destination,
                completion,
            ),
            None => unguarded::standard_process_utility(
                statement,
                query,
                read_only_tree,
                context,
                params,
                environment,
                destination,
                completion,
            ),
        }
    }
    if publishes {
        publications::refuse_publishing_the_state();
    }
}

/// The relation of the extension's own schema (qualified, quoted) that `node` would lock in a
/// mode that blocks IDs, if any: `LOCK TABLE` in `SHARE` mode or stronger, `VACUUM FULL`,
/// `CLUSTER` or `REINDEX` of it (or `REINDEX SCHEMA` of the schema).
///
/// # Safety
/// `node` is a parsed utility statement, inside a transaction.
unsafe fn blocking_the_state(node: *mut pg_sys::Node) -> Option<String> {
    // SAFETY: a statement's tag, read first: every other utility statement (all DDL) costs this
    // check nothing more.
    let kind = unsafe { node.as_ref()?.type_ };
    let relevant = [
        pg_sys::NodeTag::T_LockStmt,
        pg_sys::NodeTag::T_VacuumStmt,
        pg_sys::NodeTag::T_ClusterStmt,
        pg_sys::NodeTag::T_ReindexStmt,
    ];
    if !relevant.contains(&kind) {
        return None;
    }
    // SAFETY: a syscache lookup; InvalidOid where the extension is not installed (or predates
    // its schema), and then nothing here is the state.
    let schema = unsafe { pg_sys::get_namespace_oid(catalog::INTERNAL_SCHEMA.as_ptr(), true) };
    if schema == pg_sys::InvalidOid {
        return None;
    }
    // SAFETY: each statement's fields are read as its node tag says they are laid out; the
    // relation names are resolved without taking a lock (the command takes its own).
    unsafe {
        match kind {
            pg_sys::NodeTag::T_LockStmt => {
                let lock = node.cast::<pg_sys::LockStmt>();
                if (*lock).mode < pg_sys::ShareLock as i32 {
                    return None;
                }
                PgList::<pg_sys::RangeVar>::from_pg((*lock).relations)
                    .iter_ptr()
                    .find_map(|relation| of_the_state(relation, schema))
            }
            pg_sys::NodeTag::T_VacuumStmt => {
                let vacuum = node.cast::<pg_sys::VacuumStmt>();
                let full = PgList::<pg_sys::DefElem>::from_pg((*vacuum).options)
                    .iter_ptr()
                    .any(|option| CStr::from_ptr((*option).defname) == c"full");
                if !full {
                    return None;
                }
                PgList::<pg_sys::VacuumRelation>::from_pg((*vacuum).rels)
                    .iter_ptr()
                    .find_map(|relation| of_the_state((*relation).relation, schema))
            }
            pg_sys::NodeTag::T_ClusterStmt => {
                of_the_state((*node.cast::<pg_sys::ClusterStmt>()).relation, schema)
            }
            pg_sys::NodeTag::T_ReindexStmt => {
                let reindex = node.cast::<pg_sys::ReindexStmt>();
                let named_schema = (*reindex).kind
                    == pg_sys::ReindexObjectType::REINDEX_OBJECT_SCHEMA
                    && !(*reindex).name.is_null()
                    && CStr::from_ptr((*reindex).name) == catalog::INTERNAL_SCHEMA;
                if named_schema {
                    return Some(catalog::quoted(catalog::INTERNAL_SCHEMA.as_ptr()));
                }
                of_the_state((*reindex).relation, schema)
            }
            _ => None,
        }
    }
}

/// `relation`, qualified and quoted, when it names a relation in the extension's schema.
///
/// # Safety
/// `relation` is null or a `RangeVar` of a parsed statement, inside a transaction.
unsafe fn of_the_state(relation: *mut pg_sys::RangeVar, schema: pg_sys::Oid) -> Option<String> {
    if relation.is_null() {
        return None;
    }
    // SAFETY: see the contract; a missing relation is InvalidOid (the command reports it).
    unsafe {
        let oid = pg_sys::RangeVarGetRelidExtended(
            relation,
            pg_sys::NoLock as pg_sys::LOCKMODE,
            pg_sys::RVROption::RVR_MISSING_OK,
            None,
            std::ptr::null_mut(),
        );
        (oid != pg_sys::InvalidOid && pg_sys::get_rel_namespace(oid) == schema)
            .then(|| catalog::qualified(schema, pg_sys::get_rel_name(oid)))
    }
}
