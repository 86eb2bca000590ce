//! An exhaustive model check of the protocol (docs/design.md §5): `snowflake_id_core::protocol`
//! run by stateright through every history of up to [`MAX_DEPTH`] events of a small cluster, its
//! reservation, WAL and floor relations in memory. The steps are the ones the extension runs
//! (`first_id_of_tick`, `cover`, `learn`, `renew_for_worker`, `failover_margin`,
//! `floor_after_promotion`); what is modelled here is PostgreSQL around them: the WAL and what a
//! crash, a checkpoint or a lagging standby keeps of it, the reservation file, `pg_dump` and
//! `pg_restore`, `pg_upgrade`.
//!
//! The cluster: two sessions (worker ids 0 and 1, in databases 0 and 1), the reservation worker,
//! the WAL writer, and a wall clock that runs from 0 to [`HORIZON`] ticks, with a reservation
//! window of [`WINDOW`] ticks. Events, in any order: a tick of the wall clock; a session's first
//! ID of a tick (with the reservation lock free or taken, and with or without a restore of
//! another cluster's dump landing between its read of the floor relation and its write); the
//! worker's renewal (with or without a streaming standby); the WAL writer's flush; a crash, with
//! the clock set back; a clean restart; a failover to a standby that lags [`FAILOVER_LAG`] of the
//! old primary's time (promoted at least a tick after the failure); a dump of a database and its
//! restore into a live database; a restore of another cluster's dump whose floor is ahead
//! (within the trusted lead, or beyond it); and a `pg_upgrade` into a new cluster whose clock is
//! behind. Crashes, restarts, failovers and upgrades happen at most [`MAX_FAULTS`] times per
//! history, each restore once per database.
//!
//! Properties, in every state reached: no worker id issues a tick it issued before (so no ID
//! twice, across crashes, failover and upgrades), no database issues an ID at or below one
//! restored into it, and no floor from elsewhere moves the cluster more than the trusted lead
//! ahead of the wall clock. Left out, as design §8 says: a failover less than the lag after a
//! forward jump of the old primary's clock, and restores that lower a floor not yet carried on;
//! let in, the checker finds them. Each seeded bug of the in-memory store (one that drops the
//! floor's flush, one that writes over a change instead of reading it again, one that trusts a
//! floor beyond the bound) is caught, and its history printed.

use std::time::Instant;

use snowflake_id_core::floor::{FloorView, LoggedValue, PageLsn, Provenance};
use snowflake_id_core::protocol::{self, Cover, FloorRelation, Reservation, TickStep};
use snowflake_id_core::renewal::RenewalPolicy;
use stateright::{Checker, Model, Property};

/// `snowflake_id.reserve_ahead`, in ticks.
const WINDOW: i64 = 8;
/// How far beyond the window a floor from elsewhere is trusted (the extension's 60 s).
const TRUST_SLACK: i64 = 2;
/// `snowflake_id.failover_lag`, in ticks.
const FAILOVER_LAG: i64 = 2;
/// The wall clock runs from 0 to this.
const HORIZON: i64 = 3;
/// Events per history: every history of up to this many events is explored.
const MAX_DEPTH: usize = 11;
/// Crashes, failovers and upgrades per history.
const MAX_FAULTS: u8 = 2;
/// How far a crash or an upgrade sets the clock back.
const CLOCK_BACK: i64 = 3;
const DATABASES: usize = 2;
/// The database of each session (its index is its worker id).
const SESSION_DATABASE: [usize; 2] = [0, 1];
const SESSIONS: usize = SESSION_DATABASE.len();
/// The highest tick of some IDs, by worker id.
type Ticks = [i64; SESSIONS];
const NO_TICKS: Ticks = [i64::MIN; SESSIONS];

/// The higher of `a` and `b`, worker id by worker id.
fn highest(a: Ticks, b: Ticks) -> Ticks {
    std::array::from_fn(|worker| a[worker].max(b[worker]))
}

/// The system identifier of another cluster (a foreign dump's writer relation).
const OTHER_CLUSTER: u8 = 9;

fn policy() -> RenewalPolicy {
    RenewalPolicy::new(WINDOW)
}

