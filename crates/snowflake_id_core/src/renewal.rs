//! When the durable reservation is renewed, by whom, and to where (docs/design.md §5.1, §5.2).
//!
//! The reservation R is a time no issued ID's tick ends after. It is renewed a whole
//! `reserve_ahead` window W beyond the IDs, at three marks of what is left of the window beyond
//! the end of the tick about to be used:
//! - below ⅞ W the reservation worker renews it, so under steady load no session pays for the
//!   WAL flush and fsyncs of a renewal, and a renewal has three eighths of a window (375 ms by
//!   default) to finish before any session would wait for it;
//! - below ¾ W (the worker is late by two of its periods) a session renews it if it can take
//!   the lock without waiting; the others go on under the current reservation;
//! - below ½ W a session waits for the renewal.
//!
//! So R stays at least half a window ahead of every issued tick: the latest record a standby
//! has always covers half a window beyond the IDs issued, which is what covers asynchronous
//! replication lag (§5.2). The glue (`src/reservation.rs`) does the writing; this module only
//! decides.

/// The renewal marks of one `reserve_ahead` window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenewalPolicy {
    reserve_ahead_us: i64,
}

/// What a session does before the first ID of a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionRenewal {
    /// The reservation covers the tick by the session mark or more: nothing to do.
    Covered,
    /// Renew if the lock is free (to `enough` left), else go on under the current reservation,
    /// which still covers the tick by the waiting mark.
    TryRenew { enough: i64 },
    /// Wait for the lock and renew (to `enough` left) before the ID leaves.
    WaitAndRenew { enough: i64 },
}

impl RenewalPolicy {
    /// The policy of a `reserve_ahead` window (clamped to 0..=i64::MAX / 8, far beyond the
    /// setting's range, so the marks' arithmetic cannot overflow).
    pub fn new(reserve_ahead_us: i64) -> Self {
        RenewalPolicy {
            reserve_ahead_us: reserve_ahead_us.clamp(0, i64::MAX / 8),
        }
    }

    /// Below this much left the reservation worker renews: seven eighths of a window. (Each
    /// renewal extends the reservation by about an eighth: eight renewals per window under
    /// load, for three eighths of a window between this mark and the waiting mark, which a
    /// renewal delayed by a slow fsync or a busy CPU must not outlast.)
    pub fn worker_mark(&self) -> i64 {
        self.reserve_ahead_us - self.reserve_ahead_us / 8
    }

    /// Below this much left a session renews without waiting: three quarters, an eighth of a
    /// window (the worker's two periods) after the worker's mark.
    pub fn session_mark(&self) -> i64 {
        self.reserve_ahead_us - self.reserve_ahead_us / 4
    }

    /// Below this much left a session waits for the renewal: half a window.
    pub fn wait_mark(&self) -> i64 {
        self.reserve_ahead_us / 2
    }

    /// What a session does before the first ID of a tick ending at `end_unix_us`, with the
    /// reservation at `reserved_until` (i64::MIN before the first).
    pub fn for_session(&self, reserved_until: i64, end_unix_us: i64) -> SessionRenewal {
        let left = reserved_until.saturating_sub(end_unix_us);
        if left >= self.session_mark() {
            SessionRenewal::Covered
        } else if left >= self.wait_mark() {
            SessionRenewal::TryRenew {
                enough: self.session_mark(),
            }
        } else {
            SessionRenewal::WaitAndRenew {
                enough: self.wait_mark(),
            }
        }
    }

    /// The reservation worker's turn: the horizon to renew beyond (the latest tick issued, or
    /// the clock if later), or None when there is nothing to do: the reservation reaches the
    /// worker's mark beyond it, or no ID was issued within the last window and no standby
    /// streams (an idle server writes nothing).
    pub fn for_worker(
        &self,
        reserved_until: i64,
        issued_high_water: i64,
        now_unix_us: i64,
        standby_streaming: impl FnOnce() -> bool,
    ) -> Option<i64> {
        let idle = issued_high_water < now_unix_us.saturating_sub(self.reserve_ahead_us);
        if idle && !standby_streaming() {
            return None;
        }
        let horizon = issued_high_water.max(now_unix_us);
        self.needs_renewal(reserved_until, horizon, self.worker_mark())
            .then_some(horizon)
    }

    /// Under the lock, just before writing: whether the reservation still reaches less than
    /// `enough` beyond `end_unix_us` (another process may have renewed it meanwhile).
    pub fn needs_renewal(&self, reserved_until: i64, end_unix_us: i64, enough: i64) -> bool {
        reserved_until.saturating_sub(end_unix_us) < enough
    }

