//! This server's directory of its databases' extensions, in shared memory (docs/design.md §6,
//! "A new connection's first ID"): where each database's catalog table and floor relations are,
//! and the layouts of its sequences. A new connection's first ID finds them here and opens
//! neither `pg_extension` nor the catalog table (whose relcache entry alone, with its guard
//! trigger, costs more than a whole `nextval()`); a backend that finds nothing here, or nothing
//! it may trust, looks them up in the catalogs (`catalog.rs`, `database_floor.rs`) and leaves
//! what it found for the next one.
//!
//! An entry is trusted only while both of these hold (checked before each use):
//! - The directory's generation is the one its lookups began at. Every transaction that
//!   writes the extension's state (below) bumps the generation once its commit is visible
//!   (`forget_at_commit`), and a lookup reads the generation before it takes the catalog
//!   snapshot it reads with: a lookup that could still see a row as it was read the generation
//!   before the bump, so what it leaves is never trusted after it. A writing transaction that
//!   is prepared (two-phase commit, as Citus runs its workers' part) commits
//!   in another session, where no callback of ours runs: from its `PREPARE` until it is no
//!   longer in progress nothing of its database is trusted or left here, and the first lookup
//!   after that bumps the generation.
//! - The floor relation it names is still a sequence in the schema it was in: the relation
//!   every first ID reads anyway (`database_floor.rs`), opened here first, so the check costs
//!   nothing more. `DROP EXTENSION` drops it (and OIDs are not reused before the counter wraps
//!   around), so an extension created again is looked up again.
//!
//! Whatever changes the extension's state relations bumps the generation:
//! - an `INSERT`, `UPDATE`, `DELETE` or `MERGE` into a relation of `snowflake_id_internal` (the
//!   executor hook sees every plan that writes one: the extension's own
//!   `snowflake_drop_sequence`, and a superuser's with the guard trigger off);
//! - a `TRUNCATE`, `DROP` or `ALTER` of one (the object access hook: no row trigger fires for
//!   these), and `DROP DATABASE`.
//!
//! A database whose catalog table is not in that schema (an extension older than 0.10.0, not
//! updated yet) is never here. During recovery nothing is trusted or left here: a standby
//! replays what its hooks never see. Not seen: a superuser's logical replication into the
//! catalog table (its apply worker starts no executor plan), whose first row, `'default'`,
//! conflicts with the subscriber's own anyway.
//!
//! Rows of this backend's own transaction are never left here: they are not committed. And a
//! transaction that wrote the state neither asks nor fills the directory until it ends.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use once_cell::sync::OnceCell;
use pgrx::callbacks::{register_xact_callback, PgXactCallbackEvent};
use pgrx::prelude::*;
use snowflake_id_core::layout::Layout;

use crate::catalog::{self, CatalogTable, RowVersion, MAX_NAME_BYTES};
use crate::shared_memory::{
    self, with_lwlock, Directory, DirectoryEntry, FloorRelations, NamedLayout, DIRECTORY_DATABASES,
    DIRECTORY_LAYOUTS,
};

impl NamedLayout {
    fn name(&self) -> &[u8] {
        &self.name[..usize::from(self.length)]
    }
}

impl DirectoryEntry {
    /// The layout it holds of sequence `name`.
    fn layout_of(&self, name: &str) -> Option<&NamedLayout> {
        self.layouts
            .iter()
            .flatten()
            .find(|l| l.name() == name.as_bytes())
    }
}

impl Directory {
    /// `read` of this database's entry, when it is trusted (see the module's comment).
    fn trusted<T>(&self, read: impl FnOnce(&DirectoryEntry) -> Option<T>) -> Option<T> {
        if !self.settled() {
            return None;
        }
        let generation = self.generation.load(Ordering::Acquire);
        let database = this_database();
        let (floor, found) = with_lwlock(&self.lock, pg_sys::LWLockMode::LW_SHARED, || {
            // SAFETY: entries are read under the lock held shared and written under it held
            // exclusively, so no write is under way.
            let entries = unsafe { &*self.entries.get() };
            let entry = entries
                .iter()
                .flatten()
                .find(|entry| entry.database == database && entry.generation == generation)?;
            Some((entry.floor?, read(entry)?))
        })?;
        // Outside the lock: opening a relation may wait for its lock and read pg_class.
        floor_is_in_place(floor).then_some(found)
    }

