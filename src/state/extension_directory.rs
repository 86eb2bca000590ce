//! This server's directory of its databases' extensions, in shared memory (docs/design.md §6,
//! "A new connection's first ID"): where each database's catalog table and floor relations are,
//! and the layouts of its sequences. A new connection's first ID finds them here and opens
//! neither `pg_extension` nor the catalog table (whose relcache entry alone, with its guard
//! trigger, costs more than a whole `nextval()`); a backend that finds nothing here, or nothing
//! it may trust, looks them up in the catalogs (`catalog.rs`, `database_floor.rs`) and leaves
//! what it found for the next one.
//!
//! An entry is trusted only while both of these hold (checked before each use):
//! - The directory's trust rule (`snowflake_id_core::directory_trust`, model-checked) gives the
//!   generation its lookups began at: every transaction that writes the extension's state
//!   (below) is followed from its pre-commit (or pre-prepare) callback until the proc array no
//!   longer lists it, nothing of its database is trusted or left meanwhile, and its end bumps
//!   the generation before anything of its database is trusted again; the prepared
//!   transactions a new shared memory finds (after a start, a crash or a promotion) are
//!   followed too, whatever they wrote. A lookup reads the generation before it takes the
//!   catalog snapshot it reads with, so what it leaves is never trusted after a change it
//!   could not see.
//! - The floor relation it names is still a sequence in the schema it was in: the relation
//!   every first ID reads anyway (`database_floor.rs`), opened here first, so the check costs
//!   nothing. `DROP EXTENSION` drops it (and OIDs are not reused before the counter wraps
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
//! replays what its hooks never see. A logical apply worker's writes are seen by no hook (it
//! starts no executor plan): a publication that would publish the catalog table is refused
//! (`publications.rs`).
//!
//! Each counts once PostgreSQL checked the privileges for it, and only while it can still
//! commit: a write in a subtransaction that rolled back moves nothing.
//!
//! Rows of this backend's own transaction are never left here: they are not committed. And a
//! transaction that holds a write of the state neither asks nor fills the directory until it
//! ends.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use pgrx::callbacks::{register_xact_callback, PgXactCallbackEvent};
use pgrx::prelude::*;
use snowflake_id_core::directory_trust::{Off, Server, Writer};
use snowflake_id_core::layout::Layout;
use snowflake_id_core::state_writes::StateWrites;

use crate::durability::floor_relations::FloorRelations;
use crate::pg::guards::{Lock, OpenRelation};
use crate::pg::subtransaction;
use crate::pg::this_backend::this_database;
use crate::shmem;
use crate::shmem::directory::{Directory, DirectoryEntry, LocatedFloor, NamedLayout};
use crate::state::catalog::{self, CatalogTable, RowVersion, MAX_NAME_BYTES};
use crate::state::extension;

/// `read` of this database's entry, when it is trusted (see the module's comment). Each call
/// counts, for the database's entry if it has one, as answered or as looked up.
fn trusted<T>(directory: &Directory, read: impl FnOnce(&DirectoryEntry) -> Option<T>) -> Option<T> {
    let generation = open(directory).ok();
    let (slot, held) = directory.read_entry(this_database(), generation, read)?;
    // Outside the lock: opening a relation may wait for its lock and read pg_class.
    let found = held
        .filter(|(floor, _)| floor_is_in_place(*floor))
        .map(|(_, found)| found);
    directory.count_use(slot, found.is_some());
    found
}

/// Writes into this database's entry what lookups that began at `generation` found in the
/// extension whose catalog table is `catalog` (`Directory::write_entry`).
fn remember(
    directory: &Directory,
    generation: u64,
    catalog: &CatalogTable,
    fill: impl FnOnce(&mut DirectoryEntry),
) {
    // Before 0.10.0 the catalog table lived in the extension's schema, where the hooks do
    // not look for writes (`is_state_relation`): a database not updated yet is never here.
    if is_state_relation(catalog.oid()) {
        directory.write_entry(this_database(), generation, catalog, fill);
    }
}

