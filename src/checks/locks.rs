//! The extension's state under PostgreSQL's lock-taking commands (docs/design.md §6, the threat
//! model): a session's first ID reads the catalog table and each new floor write locks the
//! floor relations, so a lock that conflicts with those reads and writes, held or only queued,
//! makes every other session of the database wait. PostgreSQL lets roles that are not
//! superusers take such locks on them: `pg_maintain` and the `MAINTAIN` privilege (17+:
//! `LOCK TABLE`, `VACUUM FULL`, `CLUSTER`, `REINDEX`), `pg_write_all_data` members (`LOCK TABLE
//! … IN ACCESS EXCLUSIVE MODE` on the catalog table, through `UPDATE`), and anybody's `LOCK
//! TABLE` of a view over a state relation (PostgreSQL locks a view's base relations in the same
//! mode, checking the view owner's rights: a view of one's own over the catalog table, or the
//! extension's `snowflake_sequences`). The utility hook judges a command of a role that is not
//! a superuser by what PostgreSQL will lock, and refuses it (42501) when that is a state
//! relation in `SHARE` mode or stronger:
//! - before the command: the relations a `LOCK TABLE` reaches through views (their rules'
//!   dependencies, recursively, sub-queries included) and inheritance, and the relations
//!   `VACUUM FULL`, `CLUSTER` and `REINDEX` name, so a refused lock never waits in the queue;
//! - after it: whatever the command left this backend holding on a state relation in such a
//!   mode that it did not hold before (any command, any path PostgreSQL took), so nothing keeps
//!   the lock past the error.
//!
//! Lighter locks (`pg_dump`'s `ACCESS SHARE`) and maintenance of the whole database (which
//! takes each relation's lock in a transaction of its own, for as long as its few pages take)
//! go through.

use std::ffi::CStr;

use pgrx::prelude::*;
use pgrx::PgList;

use crate::durability::database_floor;
use crate::errors;
use crate::state::catalog;
use crate::state::extension_directory;

/// Before a utility command: refuses it (42501) when a role that is not a superuser would lock
/// a state relation in `SHARE` mode or stronger through it, and notes which state relations
/// this backend holds such a lock on, for [`after_command`].
///
/// # Safety
/// `utility` is the planned utility statement's node (or null), valid for the call, inside a
/// transaction, and `kind` its tag as read before the command runs (it may change the tree).
pub unsafe fn before_command(
    utility: *mut pg_sys::Node,
    kind: Option<pg_sys::NodeTag>,
) -> StateLocks {
    // SAFETY: superuser() reads this backend's cached role.
    let superuser = unsafe { pg_sys::superuser() };
    if superuser || !kind.is_some_and(may_lock) {
        return StateLocks::default();
    }
    // SAFETY: a planned utility statement, inside a transaction (see the contract).
    if let Some(relation) = unsafe { blocking_the_state(utility) } {
        errors::maintenance_of_the_state(&relation).raise();
    }
    StateLocks::now()
}

/// After the command: refuses it (42501) when it left this backend holding a lock that blocks
/// IDs on a state relation it did not hold before.
pub fn after_command(before: StateLocks) {
    if let Some(relation) = before.newly_blocking() {
        errors::maintenance_of_the_state(&relation).raise();
    }
}

/// Whether a utility statement of kind `kind` may itself lock a relation: all but transaction
/// control (`BEGIN`, `COMMIT`, savepoints) and settings (`SET`, `RESET`, `SHOW`), which every
/// application's transactions run and which lock none (a `LOCK TABLE` that a deferred trigger
/// runs at `COMMIT` passes this hook on its own), so they cost the check nothing.
fn may_lock(kind: pg_sys::NodeTag) -> bool {
    !matches!(
        kind,
        pg_sys::NodeTag::T_TransactionStmt
            | pg_sys::NodeTag::T_VariableSetStmt
            | pg_sys::NodeTag::T_VariableShowStmt
    )
}

/// The state relations of this database and which of them this backend holds a lock on that
/// blocks IDs (`SHARE` or stronger). Plain values, nothing to drop: an error of the command
/// leaves the hook's frame by PostgreSQL's longjmp.
#[derive(Clone, Copy, Default)]
pub struct StateLocks {
    relations: [Option<(pg_sys::Oid, bool)>; 4],
}

impl StateLocks {
    /// The state relations (none where the extension's schema is not), as held now.
    fn now() -> StateLocks {
        let schema = extension_directory::internal_namespace();
        if schema == pg_sys::InvalidOid {
            return StateLocks::default();
        }
        let names = [
            catalog::CATALOG_TABLE_NAME,
            catalog::CATALOG_KEY_NAME,
            database_floor::RELATION_NAME,
            database_floor::WRITER_RELATION_NAME,
        ];
        StateLocks {
            relations: names.map(|name| {
                // SAFETY: a syscache lookup of a static name, inside a transaction.
                let relation = unsafe { pg_sys::get_relname_relid(name.as_ptr(), schema) };
                (relation != pg_sys::InvalidOid).then(|| (relation, holds_blocking_lock(relation)))
            }),
        }
    }

