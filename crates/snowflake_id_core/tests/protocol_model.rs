//! An exhaustive model check of the protocol (docs/design.md §5): `snowflake_id_core::protocol`
//! run by stateright through every history of up to [`MAX_DEPTH`] events of a small cluster, its
//! reservation, WAL and floor relations in memory. The steps are the ones the extension runs
//! (`first_id_of_tick`, `cover`, `learn`, `renew_for_worker`, `raise_floor`, `accept_floor`,
//! `floor_after_promotion`, `file_takes_raised_floor`); what is modelled here is PostgreSQL around
//! them: the WAL and what a crash, a checkpoint or a lagging standby keeps of it, the reservation
//! file, `pg_dump` and `pg_restore`, `pg_upgrade`.
//!
//! The cluster: two sessions (worker ids 0 and 1, in databases 0 and 1), the reservation worker,
//! the WAL writer, and a wall clock that runs from 0 to [`HORIZON`] ticks, with a reservation
//! window of [`WINDOW`] ticks. Events, in any order: a tick of the wall clock; a session's first ID
//! of a tick (with the reservation lock free or taken, and with or without a restore of another
//! cluster's dump landing between its read of the floor relation and its write); the worker's
//! renewal (with or without a streaming standby); the WAL writer's flush; a crash, with the clock
//! set back; a clean restart; a failover to a standby that lags [`FAILOVER_LAG`] of the old
//! primary's time (promoted at least a tick after the failure); a point-in-time recovery of the
//! base backup taken at the latest checkpoint to any record of the archived WAL since, on a host
//! whose clock is behind (a new timeline; the IDs stored after the target left with their rows); a
//! dump of a database and its restore into a live database (a dump taken before a recovery too,
//! from the history it left); a restore of another cluster's dump whose floor is ahead (within the
//! trusted lead, or beyond it); a `pg_upgrade` into a new cluster whose clock is behind; and, from
//! a second initial state where database 1's extension predates the floor relations, the update
//! that creates them (that database is dumped or upgraded only after a tick issued there since, as
//! the reference's update steps say); and, in a third run, a superuser's `snowflake_raise_floor`
//! (once, as far ahead as its bound lets it) and `snowflake_accept_floor` of a floor its sessions
//! refuse. A streaming standby has replayed every reservation record a checkpoint took out of the
//! WAL, as its own file holds them. Crashes, restarts, failovers, recoveries and upgrades happen at
//! most [`MAX_FAULTS`] times per history, each restore once per database. Histories of up to
//! [`MAX_DEPTH`] events are explored without recoveries, and of up to [`MAX_DEPTH_WITH_RECOVERIES`]
//! with them (a recovery offers a target at every record), and of up to
//! [`MAX_DEPTH_WITH_FLOOR_CALLS`] with the floor calls too.
//!
//! Properties, in every state reached: no worker id issues a tick it issued before (so no ID twice,
//! across crashes, failover and upgrades; after a recovery, none it had issued before the target),
//! no database issues an ID at or below one restored into it, and no floor from elsewhere moves the
//! cluster more than the trusted lead ahead of the wall clock; a `snowflake_raise_floor` its checks
//! refuse moves nothing (neither the server nor the WAL), and no server that has the floor a raise
//! wrote refuses it (unless a restore or `pg_upgrade` brought the database a value since). Left
//! out, as design §8 says: a failover less than the lag after a forward jump of the old primary's
//! clock, and restores that lower a floor not yet carried on; let in, the checker finds them. Each
//! seeded bug of the in-memory store (one that drops the floor's flush, one that writes over a
//! change instead of reading it again, one that trusts a floor beyond the bound, a session that
//! never looks for relations an update created) is caught, and its history printed; so are a glue
//! that moves the server before `raise_floor`'s checks, one that writes the raise's relation record
//! before its reservation record (a recovery between the two refuses the raised floor), a recovery
//! whose reservation records are not replayed, and a writer relation that names the cluster without
//! its timeline (a dump from after a recovery's target then repeats IDs: what this check found,
//! `pgrx-tests/tests/pitr.rs`).

use snowflake_id_core::floor::LoggedValue;
use snowflake_id_core::protocol;
use stateright::{Model, Property};

#[path = "protocol_model/cluster.rs"]
mod cluster;
mod model_checking;
#[path = "protocol_model/steps.rs"]
mod steps;
#[path = "protocol_model/stores.rs"]
mod stores;

