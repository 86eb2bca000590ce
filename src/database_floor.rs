//! The floor carried in each database (docs/design.md §5.3): the extension's own sequence
//! relation `snowflake_floor`, which holds a time (µs since 1970) that no tick of an ID issued
//! in this database ends after. PostgreSQL carries it everywhere the rows go: its updates are
//! WAL-logged (standbys, crash recovery, PITR), `pg_upgrade` copies it, and `pg_dump` dumps it as
//! a `setval` (it is a configuration sequence of the extension). The extension never reads user
//! tables to find a floor (`stored_ids.rs` only reports what one holds): no role's code runs
//! and no role's values count, and only relations that are members of the extension and owned
//! by a superuser are taken for it.
//!
//! The steps (read, raise, re-read, flush) are the core's `protocol`, and the decisions in them
//! (when to read, raise and flush the relation, and what a value read teaches) its
//! `floor::FloorView`; this file locates, reads, writes and flushes. Before the
//! first ID of each tick a backend looks at the floor relation's page, so a change somebody else
//! made (a restore into this live database) is read before its next tick. Writes take an
//! LWLock, so the relation only rises through them, and leave the relation's last two values in
//! shared memory: a backend that reads a value written a moment ago relies on the write before
//! it, whose WAL is flushed by then, and knows it was this server's.

use std::sync::atomic::Ordering;

use pgrx::prelude::*;
use snowflake_id_core::floor::{writer_identity, FloorView, LoggedValue, PageLsn, Provenance};
use snowflake_id_core::protocol::{self, Cover, FloorRelation, TickRefused, TickStep};
use snowflake_id_core::renewal::RenewalPolicy;

use crate::catalog::{self, CatalogTable, Extension};
use crate::errors;
use crate::extension_directory::{self, this_database};
use crate::guards::{Lock, OpenRelation};
use crate::privileges::as_owner;
use crate::reservation::{renewal_policy, ClusterReservation};
use crate::shared_memory::{
    with_lwlock, FloorRelations, FloorWriteSlot, FloorWrites, SharedState, FLOOR_WRITE_SLOTS,
};
use crate::system_clock;

pub(crate) const RELATION_NAME: &std::ffi::CStr = c"snowflake_floor";
/// The relation that says which cluster wrote the floor, and on which timeline.
pub(crate) const WRITER_RELATION_NAME: &std::ffi::CStr = c"snowflake_floor_writer";

/// Whether a role that can log in and is not a superuser may write `relation` now, itself or
/// through a role it is a member of: a grant, the database's ownership (`pg_database_owner`,
/// which restores its dumps), `pg_write_all_data`. Asked only when a value from elsewhere lies
/// beyond the trusted lead (rarely): PostgreSQL's own privilege functions, no role's code.
fn writable_by_a_non_superuser(relation: pg_sys::Oid) -> bool {
    Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_roles writer, pg_catalog.pg_roles login \
          WHERE login.rolcanlogin AND NOT login.rolsuper \
            AND pg_catalog.has_sequence_privilege(writer.oid, $1, 'UPDATE') \
            AND pg_catalog.pg_has_role(login.oid, writer.oid, 'MEMBER'))",
        &[relation.into()],
    )
    .ok()
    .flatten()
    .unwrap_or(true)
}

/// This backend's view of its database's floor relation.
pub struct DatabaseFloor {
    /// The catalog table the relation was looked up for (a new one means a new extension).
    catalog: Option<CatalogTable>,
    /// The relations, or None where the extension predates them (0.4.0 and earlier, not yet
    /// updated): looked up again before each tick until the update creates them.
    relations: Option<FloorRelations>,
    /// Whether the writer relation names this cluster and timeline, as this backend last read or
    /// wrote it; None when its last read of the floor did not read it (see `read`).
    ours: Option<bool>,
    /// What this backend knows of the relation.
    view: FloorView,
}

impl DatabaseFloor {
    pub const fn new() -> Self {
        DatabaseFloor {
            catalog: None,
            relations: None,
            ours: None,
            view: FloorView::NEW,
        }
    }

    /// Follows the extension whose catalog table is `catalog`: looks up its relations the first
    /// time, forgetting what was known of another one's (the extension was dropped and created
    /// again).
    pub fn follow(&mut self, catalog: &CatalogTable) {
        if self.catalog.map(|known| known.oid()) == Some(catalog.oid()) {
            return;
        }
        *self = DatabaseFloor {
            catalog: Some(*catalog),
            relations: relations_of(catalog),
            ..DatabaseFloor::new()
        };
    }

    /// The relations, looked up again while the extension predates them (a session that
    /// started before `ALTER EXTENSION … UPDATE` finds them at its next tick).
    fn located(&mut self) -> Option<FloorRelations> {
        if let (None, Some(catalog)) = (self.relations, self.catalog) {
            self.relations = relations_of(&catalog);
        }
        self.relations
    }

