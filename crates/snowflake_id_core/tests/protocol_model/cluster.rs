//! The cluster the model runs: its constants, and what PostgreSQL keeps around the protocol
//! (the WAL and what a crash, a checkpoint or a lagging standby keeps of it, the reservation file,
//! the relations and rows of each database, dumps).

use snowflake_id_core::floor::{FloorView, LoggedValue};
use snowflake_id_core::protocol;
use snowflake_id_core::renewal::RenewalPolicy;

/// `snowflake_id.reserve_ahead`, in ticks.
pub const WINDOW: i64 = 8;
/// How far beyond the window a floor from elsewhere is trusted (the extension's 60 s).
pub const TRUST_SLACK: i64 = 2;
/// `snowflake_id.idle_renewal`, in ticks: how far beyond the reservation sessions write their
/// database's floor relation (the floor lead). The worker renews for at least a window after
/// the last ID, longer than the horizon, whatever this is.
pub const IDLE_RENEWAL: i64 = 4;
/// `snowflake_id.failover_lag`, in ticks.
pub const FAILOVER_LAG: i64 = 2;
/// The wall clock runs from 0 to this.
pub const HORIZON: i64 = 3;
/// Events per history: every history of up to this many events is explored.
pub const MAX_DEPTH: usize = 10;
/// Events per history when point-in-time recoveries are among them (each offers a target at
/// every record of the WAL, which multiplies the histories).
pub const MAX_DEPTH_WITH_RECOVERIES: usize = 9;
/// Events per history when `snowflake_raise_floor` and `snowflake_accept_floor` are among them,
/// with recoveries.
pub const MAX_DEPTH_WITH_FLOOR_CALLS: usize = 8;
/// Crashes, clean restarts, failovers, recoveries and upgrades per history.
pub const MAX_FAULTS: u8 = 2;
/// How far a crash or an upgrade sets the clock back.
pub const CLOCK_BACK: i64 = 3;
pub const DATABASES: usize = 2;
/// The database of each session (its index is its worker id).
pub const SESSION_DATABASE: [usize; 2] = [0, 1];
pub const SESSIONS: usize = SESSION_DATABASE.len();
/// The highest tick of some IDs, by worker id.
pub type Ticks = [i64; SESSIONS];
pub const NO_TICKS: Ticks = [i64::MIN; SESSIONS];

/// The higher of `a` and `b`, worker id by worker id.
pub fn highest(a: Ticks, b: Ticks) -> Ticks {
    std::array::from_fn(|worker| a[worker].max(b[worker]))
}

/// The identity of another cluster (a foreign dump's writer relation).
pub const OTHER_CLUSTER: u8 = identity(9, 1);

/// What the writer relation holds for a cluster's system identifier and timeline.
pub const fn identity(cluster: u8, timeline: u8) -> u8 {
    // (Timelines stay below 16: at most MAX_FAULTS promotions and recoveries per history.)
    cluster * 16 + timeline
}

pub fn policy() -> RenewalPolicy {
    RenewalPolicy::new(WINDOW)
        .with_trust_slack(TRUST_SLACK)
        .renewing_while_idle_for(IDLE_RENEWAL)
}

/// A broken property, as the state that broke it records it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Fault {
    /// A worker id issued a tick it had issued before.
    IssuedTwice,
    /// A database issued an ID at or below one restored into it.
    BelowRestored,
    /// A floor from elsewhere moved the cluster beyond the trusted lead.
    LeadBeyondBound,
    /// A session was refused the floor `snowflake_raise_floor` wrote, with no restore or
    /// `pg_upgrade` in between (after a promotion or a recovery that has the relation's record).
    RefusedOwnRaise,
    /// A `snowflake_raise_floor` refused by its checks moved the server or wrote the WAL.
    RefusedRaiseMoved,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Record {
    /// The reservation WAL record: no ID's tick ends after this.
    Reserve(i64),
    /// A `setval` of a database's floor relation.
    Floor { db: usize, value: i64 },
    /// A `setval` of a database's writer relation (a cluster's identity: [`identity`]).
    Writer { db: usize, cluster: u8 },
    /// Restored rows, their IDs' highest tick.
    Rows { db: usize, high: Ticks },
}

/// A record in the WAL.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Logged {
    pub record: Record,
    /// The cluster clock when it was written (a standby's lag is in the old primary's time).
    pub at: i64,
    /// The highest tick of each worker id's IDs stored when it was written ([`State::stored`]):
    /// the IDs a recovery that stops just before it must stay above.
    pub stored_before: Ticks,
}

/// A database's floor and writer relations as the data files hold them below the WAL.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Relations {
    pub floor: LoggedValue,
    pub writer: u8,
}

/// A dump of a database: its floor and writer relations and the highest tick of its IDs.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Dump {
    pub floor: i64,
    pub writer: u8,
    pub ids: Ticks,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Session {
    /// A generator exists (`learn` ran) in this server's lifetime.
    pub started: bool,
    pub view: FloorView,
    /// The first tick the generator may take.
    pub next_tick: i64,
    /// Its database had the floor relations when the generator started.
    pub started_with_relations: bool,
}

