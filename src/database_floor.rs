//! The floor carried in each database (docs/design.md §5.3): the extension's own sequence
//! relation `snowflake_floor`, which holds a time (µs since 1970) that no tick of an ID issued
//! in this database ends after. PostgreSQL carries it everywhere the rows go: its updates are
//! WAL-logged (standbys, crash recovery, PITR), `pg_upgrade` copies it, and `pg_dump` dumps it as
//! a `setval` (it is a configuration sequence of the extension). The extension never reads user
//! tables to find a floor: no role's code runs and no role's values count.
//!
//! A backend reads the relation before its first generator (raising the cluster's durable floor
//! when the relation holds more than this server reserved: it came from elsewhere), and before
//! an ID of a tick leaves it makes sure the relation covers that tick's end durably: it writes
//! the published reservation into it half a window before it is needed, and flushes the WAL up
//! to that write only when the tick gets there (by then the reservation worker's next renewal,
//! which flushes the WAL, or the WAL writer has, so no session waits for a flush). Writes take
//! an LWLock, so the relation only rises, and leave the relation's last two writes in shared
//! memory: a backend that reads a value written a moment ago relies on the write before it,
//! whose WAL is flushed by then, instead of waiting for the newest one's.

use std::sync::atomic::Ordering;

use pgrx::prelude::*;

use crate::catalog::CatalogTable;
use crate::errors;
use crate::gucs;
use crate::shared_memory::{
    with_lwlock, FloorWriteSlot, FloorWrites, SharedState, FLOOR_WRITE_SLOTS,
};

const RELATION_NAME: &std::ffi::CStr = c"snowflake_floor";
/// The relation that says which cluster wrote the floor: its system identifier.
const WRITER_RELATION_NAME: &std::ffi::CStr = c"snowflake_floor_writer";

/// How far a time may lie beyond the cluster clock for `snowflake_raise_floor`: a floor that
/// far ahead makes IDs lead real time by as much, for ten times as long (design §3.1).
pub const MAX_RAISE_AHEAD_US: i64 = 24 * 3_600 * 1_000_000;

/// A value of a floor relation and a WAL position at or after the end of the record that wrote
/// it: once the WAL is flushed there, the relation holds the value or more through a crash.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Write {
    value: i64,
    lsn: pg_sys::XLogRecPtr,
}

impl Write {
    const NONE: Write = Write {
        value: i64::MIN,
        lsn: 0,
    };
}

/// This backend's view of its database's floor relation.
pub struct DatabaseFloor {
    /// The catalog table the relation was looked up for (a new one means a new extension).
    catalog: pg_sys::Oid,
    /// The relations, or None where the extension predates them (0.4.0 and earlier, not yet
    /// updated).
    relation: Option<Relations>,
    /// Whether the writer relation names this cluster, as this backend last read or wrote it.
    ours: bool,
    /// The newest write this backend read or made.
    written: Write,
    /// The write before `written`, while above `durable`: when a tick passes `durable` it
    /// usually covers the tick and is flushed already, where `written` may have been made a
    /// moment ago.
    previous: Option<Write>,
    /// The part of `written` known to be flushed.
    durable: i64,
}

impl DatabaseFloor {
    pub const fn new() -> Self {
        DatabaseFloor {
            catalog: pg_sys::InvalidOid,
            relation: None,
            ours: false,
            written: Write::NONE,
            previous: None,
            durable: i64::MIN,
        }
    }

    /// Follows the extension whose catalog table is `catalog`: looks up its relations the first
    /// time, forgetting what was known of another one's (the extension was dropped and created
    /// again).
    pub fn follow(&mut self, catalog: &CatalogTable) {
        if self.catalog == catalog.oid() {
            return;
        }
        *self = DatabaseFloor {
            catalog: catalog.oid(),
            relation: locate(catalog.oid()),
            ..DatabaseFloor::new()
        };
    }

    /// Before a generator's first ID: reads the relation, raising the durable floor (and the
    /// cluster clock) when another cluster wrote it (`pg_upgrade`, a restored dump), or when
    /// this server started without its reservation file.
    pub fn learn(&mut self, shared: &SharedState) {
        if let Some(relation) = self.relation {
            self.read(relation, shared);
        }
    }

