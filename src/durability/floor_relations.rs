//! A database's floor relations as sequences (docs/design.md §5.3): their pages read in place,
//! their values set and locked.

use pgrx::prelude::*;
use snowflake_id_core::floor::{writer_identity, LoggedValue, PageLsn};

use crate::errors;
use crate::pg::guards::{Lock, OpenRelation};
use crate::pg::privileges::as_owner;
use crate::state::catalog;

/// A database's floor relations and their owner, as `database_floor.rs` found them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FloorRelations {
    pub floor: pg_sys::Oid,
    pub writer: pg_sys::Oid,
    pub owner: pg_sys::Oid,
}

impl FloorRelations {
    /// The sequence's value (None before it was first set), as `pg_sequence_last_value`
    /// answers it (see [`read_sequence_page`]).
    pub fn value(&self, relation: pg_sys::Oid) -> Option<i64> {
        read_sequence_page(relation).and_then(|(value, _)| value)
    }

    /// The end of the last WAL record that changed the sequence's page, or None when the
    /// relation is gone (dropped since it was looked up). No privilege is checked and no code
    /// of any role runs: the relation is opened and its one page pinned.
    fn page_lsn(relation: pg_sys::Oid) -> Option<pg_sys::XLogRecPtr> {
        // SAFETY: reads the LSN of a pinned buffer.
        with_sequence_page(relation, |buffer| unsafe {
            pg_sys::BufferGetLSNAtomic(buffer)
        })
    }

    /// The floor relation's page LSN: any change to it (this server's write, a restore's
    /// `setval`) moves it. Read once per tick, before the values when they are read. The
    /// writer relation's page is not looked at: a change to it alone brings no floor, and its
    /// value is read with the floor's (design §5.3).
    pub fn floor_page_lsn(&self) -> Option<PageLsn> {
        Self::page_lsn(self.floor)
    }

    /// The floor's value (i64::MIN before it was first set) and its page's LSN, read together,
    /// so the end of the record that wrote it (bounded by the insert position, for a page
    /// `pg_upgrade` brought from another cluster's WAL).
    pub fn current(&self) -> LoggedValue {
        let (value, lsn) = read_sequence_page(self.floor).unwrap_or((None, 0));
        LoggedValue {
            value: value.unwrap_or(i64::MIN),
            lsn: lsn.min(flushable_insert_position()),
        }
    }

    /// Whether the writer relation names this cluster and its timeline, read now (its owner
    /// checked first: 55000 for one that is not a superuser).
    pub fn writer_names_this_cluster(&self) -> bool {
        trusted_owner(self.writer);
        self.value(self.writer) == Some(this_cluster())
    }

    /// Takes the relation locks a read or write needs before the floor writes' LWLock, so that
    /// nothing waits for a relation lock while holding it (an LWLock wait cannot be cancelled).
    pub fn lock_relations(&self) {
        for relation in [self.floor, self.writer] {
            for mode in [pg_sys::AccessShareLock, pg_sys::RowExclusiveLock] {
                // SAFETY: a relation lock, held to the end of the transaction.
                unsafe { pg_sys::LockRelationOid(relation, mode as pg_sys::LOCKMODE) };
            }
        }
    }

    /// Sets the sequence to `value` with PostgreSQL's own `setval`, as the owner.
    pub fn set(&self, relation: pg_sys::Oid, value: i64) {
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

/// A sequence's row as its one page stores it (PostgreSQL's `FormData_pg_sequence_data`,
/// `commands/sequence.h`, the same from 10 to 18).
#[repr(C)]
struct SequenceData {
    last_value: i64,
    /// Not read: what `nextval` may take before its next WAL record.
    _log_cnt: i64,
    is_called: bool,
}

/// A sequence's value (`last_value` once it was set, None before, as `pg_sequence_last_value`
/// answers) and its page's LSN, read together under the page's share lock, or None when the
/// relation is gone. Straight from the page: no privilege is checked, no role is switched and
/// no code of any role runs, so a session of any role reads its database's floor relations
/// (whose owner is a superuser, `trusted_owner`) at PostgreSQL's own cost of a page read.
fn read_sequence_page(relation: pg_sys::Oid) -> Option<(Option<i64>, pg_sys::XLogRecPtr)> {
    // The page holds one tuple at the first item (sequence.c's read_seq_tuple reads it the same
    // way), whose data begins `t_hoff` bytes into it with a `SequenceData`; it is read under the
    // page's share lock (writers change it under the exclusive lock), released before the pin.
    with_sequence_page(relation, |buffer| {
        // SAFETY: a buffer `with_sequence_page` keeps pinned; unlocked below.
        unsafe { pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_SHARE as i32) };
        // SAFETY: the pinned buffer's page.
        let page = unsafe { pg_sys::BufferGetPage(buffer) };
        // SAFETY: the pinned buffer's LSN, read under its share lock.
        let lsn = unsafe { pg_sys::BufferGetLSNAtomic(buffer) };
        // SAFETY: a sequence's page has its one item at offset 1.
        let item_id = unsafe { pg_sys::PageGetItemId(page, 1) };
        // SAFETY: that item, on the locked page.
        let item = unsafe { pg_sys::PageGetItem(page, item_id) }.cast::<u8>();
        // SAFETY: the item is a heap tuple, which begins with its header.
        let header_length = unsafe { (*item.cast::<pg_sys::HeapTupleHeaderData>()).t_hoff };
        // SAFETY: the tuple's data begins `t_hoff` bytes in, inside the item.
        let row = unsafe { item.add(usize::from(header_length)) }.cast::<SequenceData>();
        // SAFETY: a sequence's row, read (unaligned) under the share lock.
        let data = unsafe { row.read_unaligned() };
        // SAFETY: releases the share lock taken above, before the pin.
        unsafe { pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_UNLOCK as i32) };
        (data.is_called.then_some(data.last_value), lsn)
    })
}

