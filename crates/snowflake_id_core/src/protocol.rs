//! The promise as one protocol (docs/design.md §5): the steps from "a session wants the first
//! ID of a tick" to "it may issue", the reservation worker's renewal and
//! `snowflake_raise_floor`, written once over two small traits. [`DurableReservation`] is the
//! cluster's reservation and durable floor (shared memory, the WAL, the reservation file);
//! [`FloorRelation`] is one database's floor relation and the WAL it is logged in. The extension
//! implements them with PostgreSQL (`src/durability/reservation.rs`, `src/durability/database_floor.rs`); the model
//! checker (`tests/protocol_model.rs`) implements them in memory and runs these same steps
//! through every interleaving of sessions, the reservation worker, the WAL writer, crashes,
//! promotions and restores it can reach. What each step decides is asked of [`RenewalPolicy`]
//! (when to renew, and how far) and [`FloorView`] (when to read, raise and flush the relation).

use crate::floor::{FloorCheck, FloorView, LoggedValue, PageLsn, Provenance};
use crate::renewal::{RenewalPolicy, SessionRenewal};

/// The cluster's reservation and durable floor.
pub trait DurableReservation {
    /// Why a reservation could not be written.
    type Error;
    /// The published reservation (i64::MIN before the first): no issued ID's tick ends after it.
    fn reserved_until(&self) -> i64;
    /// The durable floor: no ID may be issued in a tick that ends at or below it.
    fn durable_floor(&self) -> i64;
    /// The cluster clock now (µs since 1970).
    fn now(&self) -> i64;
    /// Whether a reservation can be written at all (not when the file was found broken).
    fn writable(&self) -> Result<(), Self::Error>;
    /// Runs `f` holding the lock that serialises reservation writes: waiting for it, or None
    /// without waiting when `wait` is false and another process holds it.
    fn with_lock<T>(&mut self, wait: bool, f: impl FnOnce(&mut Self) -> T) -> Option<T>;
    /// Under the lock: writes `until` durably (a WAL record, flushed, then the file) and
    /// publishes it.
    fn write(&mut self, until: i64) -> Result<(), Self::Error>;
    /// Raises the durable floor (and the cluster clock with it) to `floor`, in memory and in the
    /// file.
    fn raise_durable_floor(&mut self, floor: i64);
    /// Logs `floor` in the WAL as a reservation (flushed), so standbys and restored backups
    /// learn it, and raises the durable floor to it.
    fn log_durable_floor(&mut self, floor: i64);
}

/// One database's floor relation.
pub trait FloorRelation {
    /// Why a value read cannot be taken.
    type Error;
    /// The position of the last WAL record that changed the relation's page, or None when the
    /// relation is gone (dropped since it was looked up).
    fn page(&mut self) -> Option<PageLsn>;
    /// The relation's value and where it came from, read as one (no write of this server in
    /// between).
    fn read(&mut self) -> (LoggedValue, Provenance);
    /// The published reservation, which a raise writes.
    fn reserved_until(&self) -> i64;
    /// A floor the relation taught (it came from elsewhere): the durable floor rises to it, or
    /// the error when it lies further ahead of the wall clock than the extension trusts.
    fn learned(&mut self, floor: i64) -> Result<(), Self::Error>;
    /// Raises the relation to `value` if its page is still at `read_at` and it holds less: the
    /// write (its value and the end of its WAL record), or None, writing nothing, when somebody
    /// changed it since or it holds `value` already.
    fn raise(&mut self, value: i64, read_at: PageLsn) -> Option<LoggedValue>;
    /// How far the WAL is flushed.
    fn flushed(&self) -> u64;
    /// Flushes the WAL up to `lsn`.
    fn flush(&mut self, lsn: u64);
}

/// What the first ID of a tick may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickStep {
    /// Issue it: the tick is reserved, in the cluster and in the database, durably.
    Issue,
    /// Issue nothing in this tick: the durable floor (`floor`) reaches its end, or a floor from
    /// elsewhere does (a restore into this database). Move past the floor and start again.
    SkipTo { floor: i64 },
}

