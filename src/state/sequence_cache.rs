//! This backend's cache of sequence layouts (docs/design.md §6): lookup by name (in the
//! server's extension directory, else the catalog table), invalidation when the catalog table
//! changes, and re-verification (in the catalog table itself) before the next use. It is the only
//! owner of that cycle; the per-sequence state a user keeps in it (the generators of
//! `backend.rs`) is dropped when a sequence's layout changes.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use pgrx::prelude::*;
use snowflake_id_core::layout::Layout;
use snowflake_id_core::names::same_bytes;

use crate::errors;
use crate::state::catalog::{self, CatalogTable, RowVersion};
use crate::state::extension;
use crate::state::extension_directory;

/// Set by the relcache callback when the catalog table may have changed (a sequence was
/// created or dropped and committed, or the extension was dropped).
static CHANGED: AtomicBool = AtomicBool::new(false);
/// OID of the catalog table the callback watches (0 until looked up).
static WATCHED_OID: AtomicU32 = AtomicU32::new(0);
static CALLBACK_REGISTERED: AtomicBool = AtomicBool::new(false);

pub struct SequenceCache<S> {
    /// Where the catalog table is (looked up once, again after it changed).
    catalog: Option<CatalogTable>,
    /// Set when a committed change was noticed, until the catalog table was found again: it
    /// is then found in the catalogs themselves, not in the directory (also when the first
    /// attempt failed: the extension was gone for a moment).
    recheck: bool,
    entries: Vec<Entry<S>>,
}

pub struct Entry<S> {
    pub name: String,
    pub layout: Layout,
    /// The catalog row the layout was read from.
    row: RowVersion,
    /// What the cache's user keeps per sequence; None again after the layout changed.
    pub state: Option<S>,
    /// False after the catalog changed: re-read the layout before the next use.
    verified: bool,
}

impl<S> SequenceCache<S> {
    pub const fn new() -> Self {
        SequenceCache {
            catalog: None,
            recheck: false,
            entries: Vec::new(),
        }
    }

    /// Where the catalog table is; notices a committed catalog change first, after which the
    /// catalog table is found again in the catalogs themselves (not in the directory: a
    /// session's re-check never depends on the directory's rule).
    pub fn catalog_table(&mut self) -> &CatalogTable {
        if take_changed() {
            self.catalog = None;
            self.recheck = true;
            self.entries
                .iter_mut()
                .for_each(|entry| entry.verified = false);
        }
        if self.recheck && self.catalog.is_none() {
            // 42704 while the extension is gone: found again at the next call.
            self.catalog = Some(watched(extension::locate()));
            self.recheck = false;
        }
        self.catalog.get_or_insert_with(locate_and_watch)
    }

    /// Sequence `name`'s entry, loaded or re-verified first; raises 42704 when it does not exist.
    pub fn entry(&mut self, name: &str) -> &mut Entry<S> {
        let position = self.position_of(name);
        &mut self.entries[position]
    }

    /// [`Self::entry`] and the catalog table it was read from, from one look-up. `name` is the
    /// name's bytes as the caller passed them: the entry of a verified name is found without
    /// decoding them (each ID looks its sequence up here).
    #[inline]
    pub fn entry_and_catalog(&mut self, name: &[u8]) -> (&CatalogTable, &mut Entry<S>) {
        let verified = match self.catalog {
            Some(_) if !CHANGED.load(Ordering::Relaxed) => self
                .entries
                .iter()
                .position(|entry| entry.verified && same_bytes(entry.name.as_bytes(), name)),
            _ => None,
        };
        let position = verified.unwrap_or_else(|| self.position_of(&String::from_utf8_lossy(name)));
        let SequenceCache {
            catalog, entries, ..
        } = self;
        // Located by now (by position_of, or before the entry was verified).
        (
            catalog.get_or_insert_with(locate_and_watch),
            &mut entries[position],
        )
    }

    /// Where sequence `name`'s entry is, loaded or re-verified first (42704 when it does not
    /// exist).
    fn position_of(&mut self, name: &str) -> usize {
        self.catalog_table(); // notices a committed catalog change first
        let position = self.entries.iter().position(|entry| entry.name == name);
        if let Some(position) = position {
            if self.entries[position].verified {
                return position;
            }
        }
        let catalog = *self.catalog_table();
        // A re-check after an invalidation reads the catalog table itself; a first lookup may
        // come from the directory.
        let found = match position {
            Some(_) => catalog::load_layout(&catalog, name),
            None => extension_directory::layout(&catalog, name),
        };
        let Some((layout, row)) = found else {
            if let Some(position) = position {
                self.entries.remove(position);
            }
            errors::sequence_not_found(name, &catalog.extension_schema()).raise()
        };
        match position {
            Some(position) => {
                let entry = &mut self.entries[position];
                if entry.row != row {
                    // Dropped and created again (a new ID space, whatever its layout): new
                    // state, whose ticks are claimed on the worker id afresh, and no current
                    // value (snowflake_currval) until its first ID.
                    entry.layout = layout;
                    entry.row = row;
                    entry.state = None;
                }
                entry.verified = true;
                position
            }
            None => {
                self.entries.push(Entry {
                    name: name.to_owned(),
                    layout,
                    row,
                    state: None,
                    verified: true,
                });
                self.entries.len() - 1
            }
        }
    }
}

/// Finds the catalog table (in the extension directory, else in the catalogs) and starts
/// watching it for committed changes.
#[cold]
#[inline(never)]
fn locate_and_watch() -> CatalogTable {
    watched(extension_directory::catalog_table())
}

/// `catalog`, watched for committed changes from now on.
fn watched(catalog: CatalogTable) -> CatalogTable {
    watch(&catalog);
    catalog
}

/// Whether the catalog changed since the last call (clears the flag).
fn take_changed() -> bool {
    CHANGED.load(Ordering::Relaxed) && CHANGED.swap(false, Ordering::Relaxed)
}

/// Starts watching `catalog` for committed changes (the callback is registered once).
fn watch(catalog: &CatalogTable) {
    WATCHED_OID.store(catalog.oid().to_u32(), Ordering::Relaxed);
    if !CALLBACK_REGISTERED.swap(true, Ordering::Relaxed) {
        // SAFETY: registers a plain function for the life of this backend; PostgreSQL calls
        // it while processing invalidation messages, and it only stores to atomics.
        unsafe {
            pg_sys::CacheRegisterRelcacheCallback(
                Some(on_relcache_invalidation),
                pg_sys::Datum::from(0),
            )
        };
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_relcache_invalidation(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let watched = WATCHED_OID.load(Ordering::Relaxed);
    if relid == pg_sys::InvalidOid || relid.to_u32() == watched {
        CHANGED.store(true, Ordering::Relaxed);
    }
}