pub const NEW_SESSION: Session = Session {
    started: false,
    view: FloorView::NEW,
    next_tick: i64::MIN,
    started_with_relations: false,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct State {
    pub wall: i64,
    /// The running cluster's system identifier (a `pg_upgrade` makes a new cluster).
    pub cluster: u8,
    /// Its timeline: a promotion or a point-in-time recovery starts a new one.
    pub timeline: u8,
    pub clock: i64,
    pub published: i64,
    pub durable_floor: i64,
    pub file: i64,
    /// What the reservation file of a base backup taken at the latest checkpoint holds (the
    /// backup a point-in-time recovery starts from, its archive being the WAL since).
    pub backup_file: i64,
    /// The highest reservation record a checkpoint took out of the WAL: a streaming standby
    /// replayed it before (a checkpoint is past every standby here), and its redo wrote it into
    /// the standby's own reservation file.
    pub checkpointed_reservation: i64,
    pub started_without_file: bool,
    /// The relations as the data files hold them, before the WAL below.
    pub base: [Relations; DATABASES],
    pub wal: Vec<Logged>,
    pub flushed: usize,
    /// This server's newest write of each database's floor relation, with the value before it.
    pub floor_writes: [Option<(LoggedValue, LoggedValue)>; DATABASES],
    pub sessions: [Session; SESSIONS],
    /// The highest tick each worker id issued, over every server's lifetime.
    pub issued: [i64; SESSIONS],
    /// The highest tick of each worker id's IDs this timeline's WAL holds (their rows taken as
    /// logged as they are issued): those a point-in-time recovery to now must stay above. A
    /// crash or a failover loses those issued after the first record it loses.
    pub stored: Ticks,
    /// The highest tick of the IDs this cluster issued that each database holds (restored ones:
    /// `restored`).
    pub held: [Ticks; DATABASES],
    /// The highest tick of the IDs restored into each database, below the WAL (`Record::Rows`).
    pub base_restored: [Ticks; DATABASES],
    /// The dump taken, and whether it was restored (one of each per history).
    pub dump: Option<Dump>,
    pub restored_dump: bool,
    pub faults: u8,
    pub fault: Option<Fault>,
    /// The cluster clock just after it last jumped.
    pub jumped_at: i64,
    /// The position of the WAL's first record, less one (positions never go back).
    pub lsn_offset: u64,
    /// A restore set the database's floor below the IDs it holds, and no tick was issued there
    /// since.
    pub lowered: [bool; DATABASES],
    /// The database has its floor relations: its extension is at 0.9.0 or later (0.4.0 had
    /// none, and 0.5.0 to 0.8.0 a floor relation without the writer relation, which the
    /// library takes for none) until `ALTER EXTENSION … UPDATE` creates them.
    pub present: [bool; DATABASES],
    /// The database's floor does not cover its IDs yet: it had no relations, and no tick was
    /// issued there since the update created them (a dump or `pg_upgrade` then carries no
    /// floor, which the reference says to avoid by issuing an ID first, design §8).
    pub unfloored: [bool; DATABASES],
    /// A restore or `pg_upgrade` brought the database's floor relation a value from elsewhere
    /// (another cluster, or this one on another timeline), which may lie beyond the trusted
    /// lead.
    pub brought: [bool; DATABASES],
    /// The floor `snowflake_raise_floor` wrote (once per history).
    pub raised: Option<i64>,
}

impl State {
    /// What this cluster writes into the writer relation.
    pub fn identity(&self) -> u8 {
        identity(self.cluster, self.timeline)
    }

    /// The WAL cut to its first `kept` records (a crash, a lagging standby, a recovery
    /// target): the IDs stored after the first record lost are lost with their rows.
    pub fn keep_wal(&mut self, kept: usize) {
        if let Some(lost) = self.wal.get(kept) {
            self.stored = lost.stored_before;
        }
        self.wal.truncate(kept);
        self.flushed = self.flushed.min(kept);
    }

    pub fn relations(&self, db: usize) -> Relations {
        let mut relations = self.base[db];
        for (lsn, logged) in self.wal.iter().enumerate() {
            match logged.record {
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
    pub fn restored(&self, db: usize) -> Ticks {
        let in_wal = self.wal.iter().filter_map(|logged| match logged.record {
            Record::Rows { db: of, high } if of == db => Some(high),
            _ => None,
        });
        in_wal.fold(self.base_restored[db], highest)
    }

    /// Whether a restore may set `db`'s floor to `floor`, written by `writer`. Not over a value
    /// this server has not learned yet (set by another restore, or carried by `pg_upgrade`) with
    /// a lower one, or with this cluster's own (which a first read takes as covered): that loses
    /// it (design §8).
    pub fn may_restore(&self, db: usize, floor: i64, writer: u8) -> bool {
        let current = self.relations(db).floor.value;
        current <= self.durable_floor || (floor >= current && writer != self.identity())
    }

    /// Whether the cluster clock jumped forward less than the failover lag ago, in its own time
    /// (a start at the reservation after a crash, a floor from elsewhere, a promotion's margin):
    /// the failover margin assumes a reservation record at least every half window of the
    /// clock, which a jump skips (design §5.2, "Not covered").
    pub fn jumped_lately(&self) -> bool {
        self.jumped_at >= self.clock - FAILOVER_LAG
    }

    /// `pg_restore` into database `db`: the floor relation, then the writer relation, then rows
    /// whose IDs' highest tick is `ids`, committed (the WAL flushed).
    pub fn restore(&mut self, db: usize, floor: i64, writer: u8, ids: Ticks) {
        // A restore that sets the floor below the IDs the database holds (an older dump) leaves
        // it there until the next tick issued in it raises it again: a dump or `pg_upgrade` in
        // between carries the lower floor (design §8), which the model leaves out.
        let held = self.highest_held(db);
        self.lowered[db] |= held != i64::MIN && floor <= held;
        self.brought[db] = true;
        self.insert(Record::Floor { db, value: floor });
        self.insert(Record::Writer {
            db,
            cluster: writer,
        });
        self.insert(Record::Rows { db, high: ids });
        self.flushed = self.wal.len();
    }

    pub fn insert(&mut self, record: Record) -> u64 {
        self.wal.push(Logged {
            record,
            at: self.clock,
            stored_before: self.stored,
        });
        self.lsn_offset + self.wal.len() as u64
    }

    /// A checkpoint that no replay goes behind: the WAL's records into the data files (the
    /// relations and rows below it). Positions stay monotonic.
    pub fn checkpoint(&mut self) {
        for logged in &self.wal {
            if let Record::Reserve(until) = logged.record {
                self.checkpointed_reservation = self.checkpointed_reservation.max(until);
            }
        }
        for db in 0..DATABASES {
            self.base_restored[db] = self.restored(db);
            self.base[db] = self.relations(db);
        }
        self.lsn_offset += self.wal.len() as u64;
        self.wal.clear();
        self.flushed = 0;
        self.backup_file = self.file;
    }

    /// Whether `db`'s floor relation is above every ID the database holds (a dump or
    /// `pg_upgrade` of it carries a floor that covers them).
    pub fn floor_covers_its_ids(&self, db: usize) -> bool {
        let held = self.highest_held(db);
        held == i64::MIN || self.relations(db).floor.value > held
    }

    /// The highest tick of the IDs `db` holds, of this cluster and restored (i64::MIN if none).
    fn highest_held(&self, db: usize) -> i64 {
        let holds = highest(self.held[db], self.restored(db));
        holds.iter().copied().max().unwrap_or(i64::MIN)
    }

    /// Marks the WAL flushed up to `lsn`.
    pub fn flush_to(&mut self, lsn: u64) {
        let records = lsn.saturating_sub(self.lsn_offset) as usize;
        self.flushed = self.flushed.max(records.min(self.wal.len()));
    }

    pub fn raise_durable_floor(&mut self, floor: i64) {
        if floor <= self.durable_floor {
            return;
        }
        self.durable_floor = floor;
        self.clock = self.clock.max(floor);
        if protocol::file_takes_raised_floor(floor, self.published) {
            self.file = self.file.max(floor);
        }
    }

    /// A session of database `db` refused its floor relation's value: a broken property when
    /// that is the floor this cluster's `snowflake_raise_floor` wrote and nothing brought the
    /// database a value since.
    pub fn refused(&mut self, db: usize) {
        if !self.brought[db] && self.raised == Some(self.relations(db).floor.value) {
            self.fault.get_or_insert(Fault::RefusedOwnRaise);
        }
    }

    /// A new server lifetime on the data this state holds (the WAL already cut to what the new
    /// server has): the file, then the reservation records replayed (unless `redo` is false, a
    /// seeded bug), then the clock.
    pub fn start_server(&mut self, wall: i64, file: i64, redo: bool) {
        let start = protocol::start(Ok((file != i64::MIN).then_some(file)));
        self.wall = wall;
        self.file = file;
        self.started_without_file = start.without_reservation;
        self.published = i64::MIN;
        self.durable_floor = start.durable_floor;
        self.clock = wall.max(start.durable_floor);
        self.floor_writes = [None; DATABASES];
        self.sessions = [NEW_SESSION; SESSIONS];

        let replayed: Vec<i64> = self
            .wal
            .iter()
            .filter_map(|logged| match logged.record {
                Record::Reserve(until) => Some(until),
                _ => None,
            })
            .collect();
        for until in replayed.into_iter().filter(|_| redo) {
            self.raise_durable_floor(until);
        }
        // The clock starts at the reservation, ahead of the wall clock: a jump.
        self.jumped_at = self.clock;
    }
}
