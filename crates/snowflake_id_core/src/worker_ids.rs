//! Worker ids over plain atomics (docs/design.md §4; the glue places them in shared memory).
//!
//! **Spaces.** Each worker width has a space of worker ids, so that sessions using sequences of
//! other widths never crowd it: a width w below `shared_width` has a space of its own with 2^w
//! ids; every wider width uses one space of `capacity` ids (`snowflake.max_workers`), all of
//! which fit it. A session takes one worker id per space it uses: the lowest free one, a dead
//! sole holder's, or else it *shares* the id with the fewest sessions. Nobody is refused.
//!
//! **Ticks are owned.** Uniqueness never rests on a session being alone on an id. A session
//! issues in a tick of a worker id only after it owns the tick: it raised the id's floor for the
//! tick's time unit to the tick's end by compare-and-swap from a value at or below the tick's
//! start, or the tick lies in an interval it owns that way ([`OwnedTicks`]). Floors only rise,
//! so intervals owned by different sessions (or successive holders) never overlap. A session
//! alone on an id pays one uncontended compare-and-swap per tick and no lock; one that shares
//! the id takes the ticks the others left, so the sharers of an id take turns tick by tick.

use std::ops::Range;

use crate::generator::{Generator, Step};
use crate::layout::{Layout, ALLOWED_TIME_UNITS_US};
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
    floors_unix_us: [AtomicI64; TIME_UNITS],
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
    pub fn len(&self) -> usize {
        self.range(self.count() - 1).end
    }

    /// Never empty: every space has at least one id.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// A session's place on a worker id of one space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attached {
    /// The worker id: the index in the space, and the worker field of the session's IDs.
    pub worker: usize,
    /// Other sessions were using the id already.
    pub shared: bool,
    pub reclaimed_from_pid: Option<i32>,
}

/// Takes a worker id in `space` for session `pid`: the lowest free one; else one whose sole
/// holder no longer exists (`is_alive(pid)` false; compare-and-swap from that pid, so two
/// claimers cannot both take it); else the one with the fewest sessions, shared. Free ids are
/// tried first, so the common path makes no `is_alive` call (each is typically a system call);
/// in a full space at most [`MAX_LIVENESS_PROBES`] sole holders are checked, from a place that
/// depends on `pid`, so successive sessions check different ones.
///
/// `space` must not be empty (no space of [`Spaces`] is).
pub fn attach(
    space: &[WorkerId],
    pid: i32,
    database_oid: u32,
    now_unix_us: i64,
    is_alive: impl Fn(i32) -> bool,
) -> Attached {
    let exclusive = |worker: usize, reclaimed_from_pid| {
        let id = &space[worker];
        id.database_oid.store(database_oid, Ordering::Relaxed);
        id.claimed_at_unix_us.store(now_unix_us, Ordering::Relaxed);
        id.ids_issued.store(0, Ordering::Relaxed);
        Attached {
            worker,
            shared: false,
            reclaimed_from_pid,
        }
    };
    for (worker, id) in space.iter().enumerate() {
        if id.sessions.load(Ordering::Relaxed) == 0
            && id
                .sessions
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            id.holder_pid.store(pid, Ordering::Relaxed);
            return exclusive(worker, None);
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
            return exclusive(worker, Some(holder));
        }
    }
    let (worker, id) = space
        .iter()
        .enumerate()
        .min_by_key(|(_, id)| id.sessions.load(Ordering::Relaxed))
        .expect("a space has at least one worker id");
    id.sessions.fetch_add(1, Ordering::AcqRel);
    Attached {
        worker,
        shared: true,
        reclaimed_from_pid: None,
    }
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

/// An interval of time ([from, to), unix µs) in which one session owns every tick of one time
/// unit on one worker id: no other session issues in a tick that overlaps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnedTicks {
    from: i64,
    to: i64,
}

impl OwnedTicks {
    pub const NONE: OwnedTicks = OwnedTicks {
        from: i64::MAX,
        to: i64::MIN,
    };

    fn covers(&self, start: i64, end: i64) -> bool {
        start >= self.from && end <= self.to
    }
}

/// The outcome of [`WorkerId::claim_tick`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickClaim {
    /// The session owns the tick.
    Owned,
    /// Other sessions own time up to this floor: the session needs a tick that starts at or
    /// after it.
    TakenUntil(i64),
}