    /// Writes into this database's entry what lookups that began at `generation` found in the
    /// extension whose catalog table is `catalog`: `fill` on the entry, made anew when it
    /// holds another generation or another extension. Nothing when the generation moved since.
    fn remember(
        &self,
        generation: u64,
        catalog: &CatalogTable,
        fill: impl FnOnce(&mut DirectoryEntry),
    ) {
        // Before 0.10.0 the catalog table lived in the extension's schema, where the hooks do
        // not look for writes (`is_state_relation`): a database not updated yet is never here.
        if !is_state_relation(catalog.oid()) {
            return;
        }
        let database = this_database();
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_EXCLUSIVE, || {
            let current = self.generation.load(Ordering::Acquire);
            if current != generation {
                return;
            }
            // SAFETY: the lock is held exclusively: no other reference to the entries exists.
            let entries = unsafe { &mut *self.entries.get() };
            let slot = entries
                .iter()
                .position(|entry| entry.is_some_and(|entry| entry.database == database))
                .or_else(|| entries.iter().position(Option::is_none))
                .or_else(|| {
                    entries
                        .iter()
                        .position(|entry| entry.is_some_and(|entry| entry.generation != current))
                })
                .unwrap_or(database.to_u32() as usize % DIRECTORY_DATABASES);
            let entry = match &mut entries[slot] {
                Some(entry)
                    if entry.database == database
                        && entry.generation == generation
                        && entry.catalog.oid() == catalog.oid() =>
                {
                    entry
                }
                slot => slot.insert(DirectoryEntry {
                    database,
                    generation,
                    catalog: *catalog,
                    floor: None,
                    layouts: [None; DIRECTORY_LAYOUTS],
                }),
            };
            fill(entry);
        });
    }

    /// Where a lookup that may be left here begins: the generation now, then a new catalog
    /// snapshot, so that the lookup sees every change whose commit bumped the generation
    /// before it was read.
    fn begin_lookup(&self) -> Option<u64> {
        if !self.settled() {
            return None;
        }
        let generation = self.generation.load(Ordering::Acquire);
        // SAFETY: drops this backend's catalog snapshot; the next catalog read takes a new one
        // (scans under way hold registered copies of theirs).
        unsafe { pg_sys::InvalidateCatalogSnapshot() };
        Some(generation)
    }

    /// Whether the directory may be used now: not in recovery, not in a transaction that wrote
    /// the extension's state, and no prepared writing transaction of this database pending; one
    /// that ended (committed or rolled back) since is forgotten, and bumps the generation.
    fn settled(&self) -> bool {
        // A standby (or a server in archive recovery) replays changes that no hook of its own
        // sees: nothing is trusted or left here until it leaves recovery.
        // SAFETY: a plain read of a backend-local flag (shared memory once it changed).
        let in_recovery = unsafe { pg_sys::RecoveryInProgress() };
        if in_recovery
            || self.overflowed.load(Ordering::Acquire)
            || STATE_WRITTEN.load(Ordering::Relaxed)
        {
            return false;
        }
        let database = u64::from(this_database().to_u32());
        self.prepared.iter().all(|slot| {
            let held = slot.load(Ordering::Acquire);
            if held == 0 || held >> 32 != database {
                return true;
            }
            let xid = pg_sys::TransactionId::from_inner(held as u32);
            // SAFETY: asks the proc array about a transaction id; a prepared transaction is in
            // progress until COMMIT PREPARED or ROLLBACK PREPARED ends it.
            if unsafe { pg_sys::TransactionIdIsInProgress(xid) } {
                return false;
            }
            if slot
                .compare_exchange(held, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.generation.fetch_add(1, Ordering::AcqRel);
            }
            true
        })
    }

    /// Whether `relation` is the catalog table or a floor relation of this database's entry.
    fn holds(&self, relation: pg_sys::Oid) -> bool {
        let database = this_database();
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_SHARED, || {
            // SAFETY: read under the lock held shared (see `trusted`).
            let entries = unsafe { &*self.entries.get() };
            entries
                .iter()
                .flatten()
                .filter(|entry| entry.database == database)
                .any(|entry| {
                    entry.catalog.oid() == relation
                        || entry.floor.is_some_and(|(relations, _)| {
                            relations.floor == relation || relations.writer == relation
                        })
                })
        })
    }

    /// Follows this transaction, about to be prepared, until it ends (see `settled`).
    fn hold_until_ended(&self) {
        // SAFETY: plain reads of this backend's database and transaction id (none, 0, when
        // nothing was written after all: then it counts as ended at once).
        let xid = unsafe { pg_sys::GetTopTransactionIdIfAny() }.into_inner();
        let held = u64::from(this_database().to_u32()) << 32 | u64::from(xid);
        let noted = self.prepared.iter().any(|slot| {
            slot.compare_exchange(0, held, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        if !noted {
            self.overflowed.store(true, Ordering::Release);
        }
    }
}

/// This database's catalog table: from the directory, else found (`catalog::locate`, 42704
/// when the extension is not installed) and left there.
pub fn catalog_table() -> CatalogTable {
    let directory = &shared_memory::state().directory;
    if let Some(catalog) = directory.trusted(|entry| Some(entry.catalog)) {
        return catalog;
    }
    let generation = directory.begin_lookup();
    let catalog = catalog::locate();
    if let Some(generation) = generation {
        directory.remember(generation, &catalog, |_| {});
    }
    catalog
}

/// Sequence `name`'s layout and catalog row in `catalog`: from the directory, else read
/// (`catalog::load_layout`, None when there is no such sequence) and left there when a
/// committed transaction inserted the row.
pub fn layout(catalog: &CatalogTable, name: &str) -> Option<(Layout, RowVersion)> {
    let directory = &shared_memory::state().directory;
    let found = directory.trusted(|entry| {
        let stored = (entry.catalog.oid() == catalog.oid())
            .then(|| entry.layout_of(name))
            .flatten()?;
        Some((stored.layout, stored.row))
    });
    if found.is_some() {
        return found;
    }
    let generation = directory.begin_lookup();
    let (layout, row) = catalog::load_layout(catalog, name)?;
    if let (Some(generation), false) = (generation, row.inserted_by_this_transaction()) {
        directory.remember(generation, catalog, |entry| {
            let known = entry.layout_of(name).is_some();
            let free = entry.layouts.iter_mut().find(|l| l.is_none());
            if let (false, true, Some(free)) = (known, catalog::name_fits(name), free) {
                let mut stored = NamedLayout {
                    name: [0; MAX_NAME_BYTES],
                    length: name.len() as u8,
                    layout,
                    row,
                };
                stored.name[..name.len()].copy_from_slice(name.as_bytes());
                *free = Some(stored);
            }
        });
    }
    Some((layout, row))
}

/// The floor relations of the extension whose catalog table is `catalog`: from the directory,
/// else `look_up` (None where the extension predates them, which is not left here: its update
/// creates them).
pub fn floor_relations(
    catalog: &CatalogTable,
    look_up: impl FnOnce() -> Option<FloorRelations>,
) -> Option<FloorRelations> {
    let directory = &shared_memory::state().directory;
    let known = directory.trusted(|entry| {
        (entry.catalog.oid() == catalog.oid())
            .then_some(entry.floor)
            .flatten()
            .map(|(relations, _)| relations)
    });
    if known.is_some() {
        return known;
    }
    let generation = directory.begin_lookup();
    let found = look_up()?;
    if let Some(generation) = generation {
        // SAFETY: a syscache lookup of a relation `look_up` found (and locked) just now.
        let namespace = unsafe { pg_sys::get_rel_namespace(found.floor) };
        directory.remember(generation, catalog, |entry| {
            entry.floor = Some((found, namespace))
        });
    }
    Some(found)
}

static PREVIOUS_OBJECT_ACCESS_HOOK: OnceCell<pg_sys::object_access_hook_type> = OnceCell::new();
static PREVIOUS_EXECUTOR_START_HOOK: OnceCell<pg_sys::ExecutorStart_hook_type> = OnceCell::new();

/// Installs the hooks that see writes of the extension's state (from `_PG_init`, while
/// preloading).
pub fn install_hooks() {
    // SAFETY: `_PG_init` runs once per process before any query; the previous hooks are kept
    // and called, so other extensions' hooks keep working.
    unsafe {
        PREVIOUS_OBJECT_ACCESS_HOOK.get_or_init(|| pg_sys::object_access_hook);
        pg_sys::object_access_hook = Some(on_object_access);
        PREVIOUS_EXECUTOR_START_HOOK.get_or_init(|| pg_sys::ExecutorStart_hook);
        pg_sys::ExecutorStart_hook = Some(on_executor_start);
    }
}

/// A `TRUNCATE`, `DROP` or `ALTER` (a rename, another schema, another owner) of a state relation
/// bumps the generation at its commit, and so does `DROP DATABASE` (a database made later with
/// the same OID, once the OID counter wrapped around, and from the same template, would find the
/// same floor relation in place). After an `ALTER … SET SCHEMA` the relation's schema is the new
/// one: the relations the directory holds count too.
#[pg_guard]
unsafe extern "C-unwind" fn on_object_access(
    access: pg_sys::ObjectAccessType::Type,
    class: pg_sys::Oid,
    object: pg_sys::Oid,
    sub_id: std::ffi::c_int,
    argument: *mut std::ffi::c_void,
) {
    use pg_sys::ObjectAccessType::{OAT_DROP, OAT_POST_ALTER, OAT_TRUNCATE};
    let relation = class == pg_sys::RelationRelationId;
    let changes_state = match access {
        OAT_TRUNCATE => is_state_relation(object),
        OAT_DROP => class == pg_sys::DatabaseRelationId || (relation && is_state_relation(object)),
        OAT_POST_ALTER => {
            relation
                && (is_state_relation(object)
                    || shared_memory::try_state()
                        .is_some_and(|shared| shared.directory.holds(object)))
        }
        _ => false,
    };
    if changes_state {
        forget_at_commit();
    }
    if let Some(previous) = PREVIOUS_OBJECT_ACCESS_HOOK.get().copied().flatten() {
        // SAFETY: the hook installed before ours, called with the arguments we were given.
        unsafe { previous(access, class, object, sub_id, argument) };
    }
}

/// A plan that writes a state relation (its result relations, data-modifying CTEs included)
/// bumps the generation at its commit. Every statement of the server passes here: the plan's
/// lists are read in place, and the schema's OID is kept (`internal_namespace`), so a statement
/// that writes one table costs about a syscache hit more.
#[pg_guard]
unsafe extern "C-unwind" fn on_executor_start(
    query: *mut pg_sys::QueryDesc,
    flags: std::ffi::c_int,
) {
    // SAFETY: the executor's query descriptor, valid for the call; its plan's result relation
    // list (null when empty) holds range table indexes, from 1, into its range table, a list
    // of range table entries; both are read in place, as PostgreSQL's list_nth does.
    let writes_state = unsafe {
        let plan = (*query).plannedstmt;
        let results = (*plan).resultRelations;
        let count = if results.is_null() {
            0
        } else {
            (*results).length
        };
        (0..count as usize).any(|position| {
            let index = (*(*results).elements.add(position)).int_value as usize;
            let entry = (*(*(*plan).rtable).elements.add(index - 1)).ptr_value;
            is_state_relation((*entry.cast::<pg_sys::RangeTblEntry>()).relid)
        })
    };
    if writes_state {
        forget_at_commit();
    }
    match PREVIOUS_EXECUTOR_START_HOOK.get().copied().flatten() {
        // SAFETY: the hook installed before ours, or PostgreSQL's own, with our arguments.
        Some(previous) => unsafe { previous(query, flags) },
        None => unsafe { pg_sys::standard_ExecutorStart(query, flags) },
    }
}

/// Whether `relation` is in the extension's own schema, where only superusers create anything:
/// the catalog table and the floor relations.
fn is_state_relation(relation: pg_sys::Oid) -> bool {
    let internal = internal_namespace();
    // SAFETY: a syscache lookup of a relation, inside a transaction.
    internal != pg_sys::InvalidOid && unsafe { pg_sys::get_rel_namespace(relation) } == internal
}

/// This database's `snowflake_id_internal` schema (InvalidOid while there is none), looked up
/// once and again after any change of `pg_namespace` (a syscache callback forgets it).
fn internal_namespace() -> pg_sys::Oid {
    let known = INTERNAL_NAMESPACE.load(Ordering::Relaxed);
    if known & NAMESPACE_KNOWN != 0 {
        return pg_sys::Oid::from(known as u32);
    }
    if !NAMESPACE_CALLBACK_REGISTERED.swap(true, Ordering::Relaxed) {
        // SAFETY: registers a plain function for the life of this backend, before the first
        // lookup it guards; PostgreSQL calls it while processing invalidation messages, and it
        // only stores to an atomic.
        unsafe {
            pg_sys::CacheRegisterSyscacheCallback(
                pg_sys::SysCacheIdentifier::NAMESPACEOID as i32,
                Some(forget_internal_namespace),
                pg_sys::Datum::from(0),
            )
        };
    }
    // SAFETY: a syscache lookup of a static name, inside a transaction.
    let found = unsafe { pg_sys::get_namespace_oid(catalog::INTERNAL_SCHEMA.as_ptr(), true) };
    INTERNAL_NAMESPACE.store(
        NAMESPACE_KNOWN | u64::from(found.to_u32()),
        Ordering::Relaxed,
    );
    found
}

/// `internal_namespace`'s last answer, with NAMESPACE_KNOWN set (0: not looked up).
static INTERNAL_NAMESPACE: AtomicU64 = AtomicU64::new(0);
const NAMESPACE_KNOWN: u64 = 1 << 32;
static NAMESPACE_CALLBACK_REGISTERED: AtomicBool = AtomicBool::new(false);

#[pg_guard]
unsafe extern "C-unwind" fn forget_internal_namespace(
    _argument: pg_sys::Datum,
    _cache: std::ffi::c_int,
    _hash: u32,
) {
    INTERNAL_NAMESPACE.store(0, Ordering::Relaxed);
}

/// This transaction wrote the extension's state: the directory's generation is bumped once its
/// commit is visible, or, when it is prepared, once it ended (`Directory::settled`).
fn forget_at_commit() {
    if STATE_WRITTEN.swap(true, Ordering::Relaxed) {
        return;
    }
    register_xact_callback(PgXactCallbackEvent::Commit, || {
        STATE_WRITTEN.store(false, Ordering::Relaxed);
        if let Some(shared) = shared_memory::try_state() {
            shared.directory.generation.fetch_add(1, Ordering::AcqRel);
        }
    });
    register_xact_callback(PgXactCallbackEvent::Abort, || {
        STATE_WRITTEN.store(false, Ordering::Relaxed)
    });
    register_xact_callback(PgXactCallbackEvent::PrePrepare, || {
        if let Some(shared) = shared_memory::try_state() {
            shared.directory.hold_until_ended();
        }
    });
    register_xact_callback(PgXactCallbackEvent::Prepare, || {
        STATE_WRITTEN.store(false, Ordering::Relaxed)
    });
}

/// Set while this backend's transaction has written the extension's state (`forget_at_commit`):
/// the directory does not hold what the transaction sees (a sequence it dropped is still
/// there), so it neither answers nor is filled until the transaction ends.
static STATE_WRITTEN: AtomicBool = AtomicBool::new(false);

/// Whether the floor relation of an entry, with the schema it was found in, is still a
/// sequence there. It stays open (locked for reading to the end of the transaction), as the
/// first ID's read of it needs.
fn floor_is_in_place((relations, namespace): (FloorRelations, pg_sys::Oid)) -> bool {
    // SAFETY: opens a relation by OID inside a transaction (null when it no longer exists) and
    // reads its pg_class row from the relcache entry before closing it; the lock is kept.
    unsafe {
        let opened = pg_sys::try_relation_open(relations.floor, catalog::ACCESS_SHARE);
        if opened.is_null() {
            return false;
        }
        let class = &*(*opened).rd_rel;
        let in_place =
            class.relkind as u8 == pg_sys::RELKIND_SEQUENCE && class.relnamespace == namespace;
        pg_sys::relation_close(opened, pg_sys::NoLock as pg_sys::LOCKMODE);
        in_place
    }
}

/// This backend's database.
pub(crate) fn this_database() -> pg_sys::Oid {
    // SAFETY: a backend-local value set when the backend connected to its database.
    unsafe { pg_sys::MyDatabaseId }
}
