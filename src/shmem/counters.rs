//! The counters `snowflake_stats()` reports (docs/reference.md), in shared memory.

use std::sync::atomic::{AtomicI64, AtomicU64};

/// Rarely written counters for `snowflake_stats()` (on their own cache line).
#[repr(C, align(64))]
#[derive(Default)]
pub struct Counters {
    pub backward_steps: AtomicU64,
    pub largest_backward_step_us: AtomicI64,
    /// The wall clock's lag at the last counted change, so one step is counted once.
    pub known_lag_us: AtomicI64,
    pub borrowed_ticks: AtomicU64,
    pub throttle_sleeps: AtomicU64,
    pub reservation_writes: AtomicU64,
    /// Renewals the reservation worker made (the rest were made by sessions: the worker was
    /// late, stopped, or IDs came after an idle time).
    pub reservation_worker_writes: AtomicU64,
    /// Reservation writes that failed (WAL flush or file), by the worker or a session.
    pub reservation_write_failures: AtomicU64,
    /// IDs of earlier claims of worker ids (`worker_ids::ids_issued_since_start`).
    pub ids_issued_retired: AtomicU64,
    /// The highest count of IDs issued reported so far, so that reports never fall.
    pub ids_issued_reported: AtomicU64,
    pub forward_jumps_followed: AtomicU64,
    pub forward_jumps_ignored: AtomicU64,
    /// Ticks a session found owned by another session sharing its worker id.
    pub tick_conflicts: AtomicU64,
    /// Completed `snowflake_raise_floor` calls: an operator's step, apart from clock faults.
    pub floor_raises: AtomicU64,
    /// Completed `snowflake_accept_floor` calls, likewise.
    pub floor_accepts: AtomicU64,
}