/// Where a lookup that may be left in the directory begins: the generation now, then a new
/// catalog snapshot, so that the lookup sees every change whose commit bumped the generation
/// before it was read.
fn begin_lookup(directory: &Directory) -> Option<u64> {
    let generation = open(directory).ok()?;
    // SAFETY: drops this backend's catalog snapshot; the next catalog read takes a new one
    // (scans under way hold registered copies of theirs).
    unsafe { pg_sys::InvalidateCatalogSnapshot() };
    Some(generation)
}

/// The generation at which this database's entry may be used now, or why it may not (the
/// core's rule over this server).
fn open(directory: &Directory) -> Result<u64, Off> {
    directory
        .trust
        .open_for(this_database().to_u32(), holds_state_writes(), &ThisServer)
}

/// One database's part of the directory, for `snowflake_directory()`.
pub struct DatabaseStatus {
    pub database: pg_sys::Oid,
    /// Whether it holds an entry of the current generation.
    pub current: bool,
    /// The layouts its entry holds.
    pub layouts: usize,
    pub answered: u64,
    pub looked_up: u64,
    /// Why the directory is off for it now.
    pub off: Option<Off>,
}

/// Every database that holds an entry, and this one: what the entry holds, the lookups it
/// answered and those that read the catalogs, and why the directory is off for it, if it is.
pub fn status() -> Vec<DatabaseStatus> {
    let directory = &shmem::state().directory;
    let this = this_database();
    let mut rows: Vec<DatabaseStatus> = directory
        .held_entries()
        .into_iter()
        .map(|(entry, answered, looked_up)| {
            let (database, generation) = (entry.database, entry.generation);
            let layouts = entry.layouts.iter().flatten().count();
            let open = directory.trust.open_for(
                database.to_u32(),
                database == this && holds_state_writes(),
                &ThisServer,
            );
            DatabaseStatus {
                database,
                current: open == Ok(generation),
                layouts,
                answered,
                looked_up,
                off: open.err(),
            }
        })
        .collect();
    if !rows.iter().any(|row| row.database == this) {
        rows.push(DatabaseStatus {
            database: this,
            current: false,
            layouts: 0,
            answered: 0,
            looked_up: 0,
            off: open(directory).err(),
        });
    }
    rows
}

/// The server as the directory's trust rule asks about it.
struct ThisServer;

impl Server for ThisServer {
    fn in_recovery(&self) -> bool {
        // SAFETY: a plain read of a backend-local flag (shared memory once it changed).
        unsafe { pg_sys::RecoveryInProgress() }
    }

    fn in_progress(&self, xid: u32) -> bool {
        // SAFETY: asks the proc array about a transaction id; a prepared transaction is in
        // progress until COMMIT PREPARED or ROLLBACK PREPARED ends it.
        unsafe { pg_sys::TransactionIdIsInProgress(pg_sys::TransactionId::from_inner(xid)) }
    }

    /// From `pg_prepared_xact()`, the function behind `pg_prepared_xacts`, schema-qualified;
    /// None when it could not be read (the directory then stays off and asks again).
    fn prepared_transactions(&self) -> Option<Vec<Writer>> {
        subtransaction::run(|| {
            Spi::connect(|client| {
                client
                    .select(
                        "SELECT transaction::text::bigint, dbid::bigint \
                         FROM pg_catalog.pg_prepared_xact()",
                        None,
                        &[],
                    )?
                    .map(|row| {
                        let xid = row.get::<i64>(1)?.unwrap_or_default();
                        let database = row.get::<i64>(2)?.unwrap_or_default();
                        Ok(Writer {
                            database: database as u32,
                            xid: xid as u32,
                        })
                    })
                    .collect::<Result<Vec<_>, pgrx::spi::Error>>()
            })
            .ok()
        })
        .ok()
        .flatten()
    }
}