use cluster::*;
use model_checking::{assert_broken, assert_kept, explore};
use steps::promote;
use stores::*;

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
    /// Point-in-time recovery of the base backup taken at the latest checkpoint, replaying the
    /// archived WAL up to its first `target` records (any point the archive holds), on a host
    /// whose clock is behind; the IDs stored after the target are gone with their rows.
    Recover {
        target: usize,
    },
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
    /// `ALTER EXTENSION snowflake_id UPDATE` in a database whose extension predates the floor
    /// relations: it creates them.
    Update {
        db: usize,
    },
    /// `snowflake_raise_floor` in database `db`, to the furthest the bound lets it (the
    /// trusted lead ahead of the wall clock), once per history.
    Raise {
        db: usize,
    },
    /// `snowflake_accept_floor` in database `db`, where its floor relation holds a value its
    /// sessions refuse (a superuser's decision).
    Accept {
        db: usize,
    },
}

struct ProtocolModel {
    bug: Bug,
    /// Whether point-in-time recoveries are among the events.
    recoveries: bool,
    /// Whether `snowflake_raise_floor` and `snowflake_accept_floor` are among the events.
    floor_calls: bool,
    /// The one property to check, or None for all.
    checks: Option<&'static str>,
}

const ISSUED_TWICE: &str = "no worker id issues a tick twice";
const BELOW_RESTORED: &str = "no database issues an ID at or below one restored into it";
const BEYOND_BOUND: &str = "no floor from elsewhere moves the cluster beyond the trusted lead";
const RAISE_NEVER_REFUSED: &str =
    "no server that has the floor snowflake_raise_floor wrote refuses it";
const REFUSED_RAISE_MOVES_NOTHING: &str = "a refused snowflake_raise_floor moves nothing";

