//! The cluster's clock (docs/design.md §3.1), over four shared atomics.
//!
//! cluster_now = max(lead line, trusted wall), where
//! - the *lead line* continues from the latest cluster time anyone observed at 9/10 of real
//!   speed (`slow(monotonic) + slow_offset`, `slow_offset` only grows). While the wall clock is
//!   behind the cluster clock (it stepped back, or the server started above a durable floor),
//!   the cluster clock runs on this line: it never goes back and never stops, and the lead over
//!   the wall clock shrinks by a tenth of the elapsed time, so it is gone after ten times its
//!   size (a 1 s lead after 10 s).
//! - the *trusted wall* is the wall clock, unless it is more than `max_jump_us` ahead of where
//!   the last trusted reading, continued at real speed, would be. Such a forward jump is only
//!   believed once it has lasted `confirm_us` of monotonic time; until then the last trusted
//!   reading continues at real speed. A glitch that goes away leaves no trace; a real
//!   correction is followed after the confirmation.
//!
//! Monotonic times are system-wide CLOCK_MONOTONIC, so comparable across processes. The lead
//! line is only raised when it would grow by more than `ANCHOR_SLACK_US`, so the shared line is
//! written about once per 10 ms of cluster time, not per read; the cost is that after a
//! backward step the cluster clock may read up to that slack (less than one tick of the finest
//! time unit) below an earlier reading of another backend. One backend's IDs never go back (the
//! generator keeps them increasing), and uniqueness never depends on this clock (§2.3).

use std::sync::atomic::{AtomicI64, Ordering};

use crate::layout::clamp_i64;

/// Offset value meaning "not started". Every real offset is kept above it.
pub(crate) const NOT_STARTED: i64 = i64::MIN;
/// `suspect_since_us` when no forward jump is being confirmed.
const NO_SUSPECT: i64 = i64::MIN;
/// `suspect_since_us` while one reader adopts a confirmed jump.
const ADOPTING: i64 = i64::MIN + 1;
/// While ahead of the wall clock, the cluster clock runs at (DIVISOR − 1) / DIVISOR speed.
pub const LEAD_DECAY_DIVISOR: i64 = 10;
/// How far below the latest observed cluster time the lead line may lag (see the module doc).
pub const ANCHOR_SLACK_US: i64 = 1_000;
/// The trusted wall reading is rewritten only when the wall drifts this much from it (the
/// monotonic estimate of the hot path lags the wall clock by at most this; drift between the two
/// clocks is parts per million, so the shared line is rarely written).
const TRUST_SLACK_US: i64 = 100;

/// How far a forward jump of the wall clock is believed at once, and how long a larger one
/// must last to be believed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JumpPolicy {
    pub max_jump_us: i64,
    pub confirm_us: i64,
}

impl JumpPolicy {
    /// Follows every forward step at once (no confirmation).
    pub const TRUST_ALL: JumpPolicy = JumpPolicy {
        max_jump_us: i64::MAX,
        confirm_us: 0,
    };
}

/// A forward jump that a reading decided about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jump {
    /// It lasted the confirmation time and is followed from now on.
    Followed,
    /// It went away before it was confirmed.
    Ignored,
}

#[repr(C, align(64))]
pub struct ClusterClock {
    /// The lead line is `slow(monotonic) + slow_offset_us`.
    slow_offset_us: AtomicI64,
    /// The last trusted wall reading minus the monotonic clock at that reading.
    trusted_offset_us: AtomicI64,
    /// Monotonic time a suspicious forward jump was first seen, or NO_SUSPECT / ADOPTING.
    suspect_since_us: AtomicI64,
    /// The suspicious wall reading minus the monotonic clock: a later jump to another offset is
    /// another jump, and the one before it went away.
    suspect_offset_us: AtomicI64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    pub now_unix_us: i64,
    /// How far the wall clock is behind the cluster clock (0 when following it).
    pub wall_behind_us: i64,
    /// A forward jump this reading decided about (each is reported by exactly one reading).
    pub jump: Option<Jump>,
}

