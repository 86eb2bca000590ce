//! The cluster's time as backends read it (docs/design.md §3.1, §3.2): the core's cluster clock
//! in shared memory, fed by the system clocks, with the forward-jump settings applied and the
//! wall clock's backward steps and forward jumps counted for `snowflake_stats()`.

use std::sync::atomic::Ordering;

use snowflake_id_core::cluster_clock::{Jump, JumpPolicy, Reading};
use snowflake_id_core::layout::TickWindow;
use snowflake_id_core::monotonic_span::MonotonicSpan;

use crate::gucs;
use crate::shared_memory::SharedState;
use crate::system_clock;

/// A wall clock whose lag behind the cluster clock grows by more than this counts as a backward
/// step. Smaller changes are read jitter or a backend paused between its two clock reads; NTP
/// slews offsets below 128 ms instead of stepping.
const BACKWARD_STEP_THRESHOLD_US: i64 = 100_000;

impl SharedState {
    /// The cluster's time; notes backward steps and decided forward jumps of the wall clock.
    pub fn read_clock(&self) -> Reading {
        let (wall, monotonic) = system_clock::wall_and_monotonic_us();
        let policy = JumpPolicy {
            max_jump_us: i64::from(gucs::MAX_CLOCK_JUMP_MS.get()) * 1_000,
            confirm_us: i64::from(gucs::CLOCK_JUMP_CONFIRM_MS.get()) * 1_000,
        };
        let reading = self.clock.read(wall, monotonic, policy);
        let counters = &self.counters;
        match reading.jump {
            Some(Jump::Followed) => counters
                .forward_jumps_followed
                .fetch_add(1, Ordering::Relaxed),
            Some(Jump::Ignored) => counters
                .forward_jumps_ignored
                .fetch_add(1, Ordering::Relaxed),
            None => 0,
        };
        let known_lag = counters.known_lag_us.load(Ordering::Relaxed);
        if (reading.wall_behind_us - known_lag).abs() > BACKWARD_STEP_THRESHOLD_US {
            // Rare path: confirm with a second reading, so a stale wall read (this backend was
            // paused between its two clock reads, or raced a forward step) is not counted.
            let (wall, monotonic) = system_clock::wall_and_monotonic_us();
            let lag = self.clock.read(wall, monotonic, policy).wall_behind_us;
            if (lag - known_lag).abs() > BACKWARD_STEP_THRESHOLD_US
                && counters
                    .known_lag_us
                    .compare_exchange(known_lag, lag, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                && lag > known_lag
            {
                counters.backward_steps.fetch_add(1, Ordering::Relaxed);
                counters
                    .largest_backward_step_us
                    .fetch_max(lag - known_lag, Ordering::Relaxed);
            }
        }
        reading
    }

    /// Whether the cluster's time (`read_clock_monotonic`) is in `span` now: CLOCK_MONOTONIC
    /// compared with the span's bounds, and the clock's offsets with those it was made with.
    #[inline]
    pub fn clock_in(&self, span: &MonotonicSpan) -> bool {
        span.holds(&self.clock, system_clock::monotonic_us())
    }

    /// The span of monotonic times whose cluster time is in `window` (`clock_in`).
    pub fn clock_span(&self, window: &TickWindow) -> MonotonicSpan {
        let (start, end) = window.bounds();
        MonotonicSpan::of(&self.clock, start, end)
    }

    /// The cluster's time from CLOCK_MONOTONIC alone: the hot path within a tick whose wall
    /// clock was already checked with `read_clock`.
    pub fn read_clock_monotonic(&self) -> i64 {
        self.clock
            .read_monotonic(system_clock::monotonic_us())
            .unwrap_or_else(|| self.read_clock().now_unix_us)
    }
}
