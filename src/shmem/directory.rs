//! The server's directory of its databases' extensions, in shared memory (docs/design.md §6, "A
//! new connection's first ID"): an entry per database (where its catalog table and floor
//! relations are, and its sequences' layouts), read under its LWLock held shared and written
//! under it held exclusively; whether an entry may be trusted is the core's `directory_trust`
//! rule, which `state/extension_directory.rs` asks.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use pgrx::prelude::*;
use snowflake_id_core::directory_trust::DirectoryTrust;
use snowflake_id_core::layout::Layout;

use crate::durability::floor_relations::FloorRelations;
use crate::pg::lwlocks::with_lwlock;
use crate::state::catalog::{CatalogTable, RowVersion, MAX_NAME_BYTES};

/// How many databases the extension directory keeps (`extension_directory.rs`), an entry each;
/// a database beyond them takes the entry of another (whose next new connection looks its
/// extension up again).
pub const DIRECTORY_DATABASES: usize = 64;
/// How many sequences' layouts a directory entry keeps; the first IDs of further sequences look
/// their layouts up in the catalog table.
pub const DIRECTORY_LAYOUTS: usize = 16;
/// How many transactions that wrote the extension's state the directory follows at once
/// (committing, or prepared, or prepared before the server started): beyond them it is off
/// until shared memory starts again (`snowflake_id_core::directory_trust`).
pub const DIRECTORY_WRITERS: usize = 256;

/// The databases' extensions, as backends found them (`extension_directory.rs` reads and fills
/// it): entries read under `lock` held shared, written under it held exclusively; whether they
/// may be trusted is `trust`'s rule.
#[repr(C, align(64))]
pub struct Directory {
    lock: AtomicPtr<pg_sys::LWLock>,
    pub trust: DirectoryTrust<DIRECTORY_WRITERS>,
    entries: UnsafeCell<[Option<DirectoryEntry>; DIRECTORY_DATABASES]>,
    /// Per entry, for `snowflake_directory()`: lookups its entry answered, and lookups that
    /// read the catalogs instead while the database held it (both since the database took it).
    answered: [AtomicU64; DIRECTORY_DATABASES],
    looked_up: [AtomicU64; DIRECTORY_DATABASES],
}

/// A database's floor relations, with the floor relation's schema when it was found.
pub type LocatedFloor = (FloorRelations, pg_sys::Oid);

/// One database's extension.
#[derive(Clone, Copy)]
pub struct DirectoryEntry {
    pub database: pg_sys::Oid,
    /// The directory's generation when the lookups that filled it began.
    pub generation: u64,
    pub catalog: CatalogTable,
    /// None until a backend looked them up (and where the extension predates them), with the
    /// floor relation's schema.
    pub floor: Option<LocatedFloor>,
    pub layouts: [Option<NamedLayout>; DIRECTORY_LAYOUTS],
}

/// A sequence's layout and the catalog row it came from.
#[derive(Clone, Copy)]
pub struct NamedLayout {
    pub name: [u8; MAX_NAME_BYTES],
    pub length: u8,
    pub layout: Layout,
    pub row: RowVersion,
}

impl NamedLayout {
    fn name(&self) -> &[u8] {
        &self.name[..usize::from(self.length)]
    }
}

impl DirectoryEntry {
    /// The layout it holds of sequence `name`.
    pub fn layout_of(&self, name: &str) -> Option<&NamedLayout> {
        self.layouts
            .iter()
            .flatten()
            .find(|l| l.name() == name.as_bytes())
    }
}

impl Directory {
    pub fn new(lock: *mut pg_sys::LWLock) -> Directory {
        Directory {
            lock: AtomicPtr::new(lock),
            trust: DirectoryTrust::new(),
            entries: UnsafeCell::new([None; DIRECTORY_DATABASES]),
            answered: std::array::from_fn(|_| AtomicU64::new(0)),
            looked_up: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// `read` of `database`'s entry when it is of `generation` and holds the floor relations
    /// (returned with their schema), with the slot of its entry; None when the database holds
    /// none.
    pub fn read_entry<T>(
        &self,
        database: pg_sys::Oid,
        generation: Option<u64>,
        read: impl FnOnce(&DirectoryEntry) -> Option<T>,
    ) -> Option<(usize, Option<(LocatedFloor, T)>)> {
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_SHARED, || {
            // SAFETY: entries are read under the lock held shared and written under it held
            // exclusively, so no write is under way.
            let entries = unsafe { &*self.entries.get() };
            // A database holds one entry at most (`write_entry` reuses its slot).
            let slot = entries
                .iter()
                .position(|entry| entry.is_some_and(|entry| entry.database == database))?;
            let held = entries[slot]
                .as_ref()
                .filter(|entry| Some(entry.generation) == generation)
                .and_then(|entry| Some((entry.floor?, read(entry)?)));
            Some((slot, held))
        })
    }

    /// Counts a use of the entry in `slot`, for `snowflake_directory()`: answered by it, or
    /// looked up in the catalogs instead.
    pub fn count_use(&self, slot: usize, answered: bool) {
        let counter = if answered {
            &self.answered[slot]
        } else {
            &self.looked_up[slot]
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes into `database`'s entry what lookups that began at `generation` found in the
    /// extension whose catalog table is `catalog`: `fill` on the entry, made anew when it
    /// holds another generation or another extension. Nothing when the generation moved since.
    pub fn write_entry(
        &self,
        database: pg_sys::Oid,
        generation: u64,
        catalog: &CatalogTable,
        fill: impl FnOnce(&mut DirectoryEntry),
    ) {
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_EXCLUSIVE, || {
            if !self.trust.is_current(generation) {
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
                        .position(|entry| entry.is_some_and(|entry| entry.generation != generation))
                })
                .unwrap_or(database.to_u32() as usize % DIRECTORY_DATABASES);
            if entries[slot].is_none_or(|entry| entry.database != database) {
                self.answered[slot].store(0, Ordering::Relaxed);
                self.looked_up[slot].store(0, Ordering::Relaxed);
            }
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

    /// Whether `relation` is the catalog table or a floor relation of `database`'s entry.
    pub fn holds(&self, database: pg_sys::Oid, relation: pg_sys::Oid) -> bool {
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_SHARED, || {
            // SAFETY: read under the lock held shared (see `read_entry`).
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

    /// Every entry held, with the lookups it answered and those that read the catalogs
    /// instead.
    pub fn held_entries(&self) -> Vec<(DirectoryEntry, u64, u64)> {
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_SHARED, || {
            // SAFETY: read under the lock held shared (see `read_entry`).
            let entries = unsafe { &*self.entries.get() };
            entries
                .iter()
                .enumerate()
                .filter_map(|(slot, entry)| Some((slot, (*entry)?)))
                .map(|(slot, entry)| {
                    (
                        entry,
                        self.answered[slot].load(Ordering::Relaxed),
                        self.looked_up[slot].load(Ordering::Relaxed),
                    )
                })
                .collect()
        })
    }
}
