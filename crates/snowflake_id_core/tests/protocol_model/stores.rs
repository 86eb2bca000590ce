//! The protocol's two stores in memory, over the model's cluster (`cluster.rs`), with the
//! faults that can be seeded into them.

use std::cell::{Cell, RefCell};

use snowflake_id_core::floor::{LoggedValue, PageLsn, Provenance};
use snowflake_id_core::protocol::{DurableReservation, FloorRelation};

use super::cluster::*;

/// A fault seeded into the in-memory store, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    None,
    /// The floor relation's WAL is never flushed before an ID leaves.
    DropFloorFlush,
    /// A raise writes over a change made since the read instead of reading it again.
    SkipReread,
    /// A floor from elsewhere is taken however far ahead of the wall clock it is.
    TrustBeyondBound,
    /// A session that started before the update created its database's floor relations never
    /// looks for them again (the glue looks before each tick while it has none).
    NoLookAfterUpdate,
    /// The reservation record's redo does nothing in archive recovery (a point-in-time
    /// recovery starts from its backup's reservation file alone).
    NoRedoInArchiveRecovery,
    /// The writer relation names the cluster's system identifier alone, not its timeline: a
    /// floor written on a timeline a point-in-time recovery left is taken for this server's.
    WriterWithoutTimeline,
    /// `snowflake_raise_floor` moves the server (its durable floor and the WAL's reservation)
    /// before the protocol's checks run.
    RaiseMovesServerFirst,
    /// `snowflake_raise_floor`'s reservation record reaches the WAL after the relation's record
    /// (b23014f put it before).
    RelationRecordFirst,
}

/// The cluster's reservation, in memory.
pub struct InMemoryReservation<'a> {
    pub state: &'a mut State,
    pub lock_free: bool,
}

impl DurableReservation for InMemoryReservation<'_> {
    type Error = ();

    fn reserved_until(&self) -> i64 {
        self.state.published
    }

    fn durable_floor(&self) -> i64 {
        self.state.durable_floor
    }

    fn now(&self) -> i64 {
        self.state.clock
    }

    fn writable(&self) -> Result<(), ()> {
        Ok(())
    }

    fn with_lock<T>(&mut self, wait: bool, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        (wait || self.lock_free).then(|| f(self))
    }

    fn write(&mut self, until: i64) -> Result<(), ()> {
        let lsn = self.state.insert(Record::Reserve(until));
        // A WAL flush flushes every record before it too.
        self.state.flush_to(lsn);
        self.state.file = until;
        self.state.published = until;
        Ok(())
    }

    fn raise_durable_floor(&mut self, floor: i64) {
        self.state.raise_durable_floor(floor);
    }

    fn log_durable_floor(&mut self, floor: i64) {
        let lsn = self.state.insert(Record::Reserve(floor));
        self.state.flush_to(lsn);
        self.state.raise_durable_floor(floor);
    }
}

/// A restore of another cluster's dump that lands between a session's read of the floor
/// relation and its write (the raise must read again).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct ForeignRestore {
    pub lead: i64,
}

/// A database's floor relation, in memory.
pub struct InMemoryRelation<'a> {
    pub state: &'a mut State,
    pub db: usize,
    pub bug: Bug,
    pub before_raise: Option<ForeignRestore>,
}

impl InMemoryRelation<'_> {
    /// What this server writes into the writer relation, and takes for its own there.
    fn identity(&self) -> u8 {
        match self.bug {
            Bug::WriterWithoutTimeline => identity(self.state.cluster, 1),
            _ => self.state.identity(),
        }
    }
}

impl FloorRelation for InMemoryRelation<'_> {
    type Error = ();

    fn page(&mut self) -> Option<PageLsn> {
        Some(self.state.relations(self.db).floor.lsn)
    }

    fn read(&mut self) -> (LoggedValue, Provenance) {
        let relations = self.state.relations(self.db);
        let from = Provenance {
            set_by_this_server: self.state.floor_writes[self.db]
                .filter(|(newest, _)| *newest == relations.floor)
                .map(|(_, before)| before),
            writer_is_this_cluster: relations.writer == self.identity(),
            started_without_reservation: self.state.started_without_file,
        };
        (relations.floor, from)
    }

    fn reserved_until(&self) -> i64 {
        self.state.published
    }

    fn learned(&mut self, floor: i64) -> Result<(), ()> {
        let beyond = policy().beyond_trusted_lead(floor, self.state.wall);
        if beyond && floor > self.state.durable_floor {
            if self.bug != Bug::TrustBeyondBound {
                return Err(());
            }
            self.state.fault.get_or_insert(Fault::LeadBeyondBound);
        }
        if floor > self.state.durable_floor {
            self.state.jumped_at = floor.max(self.state.clock);
        }
        self.state.raise_durable_floor(floor);
        Ok(())
    }

    fn raise(&mut self, value: i64, read_at: PageLsn) -> Option<LoggedValue> {
        if let Some(restore) = self.before_raise.take() {
            restore_foreign(self.state, self.db, restore.lead);
        }
        let relations = self.state.relations(self.db);
        let changed = relations.floor.lsn != read_at && self.bug != Bug::SkipReread;
        if changed || relations.floor.value >= value {
            return None;
        }
        if relations.writer != self.identity() {
            let cluster = self.identity();
            self.state.insert(Record::Writer {
                db: self.db,
                cluster,
            });
        }
        let lsn = self.state.insert(Record::Floor { db: self.db, value });
        let written = LoggedValue { value, lsn };
        self.state.floor_writes[self.db] = Some((written, relations.floor));
        Some(written)
    }

    fn flushed(&self) -> u64 {
        self.state.lsn_offset + self.state.flushed as u64
    }

    fn flush(&mut self, lsn: u64) {
        if self.bug != Bug::DropFloorFlush {
            self.state.flush_to(lsn);
        }
    }
}