    /// Before the first ID of a tick ending at `end_unix_us` leaves (the reservation already
    /// covers it): the relation holds at least `end_unix_us`, and the WAL holds that write.
    pub fn cover(&mut self, end_unix_us: i64, shared: &SharedState) {
        let margin = half_window_us();
        if end_unix_us <= self.durable && end_unix_us.saturating_add(margin) <= self.written.value {
            return;
        }
        let Some(relation) = self.relation else {
            return;
        };
        if end_unix_us.saturating_add(margin) > self.written.value {
            self.read(relation, shared);
            if end_unix_us.saturating_add(margin) > self.written.value {
                // The published reservation covers `end_unix_us` by at least half a window
                // (design §5.1), the margin this write must leave.
                let target = shared.reserved_until().max(end_unix_us);
                self.write(relation, target, shared);
            }
        }
        if end_unix_us > self.durable {
            self.make_durable(end_unix_us);
        }
    }

    /// Makes a value at or above `end_unix_us` durable with the least waiting: nothing when the
    /// WAL is flushed past the newest write, else the write before it when that one covers the
    /// tick (the newest may have been made a moment ago and not be flushed yet: a session's
    /// first ID waited for it, and a second WAL flush with its commit, in 0.7.0 and 0.8.0).
    fn make_durable(&mut self, end_unix_us: i64) {
        // SAFETY: reads the flushed WAL position from shared memory; no timeline is asked for.
        let flushed = unsafe { pg_sys::GetFlushRecPtr(std::ptr::null_mut()) };
        let write = match self.previous {
            Some(previous) if previous.value >= end_unix_us && self.written.lsn > flushed => {
                previous
            }
            _ => self.written,
        };
        if write.lsn > flushed {
            // SAFETY: flushing WAL up to a position already inserted, outside a critical section.
            unsafe { pg_sys::XLogFlush(write.lsn) };
        }
        self.durable = write.value;
        self.previous = None;
    }

    /// Takes `write` as the newest known when it is newer than what this backend knows.
    fn record(&mut self, write: Write) {
        if write.value <= self.written.value {
            return;
        }
        if self.written.value > self.durable {
            self.previous = Some(self.written);
        }
        self.written = write;
    }

    /// `snowflake_raise_floor`: the relation rises to `until_unix_us` (if below), flushed.
    pub fn raise(&mut self, catalog: &CatalogTable, until_unix_us: i64, shared: &SharedState) {
        let Some(relation) = self.relation else {
            errors::floor_relation_missing(&catalog.schema).raise()
        };
        self.read(relation, shared);
        if self.written.value < until_unix_us {
            self.write(relation, until_unix_us, shared);
        }
        self.make_durable(self.written.value);
    }

    fn read(&mut self, relations: Relations, shared: &SharedState) {
        let current = relations.current();
        self.ours = relations.value(relations.writer) == Some(this_cluster());
        if let Some(before) = shared.floor_writes.before(&relations, current) {
            self.record(before);
        }
        self.record(current);
        // A value another cluster wrote covers IDs this server never saw: no ID may be issued
        // below it. One this cluster wrote (here, or on the primary whose WAL this server
        // replayed) is below what its reservation file and WAL records hold, unless the server
        // started without the file; then only what it has not reserved itself counts.
        let elsewhere = !self.ours
            || (shared.started_without_reservation() && current.value > shared.reserved_until());
        if elsewhere {
            shared.raise_durable_floor(current.value);
        }
    }

    /// Raises the relation to `value`, unless another backend raised it as far since this one
    /// read it: writes are serialised, so the relation only rises.
    fn write(&mut self, relations: Relations, value: i64, shared: &SharedState) {
        relations.lock_for_write();
        let writes = &shared.floor_writes;
        let written = writes.exclusive(|| {
            let current = relations.current();
            if current.value >= value {
                return current;
            }
            if !self.ours {
                // The writer first: a value that is not ours stays covered by the floor it
                // raised.
                relations.set(relations.writer, this_cluster());
                self.ours = true;
            }
            relations.set(relations.floor, value);
            // SAFETY: this backend's end of its last WAL record, which setval just inserted.
            let write = Write {
                value,
                lsn: unsafe { pg_sys::XactLastRecEnd },
            };
            writes.remember(&relations, current, write);
            self.record(current);
            write
        });
        self.record(written);
    }
}

/// The floor relation and the writer relation of one database, and their owner.
#[derive(Clone, Copy)]
struct Relations {
    floor: pg_sys::Oid,
    writer: pg_sys::Oid,
    owner: pg_sys::Oid,
}