/// The monotonic clock at lead-line speed. In i64 (cannot overflow: |m − m/10| ≤ |m|), since it
/// is on the hot path and a 128-bit division is a library call.
#[inline]
pub(crate) fn slow(monotonic_us: i64) -> i128 {
    i128::from(monotonic_us - monotonic_us / LEAD_DECAY_DIVISOR)
}

/// The offset that puts `line(monotonic)` + offset at `target`, kept off the sentinels.
fn offset_for(target_unix_us: i64, line_us: i128) -> i64 {
    clamp_i64(i128::from(target_unix_us) - line_us).max(NOT_STARTED + 2)
}

impl ClusterClock {
    /// Not started; the first `read` or `start` starts it.
    pub const fn new() -> ClusterClock {
        ClusterClock {
            slow_offset_us: AtomicI64::new(NOT_STARTED),
            trusted_offset_us: AtomicI64::new(NOT_STARTED),
            suspect_since_us: AtomicI64::new(NO_SUSPECT),
            suspect_offset_us: AtomicI64::new(0),
        }
    }

    /// (Re)start at max(wall, floor), trusting the wall as it reads now. Called at shared-memory
    /// init (floor = the durable floor, or i64::MIN); plain stores, since nothing reads
    /// concurrently then.
    pub fn start(&self, wall_unix_us: i64, monotonic_us: i64, floor_unix_us: i64) {
        let target = wall_unix_us.max(floor_unix_us);
        self.slow_offset_us
            .store(offset_for(target, slow(monotonic_us)), Ordering::Relaxed);
        self.trusted_offset_us.store(
            offset_for(wall_unix_us, i128::from(monotonic_us)),
            Ordering::Relaxed,
        );
        self.suspect_since_us.store(NO_SUSPECT, Ordering::Relaxed);
    }

    /// Raises the cluster clock to at least `floor_unix_us` from now on (a durable floor
    /// learned after start: WAL replay, the data); it then decays from there like any lead.
    pub fn raise_to(&self, floor_unix_us: i64, monotonic_us: i64) {
        self.slow_offset_us.fetch_max(
            offset_for(floor_unix_us, slow(monotonic_us)),
            Ordering::Relaxed,
        );
    }

    /// Current cluster time given simultaneous readings of the wall and monotonic clocks.
    pub fn read(&self, wall_unix_us: i64, monotonic_us: i64, policy: JumpPolicy) -> Reading {
        if self.slow_offset_us.load(Ordering::Relaxed) == NOT_STARTED {
            // Racing starters agree: each raises from the sentinel with fetch_max.
            self.raise_to(wall_unix_us, monotonic_us);
            self.trusted_offset_us.fetch_max(
                offset_for(wall_unix_us, i128::from(monotonic_us)),
                Ordering::Relaxed,
            );
        }
        let (trusted_wall, jump) = self.trusted_wall(wall_unix_us, monotonic_us, policy);
        let lead_line = self.lead_line(monotonic_us);
        let now = lead_line.max(trusted_wall);
        // Keep the lead line within the slack of what was observed.
        if i128::from(now) - i128::from(lead_line) > i128::from(ANCHOR_SLACK_US) {
            self.raise_to(now, monotonic_us);
        }
        Reading {
            now_unix_us: now,
            wall_behind_us: clamp_i64(i128::from(now) - i128::from(wall_unix_us)).max(0),
            jump,
        }
    }

    /// Cluster time from the monotonic clock alone (the lead line and the last trusted wall
    /// reading, continued); None if not started. Cheaper than `read` (one clock instead of two);
    /// callers still `read` now and then (once per tick) so the wall clock is followed.
    #[inline]
    pub fn read_monotonic(&self, monotonic_us: i64) -> Option<i64> {
        let trusted = self.trusted_offset_us.load(Ordering::Relaxed);
        (trusted != NOT_STARTED).then(|| {
            let trusted_wall = clamp_i64(i128::from(monotonic_us) + i128::from(trusted));
            self.lead_line(monotonic_us).max(trusted_wall)
        })
    }

    #[inline]
    fn lead_line(&self, monotonic_us: i64) -> i64 {
        clamp_i64(slow(monotonic_us) + i128::from(self.slow_offset_us.load(Ordering::Relaxed)))
    }