    /// The renewed reservation: a whole window beyond the tick's end, the clock and the durable
    /// floor, so the reservation never goes below what was issued or learned from outside.
    pub fn renewed_until(&self, end_unix_us: i64, now_unix_us: i64, floor_unix_us: i64) -> i64 {
        end_unix_us
            .max(now_unix_us)
            .max(floor_unix_us)
            .saturating_add(self.reserve_ahead_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::{FloorCheck, FloorView, LoggedValue, PageLsn, Provenance};
    use proptest::prelude::*;

    /// A renewal as the glue does it: under the lock, renewed only if still needed.
    fn renew(
        policy: &RenewalPolicy,
        until: i64,
        end: i64,
        enough: i64,
        now: i64,
        floor: i64,
    ) -> i64 {
        if policy.needs_renewal(until, end, enough) {
            policy.renewed_until(end, now, floor)
        } else {
            until
        }
    }

    /// One step of the simulated server: the reservation worker runs, or a session issues the
    /// first ID of a tick (whose end is up to `lead` past the clock), with the lock free or held.
    #[derive(Clone, Debug)]
    enum Event {
        Advance(i64),
        Worker { standby: bool },
        Session { lead: i64, lock_free: bool },
    }

    /// A step of the simulated database beside the reservation (design §5.3): one of three
    /// sessions issues the first ID of a tick, the WAL writer flushes, a restore sets the floor
    /// relation to another cluster's value (higher or lower) and the writer relation, in either
    /// order, as `pg_restore` does, or a `setval` sets the writer relation alone to another
    /// cluster (its page moves, and no session looks at it before its next tick). (Setting it to
    /// this cluster after a restore forges where the floor came from: a session's first read
    /// trusts it.)
    #[derive(Clone, Debug)]
    enum DatabaseEvent {
        Server(Event),
        FirstIdOfTick { session: usize, lead: i64 },
        WalWriter,
        Restore { value: i64, writer_first: bool },
        SetWriterToAnotherCluster,
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0i64..400_000).prop_map(Event::Advance),
            any::<bool>().prop_map(|standby| Event::Worker { standby }),
            (0i64..1_100_000, any::<bool>())
                .prop_map(|(lead, lock_free)| Event::Session { lead, lock_free }),
        ]
    }

    fn database_event() -> impl Strategy<Value = DatabaseEvent> {
        prop_oneof![
            event().prop_map(DatabaseEvent::Server),
            (0usize..3, 0i64..1_100_000)
                .prop_map(|(session, lead)| DatabaseEvent::FirstIdOfTick { session, lead }),
            Just(DatabaseEvent::WalWriter),
            (0i64..8_000_000, any::<bool>()).prop_map(|(value, writer_first)| {
                DatabaseEvent::Restore {
                    value,
                    writer_first,
                }
            }),
            Just(DatabaseEvent::SetWriterToAnotherCluster),
        ]
    }

    /// A floor relation with its WAL: every value it held with the position of its record.
    struct SimulatedRelation {
        history: Vec<LoggedValue>,
        /// The writer relation names this cluster.
        writer_ours: bool,
        inserted: u64,
        flushed: u64,
    }

    impl SimulatedRelation {
        fn current(&self) -> LoggedValue {
            *self.history.last().unwrap()
        }

        fn page(&self) -> PageLsn {
            self.current().lsn
        }

        /// Sets the writer relation (to this cluster or another): a WAL record of its own.
        fn set_writer(&mut self, ours: bool) {
            self.inserted += 1;
            self.writer_ours = ours;
        }

        fn set(&mut self, value: i64) -> LoggedValue {
            self.inserted += 1;
            let logged = LoggedValue {
                value,
                lsn: self.inserted,
            };
            self.history.push(logged);
            logged
        }

        /// What the relation holds after a crash now: its latest flushed value.
        fn after_crash(&self) -> i64 {
            self.history
                .iter()
                .rev()
                .find(|logged| logged.lsn <= self.flushed)
                .map_or(i64::MIN, |logged| logged.value)
        }
    }