/// A fault seeded into the in-memory store, to show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bug {
    None,
    /// The floor relation's WAL is never flushed before an ID leaves.
    DropFloorFlush,
    /// A raise writes over a change made since the read instead of reading it again.
    SkipReread,
    /// A floor from elsewhere is taken however far ahead of the wall clock it is.
    TrustBeyondBound,
}

/// A broken property, as the state that broke it records it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Fault {
    /// A worker id issued a tick it had issued before.
    IssuedTwice,
    /// A database issued an ID at or below one restored into it.
    BelowRestored,
    /// A floor from elsewhere moved the cluster beyond the trusted lead.
    LeadBeyondBound,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Record {
    /// The reservation WAL record: no ID's tick ends after this.
    Reserve(i64),
    /// A `setval` of a database's floor relation.
    Floor { db: usize, value: i64 },
    /// A `setval` of a database's writer relation (a cluster's system identifier).
    Writer { db: usize, cluster: u8 },
    /// Restored rows, their IDs' highest tick.
    Rows { db: usize, high: Ticks },
}

/// A database's floor and writer relations as the data files hold them below the WAL.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Relations {
    floor: LoggedValue,
    writer: u8,
}

/// A dump of a database: its floor and writer relations and the highest tick of its IDs.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Dump {
    floor: i64,
    writer: u8,
    ids: Ticks,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Session {
    /// A generator exists (`learn` ran) in this server's lifetime.
    started: bool,
    view: FloorView,
    /// The first tick the generator may take.
    next_tick: i64,
}