/// What the database's floor relation says of a tick, once [`cover`] is through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cover {
    /// The relation holds the tick's end, and the WAL holds that write.
    Covered,
    /// The relation brought a floor from elsewhere at or above the tick's end: the tick may
    /// hold restored IDs, and the durable floor has risen above it.
    FloorAtOrAbove,
    /// The relation is gone (the extension was dropped under the session).
    Gone,
}

/// Why the first ID of a tick cannot leave: the reservation could not be written, or the
/// database's floor relation holds a value this server does not take (beyond the trusted lead).
#[derive(Debug, PartialEq, Eq)]
pub enum TickRefused<R, F> {
    Reservation(R),
    Floor(F),
}

/// Before the first ID of a tick ending at `end` leaves: the reservation covers it (renewed
/// when the policy says so), then the database's floor relation does ([`cover`], with what the
/// session knows of it; nothing where the database has no floor relation, `floor` None), and
/// the tick ends above the durable floor. A floor learned on the way, here or by another
/// session, that reaches the tick's end skips it. Also returns what the relation said (the
/// caller forgets a relation found [`Cover::Gone`]).
#[inline]
pub fn first_id_of_tick<R: DurableReservation, F: FloorRelation>(
    reservation: &mut R,
    policy: &RenewalPolicy,
    end: i64,
    floor: Option<(&mut FloorView, &mut F)>,
) -> Result<(TickStep, Cover), TickRefused<R::Error, F::Error>> {
    ensure_reserved(reservation, policy, end).map_err(TickRefused::Reservation)?;
    let covered = match floor {
        Some((view, relation)) => cover(view, relation, end, policy).map_err(TickRefused::Floor)?,
        None => Cover::Covered,
    };
    let floor = reservation.durable_floor();
    if covered == Cover::FloorAtOrAbove || end <= floor {
        return Ok((TickStep::SkipTo { floor }, covered));
    }
    Ok((TickStep::Issue, covered))
}

/// A session's renewal before the first ID of a tick ending at `end`: nothing while the
/// reservation reaches the session mark beyond it; between that and the waiting mark, a renewal
/// if the lock is free (the others go on under the current reservation); below the waiting mark
/// a renewal, waiting for the lock (design §5.1).
#[inline]
pub fn ensure_reserved<R: DurableReservation>(
    reservation: &mut R,
    policy: &RenewalPolicy,
    end: i64,
) -> Result<(), R::Error> {
    let (enough, wait) = match policy.for_session(reservation.reserved_until(), end) {
        SessionRenewal::Covered => return Ok(()),
        SessionRenewal::TryRenew { enough } => (enough, false),
        SessionRenewal::WaitAndRenew { enough } => (enough, true),
    };
    reservation.writable()?;
    let renewed = reservation.with_lock(wait, |locked| {
        let now = locked.now();
        renew(locked, policy, end, enough, now)
    });
    renewed.unwrap_or(Ok(false)).map(drop)
}

/// The reservation worker's turn (design §5.2): renews beyond the latest tick issued (or the
/// clock, `now`) when the reservation reaches less than the worker's mark beyond it, without
/// waiting for the lock; nothing on an idle server without standbys, or where no reservation
/// can be written (the sessions report that). Whether it wrote.
pub fn renew_for_worker<R: DurableReservation>(
    reservation: &mut R,
    policy: &RenewalPolicy,
    issued_high_water: i64,
    now: i64,
    standby_streaming: impl FnOnce() -> bool,
) -> Result<bool, R::Error> {
    if reservation.writable().is_err() {
        return Ok(false);
    }
    let until = reservation.reserved_until();
    let Some(horizon) = policy.for_worker(until, issued_high_water, now, standby_streaming) else {
        return Ok(false);
    };
    reservation
        .with_lock(false, |locked| {
            renew(locked, policy, horizon, policy.worker_mark(), now)
        })
        .unwrap_or(Ok(false))
}