/// `pg_restore` of another cluster's dump into database `db`: its floor `lead` ticks ahead of
/// the wall clock, its IDs below it, its writer relation naming the other cluster (set after
/// the floor, as `pg_restore` does).
pub fn restore_foreign(state: &mut State, db: usize, lead: i64) {
    let floor = state.wall + lead;
    // A tick t ends at t + 1, which the dumped floor holds; any worker id may have made them.
    state.restore(db, floor, OTHER_CLUSTER, [floor - 1; SESSIONS]);
}

/// Both stores over one state, for the steps that hold the reservation and the relation
/// together (`first_id_of_tick`, `raise_floor`): each call borrows the state for itself. With
/// [`Bug::RelationRecordFirst`], the reservation's WAL record waits in `pending_reservation`
/// until the relation's record is written.
pub struct SharedStores<'a> {
    pub state: RefCell<&'a mut State>,
    pub db: usize,
    pub bug: Bug,
    pub lock_free: bool,
    /// A restore of another cluster's dump that lands just before the relation's raise.
    pub before_raise: Cell<Option<ForeignRestore>>,
    pub pending_reservation: Cell<Option<i64>>,
}

impl<'a> SharedStores<'a> {
    pub fn new(state: &'a mut State, db: usize, bug: Bug, lock_free: bool) -> Self {
        SharedStores {
            state: RefCell::new(state),
            db,
            bug,
            lock_free,
            before_raise: Cell::new(None),
            pending_reservation: Cell::new(None),
        }
    }

    /// The reservation record held back by [`Bug::RelationRecordFirst`], written and flushed.
    pub fn write_pending_reservation(&self) {
        if let Some(floor) = self.pending_reservation.take() {
            let mut state = self.state.borrow_mut();
            let lsn = state.insert(Record::Reserve(floor));
            state.flush_to(lsn);
        }
    }

    fn reservation<T>(&self, f: impl FnOnce(&mut InMemoryReservation) -> T) -> T {
        f(&mut InMemoryReservation {
            state: &mut self.state.borrow_mut(),
            lock_free: self.lock_free,
        })
    }

    fn relation<T>(
        &self,
        before_raise: Option<ForeignRestore>,
        f: impl FnOnce(&mut InMemoryRelation) -> T,
    ) -> T {
        f(&mut InMemoryRelation {
            state: &mut self.state.borrow_mut(),
            db: self.db,
            bug: self.bug,
            before_raise,
        })
    }
}

/// The cluster's reservation, over [`SharedStores`].
pub struct SharedReservation<'s, 'a>(pub &'s SharedStores<'a>);

impl DurableReservation for SharedReservation<'_, '_> {
    type Error = ();

    fn reserved_until(&self) -> i64 {
        self.0
            .reservation(|reservation| reservation.reserved_until())
    }

    fn durable_floor(&self) -> i64 {
        self.0
            .reservation(|reservation| reservation.durable_floor())
    }

    fn now(&self) -> i64 {
        self.0.reservation(|reservation| reservation.now())
    }

    fn writable(&self) -> Result<(), ()> {
        Ok(())
    }

    fn with_lock<T>(&mut self, wait: bool, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        (wait || self.0.lock_free).then(|| f(self))
    }

    fn write(&mut self, until: i64) -> Result<(), ()> {
        self.0.reservation(|reservation| reservation.write(until))
    }

    fn raise_durable_floor(&mut self, floor: i64) {
        self.0
            .reservation(|reservation| reservation.raise_durable_floor(floor));
    }

    fn log_durable_floor(&mut self, floor: i64) {
        if self.0.bug == Bug::RelationRecordFirst {
            self.0.pending_reservation.set(Some(floor));
            self.raise_durable_floor(floor);
            return;
        }
        self.0
            .reservation(|reservation| reservation.log_durable_floor(floor));
    }
}

/// The database's floor relation, over [`SharedStores`].
pub struct SharedRelation<'s, 'a>(pub &'s SharedStores<'a>);

impl FloorRelation for SharedRelation<'_, '_> {
    type Error = ();

    fn page(&mut self) -> Option<PageLsn> {
        self.0.relation(None, |relation| relation.page())
    }

    fn read(&mut self) -> (LoggedValue, Provenance) {
        self.0.relation(None, |relation| relation.read())
    }

    fn reserved_until(&self) -> i64 {
        self.0.relation(None, |relation| relation.reserved_until())
    }

    fn learned(&mut self, floor: i64) -> Result<(), ()> {
        self.0.relation(None, |relation| relation.learned(floor))
    }

    fn raise(&mut self, value: i64, read_at: PageLsn) -> Option<LoggedValue> {
        let before_raise = self.0.before_raise.take();
        let written = self
            .0
            .relation(before_raise, |relation| relation.raise(value, read_at));
        self.0.write_pending_reservation();
        written
    }

    fn flushed(&self) -> u64 {
        self.0.relation(None, |relation| relation.flushed())
    }

    fn flush(&mut self, lsn: u64) {
        self.0.relation(None, |relation| relation.flush(lsn));
    }
}
