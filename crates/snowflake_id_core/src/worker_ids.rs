//! Worker ids over plain atomics (docs/design.md §4; the glue places them in shared memory).
//!
//! **Spaces.** Each worker width has a space of worker ids, so that sessions using sequences of
//! other widths never crowd it: a width w below `shared_width` has a space of its own with 2^w
//! ids; every wider width uses one space of `capacity` ids (`snowflake_id.max_workers`), all of
//! which fit it. A session takes one worker id per space it uses: the lowest free one, a dead
//! sole holder's, or else it *shares* the id with the fewest sessions. Nobody is refused.
//!
//! Ticks are owned on an id by one session at a time: [`crate::tick_claims`].

use std::ops::Range;

use crate::layout::ALLOWED_TIME_UNITS_US;
use crate::sync::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

/// How many time units a layout can have (one floor each).
pub const TIME_UNITS: usize = ALLOWED_TIME_UNITS_US.len();

/// More spaces than [`Spaces`] ever has (its capacity is at most 2^31 ids).
pub const MAX_SPACES: usize = 33;

/// How many sole holders `attach` checks for life when a space is full: a bound on the system
/// calls a session pays to take an id once nothing is free.
pub const MAX_LIVENESS_PROBES: usize = 8;

#[repr(C, align(64))]
pub struct WorkerId {
    /// The session that took the id while it was free (0: none), so a sole holder that died
    /// without letting go can be found and replaced.
    holder_pid: AtomicI32,
    /// Sessions using the id: 1 while its holder is alone, more while it is shared.
    sessions: AtomicU32,
    database_oid: AtomicU32,
    /// Per time unit (`Layout::time_unit_index`): the end (exclusive, unix µs) of the latest
    /// tick any session owns; only raised, by compare-and-swap. 0 (1970) until first raised,
    /// which constrains no valid layout since epochs are not before 1970.
    pub(crate) floors_unix_us: [AtomicI64; TIME_UNITS],
    claimed_at_unix_us: AtomicI64,
    ids_issued: AtomicU64,
}

// One cache line per worker id: its sessions write it once per tick and per ID.
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<WorkerId>() == 64);

/// Where each worker width's space lies in the one table of worker ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spaces {
    capacity: usize,
}

impl Spaces {
    /// `capacity` ids in the space of the wide widths (1 to 2^31).
    pub fn new(capacity: usize) -> Spaces {
        Spaces {
            capacity: capacity.clamp(1, 1 << 31),
        }
    }

    /// The narrowest width whose ids all fit in `capacity`: it and every wider width share
    /// one space.
    pub fn shared_width(&self) -> u8 {
        self.capacity.next_power_of_two().trailing_zeros() as u8
    }

    /// The space of a sequence with `worker_bits` worker bits.
    pub fn space_of(&self, worker_bits: u8) -> usize {
        usize::from(worker_bits.min(self.shared_width()))
    }

    /// How many spaces there are.
    pub fn count(&self) -> usize {
        usize::from(self.shared_width()) + 1
    }

    /// The narrowest worker width that uses `space`.
    pub fn width_of(&self, space: usize) -> u8 {
        space as u8
    }

    /// Where `space`'s ids are in the table: 2^w ids from 2^w - 1 for a narrow width w, then
    /// `capacity` ids.
    pub fn range(&self, space: usize) -> Range<usize> {
        let first = (1usize << space) - 1;
        if space < usize::from(self.shared_width()) {
            first..first + (1 << space)
        } else {
            first..first + self.capacity
        }
    }

    /// Length of the whole table (below 3 × capacity).
    pub fn table_len(&self) -> usize {
        self.range(self.count() - 1).end
    }
}