const NEW_SESSION: Session = Session {
    started: false,
    view: FloorView::NEW,
    next_tick: i64::MIN,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct State {
    wall: i64,
    /// The running cluster's system identifier (a `pg_upgrade` makes a new cluster).
    cluster: u8,
    clock: i64,
    published: i64,
    durable_floor: i64,
    file: i64,
    started_without_file: bool,
    /// The relations as the data files hold them, before the WAL below.
    base: [Relations; DATABASES],
    /// Each record with the cluster clock when it was written (a standby's lag is in the old
    /// primary's time).
    wal: Vec<(Record, i64)>,
    flushed: usize,
    /// This server's newest write of each database's floor relation, with the value before it.
    floor_writes: [Option<(LoggedValue, LoggedValue)>; DATABASES],
    sessions: [Session; SESSIONS],
    /// The highest tick each worker id issued, over every server's lifetime.
    issued: [i64; SESSIONS],
    /// The highest tick of the IDs this cluster issued that each database holds (restored ones:
    /// `restored`).
    held: [Ticks; DATABASES],
    /// The highest tick of the IDs restored into each database, below the WAL (`Record::Rows`).
    base_restored: [Ticks; DATABASES],
    /// The dump taken, and whether it was restored (one of each per history).
    dump: Option<Dump>,
    restored_dump: bool,
    faults: u8,
    fault: Option<Fault>,
    /// The cluster clock just after it last jumped.
    jumped_at: i64,
    /// The position of the WAL's first record, less one (positions never go back).
    lsn_offset: u64,
    /// A restore set the database's floor below the IDs it holds, and no tick was issued there
    /// since.
    lowered: [bool; DATABASES],
}

impl State {
    fn relations(&self, db: usize) -> Relations {
        let mut relations = self.base[db];
        for (lsn, (record, _)) in self.wal.iter().enumerate() {
            match *record {
                Record::Floor { db: of, value } if of == db => {
                    relations.floor = LoggedValue {
                        value,
                        lsn: self.lsn_offset + lsn as u64 + 1,
                    }
                }
                Record::Writer { db: of, cluster } if of == db => relations.writer = cluster,
                _ => {}
            }
        }
        relations
    }

    /// The highest tick of the IDs restored into `db` that the server holds.
    fn restored(&self, db: usize) -> Ticks {
        let in_wal = self.wal.iter().filter_map(|(record, _)| match *record {
            Record::Rows { db: of, high } if of == db => Some(high),
            _ => None,
        });
        in_wal.fold(self.base_restored[db], highest)
    }

    /// Whether a restore may set `db`'s floor to `floor`, written by `writer`. Not over a value
    /// this server has not learned yet (set by another restore, or carried by `pg_upgrade`) with
    /// a lower one, or with this cluster's own (which a first read takes as covered): that loses
    /// it (design §8).
    fn may_restore(&self, db: usize, floor: i64, writer: u8) -> bool {
        let current = self.relations(db).floor.value;
        current <= self.durable_floor || (floor >= current && writer != self.cluster)
    }

    /// Whether the cluster clock jumped forward less than the failover lag ago, in its own time
    /// (a start at the reservation after a crash, a floor from elsewhere, a promotion's margin):
    /// the failover margin assumes a reservation record at least every half window of the
    /// clock, which a jump skips (design §5.2, "Not covered").
    fn jumped_lately(&self) -> bool {
        self.jumped_at >= self.clock - FAILOVER_LAG
    }

    /// `pg_restore` into database `db`: the floor relation, then the writer relation, then rows
    /// whose IDs' highest tick is `ids`, committed (the WAL flushed).
    fn restore(&mut self, db: usize, floor: i64, writer: u8, ids: Ticks) {
        // A restore that sets the floor below the IDs the database holds (an older dump) leaves
        // it there until the next tick issued in it raises it again: a dump or `pg_upgrade` in
        // between carries the lower floor (design §8), which the model leaves out.
        let holds = highest(self.held[db], self.restored(db));
        let held = holds.iter().copied().max().unwrap_or(i64::MIN);
        self.lowered[db] |= held != i64::MIN && floor <= held;
        self.insert(Record::Floor { db, value: floor });
        self.insert(Record::Writer {
            db,
            cluster: writer,
        });
        self.insert(Record::Rows { db, high: ids });
        self.flushed = self.wal.len();
    }

    fn insert(&mut self, record: Record) -> u64 {
        self.wal.push((record, self.clock));
        self.lsn_offset + self.wal.len() as u64
    }

    /// A checkpoint that no replay goes behind: the WAL's records into the data files (the
    /// relations and rows below it). Positions stay monotonic.
    fn checkpoint(&mut self) {
        for db in 0..DATABASES {
            self.base_restored[db] = self.restored(db);
            self.base[db] = self.relations(db);
        }
        self.lsn_offset += self.wal.len() as u64;
        self.wal.clear();
        self.flushed = 0;
    }

    /// Marks the WAL flushed up to `lsn`.
    fn flush_to(&mut self, lsn: u64) {
        let records = lsn.saturating_sub(self.lsn_offset) as usize;
        self.flushed = self.flushed.max(records.min(self.wal.len()));
    }

    fn raise_durable_floor(&mut self, floor: i64) {
        if floor <= self.durable_floor {
            return;
        }
        self.durable_floor = floor;
        self.clock = self.clock.max(floor);
        if floor > self.published {
            self.file = self.file.max(floor);
        }
    }

    /// A new server lifetime on the data this state holds (the WAL already cut to what the new
    /// server has): the file, then the reservation records replayed, then the clock.
    fn start_server(&mut self, wall: i64, file: i64) {
        self.wall = wall;
        self.file = file;
        self.started_without_file = file == i64::MIN;
        self.published = i64::MIN;
        self.durable_floor = file;
        self.clock = wall.max(file);
        self.floor_writes = [None; DATABASES];
        self.sessions = [NEW_SESSION; SESSIONS];

        let replayed: Vec<i64> = self
            .wal
            .iter()
            .filter_map(|(record, _)| match record {
                Record::Reserve(until) => Some(*until),
                _ => None,
            })
            .collect();
        for until in replayed {
            self.raise_durable_floor(until);
        }
        // The clock starts at the reservation, ahead of the wall clock: a jump.
        self.jumped_at = self.clock;
    }
}

/// The cluster's reservation, in memory.
struct InMemoryReservation<'a> {
    state: &'a mut State,
    lock_free: bool,
}

impl Reservation for InMemoryReservation<'_> {
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
struct ForeignRestore {
    lead: i64,
}