    /// The relations (see [`Self::located`]) as the protocol sees them, with what this backend
    /// knows of them.
    fn in_database<'a>(
        &'a mut self,
        shared: &'a SharedState,
    ) -> Option<(&'a mut FloorView, InDatabase<'a>)> {
        self.located()?;
        let relations = self.relations.as_mut()?;
        let relation = InDatabase {
            relations,
            ours: &mut self.ours,
            shared,
        };
        Some((&mut self.view, relation))
    }

    /// Before a generator's first ID: reads the relation, raising the durable floor (and the
    /// cluster clock) when another cluster, or this one on another timeline, wrote it
    /// (`pg_upgrade`, a restored dump, a promotion), or when
    /// this server started without its reservation file (`protocol::learn`).
    pub fn learn(&mut self, shared: &SharedState) {
        if let Some((view, mut relation)) = self.in_database(shared) {
            protocol::learn(view, &mut relation).unwrap_or_else(|refused| refused.raise());
        }
    }

    /// Before the first ID of a tick ending at `end_unix_us` leaves:
    /// `protocol::first_id_of_tick` with the renewal `policy`, the cluster's reservation and
    /// this database's floor relation (where it has one), handed down to the protocol once.
    /// Raises what the protocol refuses: a reservation that cannot be written, a floor beyond
    /// the trusted lead (55000).
    pub fn first_id_of_tick(
        &mut self,
        end_unix_us: i64,
        shared: &SharedState,
        policy: &RenewalPolicy,
    ) -> TickStep {
        if self.relations.is_none() {
            // SAFETY: processes pending invalidation messages, as any lock acquisition does, so
            // that relations an update made since this transaction started are seen.
            unsafe { pg_sys::AcceptInvalidationMessages() };
        }
        let mut located = self.in_database(shared);
        let floor = located
            .as_mut()
            .map(|(view, relation)| (&mut **view, relation));
        let outcome =
            protocol::first_id_of_tick(&mut ClusterReservation(shared), policy, end_unix_us, floor);
        match outcome {
            Ok((step, covered)) => {
                if covered == Cover::Gone {
                    // Dropped under us (DROP EXTENSION): the catalog's invalidation follows.
                    self.relations = None;
                }
                step
            }
            Err(TickRefused::Reservation(failure)) => failure.raise(shared),
            Err(TickRefused::Floor(refused)) => refused.raise(),
        }
    }

    /// `snowflake_raise_floor`: `protocol::raise_floor` (the server's sessions, the relation,
    /// the cluster's WAL); 55000 where the database has no floor relation.
    pub fn raise(&mut self, catalog: &CatalogTable, until_unix_us: i64, shared: &SharedState) {
        let missing = || errors::floor_relation_missing(&catalog.extension_schema()).raise();
        let Some((view, mut relation)) = self.in_database(shared) else {
            missing()
        };
        let mut reservation = ClusterReservation(shared);
        let raised = protocol::raise_floor(&mut reservation, view, &mut relation, until_unix_us)
            .unwrap_or_else(|refused| refused.raise());
        if raised == Cover::Gone {
            missing();
        }
    }

    /// `snowflake_accept_floor`: the relation's value now, whoever wrote it.
    pub fn value_now(&mut self, catalog: &CatalogTable) -> i64 {
        let relations = self
            .located()
            .unwrap_or_else(|| errors::floor_relation_missing(&catalog.extension_schema()).raise());
        FloorRelations {
            owner: trusted_owner(relations.floor),
            ..relations
        }
        .current()
        .value
    }
}

/// One database's floor relations as the protocol (`snowflake_id_core::protocol`) sees them.
struct InDatabase<'a> {
    relations: &'a mut FloorRelations,
    /// Whether the writer relation names this cluster and timeline, as this backend last read or
    /// wrote it; None when its last read of the floor did not read it (see `read`).
    ours: &'a mut Option<bool>,
    shared: &'a SharedState,
}

