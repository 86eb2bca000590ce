//! What one backend knows of its database's floor relation, and what it decides from that
//! before the first ID of a tick leaves (docs/design.md §5.3): whether to read the relation,
//! whether to raise it and to what, and which of its values to make durable. The glue
//! (`src/durability/database_floor.rs`) locates, reads, writes and flushes the relation; this module only
//! decides.
//!
//! The relation holds a time (µs since 1970) that no tick of an ID issued in the database ends
//! after. Before the first ID of a tick ending at `end` leaves, the relation must hold `end` or
//! more, and the WAL record that set it must be flushed. So that no session waits for a write
//! and its flush in its own statement, the relation is raised to the published reservation
//! plus the floor lead (`snowflake_id.idle_renewal`) half a window (the renewal policy's waiting
//! mark) before a tick gets within half the floor lead of it, and flushed only when a tick
//! passes the value before, by when the reservation worker's renewal or the WAL writer has
//! flushed it. So the first ID after a quiet spell shorter than half the floor lead writes
//! nothing, one after a spell shorter than the lead waits for no flush (the relation covers it,
//! written and flushed long before), and while IDs flow the relation is written about once per
//! half window and half lead.

use crate::renewal::RenewalPolicy;

/// A value of the floor relation and a WAL position at or after the end of the record that set
/// it: once the WAL is flushed there, the relation holds the value or more through a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LoggedValue {
    pub value: i64,
    pub lsn: u64,
}

impl LoggedValue {
    /// Nothing known (a relation never set reads as this too).
    pub const NONE: LoggedValue = LoggedValue {
        value: i64::MIN,
        lsn: 0,
    };
}

/// The WAL position of the last change to the floor relation's page: any change to it, by this
/// server or by a restore, moves it. The writer relation's page is not watched: a change to it
/// alone brings no floor, and its value is read with the floor's (design §5.3).
pub type PageLsn = u64;

/// What a backend knows of its database's floor relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FloorView {
    /// The newest value this backend read or set.
    newest: LoggedValue,
    /// The value before `newest`, while above `durable`: when a tick passes `durable` it usually
    /// covers the tick and is flushed already, where `newest` may have been set a moment ago.
    before_newest: Option<LoggedValue>,
    /// The part of `newest` known to be flushed.
    durable: i64,
    /// The page's position as this backend last read it, or left it with its own write.
    page: Option<PageLsn>,
}

/// What to do before the first ID of a tick, after checking the relation's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorCheck {
    /// The relation covers the tick durably, and nobody changed it since this backend looked.
    Covered,
    /// Read the relation (it changed, or the tick gets near what this backend knows of it),
    /// then ask [`FloorView::raise_to`] and [`FloorView::flush_for`].
    Read,
    /// Nobody changed it and it covers the tick by half a window or more, but the part known
    /// flushed does not: ask [`FloorView::flush_for`].
    Flush,
}

impl FloorView {
    /// A backend that has not read the relation yet.
    pub const NEW: FloorView = FloorView {
        newest: LoggedValue::NONE,
        before_newest: None,
        durable: i64::MIN,
        page: None,
    };

    /// The newest value known.
    pub fn newest(&self) -> LoggedValue {
        self.newest
    }

    /// Before the first ID of a tick ending at `end`, with the relation's page at `page` now.
    #[inline]
    pub fn check(&self, end: i64, page: PageLsn, policy: &RenewalPolicy) -> FloorCheck {
        if self.page != Some(page) || self.near(end, policy) {
            FloorCheck::Read
        } else if end > self.durable {
            FloorCheck::Flush
        } else {
            FloorCheck::Covered
        }
    }

    /// Whether a tick ending at `end` gets within half the floor lead and half a window of the
    /// newest value known: half the lead is used up since the relation was last raised.
    fn near(&self, end: i64, policy: &RenewalPolicy) -> bool {
        end.saturating_add(policy.wait_mark())
            .saturating_add(policy.floor_lead() / 2)
            > self.newest.value
    }