/// One step of [`WorkerId::next_owned`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnedStep {
    /// Issue this (tick, sequence); `new_tick` when the tick is later than the one the caller
    /// last published, whose end it must now reserve before the ID leaves.
    Issue {
        tick: u64,
        sequence: u64,
        new_tick: bool,
    },
    /// As [`Step::WaitUntil`].
    WaitUntil { tick: u64 },
    /// As [`Step::TimeExhausted`].
    TimeExhausted,
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

    /// Makes the session whose intervals are `owned` the owner of the tick [start, end) of time
    /// unit `unit`, unless another session owns part of it.
    pub fn claim_tick(
        &self,
        unit: usize,
        owned: &mut OwnedTicks,
        start: i64,
        end: i64,
    ) -> TickClaim {
        if owned.covers(start, end) {
            return TickClaim::Owned;
        }
        let floor = &self.floors_unix_us[unit];
        let mut seen = floor.load(Ordering::Acquire);
        loop {
            // Nobody raised the floor since this session's last claim: its interval grows.
            let extends = seen == owned.to && start >= owned.from;
            if start < seen && !extends {
                return TickClaim::TakenUntil(seen);
            }
            // end > seen: a tick at or after `seen` ends after it, and one that extends the
            // interval is not covered by it, so the floor strictly rises.
            match floor.compare_exchange_weak(seen, end, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    let from = if extends { owned.from } else { seen };
                    *owned = OwnedTicks { from, to: end };
                    return TickClaim::Owned;
                }
                Err(now) => seen = now,
            }
        }
    }

    /// The next ID of `generator` (a sequence of `layout`) in a tick the session owns on this
    /// worker id: proposes ticks as [`Generator::next`] does and claims each tick later than
    /// `published`, skipping past ticks other sessions own. `conflicts` counts the ticks found
    /// taken.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn next_owned(
        &self,
        generator: &mut Generator,
        layout: &Layout,
        owned: &mut OwnedTicks,
        published: Option<u64>,
        now_tick: u64,
        max_lead_ticks: u64,
        conflicts: &mut u64,
    ) -> OwnedStep {
        loop {
            match generator.next(now_tick, max_lead_ticks, layout.max_tick()) {
                Step::Issue { tick, sequence } => {
                    let new_tick = published < Some(tick);
                    if new_tick {
                        let start = layout.tick_start_unix_us(tick);
                        let end = layout.tick_start_unix_us(tick.saturating_add(1));
                        let unit = layout.time_unit_index();
                        if let TickClaim::TakenUntil(floor) =
                            self.claim_tick(unit, owned, start, end)
                        {
                            *conflicts += 1;
                            generator.skip_to(layout.first_tick_at_or_after(floor));
                            continue;
                        }
                    }
                    return OwnedStep::Issue {
                        tick,
                        sequence,
                        new_tick,
                    };
                }
                Step::WaitUntil { tick } => return OwnedStep::WaitUntil { tick },
                Step::TimeExhausted => return OwnedStep::TimeExhausted,
            }
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
mod tests {
    use super::*;
    use crate::layout::PRESETS;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn table(n: usize) -> Vec<WorkerId> {
        (0..n).map(|_| WorkerId::new()).collect()
    }

    fn alive(_: i32) -> bool {
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
            assert_eq!(spaces.len(), next);
            assert!(spaces.len() < 3 * capacity);
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
        assert!(!Spaces::new(5).is_empty());
    }

    #[test]
    fn lowest_free_first_then_dead_holders_then_the_least_shared() {
        let s = table(3);
        for (pid, worker) in [(10, 0), (11, 1), (12, 2)] {
            let a = attach(&s, pid, 5, 1_000, alive);
            assert_eq!(
                (a.worker, a.shared, a.reclaimed_from_pid),
                (worker, false, None)
            );
        }
        assert_eq!(
            (s[1].holder(), s[1].sessions(), s[1].database_oid()),
            (Some(11), 1, 5)
        );
        assert_eq!(s[1].claimed_at_unix_us(), 1_000);
        // Full: a dead sole holder's id is taken over, floors kept.
        let mut dead_holders = OwnedTicks::NONE;
        s[1].claim_tick(2, &mut dead_holders, 0, 5_000);
        s[1].count_issued(7);
        let a = attach(&s, 13, 6, 2_000, |pid| pid != 11);
        assert_eq!(
            (a.worker, a.shared, a.reclaimed_from_pid),
            (1, false, Some(11))
        );
        assert_eq!(
            (s[1].holder(), s[1].sessions(), s[1].ids_issued()),
            (Some(13), 1, 0)
        );
        assert_eq!(s[1].floor(2), 5_000);
        // Everyone alive: share the id with the fewest sessions, lowest first.
        for (pid, worker) in [(20, 0), (21, 1), (22, 2), (23, 0)] {
            let a = attach(&s, pid, 5, 3_000, alive);
            assert_eq!((a.worker, a.shared), (worker, true));
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
        let a = attach(&s, 30, 5, 4_000, |_| false);
        assert_eq!((a.worker, a.shared, a.reclaimed_from_pid), (0, false, None));
        assert_eq!(sharing_sessions(&s), 4);
    }

    #[test]
    fn a_full_space_checks_few_holders_for_life() {
        let s = table(20);
        for pid in 1..=20 {
            attach(&s, pid, 1, 0, alive);
        }
        let probed = std::cell::Cell::new(0);
        let a = attach(&s, 100, 1, 0, |_| {
            probed.set(probed.get() + 1);
            true
        });
        assert_eq!(probed.get(), MAX_LIVENESS_PROBES);
        assert!(a.shared);
        // Where the probes start depends on the pid: pid 33 starts at id 13 (pid 14's).
        let a = attach(&s, 33, 1, 0, |pid| pid != 14);
        assert_eq!((a.worker, a.reclaimed_from_pid), (13, Some(14)));
    }

    #[test]
    fn claims_extend_own_intervals_and_skip_the_others() {
        let id = WorkerId::new();
        let (mut a, mut b) = (OwnedTicks::NONE, OwnedTicks::NONE);
        assert_eq!(id.claim_tick(0, &mut a, 1_000, 2_000), TickClaim::Owned);
        assert_eq!(a, OwnedTicks { from: 0, to: 2_000 });
        // Inside its interval: no write.
        assert_eq!(id.claim_tick(0, &mut a, 1_500, 2_000), TickClaim::Owned);
        // The next tick extends it.
        assert_eq!(id.claim_tick(0, &mut a, 2_000, 3_000), TickClaim::Owned);
        assert_eq!((a.from, a.to, id.floor(0)), (0, 3_000, 3_000));
        // Another session cannot have any of it, nor a tick reaching into it.
        assert_eq!(
            id.claim_tick(0, &mut b, 2_000, 3_000),
            TickClaim::TakenUntil(3_000)
        );
        assert_eq!(
            id.claim_tick(0, &mut b, 2_500, 3_500),
            TickClaim::TakenUntil(3_000)
        );
        assert_eq!(id.claim_tick(0, &mut b, 3_000, 4_000), TickClaim::Owned);
        assert_eq!(
            b,
            OwnedTicks {
                from: 3_000,
                to: 4_000
            }
        );
        // Now `a` cannot extend over `b`'s tick; it starts a new interval past it.
        assert_eq!(
            id.claim_tick(0, &mut a, 3_000, 4_000),
            TickClaim::TakenUntil(4_000)
        );
        assert_eq!(id.claim_tick(0, &mut a, 5_000, 6_000), TickClaim::Owned);
        assert_eq!(
            a,
            OwnedTicks {
                from: 4_000,
                to: 6_000
            }
        );
        // Units are independent.
        assert_eq!(id.claim_tick(1, &mut b, 0, 10_000), TickClaim::Owned);
        assert_eq!(
            (id.floor(0), id.floor(1), id.highest_floor()),
            (6_000, 10_000, 10_000)
        );
    }

    #[test]
    fn next_owned_skips_a_tick_another_session_owns() {
        let layout = PRESETS[0].1; // 1 ms ticks
        let id = WorkerId::new();
        let (mut a, mut b) = (OwnedTicks::NONE, OwnedTicks::NONE);
        let (mut ga, mut gb) = (Generator::new(12, None), Generator::new(12, None));
        let mut conflicts = 0;
        let step = |g: &mut Generator, owned: &mut OwnedTicks, published, now, c: &mut u64| {
            id.next_owned(g, &layout, owned, published, now, 100, c)
        };
        let first = step(&mut ga, &mut a, None, 50, &mut conflicts);
        assert_eq!(
            first,
            OwnedStep::Issue {
                tick: 50,
                sequence: 1,
                new_tick: true
            }
        );
        let again = step(&mut ga, &mut a, Some(50), 50, &mut conflicts);
        assert_eq!(
            again,
            OwnedStep::Issue {
                tick: 50,
                sequence: 2,
                new_tick: false
            }
        );
        // `b` at the same clock gets the next tick, ahead of the clock within the lead (its
        // counter went on past the proposal it could not issue).
        let other = step(&mut gb, &mut b, None, 50, &mut conflicts);
        assert_eq!(
            other,
            OwnedStep::Issue {
                tick: 51,
                sequence: 2,
                new_tick: true
            }
        );
        assert_eq!(conflicts, 1);
        // The clock moves to 51: `a` finds it taken and moves to 52.
        let moved = step(&mut ga, &mut a, Some(50), 51, &mut conflicts);
        assert_eq!(
            moved,
            OwnedStep::Issue {
                tick: 52,
                sequence: 4,
                new_tick: true
            }
        );
        assert_eq!(conflicts, 2);
        // Without lead, the skipped-to tick waits for the clock.
        let mut gc = Generator::new(12, None);
        let mut c = OwnedTicks::NONE;
        let waits = id.next_owned(&mut gc, &layout, &mut c, None, 52, 0, &mut 0);
        assert_eq!(waits, OwnedStep::WaitUntil { tick: 53 });
    }

    #[test]
    fn threads_sharing_few_ids_never_issue_an_id_twice() {
        const THREADS: i32 = 8;
        const IDS_PER_THREAD: usize = 20_000;
        let layout = PRESETS[2].1; // js53: 8 sequence bits, so ticks run out and are borrowed
        let space = table(3);
        let clock = std::sync::atomic::AtomicU64::new(0);
        let issued: Vec<Vec<(u64, u64, u64)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (1..=THREADS)
                .map(|pid| {
                    let (space, clock) = (&space, &clock);
                    scope.spawn(move || {
                        let a = attach(space, pid, 1, 0, alive);
                        let id = &space[a.worker];
                        let mut owned = OwnedTicks::NONE;
                        let unit = layout.time_unit_index();
                        let mut generator = Generator::new(
                            layout.sequence_bits,
                            layout.first_tick_at_or_after(id.floor(unit)).checked_sub(1),
                        );
                        let (mut published, mut out, mut conflicts) = (None, Vec::new(), 0);
                        while out.len() < IDS_PER_THREAD {
                            // A shared fake clock that moves a tick every 64 calls.
                            let now = clock.fetch_add(1, Ordering::Relaxed) / 64;
                            match id.next_owned(
                                &mut generator,
                                &layout,
                                &mut owned,
                                published,
                                now,
                                10,
                                &mut conflicts,
                            ) {
                                OwnedStep::Issue { tick, sequence, .. } => {
                                    published = published.max(Some(tick));
                                    out.push((a.worker as u64, tick, sequence));
                                }
                                OwnedStep::WaitUntil { .. } => std::thread::yield_now(),
                                OwnedStep::TimeExhausted => unreachable!(),
                            }
                        }
                        assert!(detach(space, a.worker, pid));
                        out
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut seen = HashSet::new();
        for ids in &issued {
            assert!(ids.windows(2).all(|w| (w[0].1, w[0].2) < (w[1].1, w[1].2)));
            for id in ids {
                assert!(seen.insert(*id), "{id:?} issued twice");
            }
        }
        assert_eq!(seen.len(), THREADS as usize * IDS_PER_THREAD);
        assert_eq!(in_use(&space), 0);
    }

    /// A layout of 1 ms or 10 ms ticks, few sequence bits (so ticks are borrowed), and an
    /// epoch that may cut ticks at other instants than another layout's of the same unit.
    fn layout() -> impl Strategy<Value = Layout> {
        (prop_oneof![Just(1_000i64), Just(10_000)], 1u8..=3, 0i64..3).prop_map(
            |(unit, sequence_bits, shift)| Layout {
                time_bits: 40,
                node_bits: 0,
                worker_bits: 2,
                sequence_bits,
                gene_bits: 0,
                time_unit_us: unit,
                epoch_unix_us: shift * 300,
            },
        )
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Session `.0` issues an ID of sequence `.1` (IDs are (sequence, worker, tick, seq)).
        Issue(usize, usize),
        /// The clock moves on by this many µs.
        Clock(i64),
        /// Session `.0` exits and a new session takes its place.
        Replace(usize),
    }

    fn op(sessions: usize, sequences: usize) -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0..sessions, 0..sequences).prop_map(|(s, q)| Op::Issue(s, q)),
            2 => (0i64..3_000).prop_map(Op::Clock),
            1 => (0..sessions).prop_map(Op::Replace),
        ]
    }

    struct Session {
        pid: i32,
        worker: usize,
        owned: [OwnedTicks; TIME_UNITS],
        /// Per sequence: its generator and the last tick whose ID left.
        generators: Vec<Option<(Generator, Option<u64>)>>,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any interleaving of sessions that share worker ids, come and go, and use sequences
        /// of different units and epochs: no ID twice, each session's IDs of a sequence
        /// increasing, and each ID within the lead of the clock.
        #[test]
        fn shared_worker_ids_never_repeat_an_id(
            (sessions, layouts, ops, ids, lead, start_after_floor) in (2usize..6, 1usize..4)
                .prop_flat_map(|(sessions, sequences)| (
                    Just(sessions),
                    prop::collection::vec(layout(), sequences),
                    prop::collection::vec(op(sessions, sequences), 1..300),
                    1usize..=3,
                    0u64..3,
                    any::<bool>(),
                ))
        ) {
            let space = table(ids);
            let mut next_pid = 1;
            let new_session = |space: &[WorkerId], next_pid: &mut i32| {
                *next_pid += 1;
                let a = attach(space, *next_pid, 1, 0, alive);
                Session {
                    pid: *next_pid,
                    worker: a.worker,
                    owned: [OwnedTicks::NONE; TIME_UNITS],
                    generators: vec![None; layouts.len()],
                }
            };
            let mut all: Vec<Session> =
                (0..sessions).map(|_| new_session(&space, &mut next_pid)).collect();
            let mut now: i64 = 1_000_000;
            let mut issued = HashSet::new();
            let mut last: std::collections::HashMap<(i32, usize), (u64, u64)> =
                Default::default();
            let mut shared_issues = 0;
            for op in ops {
                match op {
                    Op::Clock(us) => now += us,
                    Op::Replace(s) => {
                        prop_assert!(detach(&space, all[s].worker, all[s].pid));
                        all[s] = new_session(&space, &mut next_pid);
                    }
                    Op::Issue(s, q) => {
                        let layout = &layouts[q];
                        let session = &mut all[s];
                        let id = &space[session.worker];
                        let unit = layout.time_unit_index();
                        let (generator, published) = session.generators[q].get_or_insert_with(|| {
                            // The glue starts after the floor; sessions new to an id must not
                            // need it (a session's second generator for one sequence would:
                            // the glue makes one only for a new sequence, a new ID space).
                            let after = start_after_floor
                                .then(|| layout.first_tick_at_or_after(id.floor(unit)).checked_sub(1))
                                .flatten();
                            (Generator::new(layout.sequence_bits, after), None)
                        });
                        loop {
                            let now_tick = layout.tick_at(now).unwrap();
                            match id.next_owned(generator, layout, &mut session.owned[unit],
                                                *published, now_tick, lead, &mut 0) {
                                OwnedStep::Issue { tick, sequence, new_tick } => {
                                    prop_assert_eq!(new_tick, *published < Some(tick));
                                    prop_assert!(tick <= now_tick + lead);
                                    *published = (*published).max(Some(tick));
                                    prop_assert!(
                                        issued.insert((q, session.worker, tick, sequence)),
                                        "sequence {} worker {} tick {} seq {} twice",
                                        q, session.worker, tick, sequence
                                    );
                                    let key = (session.pid, q);
                                    if let Some(previous) = last.insert(key, (tick, sequence)) {
                                        prop_assert!(previous < (tick, sequence));
                                    }
                                    if id.sessions() > 1 {
                                        shared_issues += 1;
                                    }
                                    break;
                                }
                                // The session sleeps until the clock reaches `tick`.
                                OwnedStep::WaitUntil { tick } => {
                                    now = now.max(layout.tick_start_unix_us(tick));
                                }
                                OwnedStep::TimeExhausted => prop_assert!(false, "time ran out"),
                            }
                        }
                    }
                }
            }
            // Sessions outnumber ids often enough that sharing is what is tested.
            prop_assume!(shared_issues > 0);
        }
    }
}
