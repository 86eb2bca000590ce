//! The monotonic times whose cluster time lies in a tick (docs/design.md §3.2): made once per
//! tick, so that an ID continuing the tick compares its `CLOCK_MONOTONIC` reading with two
//! bounds instead of computing the cluster time.

use crate::cluster_clock::{slow, ClusterClock, LEAD_DECAY_DIVISOR, NOT_STARTED};
use crate::layout::clamp_i64;

/// The monotonic times whose cluster time ([`ClusterClock::read_monotonic`]) lies in a span of
/// Unix µs, for the two offsets it was made with: the hot path compares its monotonic reading
/// with them ([`MonotonicSpan::holds`]) instead of computing the cluster time, as long as
/// neither offset has moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MonotonicSpan {
    slow_offset_us: i64,
    trusted_offset_us: i64,
    /// The first monotonic time whose cluster time is at or after the span's start.
    from_us: i64,
    /// The first monotonic time whose cluster time is at or after its end.
    until_us: i64,
}

impl MonotonicSpan {
    /// Holds no time.
    pub const EMPTY: MonotonicSpan = MonotonicSpan {
        slow_offset_us: NOT_STARTED,
        trusted_offset_us: NOT_STARTED,
        from_us: 0,
        until_us: 0,
    };
}

/// The first monotonic time whose cluster time, with these offsets, is at or after `target`
/// (the cluster time never decreases with the monotonic clock); None if no i64 time is.
fn first_monotonic_at(target: i64, slow_offset_us: i64, trusted_offset_us: i64) -> Option<i64> {
    if target == i64::MIN {
        return Some(i64::MIN); // every cluster time is
    }
    let target = i128::from(target);
    let in_range = |m: i128| i64::try_from(m.max(i128::from(i64::MIN))).ok();
    // clamp(m + trusted) >= target exactly when m + trusted >= target (an i64 above i64::MIN).
    let trusted = in_range(target - i128::from(trusted_offset_us));
    // clamp(slow(m) + slow_offset) >= target likewise: slow(m) >= wanted, slow non-decreasing
    // at 9/10 speed, so 10/9 of `wanted` is within two of the answer.
    let wanted = target - i128::from(slow_offset_us);
    let slow_line = (wanted <= slow(i64::MAX)).then(|| {
        let mut m =
            clamp_i64(wanted * LEAD_DECAY_DIVISOR as i128 / (LEAD_DECAY_DIVISOR - 1) as i128);
        while slow(m) < wanted {
            m += 1;
        }
        while m > i64::MIN && slow(m - 1) >= wanted {
            m -= 1;
        }
        m
    });
    // The cluster time is the later of the two lines: the first time either reaches it.
    [trusted, slow_line].into_iter().flatten().min()
}

impl MonotonicSpan {
    /// The monotonic times whose cluster time on `clock` is in `[start_unix_us, end_unix_us)`
    /// with the offsets as they are now; empty if the clock has not started or a bound is past every
    /// monotonic time.
    pub fn of(clock: &ClusterClock, start_unix_us: i64, end_unix_us: i64) -> MonotonicSpan {
        let (slow_offset_us, trusted_offset_us) = clock.offsets();
        if trusted_offset_us == NOT_STARTED || slow_offset_us == NOT_STARTED {
            return MonotonicSpan::EMPTY;
        }
        let first_at = |target| first_monotonic_at(target, slow_offset_us, trusted_offset_us);
        match (first_at(start_unix_us), first_at(end_unix_us)) {
            (Some(from_us), Some(until_us)) => MonotonicSpan {
                slow_offset_us,
                trusted_offset_us,
                from_us,
                until_us,
            },
            _ => MonotonicSpan::EMPTY,
        }
    }

    /// Whether `clock.read_monotonic(monotonic_us)` lies in this span: exactly that while both
    /// offsets are the ones it was made with, false once either moved.
    #[inline]
    pub fn holds(&self, clock: &ClusterClock, monotonic_us: i64) -> bool {
        self.from_us <= monotonic_us
            && monotonic_us < self.until_us
            && clock.offsets() == (self.slow_offset_us, self.trusted_offset_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WALL0: i64 = 1_750_000_000_000_000;
    const MONO0: i64 = 5_000_000;
    const YEAR: i64 = 365 * 24 * 60 * 60 * 1_000_000;

    #[test]
    fn a_span_holds_nothing_before_the_start_or_once_an_offset_moved() {
        let c = ClusterClock::new();
        let span = MonotonicSpan::of(&c, WALL0, WALL0 + 1_000);
        assert_eq!(span, MonotonicSpan::EMPTY);
        assert!(!span.holds(&c, 0));
        c.start(WALL0, MONO0, i64::MIN);
        let span = MonotonicSpan::of(&c, WALL0, WALL0 + 1_000);
        assert!(span.holds(&c, MONO0));
        assert!(span.holds(&c, MONO0 + 999));
        assert!(!span.holds(&c, MONO0 + 1_000));
        // The lead line runs at 9/10 speed: a microsecond earlier may read the same.
        assert!(!span.holds(&c, MONO0 - 2));
        c.raise_to(WALL0 + 500, MONO0);
        assert!(!span.holds(&c, MONO0));
        assert!(!MonotonicSpan::EMPTY.holds(&c, 0));
    }

    fn offset() -> impl Strategy<Value = i64> {
        prop_oneof![
            4 => WALL0 - 10 * YEAR..WALL0 + 10 * YEAR,
            1 => Just(NOT_STARTED + 2),
            1 => any::<i64>().prop_filter("a started offset", |o| *o > NOT_STARTED + 1),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// A span holds a monotonic time exactly when the cluster time read from it lies in
        /// the span's Unix µs, around both bounds and anywhere, at every offset.
        #[test]
        fn a_span_holds_the_times_whose_cluster_time_is_in_it(
            slow_offset in offset(),
            trusted_offset in offset(),
            mono in prop_oneof![4 => 0i64..1_000 * YEAR, 1 => any::<i64>()],
            width in prop_oneof![1i64..2_000_000, Just(1)],
            starts_before in 0i64..3_000_000,
            probes in proptest::collection::vec(-3i64..3, 8),
        ) {
            let c = ClusterClock::with_offsets(slow_offset, trusted_offset);
            let at = c.read_monotonic(mono).unwrap();
            let start = at.saturating_sub(starts_before);
            let end = start.saturating_add(width);
            let span = MonotonicSpan::of(&c, start, end);
            let inside = |m: i64| (start..end).contains(&c.read_monotonic(m).unwrap());
            let mut points = vec![mono, span.from_us, span.until_us];
            for (i, d) in probes.iter().enumerate() {
                let base = if i % 2 == 0 { span.from_us } else { span.until_us };
                points.push(base.saturating_add(*d));
            }
            for m in points {
                prop_assert_eq!(span.holds(&c, m), inside(m), "at {}: {:?}", m, span);
            }
        }
    }
}
