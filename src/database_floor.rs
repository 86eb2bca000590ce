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
//! which flushes the WAL, or the WAL writer has, so no session waits for a flush).

use pgrx::prelude::*;

use crate::catalog::CatalogTable;
use crate::errors;
use crate::gucs;
use crate::shared_memory::SharedState;

const RELATION_NAME: &std::ffi::CStr = c"snowflake_floor";
/// The relation that says which cluster wrote the floor: its system identifier.
const WRITER_RELATION_NAME: &std::ffi::CStr = c"snowflake_floor_writer";

/// How far a time may lie beyond the cluster clock for `snowflake_raise_floor`: a floor that
/// far ahead makes IDs lead real time by as much, for ten times as long (design §3.1).
pub const MAX_RAISE_AHEAD_US: i64 = 24 * 3_600 * 1_000_000;

/// This backend's view of its database's floor relation.
pub struct DatabaseFloor {
    /// The catalog table the relation was looked up for (a new one means a new extension).
    catalog: pg_sys::Oid,
    /// The relations, or None where the extension predates them (0.4.0 and earlier, not yet
    /// updated).
    relation: Option<Relations>,
    /// Whether the writer relation names this cluster, as this backend last read or wrote it.
    ours: bool,
    /// The relation's value as this backend last read or wrote it, and a WAL position at or
    /// after the record that wrote it.
    written: i64,
    written_lsn: pg_sys::XLogRecPtr,
    /// The oldest value above `durable` that this backend read or wrote before `written`, and
    /// its WAL position: when a tick passes `durable`, this older one usually covers it and is
    /// flushed already, where `written` may have been read a moment ago.
    pending: Option<(i64, pg_sys::XLogRecPtr)>,
    /// The part of `written` known to be flushed.
    durable: i64,
}

impl DatabaseFloor {
    pub const fn new() -> Self {
        DatabaseFloor {
            catalog: pg_sys::InvalidOid,
            relation: None,
            ours: false,
            written: i64::MIN,
            written_lsn: 0,
            pending: None,
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
        if end_unix_us <= self.durable && end_unix_us.saturating_add(margin) <= self.written {
            return;
        }
        let Some(relation) = self.relation else {
            return;
        };
        if end_unix_us.saturating_add(margin) > self.written {
            self.read(relation, shared);
            if end_unix_us.saturating_add(margin) > self.written {
                // The published reservation covers `end_unix_us` by at least half a window
                // (design §5.1), the margin this write must leave.
                let target = shared.reserved_until().max(end_unix_us);
                self.write(relation, target);
            }
        }
        if end_unix_us > self.durable {
            self.make_durable(end_unix_us);
        }
    }

    /// Makes a value at or above `end_unix_us` durable with the least waiting: nothing when the
    /// WAL is flushed past the newest write, else the oldest write that covers the tick (a
    /// reader took the newest one's position a moment ago, which the WAL writer may not have
    /// flushed yet: waiting for it was the slow-fsync tail of 0.7.0).
    fn make_durable(&mut self, end_unix_us: i64) {
        // SAFETY: reads the flushed WAL position from shared memory; no timeline is asked for.
        let flushed = unsafe { pg_sys::GetFlushRecPtr(std::ptr::null_mut()) };
        let (value, lsn) = match self.pending {
            Some((value, lsn)) if value >= end_unix_us && self.written_lsn > flushed => {
                (value, lsn)
            }
            _ => (self.written, self.written_lsn),
        };
        if lsn > flushed {
            // SAFETY: flushing WAL up to a position already inserted, outside a critical section.
            unsafe { pg_sys::XLogFlush(lsn) };
        }
        self.durable = value;
        self.pending = None;
    }

    /// Records `value` as written to the relation at or before WAL position `lsn`, keeping the
    /// oldest value not yet known durable as the pending one.
    fn record(&mut self, value: i64, lsn: pg_sys::XLogRecPtr) {
        if self.written > self.durable && self.pending.is_none() {
            self.pending = Some((self.written, self.written_lsn));
        }
        self.written = value;
        self.written_lsn = lsn;
    }

    /// `snowflake_raise_floor`: the relation rises to `until_unix_us` (if below), flushed.
    pub fn raise(&mut self, catalog: &CatalogTable, until_unix_us: i64, shared: &SharedState) {
        let Some(relation) = self.relation else {
            errors::floor_relation_missing(&catalog.schema).raise()
        };
        self.read(relation, shared);
        if self.written < until_unix_us {
            self.write(relation, until_unix_us);
        }
        self.make_durable(self.written);
    }

    fn read(&mut self, relations: Relations, shared: &SharedState) {
        let value = relations.value(relations.floor).unwrap_or(i64::MIN);
        self.ours = relations.value(relations.writer) == Some(this_cluster());
        // The write that produced `value` was inserted before it released the buffer this read
        // waited for, so it lies before this position.
        let lsn = flushable_insert_position();
        if value > self.written {
            self.record(value, lsn);
        }
        // A value another cluster wrote covers IDs this server never saw: no ID may be issued
        // below it. One this cluster wrote (here, or on the primary whose WAL this server
        // replayed) is below what its reservation file and WAL records hold, unless the server
        // started without the file; then only what it has not reserved itself counts.
        let elsewhere =
            !self.ours || (shared.started_without_reservation() && value > shared.reserved_until());
        if elsewhere {
            shared.raise_durable_floor(value);
        }
    }

    fn write(&mut self, relations: Relations, value: i64) {
        if !self.ours {
            // The writer first: a value that is not ours stays covered by the floor it raised.
            relations.set(relations.writer, this_cluster());
            self.ours = true;
        }
        relations.set(relations.floor, value);
        // SAFETY: this backend's end of its last WAL record, which setval just inserted.
        self.record(value, unsafe { pg_sys::XactLastRecEnd });
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

/// This cluster's system identifier (from `initdb`, kept by its standbys and backups, new after
/// `pg_upgrade`), as the writer relation stores it.
fn this_cluster() -> i64 {
    // SAFETY: reads a value PostgreSQL fixed at startup.
    unsafe { pg_sys::GetSystemIdentifier() as i64 }
}

/// The current WAL insert position in the form `XLogFlush` accepts: at a page boundary the
/// insert position points past the page header, where nothing is written yet, and flushing up
/// to it would fail (*xlog flush request … is not satisfied*); no record ends there, so the page
/// start covers every record before it.
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