/// Under the lock: renews the reservation a whole window beyond `end` (and the clock and the
/// durable floor) unless it reaches `enough` past it already (another process renewed it
/// meanwhile); whether it wrote.
fn renew<R: DurableReservation>(
    reservation: &mut R,
    policy: &RenewalPolicy,
    end: i64,
    enough: i64,
    now: i64,
) -> Result<bool, R::Error> {
    if !policy.needs_renewal(reservation.reserved_until(), end, enough) {
        return Ok(false);
    }
    let until = policy.renewed_until(end, now, reservation.durable_floor());
    reservation.write(until).map(|()| true)
}

/// Before the first ID of a tick ending at `end` (the reservation covers it already): the
/// database's floor relation holds `end` or more, and the WAL holds that write (design §5.3).
/// Reads the relation when somebody changed it or the tick gets near what the session knows of
/// it, and raises it to the published reservation when the tick is within half a window; when
/// somebody changed it between the read and the raise (another backend's write, a restore), it
/// reads again rather than write over it.
#[inline]
pub fn cover<F: FloorRelation>(
    view: &mut FloorView,
    relation: &mut F,
    end: i64,
    policy: &RenewalPolicy,
) -> Result<Cover, F::Error> {
    let Some(mut page) = relation.page() else {
        return Ok(Cover::Gone);
    };
    match view.check(end, page, policy) {
        FloorCheck::Covered => return Ok(Cover::Covered),
        FloorCheck::Flush => {}
        FloorCheck::Read => loop {
            if read(view, relation, page)?.is_some_and(|floor| floor >= end) {
                return Ok(Cover::FloorAtOrAbove);
            }
            let Some(target) = view.raise_to(end, relation.reserved_until(), policy) else {
                break;
            };
            if let Some(written) = relation.raise(target, page) {
                view.wrote(written);
                break;
            }
            let Some(now) = relation.page() else {
                return Ok(Cover::Gone);
            };
            page = now;
        },
    }
    make_durable(view, relation, end);
    Ok(Cover::Covered)
}

/// Before a generator's first ID: reads the relation, so that a floor another cluster (or this one
/// on another timeline) wrote (`pg_upgrade`, a restored dump) or one this server lost with its
/// reservation file raises the durable floor and the clock before the first tick is chosen.
pub fn learn<F: FloorRelation>(view: &mut FloorView, relation: &mut F) -> Result<(), F::Error> {
    if let Some(page) = relation.page() {
        read(view, relation, page)?;
    }
    Ok(())
}

/// `snowflake_raise_floor` (and the cut-over of a move): no ID from now on, by any session of
/// this server or by a server that gets its WAL or this database, is at or below `until`. The
/// relation is read first, with its checks, so that a call refused there moves nothing; then
/// this server's sessions (the durable floor, which every new tick checks), then the cluster's
/// WAL (a reservation record, flushed: standbys, restored backups), then the database's relation
/// (a WAL record, flushed). In that order a standby that has the relation's record has the
/// reservation's too, so the value, written on a timeline it leaves at its promotion, lies below
/// what it replayed.
/// [`Cover::Gone`] when the relation is not there (the caller reports it).
pub fn raise_floor<R: DurableReservation, F: FloorRelation>(
    reservation: &mut R,
    view: &mut FloorView,
    relation: &mut F,
    until: i64,
) -> Result<Cover, F::Error> {
    // Every check first (the relation is there and its owner trusted, a value from elsewhere
    // within the bound): a call that fails has moved nothing, in the server or in the WAL.
    let Some(mut page) = relation.page() else {
        return Ok(Cover::Gone);
    };
    read(view, relation, page)?;
    accept_floor(reservation, until);
    while view.newest().value < until {
        if let Some(written) = relation.raise(until, page) {
            view.wrote(written);
            break;
        }
        // Somebody wrote the relation since it was read: read it again.
        let Some(now) = relation.page() else {
            return Ok(Cover::Gone);
        };
        page = now;
        read(view, relation, page)?;
    }
    let newest = view.newest().value;
    make_durable(view, relation, newest);
    Ok(Cover::Covered)
}