/// `read` of the pinned page of sequence `relation` (block 0, its only one), or None when the
/// relation is gone. The relation's lock is kept to the end of the transaction: the next
/// tick's look takes it again without a trip to the lock manager's shared table.
fn with_sequence_page<T>(
    relation: pg_sys::Oid,
    read: impl FnOnce(pg_sys::Buffer) -> T,
) -> Option<T> {
    let opened =
        OpenRelation::try_open(relation, catalog::ACCESS_SHARE, Lock::KeptToTransactionEnd)?;
    // SAFETY: a sequence relation (checked in `locate`), open, has one page, block 0; it stays
    // pinned while `read` runs (an ERROR in `read` leaves the pin to the abort).
    let buffer = unsafe { pg_sys::ReadBuffer(opened.as_ptr(), 0) };
    let result = read(buffer);
    // SAFETY: the pin taken above, released once, before the relation is closed.
    unsafe { pg_sys::ReleaseBuffer(buffer) };
    Some(result)
}

/// This cluster and its timeline, as the writer relation stores them
/// (`snowflake_id_core::floor::writer_identity`). Called only outside recovery: no ID is issued
/// and no floor written in it.
pub fn this_cluster() -> i64 {
    // SAFETY: a plain read of a backend-local flag.
    debug_assert!(!unsafe { pg_sys::RecoveryInProgress() });
    // SAFETY: the system identifier is fixed at startup: a plain read.
    let system = unsafe { pg_sys::GetSystemIdentifier() };
    // SAFETY: the insertion timeline is fixed once recovery has ended, which it has here.
    let timeline = unsafe { pg_sys::GetWALInsertionTimeLine() };
    writer_identity(system, timeline)
}

/// The current WAL insert position in the form `XLogFlush` accepts, the bound for a page LSN
/// that another cluster's WAL wrote (`XLogFlush` refuses a position not yet inserted): at a page
/// boundary the insert position points past the page header, where nothing is written yet, and
/// flushing up to it would fail (*xlog flush request … is not satisfied*); no record ends
/// there, so the page start covers every record before it.
pub fn flushable_insert_position() -> pg_sys::XLogRecPtr {
    let maxalign = |size: usize| (size + 7) & !7;
    let short_header = maxalign(std::mem::size_of::<pg_sys::XLogPageHeaderData>()) as u64;
    let long_header = maxalign(std::mem::size_of::<pg_sys::XLogLongPageHeaderData>()) as u64;
    // SAFETY: reads the insert position from shared memory, valid in any backend.
    let position = unsafe { pg_sys::GetXLogInsertRecPtr() };
    // SAFETY: a plain read of the segment size, set at startup and never changed.
    let segment = unsafe { pg_sys::wal_segment_size } as u64;
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

/// The owner of a floor relation, which must be a superuser (55000 otherwise): its owner can
/// set the floor, which counts for every database of the server.
pub fn trusted_owner(relation: pg_sys::Oid) -> pg_sys::Oid {
    let owner = catalog::relation_owner(relation);
    // SAFETY: a syscache lookup of the owner's role, inside a transaction.
    if !unsafe { pg_sys::superuser_arg(owner) } {
        let relation = catalog::relation_name(relation);
        // SAFETY: as above: a palloc'd copy of the owner's name, or null when it is gone.
        let name = unsafe { pg_sys::GetUserNameFromId(owner, true) };
        // SAFETY: `name` is null or that copy.
        let name = unsafe { catalog::quoted(name) };
        errors::floor_relation_not_superuser_owned(&relation, &name).raise();
    }
    owner
}

/// Runs `f` with the transaction's read-only flag cleared: the floor is written in read-only
/// transactions too, since IDs are issued there (PostgreSQL's own `nextval` refuses them; a
/// read-only transaction's `snowflake_nextval` writes no table, only the floor's WAL). The flag is restored also when `f` raises an ERROR, since a savepoint's abort
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