    /// The wall reading if it is believed, else the last believed one continued; and the jump
    /// decided by this reading, if any.
    fn trusted_wall(
        &self,
        wall_unix_us: i64,
        monotonic_us: i64,
        policy: JumpPolicy,
    ) -> (i64, Option<Jump>) {
        let trusted_offset = self.trusted_offset_us.load(Ordering::Relaxed);
        let continued = clamp_i64(i128::from(monotonic_us) + i128::from(trusted_offset));
        let jump_us = i128::from(wall_unix_us) - i128::from(continued);
        let suspect = &self.suspect_since_us;
        let mut decided = None;
        if jump_us > i128::from(policy.max_jump_us) {
            let offset = clamp_i64(i128::from(wall_unix_us) - i128::from(monotonic_us));
            let mut since = match suspect.compare_exchange(
                NO_SUSPECT,
                monotonic_us,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.suspect_offset_us.store(offset, Ordering::Relaxed);
                    monotonic_us
                }
                Err(since) => since,
            };
            let suspected = self.suspect_offset_us.load(Ordering::Relaxed);
            if since != ADOPTING
                && (i128::from(offset) - i128::from(suspected)).abs()
                    > i128::from(policy.max_jump_us)
                && suspect
                    .compare_exchange(since, monotonic_us, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                // The wall clock jumped somewhere else: the first jump went away unconfirmed.
                self.suspect_offset_us.store(offset, Ordering::Relaxed);
                since = monotonic_us;
                decided = Some(Jump::Ignored);
            }
            let lasted = i128::from(monotonic_us) - i128::from(since);
            if since != ADOPTING && lasted < i128::from(policy.confirm_us) {
                return (continued, decided);
            }
            if since != ADOPTING
                && suspect
                    .compare_exchange(since, ADOPTING, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                self.trust(wall_unix_us, monotonic_us);
                suspect.store(NO_SUSPECT, Ordering::Relaxed);
                decided = Some(Jump::Followed);
            }
        } else {
            let since = suspect.load(Ordering::Relaxed);
            if since != NO_SUSPECT
                && since != ADOPTING
                && suspect
                    .compare_exchange(since, NO_SUSPECT, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                decided = Some(Jump::Ignored);
            }
            if (i128::from(wall_unix_us) - i128::from(continued)).abs() > i128::from(TRUST_SLACK_US)
            {
                self.trust(wall_unix_us, monotonic_us);
            }
        }
        (wall_unix_us, decided)
    }

    fn trust(&self, wall_unix_us: i64, monotonic_us: i64) {
        self.trusted_offset_us.store(
            offset_for(wall_unix_us, i128::from(monotonic_us)),
            Ordering::Relaxed,
        );
    }

    /// The lead line's offset and the trusted wall reading's, as they are now (the hot path's
    /// span of a tick is made for them: `monotonic_span`).
    #[inline]
    pub(crate) fn offsets(&self) -> (i64, i64) {
        (
            self.slow_offset_us.load(Ordering::Relaxed),
            self.trusted_offset_us.load(Ordering::Relaxed),
        )
    }

    /// A started clock with these offsets.
    #[cfg(test)]
    pub(crate) fn with_offsets(slow_offset_us: i64, trusted_offset_us: i64) -> ClusterClock {
        let c = ClusterClock::new();
        c.slow_offset_us.store(slow_offset_us, Ordering::Relaxed);
        c.trusted_offset_us
            .store(trusted_offset_us, Ordering::Relaxed);
        c
    }

    /// Whether `start` or `read` has run.
    #[cfg(test)]
    pub fn started(&self) -> bool {
        self.slow_offset_us.load(Ordering::Relaxed) != NOT_STARTED
    }
}