impl Relations {
    /// The sequence's value (None before it was first set). Only the owner may read it (no
    /// privileges for PUBLIC); pg_sequence_last_value is PostgreSQL's own function and runs no
    /// code of any role.
    fn value(&self, relation: pg_sys::Oid) -> Option<i64> {
        as_owner(self.owner, || {
            // SAFETY: a built-in function of one regclass argument, called with one.
            unsafe {
                pgrx::direct_function_call::<i64>(
                    pg_sys::pg_sequence_last_value,
                    &[relation.into_datum()],
                )
            }
        })
    }

    /// The end of the last WAL record that changed the sequence's page. No privilege is
    /// checked and no code of any role runs: the relation is opened and its one page pinned.
    fn page_lsn(&self, relation: pg_sys::Oid) -> pg_sys::XLogRecPtr {
        let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        // SAFETY: a sequence relation (checked in `locate`) has one page, block 0; it is read
        // while pinned, and the pin and the relation are released in the order they were taken.
        unsafe {
            let opened = pg_sys::relation_open(relation, lock);
            let buffer = pg_sys::ReadBuffer(opened, 0);
            let lsn = pg_sys::BufferGetLSNAtomic(buffer);
            pg_sys::ReleaseBuffer(buffer);
            pg_sys::relation_close(opened, lock);
            lsn
        }
    }

    /// The floor's value (i64::MIN before it was first set) and its page's LSN, read after the
    /// value, so at or after the end of the record that wrote it (bounded by the insert
    /// position, for a page `pg_upgrade` brought from another cluster's WAL).
    fn current(&self) -> Write {
        Write {
            value: self.value(self.floor).unwrap_or(i64::MIN),
            lsn: self.page_lsn(self.floor).min(flushable_insert_position()),
        }
    }

    /// Takes the relation locks a write needs before the floor writes' LWLock, so that nothing
    /// waits for a relation lock while holding it (an LWLock wait cannot be cancelled).
    fn lock_for_write(&self) {
        for relation in [self.floor, self.writer] {
            for mode in [pg_sys::AccessShareLock, pg_sys::RowExclusiveLock] {
                // SAFETY: a relation lock, held to the end of the transaction.
                unsafe { pg_sys::LockRelationOid(relation, mode as pg_sys::LOCKMODE) };
            }
        }
    }

    /// Sets the sequence to `value` with PostgreSQL's own `setval`, as the owner.
    fn set(&self, relation: pg_sys::Oid, value: i64) {
        as_owner(self.owner, || {
            writable(|| {
                // SAFETY: a built-in function of (regclass, bigint, boolean), called with those.
                unsafe {
                    pgrx::direct_function_call::<i64>(
                        pg_sys::setval3_oid,
                        &[relation.into_datum(), value.into_datum(), true.into_datum()],
                    )
                }
            })
        });
    }
}

impl FloorWrites {
    /// The write before `newest` of this database's floor relation, when this server made both
    /// and `newest` is still the latest write it made there.
    fn before(&self, relations: &Relations, newest: Write) -> Option<Write> {
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_SHARED, || {
            let slot = self.slot(relations);
            let known = slot.database.load(Ordering::Relaxed) == this_database()
                && slot.relation.load(Ordering::Relaxed) == relations.floor.to_u32()
                && slot.newest_value.load(Ordering::Relaxed) == newest.value
                && slot.newest_lsn.load(Ordering::Relaxed) == newest.lsn;
            known.then(|| Write {
                value: slot.previous_value.load(Ordering::Relaxed),
                lsn: slot.previous_lsn.load(Ordering::Relaxed),
            })
        })
    }

    /// Notes, under the exclusive lock, that the relation went from `before` to `newest`.
    fn remember(&self, relations: &Relations, before: Write, newest: Write) {
        let slot = self.slot(relations);
        slot.database.store(this_database(), Ordering::Relaxed);
        slot.relation
            .store(relations.floor.to_u32(), Ordering::Relaxed);
        slot.newest_value.store(newest.value, Ordering::Relaxed);
        slot.newest_lsn.store(newest.lsn, Ordering::Relaxed);
        slot.previous_value.store(before.value, Ordering::Relaxed);
        slot.previous_lsn.store(before.lsn, Ordering::Relaxed);
    }

    /// Runs `f` holding the lock exclusively: one write of any floor relation at a time.
    fn exclusive<T>(&self, f: impl FnOnce() -> T) -> T {
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_EXCLUSIVE, f)
    }

    fn slot(&self, relations: &Relations) -> &FloorWriteSlot {
        let key = this_database() ^ relations.floor.to_u32().rotate_left(16);
        &self.slots[key as usize % FLOOR_WRITE_SLOTS]
    }
}