    /// Takes what a read found: the relation's value now, its page's position read before it
    /// (so a change made after the value was read moves it and is read next time), and where the
    /// value came from. Returns the floor the server learns from it (see [`Provenance`]).
    ///
    /// After a change the relation is taken as it is, and nothing is known durable: somebody
    /// may have lowered it in between (a restore of an older dump) and another backend raised
    /// it again with a write not flushed yet. Only this server's write before the newest one
    /// (`Provenance::set_by_this_server`), which ended the relation's previous state, is known
    /// to be below it with nothing in between.
    pub fn read(
        &mut self,
        current: LoggedValue,
        page: PageLsn,
        from: Provenance,
        reserved_until: i64,
    ) -> Option<i64> {
        let first = self.page.is_none();
        let changed = self.page != Some(page) || current.value != self.newest.value;
        self.page = Some(page);
        if !changed {
            return None;
        }
        self.newest = current;
        self.before_newest = from
            .set_by_this_server
            .filter(|before| before.value < current.value);
        self.durable = i64::MIN;
        let teaches = if from.set_by_this_server.is_some() {
            false
        } else if first {
            !from.writer_is_this_cluster
                || (from.started_without_reservation && current.value > reserved_until)
        } else {
            true
        };
        (teaches && current.value != i64::MIN).then_some(current.value)
    }

    /// Takes `value` as the newest known when it is newer than what this backend knows.
    fn learn(&mut self, value: LoggedValue) {
        if value.value <= self.newest.value {
            return;
        }
        if self.newest.value > self.durable {
            self.before_newest = Some(self.newest);
        }
        self.newest = value;
    }

    /// After a read: the value to raise the relation to before a tick ending at `end`, when it
    /// is within half the floor lead and half a window of it: the published reservation (which
    /// covers the tick by half a window, design §5.1), or the tick's end if more, plus the floor
    /// lead.
    pub fn raise_to(&self, end: i64, reserved_until: i64, policy: &RenewalPolicy) -> Option<i64> {
        self.near(end, policy)
            .then(|| reserved_until.max(end).saturating_add(policy.floor_lead()))
    }

    /// This backend set the relation to `value`: the page is where its own write leaves it, so
    /// only somebody else's change makes it read again.
    pub fn wrote(&mut self, value: LoggedValue) {
        self.learn(value);
        self.page = Some(value.lsn);
    }

    /// Before the first ID of a tick ending at `end` (the relation holds `end` or more): the
    /// WAL position to flush, or None when the WAL is flushed far enough (`flushed`). Flushes
    /// the value before the newest when that one covers the tick and the newest is not flushed
    /// yet (it may have been set a moment ago), else the newest. Then the flushed value is
    /// known durable.
    pub fn flush_for(&mut self, end: i64, flushed: u64) -> Option<u64> {
        if end <= self.durable {
            return None;
        }
        let value = match self.before_newest {
            Some(before) if before.value >= end && self.newest.lsn > flushed => before,
            _ => self.newest,
        };
        self.durable = value.value;
        self.before_newest = None;
        (value.lsn > flushed).then_some(value.lsn)
    }
}

/// Where a value read from the relation came from. A value set by this server (the newest
/// write it remembers in shared memory) teaches nothing: its IDs are covered already. On a
/// backend's first read, a value another cluster set, or this one on another timeline (the writer
/// relation names another: `pg_upgrade`, a restored dump, a promotion), may cover IDs this server
/// never saw, so no ID may be issued below it; one this cluster set on this timeline lies below
/// what its reservation file and WAL records hold (a clean
/// restart continues where IDs were, not at the last value written), unless the server started
/// without the file, and then only the part above what it reserved itself counts. Any later
/// change that this server did not make (a restore into the live database, a superuser's
/// `setval`) is a floor from elsewhere, whatever the writer relation says at that moment: a
/// restore sets the two relations one after the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Provenance {
    /// The value is this server's newest write of the relation, with the value before it.
    pub set_by_this_server: Option<LoggedValue>,
    /// The writer relation names this cluster and its timeline (this server set the value, or the
    /// one whose data files it continues after a restart).
    pub writer_is_this_cluster: bool,
    /// This server started without its reservation file (lost, or a copy without it).
    pub started_without_reservation: bool,
}