/// This database's catalog table: from the directory, else found (`extension::locate`, 42704
/// when the extension is not installed) and left there.
pub fn catalog_table() -> CatalogTable {
    let directory = &shmem::state().directory;
    if let Some(catalog) = trusted(directory, |entry| Some(entry.catalog)) {
        return catalog;
    }
    let generation = begin_lookup(directory);
    let catalog = extension::locate();
    if let Some(generation) = generation {
        remember(directory, generation, &catalog, |_| {});
    }
    catalog
}

/// Sequence `name`'s layout and catalog row in `catalog`: from the directory, else read
/// (`catalog::load_layout`, None when there is no such sequence) and left there when a
/// committed transaction inserted the row.
pub fn layout(catalog: &CatalogTable, name: &str) -> Option<(Layout, RowVersion)> {
    let directory = &shmem::state().directory;
    let found = trusted(directory, |entry| {
        let stored = (entry.catalog.oid() == catalog.oid())
            .then(|| entry.layout_of(name))
            .flatten()?;
        Some((stored.layout, stored.row))
    });
    if found.is_some() {
        return found;
    }
    let generation = begin_lookup(directory);
    let (layout, row) = catalog::load_layout(catalog, name)?;
    if let (Some(generation), false) = (generation, row.inserted_by_this_transaction()) {
        remember(directory, generation, catalog, |entry| {
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
    let directory = &shmem::state().directory;
    let known = trusted(directory, |entry| {
        (entry.catalog.oid() == catalog.oid())
            .then_some(entry.floor)
            .flatten()
            .map(|(relations, _)| relations)
    });
    if known.is_some() {
        return known;
    }
    let generation = begin_lookup(directory);
    let found = look_up()?;
    if let Some(generation) = generation {
        // SAFETY: a syscache lookup of a relation `look_up` found (and locked) just now.
        let namespace = unsafe { pg_sys::get_rel_namespace(found.floor) };
        remember(directory, generation, catalog, |entry| {
            entry.floor = Some((found, namespace))
        });
    }
    Some(found)
}

/// Whether this database's directory entry holds `relation` (the catalog table or a floor
/// relation): after an `ALTER … SET SCHEMA` the relation is no longer in the state's schema.
pub fn holds(relation: pg_sys::Oid) -> bool {
    shmem::try_state().is_some_and(|shared| shared.directory.holds(this_database(), relation))
}

/// Whether `relation` is in the extension's own schema, where only superusers create anything:
/// the catalog table and the floor relations.
pub fn is_state_relation(relation: pg_sys::Oid) -> bool {
    let internal = internal_namespace();
    // SAFETY: a syscache lookup of a relation, inside a transaction.
    internal != pg_sys::InvalidOid && unsafe { pg_sys::get_rel_namespace(relation) } == internal
}

/// This database's `snowflake_id_internal` schema (InvalidOid while there is none), looked up
/// once and again after any change of `pg_namespace` (a syscache callback forgets it).
pub(crate) fn internal_namespace() -> pg_sys::Oid {
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

/// This transaction wrote the extension's state at its current level: once it holds a write
/// that can still commit (`snowflake_id_core::state_writes`), the directory's rule follows it
/// from its pre-commit or pre-prepare callback (before its commit can be visible) until it
/// ends, and its commit bumps the generation. A write in a subtransaction that rolls back (an
/// exception block, a savepoint rolled back, a write the catalog's guard refused) moves nothing.
pub fn forget_at_commit() {
    // SAFETY: a plain read of this backend's transaction state.
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    change_state_writes(|writes| writes.wrote(level as u32));
    if CALLBACKS_REGISTERED.swap(true, Ordering::Relaxed) {
        return;
    }
    let follow = || {
        if !holds_state_writes() {
            return;
        }
        let writer = this_writer();
        FOLLOWED_XID.store(writer.xid, Ordering::Relaxed);
        if let Some(shared) = shmem::try_state() {
            shared.directory.trust.follow(writer);
        }
    };
    register_xact_callback(PgXactCallbackEvent::PreCommit, follow);
    register_xact_callback(PgXactCallbackEvent::PrePrepare, follow);
    register_xact_callback(PgXactCallbackEvent::Commit, || {
        if end_of_state_writes() {
            if let Some(shared) = shmem::try_state() {
                shared.directory.trust.committed(followed_writer());
            }
        }
    });
    register_xact_callback(PgXactCallbackEvent::Abort, || {
        end_of_state_writes();
        if let Some(shared) = shmem::try_state() {
            shared.directory.trust.aborted(followed_writer());
        }
    });
    // A prepared transaction stays followed: it is in progress until it ends elsewhere.
    register_xact_callback(PgXactCallbackEvent::Prepare, || {
        end_of_state_writes();
        FOLLOWED_XID.store(0, Ordering::Relaxed);
    });
}

/// A subtransaction ended (`committed` or rolled back): its writes of the state go to its
/// parent, or are discarded. Called while the ending subtransaction is still the current one.
pub fn subtransaction_ended(committed: bool) {
    if !CALLBACKS_REGISTERED.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: a plain read of this backend's transaction state.
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() } as u32;
    if committed {
        change_state_writes(|writes| writes.subtransaction_committed(level));
    } else {
        change_state_writes(|writes| writes.subtransaction_aborted(level));
    }
}

/// Whether this backend's transaction holds a write of the extension's state that can still
/// commit: the directory does not hold what the transaction sees (a sequence it dropped is
/// still there), so it neither answers nor is filled until the transaction ends.
fn holds_state_writes() -> bool {
    STATE_WRITES.with(|writes| writes.get().any())
}

fn change_state_writes(change: impl FnOnce(&mut StateWrites)) {
    STATE_WRITES.with(|writes| {
        let mut changed = writes.get();
        change(&mut changed);
        writes.set(changed);
    });
}

/// The transaction ended: whether it held a write that could commit (its callbacks followed
/// it), forgotten for the next one.
fn end_of_state_writes() -> bool {
    CALLBACKS_REGISTERED.store(false, Ordering::Relaxed);
    STATE_WRITES.with(|writes| writes.replace(StateWrites::none()).any())
}

thread_local! {
    /// This backend's transaction's writes of the extension's state (a backend is one thread).
    static STATE_WRITES: Cell<StateWrites> = const { Cell::new(StateWrites::none()) };
}

/// Set once this backend's transaction made a write of the state, until it ends: its
/// transaction callbacks are registered.
static CALLBACKS_REGISTERED: AtomicBool = AtomicBool::new(false);

/// This transaction as a writer of this database (xid 0 while it has none: it wrote nothing).
fn this_writer() -> Writer {
    // SAFETY: a plain read of this backend's top-level transaction id.
    let xid = unsafe { pg_sys::GetTopTransactionIdIfAny() }.into_inner();
    Writer {
        database: this_database().to_u32(),
        xid,
    }
}

/// The writer this backend's callbacks followed (its transaction id is read once, before the
/// commit, not after it), taken: the next transaction follows its own.
fn followed_writer() -> Writer {
    Writer {
        database: this_database().to_u32(),
        xid: FOLLOWED_XID.swap(0, Ordering::Relaxed),
    }
}

/// The transaction id this backend's pre-commit or pre-prepare callback followed (0: none).
static FOLLOWED_XID: AtomicU32 = AtomicU32::new(0);

/// Whether the floor relation of an entry, with the schema it was found in, is still a
/// sequence there. It stays open (locked for reading to the end of the transaction), as the
/// first ID's read of it needs.
fn floor_is_in_place((relations, namespace): LocatedFloor) -> bool {
    let Some(opened) = OpenRelation::try_open(
        relations.floor,
        catalog::ACCESS_SHARE,
        Lock::KeptToTransactionEnd,
    ) else {
        return false;
    };
    let class = opened.class();
    class.relkind as u8 == pg_sys::RELKIND_SEQUENCE && class.relnamespace == namespace
}
