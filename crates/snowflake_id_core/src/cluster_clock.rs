//! The cluster's forward-only clock over one shared atomic.
//!
//! cluster_now = monotonic_now + offset, where `offset` only grows. It follows the wall
//! clock forward (a wall clock ahead raises the offset), and when the wall clock steps
//! back it keeps running at real speed from where it was, carried by the monotonic
//! clock (system-wide CLOCK_MONOTONIC, so comparable across processes). It never goes
//! back and never waits.

use std::sync::atomic::{AtomicI64, Ordering};

/// Offset value meaning "not started". Every real offset is kept above it.
const NOT_STARTED: i64 = i64::MIN;

#[repr(C, align(64))]
pub struct ClusterClock {
    offset_us: AtomicI64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    pub now_unix_us: i64,
    /// How far the wall clock is behind the cluster clock (0 when following it).
    pub wall_behind_us: i64,
}

/// Clamp an i128 into i64 (saturating arithmetic done in a wider type).
fn clamp_i64(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// The offset that makes monotonic + offset equal `target`, kept off the sentinel.
fn offset_for(target_unix_us: i64, monotonic_us: i64) -> i64 {
    clamp_i64(i128::from(target_unix_us) - i128::from(monotonic_us)).max(NOT_STARTED + 1)
}

impl ClusterClock {
    /// Not started (offset i64::MIN); the first `read` or `start` starts it.
    pub const fn new() -> ClusterClock {
        ClusterClock {
            offset_us: AtomicI64::new(NOT_STARTED),
        }
    }

    /// (Re)start: cluster time = max(wall, floor) now. Called once at shared-memory init
    /// (floor = a persisted reservation, or i64::MIN). A plain store, so a restart may
    /// move the offset down (e.g. a new boot's monotonic clock); nothing reads
    /// concurrently at init.
    pub fn start(&self, wall_unix_us: i64, monotonic_us: i64, floor_unix_us: i64) {
        let target = wall_unix_us.max(floor_unix_us);
        self.offset_us
            .store(offset_for(target, monotonic_us), Ordering::Relaxed);
    }

    /// Current cluster time given simultaneous readings of the wall and monotonic
    /// clocks. If the wall is ahead of monotonic+offset, raise offset to wall-monotonic
    /// (fetch_max; it then follows a forward step). Writes the shared atomic only when
    /// the offset actually grows (hot path: no shared-line write otherwise). If not
    /// started, start it (fetch_max from the sentinel, so racing starters agree).
    pub fn read(&self, wall_unix_us: i64, monotonic_us: i64) -> Reading {
        let mono = i128::from(monotonic_us);
        let mut offset = self.offset_us.load(Ordering::Relaxed);
        if offset == NOT_STARTED || i128::from(wall_unix_us) > mono + i128::from(offset) {
            let wanted = offset_for(wall_unix_us, monotonic_us);
            // Only the single value matters, so Relaxed suffices (coherence keeps it
            // from going back for any observer).
            let previous = self.offset_us.fetch_max(wanted, Ordering::Relaxed);
            offset = previous.max(wanted);
        }
        let now = clamp_i64(mono + i128::from(offset));
        Reading {
            now_unix_us: now,
            wall_behind_us: clamp_i64(i128::from(now) - i128::from(wall_unix_us)).max(0),
        }
    }

    /// Cluster time from the monotonic clock alone, with the offset as last raised; None if
    /// not started. Cheaper than `read` (one clock instead of two); callers still `read` now
    /// and then (once per tick) so a forward step of the wall clock is followed.
    pub fn read_monotonic(&self, monotonic_us: i64) -> Option<i64> {
        let offset = self.offset_us.load(Ordering::Relaxed);
        (offset != NOT_STARTED).then(|| clamp_i64(i128::from(monotonic_us) + i128::from(offset)))
    }

    /// Whether `start` or `read` has run.
    #[cfg(test)]
    pub fn started(&self) -> bool {
        self.offset_us.load(Ordering::Relaxed) != NOT_STARTED
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
    const MINUTE: i64 = 60_000_000;

    #[test]
    fn follows_wall_when_both_advance() {
        let c = ClusterClock::new();
        assert!(!c.started());
        for i in 0..100 {
            let r = c.read(WALL0 + i * 1000, MONO0 + i * 1000);
            assert_eq!(
                r,
                Reading {
                    now_unix_us: WALL0 + i * 1000,
                    wall_behind_us: 0
                }
            );
        }
        assert!(c.started());
    }

    #[test]
    fn backward_step_keeps_monotonic_speed() {
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, i64::MIN);
        assert_eq!(c.read(WALL0 + 1000, MONO0 + 1000).now_unix_us, WALL0 + 1000);
        // Wall steps back 10 minutes.
        let back = WALL0 + 2000 - 10 * MINUTE;
        let r = c.read(back, MONO0 + 2000);
        assert_eq!(r.now_unix_us, WALL0 + 2000);
        assert_eq!(r.wall_behind_us, 10 * MINUTE);
        // Keeps advancing at monotonic speed while the wall catches up.
        let r = c.read(back + 5 * MINUTE, MONO0 + 2000 + 5 * MINUTE);
        assert_eq!(r.now_unix_us, WALL0 + 2000 + 5 * MINUTE);
        assert_eq!(r.wall_behind_us, 10 * MINUTE);
        // A wall that runs fast after the step eventually catches up and is followed.
        let r = c.read(WALL0 + 20 * MINUTE, MONO0 + 2000 + 6 * MINUTE);
        assert_eq!(r.now_unix_us, WALL0 + 20 * MINUTE);
        assert_eq!(r.wall_behind_us, 0);
    }

    #[test]
    fn forward_step_jumps_forward() {
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, i64::MIN);
        let r = c.read(WALL0 + 60 * MINUTE, MONO0 + 10);
        assert_eq!(r.now_unix_us, WALL0 + 60 * MINUTE);
        assert_eq!(
            c.read(WALL0 + 60 * MINUTE + 5, MONO0 + 15).now_unix_us,
            WALL0 + 60 * MINUTE + 5
        );
    }

    #[test]
    fn start_with_future_floor() {
        let c = ClusterClock::new();
        let floor = WALL0 + 30 * MINUTE;
        c.start(WALL0, MONO0, floor);
        let r = c.read(WALL0, MONO0);
        assert_eq!(r.now_unix_us, floor);
        assert_eq!(r.wall_behind_us, 30 * MINUTE);
        for i in 1..100 {
            let r = c.read(WALL0 + i, MONO0 + i);
            assert_eq!(r.now_unix_us, floor + i);
        }
        // Restart without a floor follows the wall again.
        c.start(WALL0, MONO0, i64::MIN);
        assert_eq!(c.read(WALL0, MONO0).now_unix_us, WALL0);
    }

    #[test]
    fn extreme_inputs_saturate() {
        let c = ClusterClock::new();
        c.start(i64::MIN, i64::MAX, i64::MIN);
        assert!(c.started());
        let r = c.read(i64::MAX, i64::MIN);
        assert_eq!(r.now_unix_us, -1); // saturated offset i64::MAX plus i64::MIN
        let r = c.read(i64::MIN, i64::MAX);
        assert_eq!(r.now_unix_us, i64::MAX);
        assert_eq!(r.wall_behind_us, i64::MAX);
        let c = ClusterClock::default();
        let r = c.read(i64::MIN, 0);
        assert_eq!(r.now_unix_us, i64::MIN + 1);
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
    fn threads_constant_offset_nondecreasing_in_monotonic_order() {
        // The wall only steps back after start, so the offset never moves and readings
        // sorted by monotonic input must be non-decreasing.
        let c = ClusterClock::new();
        c.start(WALL0, MONO0, i64::MIN);
        let mono = AtomicI64::new(MONO0);
        let mut all: Vec<(i64, i64)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..5000)
                            .map(|_| {
                                let m = mono.fetch_add(1, Ordering::Relaxed);
                                let back = if (m / 100) % 2 == 0 { 0 } else { 10 * MINUTE };
                                let wall = WALL0 - MONO0 + m - back;
                                (m, c.read(wall, m).now_unix_us)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        all.sort();
        assert!(all.windows(2).all(|w| w[0].1 <= w[1].1));
    }

    #[test]
    fn threads_reading_after_another_is_not_earlier() {
        // With arbitrary wall steps, a reading taken after another completed (monotonic
        // sampled afterwards) is never earlier, and each thread's readings never go back.
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
                        let r = c.read(stepping_wall(m), m);
                        assert!(r.now_unix_us > seen);
                        assert!(r.now_unix_us > mine);
                        assert!(r.now_unix_us >= stepping_wall(m));
                        mine = r.now_unix_us;
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

        #[test]
        fn never_back_at_least_monotonic_speed(
            wall0 in 0i64..4_000_000_000_000_000,
            mono0 in 0i64..1_000_000_000_000,
            floor in prop_oneof![Just(i64::MIN), 0i64..4_000_000_000_000_000],
            moves in moves(),
        ) {
            let c = ClusterClock::new();
            c.start(wall0, mono0, floor);
            let (mut wall, mut mono) = (wall0, mono0);
            let mut prev = c.read(wall, mono);
            prop_assert_eq!(prev.now_unix_us, wall.max(floor));
            let mut stepped_back = floor > wall0;
            for mv in moves {
                let (dw, dm) = match mv {
                    Move::Tick(d) => (d, d),
                    Move::Step(d, m) => (d + m, m),
                };
                stepped_back |= dw < dm;
                wall += dw;
                mono += dm;
                let r = c.read(wall, mono);
                prop_assert!(r.now_unix_us >= prev.now_unix_us);
                prop_assert!(r.now_unix_us - prev.now_unix_us >= dm);
                prop_assert!(r.now_unix_us >= wall);
                prop_assert_eq!(r.wall_behind_us, r.now_unix_us - wall);
                if !stepped_back {
                    prop_assert_eq!(r.now_unix_us, wall);
                    prop_assert_eq!(r.wall_behind_us, 0);
                }
                prev = r;
            }
        }
    }

    #[test]
    fn monotonic_reads_agree_with_full_reads_and_never_go_back() {
        let clock = ClusterClock::new();
        assert_eq!(clock.read_monotonic(5), None);
        clock.start(1_000_000, 10, i64::MIN);
        assert_eq!(clock.read_monotonic(20), Some(1_000_010));
        // A forward step seen by a full read is carried by later monotonic reads.
        let stepped = clock.read(5_000_000, 30).now_unix_us;
        assert_eq!(stepped, 5_000_000);
        assert_eq!(clock.read_monotonic(40), Some(5_000_010));
        // A backward step changes nothing for either kind of read.
        assert_eq!(clock.read(100, 50).now_unix_us, 5_000_020);
        assert_eq!(clock.read_monotonic(60), Some(5_000_030));
    }
}