impl Default for ClusterClock {
    fn default() -> ClusterClock {
        ClusterClock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WALL0: i64 = 1_750_000_000_000_000;
    const MONO0: i64 = 5_000_000;
    const SECOND: i64 = 1_000_000;
    const MINUTE: i64 = 60 * SECOND;
    const YEAR: i64 = 365 * 24 * 60 * MINUTE;
    const POLICY: JumpPolicy = JumpPolicy {
        max_jump_us: SECOND,
        confirm_us: 10 * SECOND,
    };

    fn now(c: &ClusterClock, wall: i64, mono: i64) -> i64 {
        c.read(wall, mono, POLICY).now_unix_us
    }

    #[test]
    fn follows_wall_when_both_advance() {
        let c = ClusterClock::new();
        assert!(!c.started());
        for i in 0..100 {
            let r = c.read(WALL0 + i * 1000, MONO0 + i * 1000, POLICY);
            assert_eq!(
                r,
                Reading {
                    now_unix_us: WALL0 + i * 1000,
                    wall_behind_us: 0,
                    jump: None,
                }
            );
        }
        assert!(c.started());
    }

    #[test]
    fn a_backward_step_decays_at_nine_tenths_speed_without_going_back() {
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, i64::MIN);
        assert_eq!(now(&c, WALL0 + 1000, MONO0 + 1000), WALL0 + 1000);
        // The wall steps back 10 minutes: the clock continues, slowed to 9/10.
        let back = WALL0 + 2000 - 10 * MINUTE;
        let r = c.read(back, MONO0 + 2000, POLICY);
        assert!(r.now_unix_us >= WALL0 + 1000);
        assert!(r.wall_behind_us > 10 * MINUTE - 2 * ANCHOR_SLACK_US);
        let r = c.read(back + 5 * MINUTE, MONO0 + 2000 + 5 * MINUTE, POLICY);
        let expected = WALL0 + 2000 + 5 * MINUTE * 9 / 10;
        assert!((r.now_unix_us - expected).abs() <= ANCHOR_SLACK_US, "{r:?}");
        // After ten times the step the wall has caught up and is followed again.
        let later = 100 * MINUTE + 10 * SECOND;
        let r = c.read(back + later, MONO0 + 2000 + later, POLICY);
        assert_eq!((r.now_unix_us, r.wall_behind_us), (back + later, 0));
    }