/// What the writer relation holds for the cluster that wrote the floor: its system identifier
/// (from `initdb`, kept by its standbys and base backups, new after `pg_upgrade`) and its WAL
/// timeline (new after every promotion and point-in-time recovery). A floor written on another
/// timeline may come from a history this server never replayed (a dump taken after a recovery
/// target, restored after the recovery), so it is a floor from elsewhere; one written on a
/// timeline this server continues covers no ID beyond what it replayed (it leads those by the
/// floor lead at most), and learning it again changes nothing. On timeline 1 the identity is
/// the system identifier itself (what the relation held
/// before timelines counted); other timelines mix theirs in through a bijection, so two
/// timelines of one cluster never share an identity.
pub fn writer_identity(system_identifier: u64, timeline: u32) -> i64 {
    (system_identifier ^ mix(u64::from(timeline).wrapping_sub(1))) as i64
}

/// SplitMix64's finalizer: a bijection of u64 that maps 0 to 0 and spreads neighbours apart.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_timeline_is_the_system_identifier_and_every_other_differs() {
        let system = 7_311_345_678_901_234_567_u64;
        assert_eq!(writer_identity(system, 1), system as i64);
        let identities: std::collections::HashSet<i64> = (1..=10_000)
            .map(|timeline| writer_identity(system, timeline))
            .collect();
        assert_eq!(identities.len(), 10_000);
        assert_ne!(writer_identity(system, 2), writer_identity(system + 1, 2));
    }

    const POLICY_US: i64 = 1_000_000;

    fn policy() -> RenewalPolicy {
        RenewalPolicy::new(POLICY_US)
    }

    fn logged(value: i64, lsn: u64) -> LoggedValue {
        LoggedValue { value, lsn }
    }

    const OURS: Provenance = Provenance {
        set_by_this_server: None,
        writer_is_this_cluster: true,
        started_without_reservation: false,
    };

    #[test]
    fn a_new_view_reads_first() {
        assert_eq!(FloorView::NEW.check(5, 1, &policy()), FloorCheck::Read);
    }

    #[test]
    fn a_change_by_somebody_else_is_read_before_the_next_tick_and_teaches_its_value() {
        let mut view = FloorView::NEW;
        assert_eq!(
            view.read(logged(10_000_000, 40), 40, OURS, 20_000_000),
            None
        );
        assert_eq!(view.flush_for(5, 100), None);
        assert_eq!(view.check(6, 40, &policy()), FloorCheck::Covered);
        // A restore sets the floor (then the writer): the page moves, and the value counts even
        // while the writer relation still names this cluster.
        assert_eq!(view.check(6, 90, &policy()), FloorCheck::Read);
        assert_eq!(
            view.read(logged(12_000_000, 90), 90, OURS, 20_000_000),
            Some(12_000_000)
        );
        // Read again unchanged (a tick near it): nothing new.
        assert_eq!(
            view.read(logged(12_000_000, 90), 90, OURS, 20_000_000),
            None
        );
    }

    #[test]
    fn another_servers_backend_write_teaches_nothing() {
        let mut view = FloorView::NEW;
        view.read(logged(10_000_000, 40), 40, OURS, 20_000_000);
        let by_this_server = Provenance {
            set_by_this_server: Some(logged(10_000_000, 40)),
            ..OURS
        };
        assert_eq!(
            view.read(logged(11_000_000, 70), 70, by_this_server, 20_000_000),
            None
        );
        assert_eq!(view.newest(), logged(11_000_000, 70));
        // The write before it is known, and flushed: nothing to wait for below it.
        assert_eq!(view.flush_for(9_000_000, 50), None);
    }

    #[test]
    fn its_own_write_does_not_make_it_read_again() {
        let mut view = FloorView::NEW;
        view.read(LoggedValue::NONE, 7, OURS, 0);
        assert_eq!(view.raise_to(5, 1_000_005, &policy()), Some(1_000_005));
        view.wrote(logged(1_000_005, 50));
        assert_eq!(view.flush_for(5, 10), Some(50));
        assert_eq!(view.check(6, 50, &policy()), FloorCheck::Covered);
    }

    #[test]
    fn the_write_before_the_newest_is_flushed_when_it_covers_the_tick() {
        let mut view = FloorView::NEW;
        let by_this_server = Provenance {
            set_by_this_server: Some(logged(2_000_000, 100)),
            ..OURS
        };
        view.read(logged(3_000_000, 200), 200, by_this_server, 0);
        // The older write covers the tick and is flushed; the newest is not: nothing to wait for.
        assert_eq!(view.flush_for(1_500_000, 150), None);
        // Known durable up to the older value only: a later tick flushes the newest.
        assert_eq!(view.flush_for(2_500_000, 150), Some(200));
        assert_eq!(view.flush_for(2_600_000, 150), None);
    }

    #[test]
    fn a_lowered_relation_is_taken_as_it_is_and_raised_again() {
        let mut view = FloorView::NEW;
        view.read(logged(10_000_000, 5), 5, OURS, 0);
        assert_eq!(view.flush_for(9_000_000, 5), None);
        // A restore of an older dump sets the relation lower.
        view.read(logged(3_000_000, 9), 9, OURS, 0);
        assert_eq!(view.newest(), logged(3_000_000, 9));
        assert_eq!(
            view.raise_to(9_100_000, 10_500_000, &policy()),
            Some(10_500_000)
        );
        view.wrote(logged(10_500_000, 12));
        assert_eq!(view.flush_for(9_100_000, 9), Some(12));
    }

    #[test]
    fn a_first_read_trusts_the_writer_relation() {
        let theirs = Provenance {
            writer_is_this_cluster: false,
            ..OURS
        };
        let without_file = Provenance {
            started_without_reservation: true,
            ..OURS
        };
        let first = |value, from, reserved| {
            let mut view = FloorView::NEW;
            view.read(logged(value, 1), 1, from, reserved)
        };
        assert_eq!(first(50, OURS, 10), None);
        assert_eq!(first(5, theirs, 10), Some(5));
        assert_eq!(first(i64::MIN, theirs, 10), None);
        assert_eq!(first(5, without_file, 10), None);
        assert_eq!(first(50, without_file, 10), Some(50));
    }

    #[test]
    fn a_tick_far_below_the_newest_value_is_not_near() {
        let mut view = FloorView::NEW;
        view.read(logged(10_000_000, 5), 5, OURS, 0);
        assert_eq!(view.raise_to(9_400_000, 11_000_000, &policy()), None);
        assert_eq!(
            view.raise_to(9_600_000, 11_000_000, &policy()),
            Some(11_000_000)
        );
        assert_eq!(view.check(9_600_000, 5, &policy()), FloorCheck::Read);
        assert_eq!(view.check(9_400_000, 5, &policy()), FloorCheck::Flush);
    }

    #[test]
    fn with_a_floor_lead_the_relation_is_written_that_far_ahead_once_half_of_it_is_used() {
        let leading = policy().renewing_while_idle_for(60_000_000);
        let mut view = FloorView::NEW;
        view.read(logged(10_000_000, 5), 5, OURS, 0);
        // Near means within half the lead and half a window: raised to the reservation plus the
        // lead.
        assert_eq!(
            view.raise_to(9_600_000 - 30_000_000, 11_000_000, &leading),
            Some(71_000_000)
        );
        assert_eq!(
            view.raise_to(9_400_000 - 30_000_000, 11_000_000, &leading),
            None
        );
        view.wrote(logged(71_000_000, 9));
        // The next write is due once half the lead is used: a tick half a window and half the
        // lead below the value; every tick up to the value before waits for no flush of it.
        assert_eq!(view.raise_to(40_400_000, 41_000_000, &leading), None);
        assert_eq!(view.flush_for(9_900_000, 5), None);
        // A tick after a quiet spell longer than half the lead and shorter than the lead gets
        // near the value: raised again, and it waits for no flush: the value before covers it,
        // flushed long before.
        assert_eq!(view.check(60_000_000, 9, &leading), FloorCheck::Read);
        assert_eq!(
            view.raise_to(60_000_000, 61_000_000, &leading),
            Some(121_000_000)
        );
        view.wrote(logged(121_000_000, 30));
        assert_eq!(view.flush_for(60_000_000, 9), None);
    }
}
