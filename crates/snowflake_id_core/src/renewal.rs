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
//! replication lag (§5.2). The worker goes on renewing for `snowflake_id.idle_renewal` after
//! the last ID, so the first ID after a quiet spell that long finds R renewed too; after it an
//! idle server writes nothing. The glue (`src/durability/reservation.rs`) does the writing; this module
//! only decides.

/// The renewal marks of one `reserve_ahead` window, and the trusted lead that follows from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenewalPolicy {
    reserve_ahead_us: i64,
    trust_slack_us: i64,
    idle_renewal_us: i64,
}

/// What the trusted lead allows beyond a window by default: enough for the clocks of two
/// clusters to differ at a cut-over or a restore (a dump restored onto a host up to a minute
/// behind the one it came from is taken as it is), and the whole lead that any role able to
/// call `snowflake_raise_floor` or write a floor relation can give every database's IDs.
pub const TRUST_SLACK_US: i64 = 60 * 1_000_000;

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
            trust_slack_us: TRUST_SLACK_US,
            idle_renewal_us: 0,
        }
    }

    /// The same policy with the worker renewing for `idle_renewal_us` after the last ID
    /// (`snowflake_id.idle_renewal`; at least a window, which 0 means).
    pub fn renewing_while_idle_for(self, idle_renewal_us: i64) -> Self {
        RenewalPolicy {
            idle_renewal_us: idle_renewal_us.clamp(0, i64::MAX / 8),
            ..self
        }
    }

    /// The same policy with another slack for the trusted lead (the model check's clock counts
    /// ticks, not microseconds).
    pub fn with_trust_slack(self, trust_slack_us: i64) -> Self {
        RenewalPolicy {
            trust_slack_us: trust_slack_us.clamp(0, i64::MAX / 8),
            ..self
        }
    }

    /// How far beyond the reservation a session raises its database's floor relation (design
    /// §5.3): the idle renewal, so that, like the reservation, the relation still covers the
    /// first ID after a quiet spell that long, and no statement then waits for a write of the
    /// relation or its flush. 0 with an idle renewal of 0 (the relation follows the reservation).
    pub fn floor_lead(&self) -> i64 {
        self.idle_renewal_us
    }

    /// How far ahead of the wall clock a floor the extension did not write counts (design
    /// §5.3): a window and the floor lead, which a dump's floor leads the clock of its cluster by
    /// at most, plus the slack for two hosts' clocks (6 min 1 s by default).
    pub fn trusted_lead(&self) -> i64 {
        self.reserve_ahead_us + self.floor_lead() + self.trust_slack_us
    }

    /// Whether `value` lies more than the trusted lead ahead of `wall`: such a value from
    /// elsewhere waits for a superuser, and `snowflake_raise_floor` refuses it. The one rule
    /// the extension and the model check both ask.
    pub fn beyond_trusted_lead(&self, value: i64, wall: i64) -> bool {
        value.saturating_sub(wall) > self.trusted_lead()
    }

    /// The reservation worker's period: a sixteenth of the window, at least 1 ms, so that a
    /// renewal starts within it of the worker's mark, two periods before sessions would renew.
    pub fn worker_period(&self) -> i64 {
        (self.reserve_ahead_us / 16).max(1_000)
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
    /// worker's mark beyond it, or no ID was issued within the idle renewal (at least a window)
    /// and no standby streams (an idle server writes nothing).
    pub fn for_worker(
        &self,
        reserved_until: i64,
        issued_high_water: i64,
        now_unix_us: i64,
        standby_streaming: impl FnOnce() -> bool,
    ) -> Option<i64> {
        let renews_for = self.reserve_ahead_us.max(self.idle_renewal_us);
        let idle = issued_high_water < now_unix_us.saturating_sub(renews_for);
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

    #[test]
    fn the_worker_renews_for_the_idle_renewal_after_the_last_id_then_stops() {
        let policy = RenewalPolicy::new(1_000_000).renewing_while_idle_for(300_000_000);
        let last_id = 100_000_000;
        // Quiet for a minute: renewed to a window beyond the clock, as under load.
        let now = last_id + 60_000_000;
        assert_eq!(
            policy.for_worker(now + 800_000, last_id, now, || false),
            Some(now)
        );
        assert_eq!(
            policy.for_worker(now + 900_000, last_id, now, || false),
            None
        );
        // Quiet for longer than the idle renewal: nothing.
        let now = last_id + 300_000_001;
        assert_eq!(policy.for_worker(i64::MIN, last_id, now, || false), None);
        // Shorter than a window counts as a window.
        let short = RenewalPolicy::new(1_000_000).renewing_while_idle_for(5);
        let now = last_id + 999_999;
        assert_eq!(
            short.for_worker(i64::MIN, last_id, now, || false),
            Some(now)
        );
    }

    #[test]
    fn the_trusted_lead_is_a_window_the_floor_lead_and_the_slack() {
        let policy = RenewalPolicy::new(1_000_000);
        assert_eq!(policy.trusted_lead(), 61_000_000);
        assert!(!policy.beyond_trusted_lead(61_000_000, 0));
        assert!(policy.beyond_trusted_lead(61_000_001, 0));
        assert!(!policy.beyond_trusted_lead(i64::MIN, i64::MAX));
        let ticks = RenewalPolicy::new(4).with_trust_slack(2);
        assert_eq!(ticks.trusted_lead(), 6);
        // A floor written the floor lead ahead still counts: the idle renewal is added.
        let leading = policy.renewing_while_idle_for(300_000_000);
        assert_eq!(leading.floor_lead(), 300_000_000);
        assert_eq!(leading.trusted_lead(), 361_000_000);
        assert_eq!(policy.floor_lead(), 0);
        assert_eq!(policy.worker_period(), 62_500);
        assert_eq!(RenewalPolicy::new(1_000).worker_period(), 1_000);
    }
}