fn this_database() -> u32 {
    // SAFETY: a backend-local value set when the backend connected to its database.
    unsafe { pg_sys::MyDatabaseId }.to_u32()
}

/// This cluster's system identifier (from `initdb`, kept by its standbys and backups, new after
/// `pg_upgrade`), as the writer relation stores it.
fn this_cluster() -> i64 {
    // SAFETY: reads a value PostgreSQL fixed at startup.
    unsafe { pg_sys::GetSystemIdentifier() as i64 }
}

/// The current WAL insert position in the form `XLogFlush` accepts, the bound for a page LSN
/// that another cluster's WAL wrote (`XLogFlush` refuses a position not yet inserted): at a page
/// boundary the insert position points past the page header, where nothing is written yet, and
/// flushing up to it would fail (*xlog flush request … is not satisfied*); no record ends
/// there, so the page start covers every record before it.
fn flushable_insert_position() -> pg_sys::XLogRecPtr {
    let maxalign = |size: usize| (size + 7) & !7;
    let short_header = maxalign(std::mem::size_of::<pg_sys::XLogPageHeaderData>()) as u64;
    let long_header = maxalign(std::mem::size_of::<pg_sys::XLogLongPageHeaderData>()) as u64;
    // SAFETY: reads the insert position and the segment size, both valid in any backend.
    let (position, segment) = unsafe {
        (
            pg_sys::GetXLogInsertRecPtr(),
            pg_sys::wal_segment_size as u64,
        )
    };
    let in_page = position % u64::from(pg_sys::XLOG_BLCKSZ);
    let header = if position % segment == long_header {
        long_header
    } else {
        short_header
    };
    if in_page == header {
        position - in_page
    } else {
        position
    }
}

/// Half of `snowflake_id.reserve_ahead`: how early the relation is renewed before a tick reaches
/// it. Longer than a renewal period (a quarter window) plus a renewal, whose WAL flush makes the
/// write durable before a tick needs it.
fn half_window_us() -> i64 {
    i64::from(gucs::RESERVE_AHEAD_MS.get()) * 1_000 / 2
}

/// The floor and writer relations next to the catalog table, and their owner.
fn locate(catalog: pg_sys::Oid) -> Option<Relations> {
    // SAFETY: syscache lookups inside a transaction; the catalog table exists (just found).
    unsafe {
        let namespace = pg_sys::get_rel_namespace(catalog);
        let sequence = |name: &std::ffi::CStr| {
            let relation = pg_sys::get_relname_relid(name.as_ptr(), namespace);
            (relation != pg_sys::InvalidOid
                && pg_sys::get_rel_relkind(relation)
                    == pg_sys::RELKIND_SEQUENCE as std::ffi::c_char)
                .then_some(relation)
        };
        let (floor, writer) = (sequence(RELATION_NAME)?, sequence(WRITER_RELATION_NAME)?);
        let opened = pg_sys::relation_open(floor, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let owner = (*(*opened).rd_rel).relowner;
        pg_sys::relation_close(opened, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        Some(Relations {
            floor,
            writer,
            owner,
        })
    }
}

/// Runs `f` as `owner` in a security-restricted operation, the way PostgreSQL runs maintenance
/// code (VACUUM, ANALYZE): `f` only calls PostgreSQL's own sequence functions.
fn as_owner<T>(owner: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let (mut user, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: reads and sets the current user the way SECURITY DEFINER functions do. An ERROR
    // inside `f` aborts the (sub)transaction, which restores the previous user itself.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(
            owner,
            context
                | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32
                | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        );
    }
    let result = f();
    // SAFETY: restores exactly what was read above.
    unsafe { pg_sys::SetUserIdAndSecContext(user, context) };
    result
}

/// Runs `f` with the transaction's read-only flag cleared: the floor is written in read-only
/// transactions too (IDs are issued there), as `nextval` writes a sequence's WAL without a
/// table write. The flag is restored also when `f` raises an ERROR, since a savepoint's abort
/// would not restore it.
fn writable<T>(f: impl FnOnce() -> T + std::panic::UnwindSafe) -> T {
    // SAFETY: a plain read of this backend's transaction flag.
    let read_only = unsafe { pg_sys::XactReadOnly };
    // SAFETY: as above; the flag is this backend's own and restored below.
    unsafe { pg_sys::XactReadOnly = false };
    PgTryBuilder::new(f)
        .finally(|| {
            // SAFETY: restores the flag read above.
            unsafe { pg_sys::XactReadOnly = read_only };
        })
        .execute()
}
