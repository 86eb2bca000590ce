//! The system's clocks: CLOCK_REALTIME (the wall clock, which steps) and CLOCK_MONOTONIC (which
//! does not), both system-wide and so comparable across backends. The cluster clock
//! (`shmem/mod.rs`, docs/design.md §3) is built on the two.

/// Longest gap between the two monotonic reads around a wall-clock read that still counts the
/// three as one instant.
const SIMULTANEOUS_US: i64 = 20;

/// Reads the wall and the monotonic clock as one instant: the wall clock between two monotonic
/// reads, retried a few times when the process was preempted in between. The cluster clock
/// keeps the wall clock's offset to the monotonic clock, and a preemption between the reads
/// would make that offset wrong by its length.
pub fn wall_and_monotonic_us() -> (i64, i64) {
    let mut best = (0, 0, i64::MAX);
    for _ in 0..4 {
        let before = monotonic_us();
        let wall = read(libc::CLOCK_REALTIME);
        let after = monotonic_us();
        let gap = after - before;
        if gap < best.2 {
            best = (wall, before + gap / 2, gap);
        }
        if gap <= SIMULTANEOUS_US {
            break;
        }
    }
    (best.0, best.1)
}

/// CLOCK_MONOTONIC in microseconds.
pub fn monotonic_us() -> i64 {
    read(libc::CLOCK_MONOTONIC)
}

fn read(clock: libc::clockid_t) -> i64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec and the callers' clock ids exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut now) };
    now.tv_sec * 1_000_000 + now.tv_nsec / 1_000
}