impl Model for ProtocolModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let created = Relations {
            floor: LoggedValue::NONE,
            writer: identity(1, 1),
        };
        let mut state = State {
            wall: 0,
            cluster: 1,
            timeline: 1,
            clock: 0,
            published: i64::MIN,
            durable_floor: i64::MIN,
            file: i64::MIN,
            backup_file: i64::MIN,
            checkpointed_reservation: i64::MIN,
            started_without_file: true,
            base: [created; DATABASES],
            wal: Vec::new(),
            flushed: 0,
            floor_writes: [None; DATABASES],
            sessions: [NEW_SESSION; SESSIONS],
            issued: [i64::MIN; SESSIONS],
            stored: NO_TICKS,
            held: [NO_TICKS; DATABASES],
            base_restored: [NO_TICKS; DATABASES],
            dump: None,
            restored_dump: false,
            faults: 0,
            fault: None,
            jumped_at: i64::MIN,
            lsn_offset: 0,
            lowered: [false; DATABASES],
            present: [true; DATABASES],
            unfloored: [false; DATABASES],
            brought: [false; DATABASES],
            raised: None,
        };
        state.start_server(0, i64::MIN, true);
        // Also a cluster whose second database's extension predates the floor relations.
        let mut older = state.clone();
        older.present[1] = false;
        older.unfloored[1] = true;
        vec![state, older]
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
                NO_TICKS
                    if state.present[db]
                        && state.may_restore(db, state.wall + 1, OTHER_CLUSTER) =>
                {
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
            if self.recoveries {
                for target in 0..=state.flushed {
                    actions.push(Action::Recover { target });
                }
            }
            let carried = !state.lowered.contains(&true) && !state.unfloored.contains(&true);
            if state.cluster == 1 && carried {
                actions.push(Action::Upgrade);
            }
        }
        for db in 0..DATABASES {
            if !state.present[db] {
                actions.push(Action::Update { db });
                continue;
            }
            // One restore per database.
            let restorable = state.restored(db) == NO_TICKS;
            match (state.dump, state.restored_dump) {
                (None, _) if !state.lowered[db] && !state.unfloored[db] => {
                    actions.push(Action::Dump { db })
                }
                (Some(dump), false)
                    if restorable && state.may_restore(db, dump.floor, dump.writer) =>
                {
                    actions.push(Action::Restore { db })
                }
                _ => {}
            }
            for lead in [1, policy().trusted_lead() + 1] {
                if restorable && state.may_restore(db, state.wall + lead, OTHER_CLUSTER) {
                    actions.push(Action::RestoreForeign { db, lead });
                }
            }
            if !self.floor_calls {
                continue;
            }
            // (One database is enough: the raise moves the whole server.)
            if state.raised.is_none() && db == 0 {
                actions.push(Action::Raise { db });
            }
            let floor = state.relations(db).floor.value;
            if floor > state.durable_floor && policy().beyond_trusted_lead(floor, state.wall) {
                actions.push(Action::Accept { db });
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
                state.keep_wal(state.flushed);
                state.faults += 1;
                let file = state.file;
                state.start_server((state.wall - CLOCK_BACK).max(0), file, true);
            }
            Action::CleanRestart => {
                state.faults += 1;
                // The shutdown checkpoint (nothing before it is replayed); the file gets the end
                // of the latest tick used (`write_floor_at_shutdown`).
                state.checkpoint();
                let used = state.sessions.iter().map(|session| session.next_tick).max();
                let kept =
                    protocol::floor_at_shutdown(used.unwrap_or(i64::MIN), state.durable_floor);
                let file = kept.unwrap_or(state.file);
                let wall = state.wall;
                state.start_server(wall, file, true);
                // A base backup taken after it copies that file.
                state.backup_file = state.file;
            }
            Action::Failover => {
                // The standby has the flushed WAL written at least the lag before now, and its
                // own file (the reservations it replayed); then the failover margin.
                // The promotion comes at least a tick after the failure.
                let wall = state.wall + 1;
                let received = state.wal[..state.flushed]
                    .iter()
                    .take_while(|logged| logged.at <= state.clock - FAILOVER_LAG)
                    .count();
                state.keep_wal(received);
                state.timeline += 1;
                state.faults += 1;
                // Which of the old primary's rows arrived is left open: its IDs count in
                // `issued` (no tick twice), and none here for a later `pg_upgrade` or dump.
                state.held = [NO_TICKS; DATABASES];
                // Its own file: the reservations it replayed before the latest checkpoint; it
                // replays those after it below. (It did not start without one.)
                let file = state.checkpointed_reservation;
                state.start_server(wall, file, true);
                state.started_without_file = false;
                promote(&mut state);
            }
            Action::Recover { target } => {
                // The archive up to the target: the IDs stored before it are promised, those
                // after it left with their rows (the old timeline's).
                state.keep_wal(target);
                let stored = state.stored;
                state.issued = stored;
                state.timeline += 1;
                for held in &mut state.held {
                    *held = std::array::from_fn(|worker| held[worker].min(stored[worker]));
                }
                state.faults += 1;
                let file = state.backup_file;
                state.checkpointed_reservation = file;
                let redo = self.bug != Bug::NoRedoInArchiveRecovery;
                state.start_server((state.wall - CLOCK_BACK).max(0), file, redo);
                promote(&mut state);
                // A target between a restore of an older dump (or an update) and the tick that
                // raised the floor again leaves the floor below the IDs held, as then.
                for db in 0..DATABASES {
                    state.lowered[db] |= !state.floor_covers_its_ids(db);
                }
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
            Action::Update { db } => {
                // The update commits (its WAL flushed, and, as the model keeps it, past every
                // standby and crash): the floor relation as `CREATE SEQUENCE` makes it, and the
                // writer relation naming no cluster.
                state.checkpoint();
                state.base[db] = Relations {
                    floor: LoggedValue::NONE,
                    writer: 0,
                };
                state.present[db] = true;
            }
            Action::Raise { db } => {
                let until = state.wall + policy().trusted_lead();
                state.raised = Some(until);
                self.raise_floor(&mut state, db, until);
            }
            Action::Accept { db } => {
                let floor = state.relations(db).floor.value;
                let mut reservation = InMemoryReservation {
                    state: &mut state,
                    lock_free: true,
                };
                protocol::accept_floor(&mut reservation, floor);
                state.jumped_at = state.clock;
                // The cluster now runs beyond the trusted lead: its own floors, after a recovery
                // to another timeline, lie beyond it too, as the value it accepted did.
                state.brought = [true; DATABASES];
            }
            Action::Upgrade => {
                // A clean shutdown, then the data files into a new cluster (new system
                // identifier, new WAL, no reservation file) on a host whose clock is behind.
                state.checkpoint();
                state.cluster = 2;
                state.checkpointed_reservation = i64::MIN;
                state.timeline = 1;
                // The new cluster holds the IDs of the data files; IDs the old one issued that
                // no database holds (their rows lost in a failover) are not promised to it.
                state.stored = std::array::from_fn(|worker| {
                    state
                        .held
                        .iter()
                        .map(|held| held[worker])
                        .max()
                        .unwrap_or(i64::MIN)
                });
                state.issued = state.stored;
                state.faults += 1;
                state.brought = [true; DATABASES];
                state.start_server((state.wall - CLOCK_BACK).max(0), i64::MIN, true);
                state.backup_file = state.file;
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
            Property::always(RAISE_NEVER_REFUSED, |_, state: &State| {
                state.fault != Some(Fault::RefusedOwnRaise)
            }),
            Property::always(REFUSED_RAISE_MOVES_NOTHING, |_, state: &State| {
                state.fault != Some(Fault::RefusedRaiseMoved)
            }),
        ];
        all.into_iter()
            .filter(|property| self.checks.is_none_or(|name| property.name == name))
            .collect()
    }
}