/// `snowflake_accept_floor` (a superuser's decision, with its checks done by the caller), and
/// the second step of [`raise_floor`]: this server's sessions move above `floor` (the durable
/// floor, which every new tick checks), then the cluster's WAL does (a reservation record,
/// flushed: standbys, restored backups), before anything else is written.
pub fn accept_floor<R: DurableReservation>(reservation: &mut R, floor: i64) {
    reservation.raise_durable_floor(floor);
    reservation.log_durable_floor(floor);
}

/// A server's start (the postmaster's, or a restart after a crash), from what its reservation
/// file holds: the durable floor (the clock starts there, and the WAL's reservation records
/// replayed afterwards raise it), and whether it started without a file (lost, or a copy without
/// it), which makes a floor relation's value above its own reservation count (§5.3). A file
/// found unusable is neither: no ID is issued until it is repaired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Start {
    pub durable_floor: i64,
    pub without_reservation: bool,
}

/// The start from the reservation file: `Ok(Some(until))` read, `Ok(None)` absent, `Err(())`
/// unusable.
pub fn start(file: Result<Option<i64>, ()>) -> Start {
    Start {
        durable_floor: file.ok().flatten().unwrap_or(i64::MIN),
        without_reservation: file == Ok(None),
    }
}

/// At a clean shutdown: what the file keeps instead of the reservation, the end of the latest
/// tick actually used (`issued_high_water`) or the durable floor, so a restart continues where
/// IDs were instead of a whole window ahead; None when nothing was issued or learned (the file
/// stays as it is). After a crash the reservation stays: the ticks used may not be known.
pub fn floor_at_shutdown(issued_high_water: i64, durable_floor: i64) -> Option<i64> {
    let high_water = issued_high_water.max(durable_floor);
    (high_water > 0).then_some(high_water)
}

/// What a promotion's floor depends on besides the renewal policy (µs, or ticks in the model):
/// `snowflake_id.failover_lag`, `snowflake_id.max_lead` and the coarsest tick of any layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromotionLeads {
    pub failover_lag: i64,
    pub max_lead: i64,
    pub coarsest_tick: i64,
}

/// The durable floor a server takes before its first ID after standby mode or archive recovery
/// (a promotion, a point-in-time restore), from the last reservation it replayed (`replayed`,
/// its file's included) and its clock `now` (design §5.2). It starts the failover margin above
/// `replayed`: the last record it has was written at most `failover_lag` + half a window (the
/// waiting mark) before the failure, and reserved a whole window beyond the clock then; the IDs
/// issued until the failure end at most `max_lead` and a tick (`coarsest_tick`) beyond the
/// clock. One that replayed none (the old primary's first reservation came less than
/// `failover_lag` before the failure, or the recovery target precedes it) knows of no ID the old
/// primary issued: those end at most `max_lead` and a tick beyond the old primary's clock at the
/// failure, so it starts that far above its own clock, which the promotion finds at or after the
/// failure when the two hosts' clocks agree.
pub fn floor_after_promotion(
    policy: &RenewalPolicy,
    leads: PromotionLeads,
    replayed: i64,
    now: i64,
) -> i64 {
    let issue_lead = leads.max_lead + leads.coarsest_tick;
    match replayed {
        i64::MIN => now.saturating_add(issue_lead),
        _ => {
            let margin = (leads.failover_lag + issue_lead - policy.wait_mark()).max(0);
            replayed.saturating_add(margin)
        }
    }
}