    #[test]
    fn a_lead_from_a_floor_decays_within_ten_times_its_size() {
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, WALL0 + SECOND);
        assert_eq!(now(&c, WALL0, MONO0), WALL0 + SECOND);
        let mut previous = WALL0 + SECOND;
        for ms in (1..=11_000).step_by(10) {
            let r = c.read(WALL0 + ms * 1000, MONO0 + ms * 1000, POLICY);
            assert!(r.now_unix_us >= previous - ANCHOR_SLACK_US);
            assert!(r.now_unix_us >= WALL0 + ms * 1000);
            previous = r.now_unix_us;
        }
        assert_eq!(
            c.read(WALL0 + 11 * SECOND, MONO0 + 11 * SECOND, POLICY)
                .wall_behind_us,
            0
        );
    }

    #[test]
    fn a_short_forward_glitch_leaves_no_trace() {
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, i64::MIN);
        // +100 years for 2 seconds.
        for ms in (0..2000).step_by(10) {
            let r = c.read(WALL0 + 100 * YEAR + ms * 1000, MONO0 + ms * 1000, POLICY);
            assert_eq!(r.now_unix_us, WALL0 + ms * 1000, "continues at real speed");
            assert_eq!(r.jump, None);
        }
        let r = c.read(WALL0 + 2 * SECOND, MONO0 + 2 * SECOND, POLICY);
        assert_eq!(r.now_unix_us, WALL0 + 2 * SECOND);
        assert_eq!(r.jump, Some(Jump::Ignored));
        let r = c.read(WALL0 + 3 * SECOND, MONO0 + 3 * SECOND, POLICY);
        assert_eq!((r.now_unix_us, r.jump), (WALL0 + 3 * SECOND, None));
    }

    #[test]
    fn two_different_glitches_in_a_row_are_two_ignored_jumps() {
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, i64::MIN);
        let mut ignored = 0;
        for (offset, from_ms) in [(100 * YEAR, 0), (5 * YEAR, 2_000)] {
            for ms in (from_ms..from_ms + 2_000).step_by(10) {
                let r = c.read(WALL0 + offset + ms * 1000, MONO0 + ms * 1000, POLICY);
                assert_eq!(r.now_unix_us, WALL0 + ms * 1000);
                ignored += usize::from(r.jump == Some(Jump::Ignored));
            }
        }
        let r = c.read(WALL0 + 4 * SECOND, MONO0 + 4 * SECOND, POLICY);
        ignored += usize::from(r.jump == Some(Jump::Ignored));
        assert_eq!((r.now_unix_us, ignored), (WALL0 + 4 * SECOND, 2));
    }

    #[test]
    fn a_forward_correction_that_lasts_is_followed_once_confirmed() {
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, i64::MIN);
        let hour = 60 * MINUTE;
        let mut followed = 0;
        for ms in (0..=12_000).step_by(100) {
            let r = c.read(WALL0 + hour + ms * 1000, MONO0 + ms * 1000, POLICY);
            followed += usize::from(r.jump == Some(Jump::Followed));
            if ms < 10_000 {
                assert_eq!(r.now_unix_us, WALL0 + ms * 1000);
            } else {
                assert_eq!(r.now_unix_us, WALL0 + hour + ms * 1000);
            }
        }
        assert_eq!(followed, 1);
        // Small forward steps are followed at once.
        let r = c.read(WALL0 + hour + 12_500_000, MONO0 + 12_100_000, POLICY);
        assert_eq!((r.now_unix_us, r.jump), (WALL0 + hour + 12_500_000, None));
    }

    #[test]
    fn trust_all_follows_forward_steps_at_once() {
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, i64::MIN);
        let r = c.read(WALL0 + 60 * MINUTE, MONO0 + 10, JumpPolicy::TRUST_ALL);
        assert_eq!(r.now_unix_us, WALL0 + 60 * MINUTE);
    }

    #[test]
    fn raise_to_lifts_the_clock_and_then_decays() {
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, i64::MIN);
        c.raise_to(WALL0 + 5 * SECOND, MONO0);
        assert_eq!(now(&c, WALL0, MONO0), WALL0 + 5 * SECOND);
        assert_eq!(c.read_monotonic(MONO0), Some(WALL0 + 5 * SECOND));
        // A lower floor changes nothing.
        c.raise_to(WALL0, MONO0);
        assert_eq!(now(&c, WALL0, MONO0), WALL0 + 5 * SECOND);
        let r = c.read(WALL0 + 51 * SECOND, MONO0 + 51 * SECOND, POLICY);
        assert_eq!(r.wall_behind_us, 0);
    }

    #[test]
    fn extreme_inputs_saturate() {
        let c = ClusterClock::new();
        c.start(i64::MIN, i64::MAX, i64::MIN);
        assert!(c.started());
        let _ = c.read(i64::MAX, i64::MIN, POLICY);
        let _ = c.read(i64::MIN, i64::MAX, POLICY);
        let _ = c.read(i64::MAX, i64::MAX, JumpPolicy::TRUST_ALL);
        let _ = c.read_monotonic(i64::MIN);
        let c = ClusterClock::default();
        assert!(c.read(i64::MIN, 0, POLICY).now_unix_us > i64::MIN);
    }

    /// Wall clock as a function of monotonic time with steps both ways.
    fn stepping_wall(mono: i64) -> i64 {
        let step = match (mono / 1000) % 7 {
            0 => 0,
            1 => -10 * MINUTE,
            2 => 3 * MINUTE,
            3 => -MINUTE,
            4 => 5 * MINUTE,
            5 => -20 * MINUTE,
            _ => 4 * MINUTE,
        };
        WALL0 - MONO0 + mono + step
    }

    #[test]
    fn threads_never_see_the_clock_go_back_beyond_the_slack() {
        // With arbitrary wall steps, a reading taken after another completed (monotonic
        // sampled afterwards) is never more than the slack earlier, each thread's readings
        // likewise, and no reading is behind the wall it was given.
        let c = ClusterClock::new();
        let mono = AtomicI64::new(MONO0);
        let latest = AtomicI64::new(i64::MIN);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut mine = i64::MIN;
                    for _ in 0..20_000 {
                        let seen = latest.load(Ordering::Acquire);
                        let m = mono.fetch_add(1, Ordering::Relaxed);
                        let r = c.read(stepping_wall(m), m, JumpPolicy::TRUST_ALL);
                        assert!(r.now_unix_us >= seen.saturating_sub(ANCHOR_SLACK_US));
                        assert!(r.now_unix_us >= mine.saturating_sub(ANCHOR_SLACK_US));
                        assert!(r.now_unix_us >= stepping_wall(m));
                        mine = mine.max(r.now_unix_us);
                        latest.fetch_max(r.now_unix_us, Ordering::AcqRel);
                    }
                });
            }
        });
    }

    #[derive(Clone, Copy, Debug)]
    enum Move {
        /// Wall and monotonic advance together by this much.
        Tick(i64),
        /// Wall jumps by this much (either way) as monotonic advances by `.1`.
        Step(i64, i64),
    }

    fn moves() -> impl Strategy<Value = Vec<Move>> {
        prop::collection::vec(
            prop_oneof![
                4 => (0i64..10_000_000).prop_map(Move::Tick),
                1 => (-3_600_000_000i64..3_600_000_000, 0i64..10_000)
                    .prop_map(|(d, m)| Move::Step(d, m)),
            ],
            1..300,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// For any wall clock: never back beyond the slack, at least 9/10 of real speed,
        /// never behind a believed wall; exactly the wall while the wall only moves forward
        /// in steps it believes; and every suspected jump is decided at most once.
        #[test]
        fn never_back_never_stalls_and_follows_a_believed_wall(
            wall0 in 0i64..4_000_000_000_000_000,
            mono0 in 0i64..1_000_000_000_000,
            floor in prop_oneof![Just(i64::MIN), 0i64..4_000_000_000_000_000],
            moves in moves(),
            trust_all in any::<bool>(),
        ) {
            let policy = if trust_all { JumpPolicy::TRUST_ALL } else { POLICY };
            let c = ClusterClock::new();
            c.start(wall0, mono0, floor);
            let (mut wall, mut mono) = (wall0, mono0);
            let mut prev = c.read(wall, mono, policy);
            prop_assert_eq!(prev.now_unix_us, wall.max(floor));
            let mut wall_only_forward = floor <= wall0;
            for mv in moves {
                let (dw, dm) = match mv {
                    Move::Tick(d) => (d, d),
                    Move::Step(d, m) => (d + m, m),
                };
                wall_only_forward &= dw >= dm && (trust_all || dw - dm <= POLICY.max_jump_us);
                wall += dw;
                mono += dm;
                let r = c.read(wall, mono, policy);
                prop_assert!(r.now_unix_us >= prev.now_unix_us - ANCHOR_SLACK_US);
                prop_assert!(
                    r.now_unix_us - prev.now_unix_us >= dm - dm / LEAD_DECAY_DIVISOR - 1 - ANCHOR_SLACK_US
                );
                if trust_all {
                    prop_assert!(r.now_unix_us >= wall);
                }
                prop_assert_eq!(r.wall_behind_us, (r.now_unix_us - wall).max(0));
                if wall_only_forward {
                    prop_assert_eq!(r.now_unix_us, wall);
                }
                prev = r;
            }
        }
    }

    #[test]
    fn monotonic_reads_agree_with_full_reads() {
        let clock = ClusterClock::new();
        assert_eq!(clock.read_monotonic(5), None);
        clock.start(1_000_000, 10, i64::MIN);
        assert_eq!(clock.read_monotonic(20), Some(1_000_010));
        // A forward step seen by a full read is carried by later monotonic reads.
        let stepped = clock.read(5_000_000, 30, JumpPolicy::TRUST_ALL).now_unix_us;
        assert_eq!(stepped, 5_000_000);
        assert_eq!(clock.read_monotonic(40), Some(5_000_010));
        // After a backward step both kinds of read continue from where the clock was.
        let r = clock.read(100, 50, JumpPolicy::TRUST_ALL).now_unix_us;
        assert!(r >= 5_000_020 - ANCHOR_SLACK_US);
        assert!(clock.read_monotonic(60).unwrap() >= r);
    }
}