    #[test]
    fn the_marks_are_ordered_and_inside_the_window() {
        for ahead in [-5, 0, 1, 7, 8, 1_000, 1_000_000, 2_000_000, i64::MAX] {
            let policy = RenewalPolicy::new(ahead);
            assert!(0 <= policy.wait_mark(), "{ahead}");
            assert!(policy.wait_mark() <= policy.session_mark(), "{ahead}");
            assert!(policy.session_mark() <= policy.worker_mark(), "{ahead}");
            assert!(policy.worker_mark() <= ahead.max(0), "{ahead}");
        }
        let policy = RenewalPolicy::new(2_000_000);
        assert_eq!(
            (
                policy.wait_mark(),
                policy.session_mark(),
                policy.worker_mark()
            ),
            (1_000_000, 1_500_000, 1_750_000)
        );
    }

    #[test]
    fn the_first_tick_waits_for_the_first_reservation() {
        let policy = RenewalPolicy::new(2_000_000);
        assert_eq!(
            policy.for_session(i64::MIN, 5),
            SessionRenewal::WaitAndRenew { enough: 1_000_000 }
        );
        assert_eq!(policy.renewed_until(5, 3, i64::MIN), 2_000_005);
    }

    #[test]
    fn an_idle_server_without_standbys_renews_nothing() {
        let policy = RenewalPolicy::new(2_000_000);
        let now = 100_000_000;
        let long_ago = now - 2_000_001;
        assert_eq!(policy.for_worker(i64::MIN, long_ago, now, || false), None);
        assert_eq!(
            policy.for_worker(i64::MIN, long_ago, now, || true),
            Some(now)
        );
        assert_eq!(
            policy.for_worker(i64::MIN, now + 7, now, || false),
            Some(now + 7)
        );
        // Renewed already: nothing to do.
        assert_eq!(policy.for_worker(now + 1_800_000, now, now, || true), None);
    }