/// Runs the checker over every state reachable in `depth` events (point-in-time recoveries among
/// them if `recoveries`); returns the broken properties with their counterexamples.
fn check(
    bug: Bug,
    checks: Option<&'static str>,
    (recoveries, floor_calls): (bool, bool),
    depth: usize,
    threads: usize,
) -> Vec<(&'static str, String)> {
    let model = ProtocolModel {
        bug,
        recoveries,
        floor_calls,
        checks,
    };
    let label = format!("{bug:?}, recoveries {recoveries}, floor calls {floor_calls}");
    explore(model, depth, threads, &label)
}

/// Checks `bug` is caught by `property` (with point-in-time recoveries among the events if
/// `recoveries`, and the superuser's floor calls if `floor_calls`), printing the
/// counterexample.
fn assert_caught(bug: Bug, property: &'static str, recoveries: bool, floor_calls: bool) {
    let depth = match (recoveries, floor_calls) {
        (_, true) => MAX_DEPTH_WITH_FLOOR_CALLS,
        (true, false) => MAX_DEPTH_WITH_RECOVERIES,
        (false, false) => MAX_DEPTH,
    };
    // One thread: a depth-bounded search that skips states it has seen can miss a path that
    // reaches one of them at a smaller depth; with two threads which path comes first depends
    // on the machine's speed (a run beside other work once missed the seeded bug), with one it
    // is the same every run.
    let found = check(bug, Some(property), (recoveries, floor_calls), depth, 1);
    assert_broken(&found, property, &format!("{bug:?}"));
}

#[test]
fn the_protocol_keeps_its_promise_in_every_reachable_state() {
    assert_kept(check(Bug::None, None, (false, false), MAX_DEPTH, 2));
}

#[test]
fn the_protocol_keeps_its_promise_through_point_in_time_recovery_to_any_point() {
    assert_kept(check(
        Bug::None,
        None,
        (true, false),
        MAX_DEPTH_WITH_RECOVERIES,
        2,
    ));
}

#[test]
fn the_protocol_keeps_its_promise_through_raises_and_accepts() {
    assert_kept(check(
        Bug::None,
        None,
        (true, true),
        MAX_DEPTH_WITH_FLOOR_CALLS,
        2,
    ));
}

#[test]
fn a_store_that_drops_the_floors_flush_is_caught() {
    assert_caught(Bug::DropFloorFlush, ISSUED_TWICE, false, false);
}

#[test]
fn a_raise_that_writes_over_a_restore_instead_of_reading_again_is_caught() {
    assert_caught(Bug::SkipReread, BELOW_RESTORED, false, false);
}

#[test]
fn a_floor_trusted_beyond_the_bound_is_caught() {
    assert_caught(Bug::TrustBeyondBound, BEYOND_BOUND, false, false);
}

#[test]
fn a_recovery_that_does_not_replay_reservations_is_caught() {
    assert_caught(Bug::NoRedoInArchiveRecovery, ISSUED_TWICE, true, false);
}

#[test]
fn a_writer_relation_without_the_timeline_is_caught() {
    assert_caught(Bug::WriterWithoutTimeline, BELOW_RESTORED, true, false);
}

#[test]
fn a_session_that_never_looks_for_relations_an_update_created_is_caught() {
    assert_caught(Bug::NoLookAfterUpdate, ISSUED_TWICE, false, false);
}

#[test]
fn a_raise_that_moves_the_server_before_its_checks_is_caught() {
    assert_caught(
        Bug::RaiseMovesServerFirst,
        REFUSED_RAISE_MOVES_NOTHING,
        false,
        true,
    );
}

#[test]
fn a_raise_whose_relation_record_precedes_the_reservations_is_caught() {
    assert_caught(Bug::RelationRecordFirst, RAISE_NEVER_REFUSED, true, true);
}