/// Takes a worker id in `space` for session `pid`: the lowest free one; else one whose sole
/// holder no longer exists (`is_alive(pid)` false; compare-and-swap from that pid, so two
/// claimers cannot both take it); else the one with the fewest sessions, shared. Free ids are
/// tried first, so the common path makes no `is_alive` call (each is typically a system call);
/// in a full space at most [`MAX_LIVENESS_PROBES`] sole holders are checked, from a place that
/// depends on `pid`, so successive sessions check different ones.
///
/// Returns the worker id taken: its index in the space, the worker field of the session's IDs.
/// `space` must not be empty (no space of [`Spaces`] is).
pub fn attach(
    space: &[WorkerId],
    pid: i32,
    database_oid: u32,
    now_unix_us: i64,
    is_alive: impl Fn(i32) -> bool,
    retired: &AtomicU64,
) -> usize {
    let exclusive = |worker: usize| {
        let id = &space[worker];
        id.database_oid.store(database_oid, Ordering::Relaxed);
        id.claimed_at_unix_us.store(now_unix_us, Ordering::Relaxed);
        // The earlier claims' IDs move to `retired` (see `ids_issued_since_start`): taken from
        // the id first, so a reading in between misses them rather than counting them twice.
        let earlier = id.ids_issued.swap(0, Ordering::SeqCst);
        retired.fetch_add(earlier, Ordering::SeqCst);
        worker
    };
    for (worker, id) in space.iter().enumerate() {
        if id.sessions.load(Ordering::Relaxed) == 0
            && id
                .sessions
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            id.holder_pid.store(pid, Ordering::Relaxed);
            return exclusive(worker);
        }
    }
    let first = pid.unsigned_abs() as usize % space.len();
    let sole_holders = (first..space.len())
        .chain(0..first)
        .filter_map(|worker| {
            let holder = space[worker].holder_pid.load(Ordering::Relaxed);
            let alone = space[worker].sessions.load(Ordering::Relaxed) == 1;
            (holder != 0 && holder != pid && alone).then_some((worker, holder))
        })
        .take(MAX_LIVENESS_PROBES);
    for (worker, holder) in sole_holders {
        if !is_alive(holder)
            && space[worker]
                .holder_pid
                .compare_exchange(holder, pid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return exclusive(worker);
        }
    }
    let (worker, id) = space
        .iter()
        .enumerate()
        .min_by_key(|(_, id)| id.sessions.load(Ordering::Relaxed))
        .expect("a space has at least one worker id");
    id.sessions.fetch_add(1, Ordering::AcqRel);
    worker
}