/// Whether a durable floor raised to `floor` must be written to the reservation file: only
/// above the published reservation `published`, which is in the file already (it is published
/// only once written), so a floor at or below it is durable as it is (a database's floor
/// relation holds what this server reserved: a session's first ID writes nothing).
pub fn file_takes_raised_floor(floor: i64, published: i64) -> bool {
    floor > published
}

/// Reads the relation (its page read before, as `page`) into the view; a floor it teaches raises
/// the durable floor, and is returned. A floor refused (beyond the trusted lead) leaves the view
/// as it was, so the next tick reads it again.
fn read<F: FloorRelation>(
    view: &mut FloorView,
    relation: &mut F,
    page: PageLsn,
) -> Result<Option<i64>, F::Error> {
    let (current, from) = relation.read();
    let known = *view;
    let learned = view.read(current, page, from, relation.reserved_until());
    if let Some(floor) = learned {
        if let Err(refused) = relation.learned(floor) {
            *view = known;
            return Err(refused);
        }
    }
    Ok(learned)
}

/// Flushes the WAL as far as the view says a value at or above `end` needs.
fn make_durable<F: FloorRelation>(view: &mut FloorView, relation: &mut F, end: i64) {
    if let Some(lsn) = view.flush_for(end, relation.flushed()) {
        relation.flush(lsn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A reservation in memory, whose lock is free or taken as the test says.
    struct TestReservation {
        until: i64,
        floor: i64,
        now: i64,
        lock_free: bool,
    }

    impl DurableReservation for TestReservation {
        type Error = ();

        fn reserved_until(&self) -> i64 {
            self.until
        }

        fn durable_floor(&self) -> i64 {
            self.floor
        }

        fn now(&self) -> i64 {
            self.now
        }

        fn writable(&self) -> Result<(), ()> {
            Ok(())
        }

        fn with_lock<T>(&mut self, wait: bool, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
            (wait || self.lock_free).then(|| f(self))
        }

        fn write(&mut self, until: i64) -> Result<(), ()> {
            self.until = until;
            Ok(())
        }

        fn raise_durable_floor(&mut self, floor: i64) {
            self.floor = self.floor.max(floor);
        }

        fn log_durable_floor(&mut self, floor: i64) {
            self.raise_durable_floor(floor);
        }
    }

    /// One step of the simulated server: the clock moves, the reservation worker runs, or a
    /// session issues the first ID of a tick (whose end is up to `lead` past the clock), with the
    /// lock free or held.
    #[derive(Clone, Debug)]
    enum Event {
        Advance(i64),
        Worker { standby: bool },
        Session { lead: i64, lock_free: bool },
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0i64..400_000).prop_map(Event::Advance),
            any::<bool>().prop_map(|standby| Event::Worker { standby }),
            (0i64..1_100_000, any::<bool>())
                .prop_map(|(lead, lock_free)| Event::Session { lead, lock_free }),
        ]
    }

    #[test]
    fn a_start_takes_the_file_and_a_clean_shutdown_keeps_the_ticks_used() {
        let with_file = start(Ok(Some(7)));
        assert_eq!(
            (with_file.durable_floor, with_file.without_reservation),
            (7, false)
        );
        let without = start(Ok(None));
        assert_eq!(
            (without.durable_floor, without.without_reservation),
            (i64::MIN, true)
        );
        let unusable = start(Err(()));
        assert_eq!(
            (unusable.durable_floor, unusable.without_reservation),
            (i64::MIN, false)
        );
        assert_eq!(floor_at_shutdown(12, 9), Some(12));
        assert_eq!(floor_at_shutdown(0, 9), Some(9));
        assert_eq!(floor_at_shutdown(0, i64::MIN), None);
    }

    /// One database's floor relation in memory, written by this server only; the WAL writer
    /// flushes between statements as the test says.
    struct TestRelation {
        value: LoggedValue,
        before: Option<LoggedValue>,
        page: PageLsn,
        next_lsn: u64,
        flushed: u64,
        flushes: usize,
        reserved_until: i64,
        /// Every value the relation held, with the end of the record that set it.
        history: Vec<LoggedValue>,
    }

    impl TestRelation {
        fn new() -> Self {
            TestRelation {
                value: LoggedValue::NONE,
                before: None,
                page: 1,
                next_lsn: 1,
                flushed: 1,
                flushes: 0,
                reserved_until: i64::MIN,
                history: Vec::new(),
            }
        }

        /// Whether a value at or above `end` is in the flushed WAL.
        fn durably_covers(&self, end: i64) -> bool {
            self.history
                .iter()
                .any(|logged| logged.value >= end && logged.lsn <= self.flushed)
        }
    }

    impl FloorRelation for TestRelation {
        type Error = ();

        fn page(&mut self) -> Option<PageLsn> {
            Some(self.page)
        }

        fn read(&mut self) -> (LoggedValue, Provenance) {
            let from = Provenance {
                set_by_this_server: self.before,
                writer_is_this_cluster: true,
                started_without_reservation: false,
            };
            (self.value, from)
        }

        fn reserved_until(&self) -> i64 {
            self.reserved_until
        }

        fn learned(&mut self, _floor: i64) -> Result<(), ()> {
            Ok(())
        }

        fn raise(&mut self, value: i64, read_at: PageLsn) -> Option<LoggedValue> {
            if self.page != read_at || value <= self.value.value {
                return None;
            }
            self.next_lsn += 10;
            self.before = Some(self.value);
            self.value = LoggedValue {
                value,
                lsn: self.next_lsn,
            };
            self.page = self.next_lsn;
            self.history.push(self.value);
            Some(self.value)
        }

        fn flushed(&self) -> u64 {
            self.flushed
        }

        fn flush(&mut self, lsn: u64) {
            self.flushes += 1;
            self.flushed = self.flushed.max(lsn);
        }
    }

    /// A session's first IDs of ticks `gaps` apart, the WAL flushed between statements (the WAL
    /// writer, a commit): how many of them wrote the relation, and how many flushed its WAL, in
    /// their own statement (the first one left out).
    fn floor_work_in_statements(policy: &RenewalPolicy, gaps: &[i64]) -> (usize, usize) {
        let mut relation = TestRelation::new();
        let mut view = FloorView::NEW;
        let mut end = 1_000_000_000;
        let (mut writes, mut flushes) = (0, 0);
        for (at, gap) in gaps.iter().enumerate() {
            end += gap;
            relation.reserved_until = end + policy.wait_mark() + 1;
            relation.flushed = relation.next_lsn;
            let (flushes_before, writes_before) = (relation.flushes, relation.history.len());
            assert_eq!(
                cover(&mut view, &mut relation, end, policy),
                Ok(Cover::Covered)
            );
            assert!(relation.durably_covers(end), "tick {at} ending at {end}");
            if at > 0 {
                writes += usize::from(relation.history.len() > writes_before);
                flushes += usize::from(relation.flushes > flushes_before);
            }
        }
        (writes, flushes)
    }

    fn flushes_in_statements(policy: &RenewalPolicy, gaps: &[i64]) -> usize {
        floor_work_in_statements(policy, gaps).1
    }

    #[test]
    fn without_a_floor_lead_the_first_id_after_a_window_of_quiet_flushes_in_its_statement() {
        let policy = RenewalPolicy::new(1_000_000);
        assert_eq!(floor_work_in_statements(&policy, &[0, 3_000_000]), (1, 1));
        let leading = policy.renewing_while_idle_for(300_000_000);
        // After a spell shorter than half the lead it writes nothing; shorter than the lead, it
        // writes and waits for no flush; longer, it does both, as it must.
        assert_eq!(floor_work_in_statements(&leading, &[0, 3_000_000]), (0, 0));
        assert_eq!(
            floor_work_in_statements(&leading, &[0, 149_000_000]),
            (0, 0)
        );
        assert_eq!(
            floor_work_in_statements(&leading, &[0, 152_000_000]),
            (1, 0)
        );
        assert_eq!(
            floor_work_in_statements(&leading, &[0, 302_000_000]),
            (1, 1)
        );
        // While IDs flow (a tick every 100 ms for ten minutes, the reservation half a window
        // ahead of each), the relation is written at every tick without a lead, and once per
        // half lead with it; never flushed in a statement.
        let flowing = vec![100_000; 6_000];
        assert_eq!(floor_work_in_statements(&policy, &flowing), (5_999, 0));
        assert_eq!(floor_work_in_statements(&leading, &flowing), (3, 0));
    }

    proptest! {
        /// Design §5.3's floor lead: a tick ending at most half the lead beyond the one before
        /// waits for no flush in its statement, once the WAL writer flushed what the statements
        /// before it wrote; and every tick's end is in a flushed value of the relation before it
        /// is used.
        #[test]
        fn a_tick_within_half_the_floor_lead_of_the_last_waits_for_no_flush(
            ahead in 1_000i64..4_000_000,
            lead in 0i64..20_000_000,
            fractions in proptest::collection::vec(0.0f64..=1.0, 1..40),
        ) {
            let policy = RenewalPolicy::new(ahead).renewing_while_idle_for(lead);
            let gaps: Vec<i64> = fractions.iter().map(|f| (f * (lead / 2) as f64) as i64).collect();
            prop_assert_eq!(flushes_in_statements(&policy, &gaps), 0);
        }

        /// The invariant of design §5.1/§5.2: once a session is through `ensure_reserved`
        /// (renewing when told to wait, and when the lock was free), the reservation reaches at
        /// least half a window beyond the tick it is about to use, and it never went down.
        #[test]
        fn a_session_through_ensure_reserved_leaves_half_a_window(
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
            let mut reservation = TestReservation { until, floor, now, lock_free };
            ensure_reserved(&mut reservation, &policy, end).unwrap();
            prop_assert!(reservation.until >= until);
            prop_assert!(reservation.until - end >= ahead / 2, "{} - {end} < W/2", reservation.until);
        }

        /// A whole server over time: the worker, and sessions with and without the lock. Every
        /// tick issued ends at least half a window below the reservation at the moment it is
        /// issued, the reservation only rises, and it never goes below the durable floor.
        #[test]
        fn every_issued_tick_ends_half_a_window_below_the_reservation(
            ahead in 1_000i64..4_000_000,
            floor in prop_oneof![Just(i64::MIN), 0i64..5_000_000],
            events in proptest::collection::vec(event(), 1..60),
            idle_renewal in prop_oneof![Just(0i64), 0i64..20_000_000],
        ) {
            let policy = RenewalPolicy::new(ahead).renewing_while_idle_for(idle_renewal);
            let mut server = TestReservation {
                until: i64::MIN,
                floor,
                now: 1_000_000,
                lock_free: true,
            };
            let mut issued = 0i64;
            for event in events {
                let before = server.until;
                match event {
                    Event::Advance(by) => server.now += by,
                    Event::Worker { standby } => {
                        let now = server.now;
                        if renew_for_worker(&mut server, &policy, issued, now, || standby).unwrap() {
                            prop_assert!(server.until - issued.max(now) >= ahead * 3 / 4);
                        }
                    }
                    Event::Session { lead, lock_free } => {
                        let end = server.now + lead;
                        server.lock_free = lock_free;
                        ensure_reserved(&mut server, &policy, end).unwrap();
                        prop_assert!(server.until - end >= ahead / 2, "{} - {end} < W/2", server.until);
                        issued = issued.max(end);
                    }
                }
                prop_assert!(server.until >= before);
                if server.until != i64::MIN {
                    prop_assert!(server.until >= floor.saturating_add(ahead));
                    prop_assert!(server.until >= issued);
                }
            }
        }
    }
}