impl FloorRelation for InDatabase<'_> {
    type Error = errors::Error;

    /// The floor relation's page LSN (see [`FloorRelations::floor_page_lsn`]).
    fn page(&mut self) -> Option<PageLsn> {
        self.relations.floor_page_lsn()
    }

    /// The value and whether this server's newest write set it, under the floor writes' lock
    /// (shared; writes hold it exclusively around their setval and slot), so that a write
    /// finishing in between is not taken for somebody else's. The writer relation is read only
    /// when it is not: what it says counts for nothing about a value this server set
    /// (`FloorView::read`), and a new connection's first ID then builds no relcache entry for
    /// it; a raise reads it if it must (`raise`).
    fn read(&mut self) -> (LoggedValue, Provenance) {
        // The owner may have changed since the lookup (REASSIGN OWNED, ALTER ROLE), which the
        // extension directory may have made in another session: checked at every read.
        self.relations.owner = trusted_owner(self.relations.floor);
        let relations = *self.relations;
        // The relation locks first, so that nothing waits for one while holding the LWLock.
        relations.lock_relations();
        let recent = &self.shared.floor_writes;
        let (current, set_by_this_server) = recent.shared(|| {
            let current = relations.current();
            (current, recent.before(&relations, current))
        });
        *self.ours = set_by_this_server
            .is_none()
            .then(|| relations.writer_names_this_cluster());
        let from = Provenance {
            set_by_this_server,
            // When unread, what it would say is ignored (this server set the value).
            writer_is_this_cluster: self.ours.unwrap_or(true),
            started_without_reservation: self.shared.started_without_reservation(),
        };
        (current, from)
    }

    fn reserved_until(&self) -> i64 {
        self.shared.reserved_until()
    }

    /// A value the extension did not write (a restore, pg_upgrade), where a role that is not a
    /// superuser may write the relation (the database's owner, a member of pg_write_all_data, a
    /// grant), moves the server's IDs at most the trusted lead ahead of the wall clock, which no
    /// write moves; beyond it the sessions of this database that read it issue no ID until a
    /// superuser accepts it or sets it back. Where only superusers can write it, it is theirs.
    fn learned(&mut self, floor: i64) -> Result<(), errors::Error> {
        let (wall, _) = system_clock::wall_and_monotonic_us();
        let policy = renewal_policy();
        if floor > self.shared.durable_floor()
            && policy.beyond_trusted_lead(floor, wall)
            && writable_by_a_non_superuser(self.relations.floor)
        {
            let name = catalog::relation_name(self.relations.floor);
            return Err(errors::floor_beyond_trust(
                &name,
                floor,
                wall,
                policy.trusted_lead(),
            ));
        }
        self.shared.raise_durable_floor(floor);
        Ok(())
    }

    /// Raises the relation with `setval` when its page is still at `read_at`. Writes are
    /// serialised, so the relation only rises through them. (A `setval` that is not the
    /// extension's, landing between the check and the write, a few microseconds, is written
    /// over: design §5.3.)
    fn raise(&mut self, value: i64, read_at: PageLsn) -> Option<LoggedValue> {
        let relations = *self.relations;
        relations.lock_relations();
        // Read before the LWLock, as `read` would have: its relcache entry may be built now.
        let ours = *self
            .ours
            .get_or_insert_with(|| relations.writer_names_this_cluster());
        let recent = &self.shared.floor_writes;
        recent.exclusive(|| {
            let current = relations.current();
            if relations.floor_page_lsn() != Some(read_at) || current.value >= value {
                return None;
            }
            if !ours {
                // The writer first: a value that is not ours stays covered by the floor it
                // raised.
                relations.set(relations.writer, this_cluster());
                *self.ours = Some(true);
            }
            relations.set(relations.floor, value);
            let written = LoggedValue {
                value,
                lsn: last_record_end(),
            };
            recent.remember(&relations, current, written);
            Some(written)
        })
    }

    fn flushed(&self) -> u64 {
        // SAFETY: reads the flushed WAL position from shared memory; no timeline is asked for.
        unsafe { pg_sys::GetFlushRecPtr(std::ptr::null_mut()) }
    }

    fn flush(&mut self, lsn: u64) {
        // SAFETY: flushing WAL up to a position already inserted, outside a critical section.
        unsafe { pg_sys::XLogFlush(lsn) };
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

/// The end of this backend's last WAL record (what `setval` just inserted): the LSN it left on
/// the sequence's page.
fn last_record_end() -> pg_sys::XLogRecPtr {
    // SAFETY: a plain read of this backend's own WAL position.
    unsafe { pg_sys::XactLastRecEnd }
}

/// The floor relation and the writer relation of one database, and their owner (kept in the
/// extension directory).
impl FloorRelations {
    /// The sequence's value (None before it was first set), as `pg_sequence_last_value`
    /// answers it (see [`read_sequence_page`]).
    fn value(&self, relation: pg_sys::Oid) -> Option<i64> {
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
    fn floor_page_lsn(&self) -> Option<PageLsn> {
        Self::page_lsn(self.floor)
    }

    /// The floor's value (i64::MIN before it was first set) and its page's LSN, read together,
    /// so the end of the record that wrote it (bounded by the insert position, for a page
    /// `pg_upgrade` brought from another cluster's WAL).
    fn current(&self) -> LoggedValue {
        let (value, lsn) = read_sequence_page(self.floor).unwrap_or((None, 0));
        LoggedValue {
            value: value.unwrap_or(i64::MIN),
            lsn: lsn.min(flushable_insert_position()),
        }
    }

    /// Whether the writer relation names this cluster and its timeline, read now (its owner
    /// checked first: 55000 for one that is not a superuser).
    fn writer_names_this_cluster(&self) -> bool {
        trusted_owner(self.writer);
        self.value(self.writer) == Some(this_cluster())
    }

    /// Takes the relation locks a read or write needs before the floor writes' LWLock, so that
    /// nothing waits for a relation lock while holding it (an LWLock wait cannot be cancelled).
    fn lock_relations(&self) {
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
    /// The value before `newest` of this database's floor relation, when `newest` is the latest
    /// write this server made there (and so is this server's). Under the lock, shared or
    /// exclusive.
    fn before(&self, relations: &FloorRelations, newest: LoggedValue) -> Option<LoggedValue> {
        let slot = self.slot_of(relations)?;
        let known = slot.newest_value.load(Ordering::Relaxed) == newest.value
            && slot.newest_lsn.load(Ordering::Relaxed) == newest.lsn;
        known.then(|| LoggedValue {
            value: slot.previous_value.load(Ordering::Relaxed),
            lsn: slot.previous_lsn.load(Ordering::Relaxed),
        })
    }

    /// Runs `f` holding the lock shared: no write of a floor relation by this server meanwhile.
    fn shared<T>(&self, f: impl FnOnce() -> T) -> T {
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_SHARED, f)
    }

    /// Notes, under the exclusive lock, that the relation went from `before` to `newest`.
    fn remember(&self, relations: &FloorRelations, before: LoggedValue, newest: LoggedValue) {
        let slot = self
            .slot_of(relations)
            .unwrap_or_else(|| self.slot_to_take(relations));
        slot.database
            .store(this_database().to_u32(), Ordering::Relaxed);
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

    /// The slots this database's relation may use: a few from its hash on.
    fn candidates(&self, relations: &FloorRelations) -> impl Iterator<Item = &FloorWriteSlot> {
        // A multiplicative hash: database and relation OIDs are small and close together.
        let key = (u64::from(this_database().to_u32()) << 32 | u64::from(relations.floor.to_u32()))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> 40;
        (0..FLOOR_PROBES).map(move |probe| &self.slots[(key as usize + probe) % FLOOR_WRITE_SLOTS])
    }

    /// The slot holding this relation's writes, if any.
    fn slot_of(&self, relations: &FloorRelations) -> Option<&FloorWriteSlot> {
        self.candidates(relations).find(|slot| {
            slot.database.load(Ordering::Relaxed) == this_database().to_u32()
                && slot.relation.load(Ordering::Relaxed) == relations.floor.to_u32()
        })
    }

    /// A slot for a relation that has none: an empty one, else the one written longest ago.
    fn slot_to_take(&self, relations: &FloorRelations) -> &FloorWriteSlot {
        self.candidates(relations)
            .min_by_key(|slot| match slot.database.load(Ordering::Relaxed) {
                0 => 0,
                _ => slot.newest_lsn.load(Ordering::Relaxed).max(1),
            })
            .unwrap_or(&self.slots[0])
    }
}

/// How many slots, from its hash on, a relation's writes may take.
const FLOOR_PROBES: usize = 8;

/// This cluster and its timeline, as the writer relation stores them
/// (`snowflake_id_core::floor::writer_identity`). Called only outside recovery: no ID is issued
/// and no floor written in it.
fn this_cluster() -> i64 {
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
fn flushable_insert_position() -> pg_sys::XLogRecPtr {
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

/// The floor and writer relations of the extension whose catalog table is `catalog`: from the
/// extension directory, else looked up (`locate`).
fn relations_of(catalog: &CatalogTable) -> Option<FloorRelations> {
    extension_directory::floor_relations(catalog, || locate(catalog.oid()))
}

/// The floor and writer relations next to the catalog table, and their owner: sequences that
/// are members of the catalog table's extension. A relation of that name that is not (one a
/// role created in a database whose extension predates the floor) is not the floor; a member
/// owned by a role that is not a superuser (moved by `REASSIGN OWNED`) is refused (55000), since
/// its owner could set any floor for the whole server.
fn locate(catalog: pg_sys::Oid) -> Option<FloorRelations> {
    let extension = Extension::installed()?;
    // The catalog table this backend read is still the extension's (not one of an extension
    // dropped and created again since).
    if !extension.registers(catalog) {
        return None;
    }
    let sequence = pg_sys::RELKIND_SEQUENCE;
    let floor = extension.member(RELATION_NAME, sequence)?;
    let writer = extension.member(WRITER_RELATION_NAME, sequence)?;
    trusted_owner(writer);
    Some(FloorRelations {
        floor,
        writer,
        owner: trusted_owner(floor),
    })
}

/// The owner of a floor relation, which must be a superuser (55000 otherwise): its owner can
/// set the floor, which counts for every database of the server.
fn trusted_owner(relation: pg_sys::Oid) -> pg_sys::Oid {
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