/// Session `pid` stops using worker id `worker` of `space` (at its exit). Returns whether it
/// was counted there.
pub fn detach(space: &[WorkerId], worker: usize, pid: i32) -> bool {
    let Some(id) = space.get(worker) else {
        return false;
    };
    // Only the holder's own pid is cleared; a sharer leaves the holder in place.
    let _ = id
        .holder_pid
        .compare_exchange(pid, 0, Ordering::Release, Ordering::Relaxed);
    id.sessions
        .fetch_update(Ordering::Release, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

/// The IDs issued on the worker ids of `table` since the server started: those of earlier
/// claims (`retired`, where `attach` moves an id's count when a new session takes it alone)
/// and those of the current ones. A reading that races such a move may miss the IDs being
/// moved, never count them twice (`retired` is read before the ids, and they leave an id
/// before they reach it); `reported`, the highest reading so far, hides that dip. So readings
/// never fall while the server runs, as a Prometheus counter must not, and never exceed the
/// IDs issued.
pub fn ids_issued_since_start(
    table: &[WorkerId],
    retired: &AtomicU64,
    reported: &AtomicU64,
) -> u64 {
    let earlier = retired.load(Ordering::SeqCst);
    let reading = table
        .iter()
        .map(|id| id.ids_issued.load(Ordering::SeqCst))
        .fold(earlier, u64::saturating_add);
    reported.fetch_max(reading, Ordering::Relaxed).max(reading)
}

/// How many worker ids of a space have at least one session.
pub fn in_use(space: &[WorkerId]) -> usize {
    space.iter().filter(|id| id.sessions() > 0).count()
}

/// How many sessions use a worker id they share with another.
pub fn sharing_sessions(space: &[WorkerId]) -> usize {
    space
        .iter()
        .map(WorkerId::sessions)
        .filter(|&n| n > 1)
        .map(|n| n as usize)
        .sum()
}

impl WorkerId {
    pub fn new() -> WorkerId {
        WorkerId {
            holder_pid: AtomicI32::new(0),
            sessions: AtomicU32::new(0),
            database_oid: AtomicU32::new(0),
            floors_unix_us: std::array::from_fn(|_| AtomicI64::new(0)),
            claimed_at_unix_us: AtomicI64::new(0),
            ids_issued: AtomicU64::new(0),
        }
    }

    /// The floor of time unit `unit`: a new generator starts at the first tick at or after it.
    #[inline]
    pub fn floor(&self, unit: usize) -> i64 {
        self.floors_unix_us[unit].load(Ordering::Acquire)
    }

    /// The end of the latest tick any session owns, in any unit.
    pub fn highest_floor(&self) -> i64 {
        (0..TIME_UNITS)
            .map(|unit| self.floor(unit))
            .max()
            .unwrap_or(0)
    }

    /// Counts `n` IDs issued on this id, by any of its sessions.
    #[inline]
    pub fn count_issued(&self, n: u64) {
        self.ids_issued.fetch_add(n, Ordering::Relaxed);
    }

    pub fn ids_issued(&self) -> u64 {
        self.ids_issued.load(Ordering::Relaxed)
    }

    /// Sessions using the id (0: free).
    pub fn sessions(&self) -> u32 {
        self.sessions.load(Ordering::Relaxed)
    }

    /// The pid of the session that took the id while it was free, if it still uses it.
    pub fn holder(&self) -> Option<i32> {
        match self.holder_pid.load(Ordering::Relaxed) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// The database of the session that took the id while it was free.
    pub fn database_oid(&self) -> u32 {
        self.database_oid.load(Ordering::Relaxed)
    }

    pub fn claimed_at_unix_us(&self) -> i64 {
        self.claimed_at_unix_us.load(Ordering::Relaxed)
    }
}

impl Default for WorkerId {
    fn default() -> WorkerId {
        WorkerId::new()
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests {
    use super::*;

    /// A space of `n` worker ids, as the tests of this module and of `tick_claims` use it.
    pub(crate) fn table(n: usize) -> Vec<WorkerId> {
        (0..n).map(|_| WorkerId::new()).collect()
    }

    /// Every holder is alive.
    pub(crate) fn alive(_: i32) -> bool {
        true
    }

    #[test]
    fn one_cache_line_each() {
        assert_eq!(std::mem::size_of::<WorkerId>(), 64);
        assert_eq!(std::mem::align_of::<WorkerId>(), 64);
    }

    #[test]
    fn spaces_tile_the_table_and_every_width_fits_its_space() {
        for capacity in [1, 2, 3, 100, 128, 129, 1024, 65_536] {
            let spaces = Spaces::new(capacity);
            let mut next = 0;
            for space in 0..spaces.count() {
                let range = spaces.range(space);
                assert_eq!(range.start, next, "capacity {capacity}, space {space}");
                assert!(!range.is_empty());
                next = range.end;
            }
            assert_eq!(spaces.table_len(), next);
            assert!(spaces.table_len() < 3 * capacity);
            for bits in 0..=31u8 {
                let space = spaces.space_of(bits);
                let ids = spaces.range(space).len() as u64;
                // Every id of the space fits the width's worker field.
                assert!(ids <= 1u64 << bits, "capacity {capacity}, {bits} bits");
                // A narrow width gets all its ids; a wide one `capacity` of them.
                assert_eq!(ids, (1u64 << bits).min(capacity as u64));
                assert!(spaces.width_of(space) <= bits);
            }
        }
        assert_eq!(Spaces::new(1024).shared_width(), 10);
        assert_eq!(Spaces::new(1000).shared_width(), 10);
        assert_eq!(Spaces::new(0), Spaces::new(1));
    }

    #[test]
    fn lowest_free_first_then_dead_holders_then_the_least_shared() {
        let s = table(3);
        let retired = AtomicU64::new(0);
        for (pid, worker) in [(10, 0), (11, 1), (12, 2)] {
            assert_eq!(attach(&s, pid, 5, 1_000, alive, &retired), worker);
            assert_eq!((s[worker].holder(), s[worker].sessions()), (Some(pid), 1));
        }
        assert_eq!(
            (s[1].holder(), s[1].sessions(), s[1].database_oid()),
            (Some(11), 1, 5)
        );
        assert_eq!(s[1].claimed_at_unix_us(), 1_000);
        // Full: a dead sole holder's id is taken over, floors kept.
        // (A tick the dead holder claimed in unit 2 left this floor.)
        s[1].floors_unix_us[2].store(5_000, Ordering::Release);
        s[1].count_issued(7);
        assert_eq!(attach(&s, 13, 6, 2_000, |pid| pid != 11, &retired), 1);
        assert_eq!(
            (s[1].holder(), s[1].sessions(), s[1].ids_issued()),
            (Some(13), 1, 0)
        );
        assert_eq!(retired.load(Ordering::Relaxed), 7, "the dead holder's IDs");
        assert_eq!(s[1].floor(2), 5_000);
        // Everyone alive: share the id with the fewest sessions, lowest first.
        for (pid, worker) in [(20, 0), (21, 1), (22, 2), (23, 0)] {
            assert_eq!(attach(&s, pid, 5, 3_000, alive, &retired), worker);
        }
        assert_eq!(
            s.iter().map(WorkerId::sessions).collect::<Vec<_>>(),
            [3, 2, 2]
        );
        assert_eq!(in_use(&s), 3);
        assert_eq!(sharing_sessions(&s), 7);
        // A sharer leaves the holder in place; the holder's exit clears it.
        assert!(detach(&s, 0, 20));
        assert_eq!((s[0].holder(), s[0].sessions()), (Some(10), 2));
        assert!(detach(&s, 0, 10));
        assert_eq!((s[0].holder(), s[0].sessions()), (None, 1));
        assert!(detach(&s, 0, 23));
        assert!(!detach(&s, 0, 23), "nobody is left to count");
        assert!(!detach(&s, 9, 23), "no such id");
        // A free id is preferred to sharing, even a higher one... and to a dead holder.
        assert_eq!(attach(&s, 30, 5, 4_000, |_| false, &retired), 0);
        assert_eq!((s[0].holder(), s[0].sessions()), (Some(30), 1));
        assert_eq!(sharing_sessions(&s), 4);
    }

    #[test]
    fn a_full_space_checks_few_holders_for_life() {
        let s = table(20);
        let retired = AtomicU64::new(0);
        for pid in 1..=20 {
            attach(&s, pid, 1, 0, alive, &retired);
        }
        let probed = std::cell::Cell::new(0);
        let a = attach(
            &s,
            100,
            1,
            0,
            |_| {
                probed.set(probed.get() + 1);
                true
            },
            &retired,
        );
        assert_eq!(probed.get(), MAX_LIVENESS_PROBES);
        assert_eq!(s[a].sessions(), 2, "shared");
        // Where the probes start depends on the pid: pid 33 starts at id 13 (pid 14's).
        assert_eq!(attach(&s, 33, 1, 0, |pid| pid != 14, &retired), 13);
        assert_eq!((s[13].holder(), s[13].sessions()), (Some(33), 1));
    }

    #[test]
    fn ids_issued_since_start_never_fall_as_sessions_come_and_go() {
        let s = table(2);
        let (retired, reported) = (AtomicU64::new(0), AtomicU64::new(0));
        let since_start = || ids_issued_since_start(&s, &retired, &reported);
        let first = attach(&s, 1, 1, 0, alive, &retired);
        s[first].count_issued(5);
        assert_eq!(since_start(), 5);
        assert!(detach(&s, first, 1));
        assert_eq!(since_start(), 5, "a free id keeps its count");
        let second = attach(&s, 2, 1, 0, alive, &retired);
        assert_eq!(second, first, "the lowest free id again");
        assert_eq!(s[second].ids_issued(), 0, "the new claim's own count");
        s[second].count_issued(3);
        assert_eq!(since_start(), 8);
        // A reading that raced a move (missing the IDs moved) reports no less than before.
        s[second].ids_issued.store(0, Ordering::SeqCst);
        assert_eq!(since_start(), 8);
        retired.fetch_add(3, Ordering::SeqCst);
        s[second].count_issued(1);
        assert_eq!(since_start(), 9);
    }
}
