//! The steps the model runs through the protocol, as the extension runs them: a session's first
//! ID of a tick, `snowflake_raise_floor`, and a server's start after recovery.

use snowflake_id_core::protocol::{self, TickRefused, TickStep};

use super::cluster::*;
use super::stores::*;
use super::ProtocolModel;

impl ProtocolModel {
    pub fn first_id_of_tick(
        &self,
        state: &mut State,
        session: usize,
        lock_free: bool,
        before_raise: Option<ForeignRestore>,
    ) {
        let db = SESSION_DATABASE[session];
        let policy = policy();
        let mut view = state.sessions[session].view;
        let bug = self.bug;
        if !state.sessions[session].started {
            state.sessions[session].started_with_relations = state.present[db];
        }
        let present = state.present[db]
            && (bug != Bug::NoLookAfterUpdate || state.sessions[session].started_with_relations);
        if !state.sessions[session].started && present {
            // A new generator learns the relation first (`DatabaseFloor::learn`).
            let mut relation = InMemoryRelation {
                state,
                db,
                bug,
                before_raise: None,
            };
            if protocol::learn(&mut view, &mut relation).is_err() {
                state.sessions[session].view = view;
                state.refused(db);
                return;
            }
        }
        state.sessions[session].started = true;
        let tick = state.sessions[session].next_tick.max(state.clock);
        if tick > state.clock {
            // Waits for the clock (`snowflake_id.max_lead` = 0 here).
            state.sessions[session].view = view;
            return;
        }
        let end = tick + 1;
        let stores = SharedStores::new(state, db, bug, lock_free);
        stores.before_raise.set(before_raise);
        let mut relation = SharedRelation(&stores);
        // No relations yet: nothing to cover in the database (`DatabaseFloor::first_id_of_tick`).
        let floor = present.then_some((&mut view, &mut relation));
        let step = protocol::first_id_of_tick(&mut SharedReservation(&stores), &policy, end, floor);
        state.sessions[session].view = view;
        match step {
            Err(TickRefused::Floor(())) => {
                // The statement fails: no ID, until a superuser accepts the floor.
                state.refused(db);
            }
            Ok((TickStep::Issue, _)) => {
                if tick <= state.issued[session] {
                    state.fault.get_or_insert(Fault::IssuedTwice);
                }
                if tick <= state.restored(db)[session] {
                    state.fault.get_or_insert(Fault::BelowRestored);
                }
                state.issued[session] = state.issued[session].max(tick);
                state.stored[session] = state.stored[session].max(tick);
                state.held[db][session] = state.held[db][session].max(tick);
                state.lowered[db] = false;
                // The reference's step after an update: an ID issued there writes the floor.
                state.unfloored[db] &= !state.present[db];
                state.sessions[session].next_tick = tick + 1;
            }
            Ok((TickStep::SkipTo { floor }, _)) => state.sessions[session].next_tick = floor,
            Err(TickRefused::Reservation(())) => {}
        }
    }

    /// `snowflake_raise_floor(until)` in database `db`, run by its session's backend: the
    /// protocol's `raise_floor` (with [`Bug::RaiseMovesServerFirst`], the glue moves the server
    /// first). A call its checks refuse must leave the server and the WAL as they were.
    pub fn raise_floor(&self, state: &mut State, db: usize, until: i64) {
        let before = (state.durable_floor, state.clock, state.wal.clone());
        let mut view = state.sessions[db].view;
        let stores = SharedStores::new(state, db, self.bug, true);
        let mut reservation = SharedReservation(&stores);
        if self.bug == Bug::RaiseMovesServerFirst {
            protocol::accept_floor(&mut reservation, until);
        }
        let raised = protocol::raise_floor(
            &mut reservation,
            &mut view,
            &mut SharedRelation(&stores),
            until,
        );
        stores.write_pending_reservation();
        state.sessions[db].view = view;
        match raised {
            Err(())
                if (state.durable_floor, state.clock, &state.wal)
                    != (before.0, before.1, &before.2) =>
            {
                state.fault.get_or_insert(Fault::RefusedRaiseMoved);
            }
            Err(()) => {}
            Ok(_) => state.jumped_at = state.jumped_at.max(state.clock),
        }
    }
}

/// Before the first ID after leaving recovery (a promotion, a point-in-time recovery): the
/// durable floor the failover margin above the last reservation replayed.
pub fn promote(state: &mut State) {
    // (`snowflake_id.max_lead` = 0 here, and ticks are the coarsest.)
    let leads = protocol::PromotionLeads {
        failover_lag: FAILOVER_LAG,
        max_lead: 0,
        coarsest_tick: 1,
    };
    let floor = protocol::floor_after_promotion(&policy(), leads, state.durable_floor, state.clock);
    state.raise_durable_floor(floor);
    state.jumped_at = state.clock;
}