    /// A state relation (qualified, quoted) this backend holds such a lock on now and did not
    /// hold one on then.
    fn newly_blocking(&self) -> Option<String> {
        self.relations
            .iter()
            .flatten()
            .find(|&&(relation, held)| !held && holds_blocking_lock(relation))
            .map(|&(relation, _)| catalog::relation_name(relation))
    }
}

/// Whether this backend holds a lock on `relation` (of this database) in `SHARE` mode or
/// stronger: one that makes a first ID's read of the catalog table, or a floor write, wait.
fn holds_blocking_lock(relation: pg_sys::Oid) -> bool {
    let tag = pg_sys::LOCKTAG {
        // SAFETY: a backend-local value set when the backend connected to its database.
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
        locktag_field2: relation.to_u32(),
        locktag_field3: 0,
        locktag_field4: 0,
        locktag_type: pg_sys::LockTagType::LOCKTAG_RELATION as u8,
        locktag_lockmethodid: pg_sys::DEFAULT_LOCKMETHOD as u8,
    };
    let share = pg_sys::ShareLock as pg_sys::LOCKMODE;
    #[cfg(any(feature = "pg15", feature = "pg16"))]
    {
        let strongest = pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE;
        // SAFETY: reads this backend's own lock table for the tag built above (as
        // SET_LOCKTAG_RELATION builds it), once per mode.
        (share..=strongest).any(|mode| unsafe { pg_sys::LockHeldByMe(&tag, mode) })
    }
    #[cfg(any(feature = "pg17", feature = "pg18"))]
    {
        // SAFETY: reads this backend's own lock table for the tag built above (as
        // SET_LOCKTAG_RELATION builds it).
        unsafe { pg_sys::LockHeldByMe(&tag, share, true) }
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
    // InvalidOid where the extension is not installed (or predates its schema), and then
    // nothing here is the state.
    let schema = extension_directory::internal_namespace();
    if schema == pg_sys::InvalidOid {
        return None;
    }
    // Each statement is read as its node tag says it is laid out; the relation names are
    // resolved without taking a lock (the command takes its own).
    match kind {
        // SAFETY: a LockStmt, as its tag says.
        pg_sys::NodeTag::T_LockStmt => unsafe { locked_state(node.cast(), schema) },
        // SAFETY: a VacuumStmt, as its tag says.
        pg_sys::NodeTag::T_VacuumStmt => unsafe { vacuumed_state(node.cast()) },
        pg_sys::NodeTag::T_ClusterStmt => {
            // SAFETY: a ClusterStmt, as its tag says.
            let relation = unsafe { (*node.cast::<pg_sys::ClusterStmt>()).relation };
            // SAFETY: the statement's RangeVar, null or valid.
            unsafe { of_the_state(relation) }
        }
        // SAFETY: a ReindexStmt, as its tag says.
        pg_sys::NodeTag::T_ReindexStmt => unsafe { reindexed_state(node.cast()) },
        _ => None,
    }
}

/// The state relation (qualified, quoted) that `LOCK TABLE` would lock in a mode that blocks
/// IDs: `SHARE` or stronger, of a state relation or of one that reaches one.
///
/// # Safety
/// `lock` is a parsed `LockStmt`, inside a transaction.
unsafe fn locked_state(lock: *mut pg_sys::LockStmt, schema: pg_sys::Oid) -> Option<String> {
    // SAFETY: see the contract.
    let lock = unsafe { &*lock };
    if lock.mode < pg_sys::ShareLock as i32 {
        return None;
    }
    // SAFETY: the statement's list of RangeVars.
    unsafe { PgList::<pg_sys::RangeVar>::from_pg(lock.relations) }
        .iter_ptr()
        .find_map(|relation| {
            // SAFETY: a RangeVar of the statement.
            let oid = unsafe { relation_of(relation) }?;
            state_relation_name(oid).or_else(|| reached_through(oid, schema))
        })
}

/// The state relation (qualified, quoted) that `VACUUM FULL` names.
///
/// # Safety
/// `vacuum` is a parsed `VacuumStmt`, inside a transaction.
unsafe fn vacuumed_state(vacuum: *mut pg_sys::VacuumStmt) -> Option<String> {
    // SAFETY: see the contract.
    let vacuum = unsafe { &*vacuum };
    // SAFETY: the statement's list of options, DefElems.
    let full = unsafe { PgList::<pg_sys::DefElem>::from_pg(vacuum.options) }
        .iter_ptr()
        .any(|option| {
            // SAFETY: an option of the statement.
            let name = unsafe { (*option).defname };
            // SAFETY: its name, NUL-terminated.
            let name = unsafe { CStr::from_ptr(name) };
            name == c"full"
        });
    if !full {
        return None;
    }
    // SAFETY: the statement's list of VacuumRelations.
    unsafe { PgList::<pg_sys::VacuumRelation>::from_pg(vacuum.rels) }
        .iter_ptr()
        .find_map(|relation| {
            // SAFETY: a VacuumRelation of the statement.
            let relation = unsafe { (*relation).relation };
            // SAFETY: its RangeVar, null or valid.
            unsafe { of_the_state(relation) }
        })
}

/// The state relation (qualified, quoted) that `REINDEX` names, or the extension's schema
/// (quoted) that `REINDEX SCHEMA` names.
///
/// # Safety
/// `reindex` is a parsed `ReindexStmt`, inside a transaction.
unsafe fn reindexed_state(reindex: *mut pg_sys::ReindexStmt) -> Option<String> {
    // SAFETY: see the contract.
    let reindex = unsafe { &*reindex };
    let named_schema = reindex.kind == pg_sys::ReindexObjectType::REINDEX_OBJECT_SCHEMA
        && !reindex.name.is_null()
        // SAFETY: the schema's name, NUL-terminated.
        && unsafe { CStr::from_ptr(reindex.name) } == catalog::INTERNAL_SCHEMA;
    if named_schema {
        // SAFETY: a static NUL-terminated name.
        return Some(unsafe { catalog::quoted(catalog::INTERNAL_SCHEMA.as_ptr()) });
    }
    // SAFETY: the statement's RangeVar, null or valid.
    unsafe { of_the_state(reindex.relation) }
}

/// `relation`, qualified and quoted, when it names a relation in the extension's schema.
///
/// # Safety
/// `relation` is null or a `RangeVar` of a parsed statement, inside a transaction.
unsafe fn of_the_state(relation: *mut pg_sys::RangeVar) -> Option<String> {
    // SAFETY: see the contract.
    state_relation_name(unsafe { relation_of(relation) }?)
}

/// The relation `relation` names now, if any (a missing one: the command reports it).
///
/// # Safety
/// `relation` is null or a `RangeVar` of a parsed statement, inside a transaction.
unsafe fn relation_of(relation: *mut pg_sys::RangeVar) -> Option<pg_sys::Oid> {
    if relation.is_null() {
        return None;
    }
    // SAFETY: see the contract; resolved without taking a lock (the command takes its own).
    let oid = unsafe {
        pg_sys::RangeVarGetRelidExtended(
            relation,
            pg_sys::NoLock as pg_sys::LOCKMODE,
            pg_sys::RVROption::RVR_MISSING_OK,
            None,
            std::ptr::null_mut(),
        )
    };
    (oid != pg_sys::InvalidOid).then_some(oid)
}

/// `relation`, qualified and quoted, when it is a state relation.
fn state_relation_name(relation: pg_sys::Oid) -> Option<String> {
    extension_directory::is_state_relation(relation).then(|| catalog::relation_name(relation))
}

/// `pg_rewrite`'s OID (catalog/pg_rewrite.h; fixed in every release), which pgrx's bindings
/// leave out.
const REWRITE_RELATION_ID: pg_sys::Oid = pg_sys::Oid::from_u32(2618);

/// A relation of `schema` that `LOCK TABLE` of `relation` would lock too: through a view (the
/// relations its `SELECT` rule depends on, which are those its query and sub-queries read),
/// views over views, and inheritance children (partitions included), as PostgreSQL's
/// `LockViewRecurse` and `LockTableRecurse` walk them. Read from PostgreSQL's catalogs with
/// every name and operator qualified, so nothing a role defines takes part (about a
/// millisecond, for a `LOCK TABLE` in `SHARE` mode or stronger by a role that is not a
/// superuser).
fn reached_through(relation: pg_sys::Oid, schema: pg_sys::Oid) -> Option<String> {
    let reached = Spi::get_one_with_args::<pg_sys::Oid>(
        "WITH RECURSIVE reached(relation) AS ( \
             SELECT $1 \
           UNION \
             SELECT next.relation FROM reached, LATERAL ( \
                 SELECT dependency.refobjid \
                   FROM pg_catalog.pg_rewrite AS rule \
                   JOIN pg_catalog.pg_depend AS dependency \
                     ON dependency.classid OPERATOR(pg_catalog.=) $3 \
                    AND dependency.objid OPERATOR(pg_catalog.=) rule.oid \
                  WHERE rule.ev_class OPERATOR(pg_catalog.=) reached.relation \
                    AND rule.ev_type OPERATOR(pg_catalog.=) '1'::pg_catalog.\"char\" \
                    AND dependency.refclassid OPERATOR(pg_catalog.=) $4 \
               UNION ALL \
                 SELECT child.inhrelid FROM pg_catalog.pg_inherits AS child \
                  WHERE child.inhparent OPERATOR(pg_catalog.=) reached.relation \
             ) AS next(relation)) \
         SELECT reached.relation FROM reached \
           JOIN pg_catalog.pg_class AS class ON class.oid OPERATOR(pg_catalog.=) reached.relation \
          WHERE class.relnamespace OPERATOR(pg_catalog.=) $2 LIMIT 1",
        &[
            relation.into(),
            schema.into(),
            REWRITE_RELATION_ID.into(),
            pg_sys::RelationRelationId.into(),
        ],
    );
    state_relation_name(reached.ok().flatten()?)
}
