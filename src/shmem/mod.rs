//! The shared-memory segment (docs/design.md §3–§6): its header, `SharedState`, with the
//! structures in it (each in its own file here, with its behaviour), found from a backend; and
//! the cluster clock as backends read it (§3.1, §3.2): the core's cluster clock, fed by the
//! system clocks, with the forward-jump settings applied and the wall clock's backward steps
//! and forward jumps counted for `snowflake_stats()`. The segment is requested and created by
//! `segment.rs`, from the hooks in `hooks/shmem.rs`.

pub mod counters;
pub mod directory;
pub mod floor_writes;
pub mod published_reservation;
pub mod segment;

use std::sync::atomic::{AtomicPtr, Ordering};

use snowflake_id_core::cluster_clock::{ClusterClock, Jump, JumpPolicy, Reading};
use snowflake_id_core::layout::TickWindow;
use snowflake_id_core::monotonic_span::MonotonicSpan;
use snowflake_id_core::worker_ids::{Spaces, WorkerId};

use crate::errors;
use crate::pg::gucs;
use crate::pg::system_clock;
use crate::shmem::counters::Counters;
use crate::shmem::directory::Directory;
use crate::shmem::floor_writes::FloorWrites;
use crate::shmem::published_reservation::PublishedReservation;

/// Header of the segment; the table of worker ids (`spaces.table_len()` of them) follows
/// it directly. Each part is cache-line aligned so the hot, read-mostly lines are not written
/// by the rare updates of others.
#[repr(C, align(64))]
pub struct SharedState {
    pub clock: ClusterClock,
    pub reservation: PublishedReservation,
    pub counters: Counters,
    pub floor_writes: FloorWrites,
    pub directory: Directory,
    pub spaces: Spaces,
}

/// Set in the postmaster by the startup hook; backends inherit it through fork.
static SHARED: AtomicPtr<SharedState> = AtomicPtr::new(std::ptr::null_mut());

/// The shared state, or the "add shared_preload_libraries" error.
pub fn state() -> &'static SharedState {
    try_state().unwrap_or_else(|| errors::not_preloaded().raise())
}

/// Raises "add shared_preload_libraries" (55000) unless the library was preloaded: for the
/// functions that need the preloaded library but not the segment itself.
pub fn require_preloaded() {
    state();
}

pub fn try_state() -> Option<&'static SharedState> {
    let pointer = SHARED.load(Ordering::Acquire);
    // SAFETY: non-null only after `segment::create_or_find` initialised the segment, which is never
    // unmapped while this process runs.
    unsafe { pointer.as_ref() }
}

/// A wall clock whose lag behind the cluster clock grows by more than this counts as a backward
/// step. Smaller changes are read jitter or a backend paused between its two clock reads; NTP
/// slews offsets below 128 ms instead of stepping.
const BACKWARD_STEP_THRESHOLD_US: i64 = 100_000;

impl SharedState {
    /// Every worker id, of every space.
    pub fn worker_ids(&self) -> &[WorkerId] {
        let first = (self as *const SharedState)
            .wrapping_add(1)
            .cast::<WorkerId>();
        // SAFETY: `segment::create_or_find` placed `spaces.table_len()` initialised worker ids right
        // after this header (which is 64-aligned and a multiple of 64 long), and the segment
        // lives as long as the process.
        unsafe { std::slice::from_raw_parts(first, self.spaces.table_len()) }
    }

    /// The worker ids of one space (`Spaces::space_of`).
    pub fn space(&self, space: usize) -> &[WorkerId] {
        &self.worker_ids()[self.spaces.range(space)]
    }

    /// The end of the latest tick any session owns on any worker id (0 if none).
    pub fn owned_high_water(&self) -> i64 {
        self.worker_ids()
            .iter()
            .map(WorkerId::highest_floor)
            .max()
            .unwrap_or(0)
    }

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