/// A database's floor relation, in memory.
struct InMemoryRelation<'a> {
    state: &'a mut State,
    db: usize,
    bug: Bug,
    before_raise: Option<ForeignRestore>,
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
            writer_is_this_cluster: relations.writer == self.state.cluster,
            started_without_reservation: self.state.started_without_file,
        };
        (relations.floor, from)
    }

    fn reserved_until(&self) -> i64 {
        self.state.published
    }

    fn learned(&mut self, floor: i64) -> Result<(), ()> {
        let beyond = floor - self.state.wall > WINDOW + TRUST_SLACK;
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
        if relations.writer != self.state.cluster {
            let cluster = self.state.cluster;
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
fn restore_foreign(state: &mut State, db: usize, lead: i64) {
    let floor = state.wall + lead;
    // A tick t ends at t + 1, which the dumped floor holds; any worker id may have made them.
    state.restore(db, floor, OTHER_CLUSTER, [floor - 1; SESSIONS]);
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Action {
    WallTick,
    FirstIdOfTick {
        session: usize,
        lock_free: bool,
        before_raise: Option<ForeignRestore>,
    },
    Worker {
        standby: bool,
    },
    WalWriter,
    Crash,
    CleanRestart,
    Failover,
    Dump {
        db: usize,
    },
    Restore {
        db: usize,
    },
    RestoreForeign {
        db: usize,
        lead: i64,
    },
    Upgrade,
}

struct ProtocolModel {
    bug: Bug,
    /// The one property to check, or None for all.
    checks: Option<&'static str>,
}

const ISSUED_TWICE: &str = "no worker id issues a tick twice";
const BELOW_RESTORED: &str = "no database issues an ID at or below one restored into it";
const BEYOND_BOUND: &str = "no floor from elsewhere moves the cluster beyond the trusted lead";

impl ProtocolModel {
    fn first_id_of_tick(
        &self,
        state: &mut State,
        session: usize,
        lock_free: bool,
        mut before_raise: Option<ForeignRestore>,
    ) {
        let db = SESSION_DATABASE[session];
        let policy = policy();
        let mut view = state.sessions[session].view;
        let bug = self.bug;
        let mut refused = false;
        if !state.sessions[session].started {
            // A new generator learns the relation first (`DatabaseFloor::learn`).
            let mut relation = InMemoryRelation {
                state,
                db,
                bug,
                before_raise: None,
            };
            if protocol::learn(&mut view, &mut relation).is_err() {
                state.sessions[session].view = view;
                return;
            }
            state.sessions[session].started = true;
        }
        let tick = state.sessions[session].next_tick.max(state.clock);
        if tick > state.clock {
            // Waits for the clock (`snowflake_id.max_lead` = 0 here).
            state.sessions[session].view = view;
            return;
        }
        let end = tick + 1;
        let mut reservation = InMemoryReservation { state, lock_free };
        let step = protocol::first_id_of_tick(&mut reservation, &policy, end, |reservation| {
            let mut relation = InMemoryRelation {
                state: reservation.state,
                db,
                bug,
                before_raise: before_raise.take(),
            };
            protocol::cover(&mut view, &mut relation, end, &policy).unwrap_or_else(|()| {
                refused = true;
                Cover::FloorAtOrAbove
            })
        });
        state.sessions[session].view = view;
        if refused {
            // The statement fails: no ID, until a superuser accepts the floor.
            return;
        }
        match step {
            Ok(TickStep::Issue) => {
                if tick <= state.issued[session] {
                    state.fault.get_or_insert(Fault::IssuedTwice);
                }
                if tick <= state.restored(db)[session] {
                    state.fault.get_or_insert(Fault::BelowRestored);
                }
                state.issued[session] = state.issued[session].max(tick);
                state.held[db][session] = state.held[db][session].max(tick);
                state.lowered[db] = false;
                state.sessions[session].next_tick = tick + 1;
            }
            Ok(TickStep::SkipTo { floor }) => state.sessions[session].next_tick = floor,
            Err(()) => {}
        }
    }
}

impl Model for ProtocolModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let created = Relations {
            floor: LoggedValue::NONE,
            writer: 1,
        };
        let mut state = State {
            wall: 0,
            cluster: 1,
            clock: 0,
            published: i64::MIN,
            durable_floor: i64::MIN,
            file: i64::MIN,
            started_without_file: true,
            base: [created; DATABASES],
            wal: Vec::new(),
            flushed: 0,
            floor_writes: [None; DATABASES],
            sessions: [NEW_SESSION; SESSIONS],
            issued: [i64::MIN; SESSIONS],
            held: [NO_TICKS; DATABASES],
            base_restored: [NO_TICKS; DATABASES],
            dump: None,
            restored_dump: false,
            faults: 0,
            fault: None,
            jumped_at: i64::MIN,
            lsn_offset: 0,
            lowered: [false; DATABASES],
        };
        state.start_server(0, i64::MIN);
        vec![state]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.fault.is_some() {
            return;
        }
        if state.wall < HORIZON {
            actions.push(Action::WallTick);
        }
        for (session, &db) in SESSION_DATABASE.iter().enumerate() {
            // (A restore of another cluster's dump, once per database: before a raise, or below.)
            let restores = match state.restored(db) {
                NO_TICKS if state.may_restore(db, state.wall + 1, OTHER_CLUSTER) => {
                    &[None, Some(ForeignRestore { lead: 1 })][..]
                }
                _ => &[None][..],
            };
            for lock_free in [true, false] {
                for &before_raise in restores {
                    actions.push(Action::FirstIdOfTick {
                        session,
                        lock_free,
                        before_raise,
                    });
                }
            }
        }
        actions.push(Action::Worker { standby: false });
        actions.push(Action::Worker { standby: true });
        actions.push(Action::WalWriter);
        if state.faults < MAX_FAULTS {
            actions.push(Action::Crash);
            actions.push(Action::CleanRestart);
            // Not covered (design §8): a failover less than the lag after the clock jumped.
            if !state.jumped_lately() {
                actions.push(Action::Failover);
            }
            if state.cluster == 1 && !state.lowered.contains(&true) {
                actions.push(Action::Upgrade);
            }
        }
        for db in 0..DATABASES {
            // One restore per database.
            let restorable = state.restored(db) == NO_TICKS;
            match (state.dump, state.restored_dump) {
                (None, _) if !state.lowered[db] => actions.push(Action::Dump { db }),
                (Some(dump), false)
                    if restorable && state.may_restore(db, dump.floor, dump.writer) =>
                {
                    actions.push(Action::Restore { db })
                }
                _ => {}
            }
            for lead in [1, WINDOW + TRUST_SLACK + 1] {
                if restorable && state.may_restore(db, state.wall + lead, OTHER_CLUSTER) {
                    actions.push(Action::RestoreForeign { db, lead });
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::WallTick => {
                state.wall += 1;
                state.clock = state.clock.max(state.wall);
            }
            Action::FirstIdOfTick {
                session,
                lock_free,
                before_raise,
            } => self.first_id_of_tick(&mut state, session, lock_free, before_raise),
            Action::Worker { standby } => {
                let issued_high_water = state.issued.iter().max().map_or(0, |tick| tick + 1);
                let now = state.clock;
                let mut reservation = InMemoryReservation {
                    state: &mut state,
                    lock_free: true,
                };
                let _ = protocol::renew_for_worker(
                    &mut reservation,
                    &policy(),
                    issued_high_water,
                    now,
                    || standby,
                );
            }
            Action::WalWriter => state.flushed = state.wal.len(),
            Action::Crash => {
                // What was not flushed is lost; the clock comes back set back.
                state.wal.truncate(state.flushed);
                state.faults += 1;
                let file = state.file;
                state.start_server((state.wall - CLOCK_BACK).max(0), file);
            }
            Action::CleanRestart => {
                state.faults += 1;
                // The shutdown checkpoint (nothing before it is replayed); the file gets the end
                // of the latest tick used (`write_floor_at_shutdown`).
                state.checkpoint();
                let used = state.sessions.iter().map(|session| session.next_tick).max();
                let high_water = used.unwrap_or(i64::MIN).max(state.durable_floor);
                let file = if high_water > 0 {
                    high_water
                } else {
                    state.file
                };
                let wall = state.wall;
                state.start_server(wall, file);
            }
            Action::Failover => {
                // The standby has the flushed WAL written at least the lag before now, and its
                // own file (the reservations it replayed); then the failover margin.
                // The promotion comes at least a tick after the failure.
                let wall = state.wall + 1;
                let received = state.wal[..state.flushed]
                    .iter()
                    .take_while(|(_, written)| *written <= state.clock - FAILOVER_LAG)
                    .count();
                state.wal.truncate(received);
                state.flushed = received;
                state.faults += 1;
                // Which of the old primary's rows arrived is left open: its IDs count in
                // `issued` (no tick twice), and none here for a later `pg_upgrade` or dump.
                state.held = [NO_TICKS; DATABASES];
                state.start_server(wall, i64::MIN);
                // (Its file came with its base backup: it did not start without one.)
                state.started_without_file = false;
                // (`snowflake_id.max_lead` = 0 here, and ticks are the coarsest.)
                let margin = protocol::failover_margin(&policy(), FAILOVER_LAG, 0, 1);
                let floor =
                    protocol::floor_after_promotion(state.durable_floor, margin, state.clock, 1);
                state.raise_durable_floor(floor);
                state.jumped_at = state.clock;
            }
            Action::Dump { db } => {
                let relations = state.relations(db);
                state.dump = Some(Dump {
                    floor: relations.floor.value,
                    writer: relations.writer,
                    ids: highest(state.held[db], state.restored(db)),
                });
            }
            Action::Restore { db } => {
                let dump = state.dump?;
                state.restore(db, dump.floor, dump.writer, dump.ids);
                state.restored_dump = true;
            }
            Action::RestoreForeign { db, lead } => restore_foreign(&mut state, db, lead),
            Action::Upgrade => {
                // A clean shutdown, then the data files into a new cluster (new system
                // identifier, new WAL, no reservation file) on a host whose clock is behind.
                state.checkpoint();
                state.cluster = 2;
                // The new cluster holds the IDs of the data files; IDs the old one issued that
                // no database holds (their rows lost in a failover) are not promised to it.
                state.issued = std::array::from_fn(|worker| {
                    state
                        .held
                        .iter()
                        .map(|held| held[worker])
                        .max()
                        .unwrap_or(i64::MIN)
                });
                state.faults += 1;
                state.start_server((state.wall - CLOCK_BACK).max(0), i64::MIN);
            }
        }
        Some(state)
    }

    /// Every property; a seeded bug's run checks only the one it must break, so that it ends
    /// at its first counterexample.
    fn properties(&self) -> Vec<Property<Self>> {
        let all = vec![
            Property::always(ISSUED_TWICE, |_, state: &State| {
                state.fault != Some(Fault::IssuedTwice)
            }),
            Property::always(BELOW_RESTORED, |_, state: &State| {
                state.fault != Some(Fault::BelowRestored)
            }),
            Property::always(BEYOND_BOUND, |_, state: &State| {
                state.fault != Some(Fault::LeadBeyondBound)
            }),
        ];
        all.into_iter()
            .filter(|property| self.checks.is_none_or(|name| property.name == name))
            .collect()
    }
}

/// Runs the checker over every reachable state; returns the broken properties with their
/// counterexamples.
fn check(bug: Bug, checks: Option<&'static str>) -> Vec<(&'static str, String)> {
    let started = Instant::now();
    let checker = ProtocolModel { bug, checks }
        .checker()
        .threads(2)
        .target_max_depth(MAX_DEPTH)
        .spawn_dfs()
        .join();
    println!(
        "{bug:?}: {} states ({} unique), depth {}, in {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed().as_secs_f64()
    );
    checker
        .discoveries()
        .into_iter()
        .map(|(name, path)| {
            let steps: Vec<String> = path
                .into_actions()
                .iter()
                .map(|action| format!("{action:?}"))
                .collect();
            (name, steps.join("\n  "))
        })
        .collect()
}

/// Checks `bug` is caught by `property`, printing the counterexample.
fn assert_caught(bug: Bug, property: &'static str) {
    let found = check(bug, Some(property));
    let (name, path) = found
        .iter()
        .find(|(name, _)| *name == property)
        .unwrap_or_else(|| panic!("{bug:?} not caught by \"{property}\"; found {found:?}"));
    println!("{bug:?} breaks \"{name}\":\n  {path}");
}

#[test]
fn the_protocol_keeps_its_promise_in_every_reachable_state() {
    let found = check(Bug::None, None);
    for (name, path) in &found {
        println!("\"{name}\" broken:\n  {path}");
    }
    assert!(found.is_empty(), "{} properties broken", found.len());
}

#[test]
fn a_store_that_drops_the_floors_flush_is_caught() {
    assert_caught(Bug::DropFloorFlush, ISSUED_TWICE);
}

#[test]
fn a_raise_that_writes_over_a_restore_instead_of_reading_again_is_caught() {
    assert_caught(Bug::SkipReread, BELOW_RESTORED);
}

#[test]
fn a_floor_trusted_beyond_the_bound_is_caught() {
    assert_caught(Bug::TrustBeyondBound, BEYOND_BOUND);
}