    proptest! {
            /// The invariant of design §5.1/§5.2: once a session is through the policy (renewing
            /// when told to wait, and when the lock was free), the reservation reaches at least
            /// half a window beyond the tick it is about to use, and it never went down.
            #[test]
            fn a_session_through_the_policy_leaves_half_a_window(
                ahead in 1i64..10_000_000,
                // What is left beyond the tick, in windows (None: nothing reserved yet).
                left in proptest::option::of(-2.0f64..2.0),
                end in -1_000_000_000i64..1_000_000_000,
                now in -1_000_000_000i64..1_000_000_000,
                floor in prop_oneof![Just(i64::MIN), -1_000_000_000i64..1_000_000_000],
                lock_free in any::<bool>(),
            ) {
                let policy = RenewalPolicy::new(ahead);
                let until = left.map_or(i64::MIN, |left| end + (left * ahead as f64) as i64);
                let after = match policy.for_session(until, end) {
                    SessionRenewal::Covered => until,
                    SessionRenewal::TryRenew { enough } if lock_free => {
                        renew(&policy, until, end, enough, now, floor)
                    }
                    SessionRenewal::TryRenew { .. } => until,
                    SessionRenewal::WaitAndRenew { enough } => {
                        renew(&policy, until, end, enough, now, floor)
                    }
                };
                prop_assert!(after >= until);
                prop_assert!(after - end >= ahead / 2, "{after} - {end} < W/2");
            }

            /// A whole server over time: the worker, and sessions with and without the lock. Every
            /// tick issued ends at least half a window below the reservation at the moment it is
            /// issued, the reservation only rises, and it never goes below the durable floor.
            #[test]
            fn every_issued_tick_ends_half_a_window_below_the_reservation(
                ahead in 1_000i64..4_000_000,
                floor in prop_oneof![Just(i64::MIN), 0i64..5_000_000],
                events in proptest::collection::vec(event(), 1..60),
            ) {
                let policy = RenewalPolicy::new(ahead);
                let mut now = 1_000_000i64;
                let mut until = i64::MIN;
                let mut issued = 0i64;
                for event in events {
                    let before = until;
                    match event {
                        Event::Advance(by) => now += by,
                        Event::Worker { standby } => {
                            if let Some(horizon) = policy.for_worker(until, issued, now, || standby) {
                                until = renew(&policy, until, horizon, policy.worker_mark(), now, floor);
                                prop_assert!(until - horizon >= ahead * 3 / 4);
                            }
                        }
                        Event::Session { lead, lock_free } => {
                            let end = now + lead;
                            match policy.for_session(until, end) {
                                SessionRenewal::Covered => {}
                                SessionRenewal::TryRenew { enough } => {
                                    if lock_free {
                                        until = renew(&policy, until, end, enough, now, floor);
                                    }
                                }
                                SessionRenewal::WaitAndRenew { enough } => {
                                    until = renew(&policy, until, end, enough, now, floor);
                                }
                            }
                            prop_assert!(until - end >= ahead / 2, "{until} - {end} < W/2");
                            issued = issued.max(end);
                        }
                    }
                    prop_assert!(until >= before);
                    if until != i64::MIN {
                        prop_assert!(until >= floor.saturating_add(ahead));
                        prop_assert!(until >= issued);
                    }
                }
            }

            /// The database beside the server (design §5.3): sessions go through the reservation
        /// policy, then through the floor view before the first ID of each tick. Whatever the
        /// order of renewals, flushes and restores, every tick's end is in the relation, and in
        /// what it holds after a crash, when its first ID leaves; and a restore is read by each
        /// session before its next tick.
        #[test]
        fn every_issued_tick_is_in_the_floor_relation_durably(
            ahead in 1_000i64..4_000_000,
            events in proptest::collection::vec(database_event(), 1..80),
        ) {
            let policy = RenewalPolicy::new(ahead);
            let mut now = 1_000_000i64;
            let mut until = i64::MIN;
            let mut issued = 0i64;
            let mut relation = SimulatedRelation {
                history: vec![LoggedValue::NONE],
                writer_ours: true,
                inserted: 0,
                flushed: 0,
            };
            let mut views = [FloorView::NEW; 3];
            // The floor the server learned from the relation (a cluster-wide raise), and the
            // latest restored value.
            let mut learned_floor = i64::MIN;
            let mut restored = i64::MIN;
            // This server's newest write and the one before it, as shared memory keeps them.
            let mut this_servers_writes: Option<(LoggedValue, LoggedValue)> = None;
            for event in events {
                match event {
                    DatabaseEvent::Server(Event::Advance(by)) => now += by,
                    DatabaseEvent::Server(Event::Worker { standby }) => {
                        if let Some(horizon) = policy.for_worker(until, issued, now, || standby) {
                            until = renew(&policy, until, horizon, policy.worker_mark(), now, i64::MIN);
                            // A renewal's WAL record is flushed, and everything before it.
                            relation.flushed = relation.inserted;
                        }
                    }
                    DatabaseEvent::Server(Event::Session { .. }) => {}
                    DatabaseEvent::WalWriter => relation.flushed = relation.inserted,
                    DatabaseEvent::Restore { value, writer_first } => {
                        if writer_first {
                            relation.set_writer(false);
                        }
                        relation.set(value);
                        if !writer_first {
                            relation.set_writer(false);
                        }
                        restored = value;
                    }
                    DatabaseEvent::SetWriterToAnotherCluster => relation.set_writer(false),
                    DatabaseEvent::FirstIdOfTick { session, lead } => {
                        let end = now + lead;
                        if let SessionRenewal::WaitAndRenew { enough } | SessionRenewal::TryRenew { enough } =
                            policy.for_session(until, end)
                        {
                            until = renew(&policy, until, end, enough, now, i64::MIN);
                            relation.flushed = relation.inserted;
                        }
                        let view = &mut views[session];
                        let page = relation.page();
                        let changed = view.check(end, page, &policy) == FloorCheck::Read;
                        if changed {
                            let current = relation.current();
                            let from = Provenance {
                                set_by_this_server: this_servers_writes
                                    .filter(|(newest, _)| *newest == current)
                                    .map(|(_, before)| before),
                                writer_is_this_cluster: relation.writer_ours,
                                started_without_reservation: false,
                            };
                            if let Some(floor) = view.read(current, page, from, until) {
                                learned_floor = learned_floor.max(floor);
                            }
                            if let Some(value) = view.raise_to(end, until, &policy) {
                                // Serialised writes, only upward.
                                if relation.current().value < value {
                                    let before = relation.current();
                                    if !relation.writer_ours {
                                        // The writer first, as the glue does.
                                        relation.set_writer(true);
                                    }
                                    let logged = relation.set(value);
                                    this_servers_writes = Some((logged, before));
                                    view.wrote(logged);
                                }
                            }
                        }
                        prop_assert!(learned_floor >= restored, "a restore went unread");
                        if let Some(lsn) = view.flush_for(end, relation.flushed) {
                            relation.flushed = relation.flushed.max(lsn);
                        }
                        prop_assert!(relation.current().value >= end, "relation below tick {end}");
                        prop_assert!(relation.after_crash() >= end, "not durable: tick {end}");
                        issued = issued.max(end);
                    }
                }
            }
        }
    }
}
