//! Worker-slot allocation over a table of plain atomics (the glue places `[Slot]` in
//! shared memory). A slot's index is the worker number; holder pid 0 means free.
//!
//! Each slot carries a floor per time unit: the end of the latest tick any holder used in a
//! sequence of that unit. A new holder's generator for a sequence starts at or after the floor
//! of the sequence's unit, so a worker number reused by another backend never repeats an
//! earlier holder's (tick, worker) pairs, and a sequence with fine ticks never waits for the end
//! of a coarse tick another sequence used (docs/design.md §4).

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

use crate::layout::ALLOWED_TIME_UNITS_US;

/// How many time units a layout can have (one floor each).
pub const TIME_UNITS: usize = ALLOWED_TIME_UNITS_US.len();

#[repr(C, align(64))]
pub struct Slot {
    pub holder_pid: AtomicI32,
    pub database_oid: AtomicU32,
    /// Per time unit (`Layout::time_unit_index`): end (exclusive, unix µs) of the latest tick
    /// any holder of this slot used in a sequence of that unit; a new holder starts at or after
    /// it. 0 (1970) until first raised, which constrains no valid layout since epochs are not
    /// before 1970.
    floors_unix_us: [AtomicI64; TIME_UNITS],
    pub claimed_at_unix_us: AtomicI64,
    pub ids_issued: AtomicU64,
}

// One cache line per slot: holders write their own slot on the hot path.
const _: () = assert!(std::mem::size_of::<Slot>() == 64);
const _: () = assert!(std::mem::align_of::<Slot>() == 64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exhausted {
    pub in_use: usize,
    pub capacity: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    pub index: usize,
    /// The slot's floors when it was claimed, per time unit.
    pub floors_unix_us: [i64; TIME_UNITS],
    pub reclaimed_from_pid: Option<i32>,
}

/// Claim the lowest free slot for `pid`. A slot held by a pid for which `is_alive(pid)`
/// is false is reclaimed (compare-exchange from that pid, so two claimers cannot both
/// take it); its floors are kept. Sets database_oid, claimed_at_unix_us = now_unix_us,
/// ids_issued = 0. Returns the floors the new holder must start at or after.
///
/// Free slots are preferred over dead holders' slots, so the common path makes no
/// `is_alive` calls (each is typically a syscall); dead holders are only reclaimed when
/// no slot is free. pid 0 cannot hold a slot (0 means free) and always gets `Exhausted`.
pub fn claim(
    slots: &[Slot],
    pid: i32,
    database_oid: u32,
    now_unix_us: i64,
    is_alive: impl Fn(i32) -> bool,
) -> Result<Claim, Exhausted> {
    if pid != 0 {
        for (index, slot) in slots.iter().enumerate() {
            if slot.holder_pid.load(Ordering::Relaxed) == 0 && slot.take(0, pid) {
                return Ok(slot.init(index, database_oid, now_unix_us, None));
            }
        }
        for (index, slot) in slots.iter().enumerate() {
            let holder = slot.holder_pid.load(Ordering::Relaxed);
            if holder != 0 && holder != pid && !is_alive(holder) && slot.take(holder, pid) {
                return Ok(slot.init(index, database_oid, now_unix_us, Some(holder)));
            }
        }
    }
    Err(Exhausted {
        in_use: in_use(slots),
        capacity: slots.len(),
    })
}

/// Release slot `index` if `pid` holds it (Release ordering, after the floor store).
/// Returns whether it did.
pub fn release(slots: &[Slot], index: usize, pid: i32) -> bool {
    match slots.get(index) {
        Some(slot) if pid != 0 => slot
            .holder_pid
            .compare_exchange(pid, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok(),
        _ => false,
    }
}

/// Number of slots with a holder.
pub fn in_use(slots: &[Slot]) -> usize {
    slots
        .iter()
        .filter(|s| s.holder_pid.load(Ordering::Relaxed) != 0)
        .count()
}

impl Slot {
    pub const fn new() -> Slot {
        Slot {
            holder_pid: AtomicI32::new(0),
            database_oid: AtomicU32::new(0),
            floors_unix_us: [const { AtomicI64::new(0) }; TIME_UNITS],
            claimed_at_unix_us: AtomicI64::new(0),
            ids_issued: AtomicU64::new(0),
        }
    }

    /// Called only by the holder (single writer): raise the floor of time unit `unit` to at
    /// least `end_unix_us` (load, max, store — no RMW needed).
    #[inline]
    pub fn raise_floor(&self, unit: usize, end_unix_us: i64) {
        let floor = &self.floors_unix_us[unit];
        // Release as well as the release in `release`: a holder that dies without
        // releasing still publishes its floor as far as the hardware allows.
        if end_unix_us > floor.load(Ordering::Relaxed) {
            floor.store(end_unix_us, Ordering::Release);
        }
    }

    /// The floor of time unit `unit`.
    #[inline]
    pub fn floor(&self, unit: usize) -> i64 {
        self.floors_unix_us[unit].load(Ordering::Acquire)
    }

    /// The end of the latest tick any holder used, in any unit.
    pub fn highest_floor(&self) -> i64 {
        (0..TIME_UNITS)
            .map(|unit| self.floor(unit))
            .max()
            .unwrap_or(0)
    }

    /// Called only by the holder: add to ids_issued without an atomic RMW (single
    /// writer: load + store, Relaxed). Saturates rather than wrapping.
    #[inline]
    pub fn count_issued(&self, n: u64) {
        let v = self.ids_issued.load(Ordering::Relaxed).saturating_add(n);
        self.ids_issued.store(v, Ordering::Relaxed);
    }

    /// The holder's pid, or None if free.
    pub fn holder(&self) -> Option<i32> {
        match self.holder_pid.load(Ordering::Relaxed) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// Compare-exchange the holder from `from` to `pid`. AcqRel/Acquire so the new holder
    /// sees the floor stored before the previous holder's Release.
    fn take(&self, from: i32, pid: i32) -> bool {
        self.holder_pid
            .compare_exchange(from, pid, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Fill in the new holder's fields after a successful `take`.
    fn init(
        &self,
        index: usize,
        database_oid: u32,
        now_unix_us: i64,
        reclaimed_from_pid: Option<i32>,
    ) -> Claim {
        self.database_oid.store(database_oid, Ordering::Relaxed);
        self.claimed_at_unix_us
            .store(now_unix_us, Ordering::Relaxed);
        self.ids_issued.store(0, Ordering::Relaxed);
        Claim {
            index,
            floors_unix_us: std::array::from_fn(|unit| self.floor(unit)),
            reclaimed_from_pid,
        }
    }
}

impl Default for Slot {
    fn default() -> Slot {
        Slot::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(n: usize) -> Vec<Slot> {
        (0..n).map(|_| Slot::new()).collect()
    }

    fn alive(_: i32) -> bool {
        true
    }

    #[test]
    fn layout_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Slot>(), 64);
        assert_eq!(std::mem::align_of::<Slot>(), 64);
        static TABLE: [Slot; 2] = [Slot::new(), Slot::new()];
        assert_eq!(in_use(&TABLE), 0);
    }

    #[test]
    fn lowest_free_slot_is_taken() {
        let s = table(4);
        for (i, pid) in [10, 11, 12].into_iter().enumerate() {
            let c = claim(&s, pid, 5, 1000, alive).unwrap();
            assert_eq!(c.index, i);
            assert_eq!(c.floors_unix_us, [0; TIME_UNITS]);
            assert_eq!(c.reclaimed_from_pid, None);
        }
        assert!(release(&s, 1, 11));
        assert_eq!(claim(&s, 13, 5, 1000, alive).unwrap().index, 1);
        assert_eq!(claim(&s, 14, 5, 1000, alive).unwrap().index, 3);
        assert_eq!(s[3].holder(), Some(14));
        assert_eq!(s[3].database_oid.load(Ordering::Relaxed), 5);
        assert_eq!(s[3].claimed_at_unix_us.load(Ordering::Relaxed), 1000);
    }

    #[test]
    fn exhaustion() {
        let s = table(3);
        for pid in 1..=3 {
            claim(&s, pid, 1, 0, alive).unwrap();
        }
        assert_eq!(
            claim(&s, 4, 1, 0, alive),
            Err(Exhausted {
                in_use: 3,
                capacity: 3
            })
        );
        assert_eq!(
            claim(&[], 4, 1, 0, alive),
            Err(Exhausted {
                in_use: 0,
                capacity: 0
            })
        );
        // pid 0 means free, so it can never hold a slot.
        assert_eq!(
            claim(&table(2), 0, 1, 0, alive),
            Err(Exhausted {
                in_use: 0,
                capacity: 2
            })
        );
    }

    #[test]
    fn dead_holders_reclaimed_with_floor_live_not() {
        let s = table(3);
        for pid in [100, 200, 300] {
            claim(&s, pid, 1, 0, alive).unwrap();
        }
        s[1].raise_floor(2, 5_000);
        s[1].count_issued(7);
        let c = claim(&s, 400, 2, 9_000, |p| p != 200).unwrap();
        assert_eq!(
            c,
            Claim {
                index: 1,
                floors_unix_us: [0, 0, 5_000, 0],
                reclaimed_from_pid: Some(200)
            }
        );
        assert_eq!(s[1].holder(), Some(400));
        assert_eq!(s[1].ids_issued.load(Ordering::Relaxed), 0);
        assert_eq!(s[1].database_oid.load(Ordering::Relaxed), 2);
        // Everyone alive: nothing to take.
        assert_eq!(
            claim(&s, 500, 1, 0, alive),
            Err(Exhausted {
                in_use: 3,
                capacity: 3
            })
        );
        // A free slot is preferred to a dead holder's, even a lower one.
        assert!(release(&s, 2, 300));
        let c = claim(&s, 600, 1, 0, |_| false).unwrap();
        assert_eq!((c.index, c.reclaimed_from_pid), (2, None));
    }

    #[test]
    fn release_by_non_holder_does_nothing() {
        let s = table(2);
        claim(&s, 7, 1, 0, alive).unwrap();
        assert!(!release(&s, 0, 8));
        assert!(!release(&s, 1, 7)); // free slot
        assert!(!release(&s, 5, 7)); // out of range
        assert!(!release(&s, 1, 0));
        assert_eq!(s[0].holder(), Some(7));
        assert!(release(&s, 0, 7));
        assert!(!release(&s, 0, 7));
        assert_eq!(in_use(&s), 0);
    }

    #[test]
    fn floors_only_rise_each_in_its_unit_and_count_saturates() {
        let s = Slot::default();
        s.raise_floor(0, 10);
        s.raise_floor(0, 5);
        s.raise_floor(3, 7);
        assert_eq!((s.floor(0), s.floor(1), s.floor(3)), (10, 0, 7));
        assert_eq!(s.highest_floor(), 10);
        s.count_issued(3);
        s.count_issued(u64::MAX);
        assert_eq!(s.ids_issued.load(Ordering::Relaxed), u64::MAX);
    }

    #[test]
    fn threads_never_share_a_slot_and_floors_carry_over() {
        const THREADS: i32 = 8;
        const CYCLES: usize = 3000;
        const SLOTS: usize = 5;
        let slots = table(SLOTS);
        // The test's own bookkeeping, written by whoever holds the slot.
        let owner: Vec<AtomicI32> = (0..SLOTS).map(|_| AtomicI32::new(0)).collect();
        let released_floor: Vec<AtomicI64> = (0..SLOTS).map(|_| AtomicI64::new(0)).collect();
        let clock = AtomicI64::new(1);
        std::thread::scope(|scope| {
            for pid in 1..=THREADS {
                let (slots, owner, released_floor, clock) =
                    (&slots, &owner, &released_floor, &clock);
                scope.spawn(move || {
                    let mut done = 0;
                    while done < CYCLES {
                        let c = match claim(slots, pid, 1, 0, alive) {
                            Ok(c) => c,
                            Err(e) => {
                                assert_eq!(e.capacity, SLOTS);
                                std::thread::yield_now();
                                continue;
                            }
                        };
                        assert_eq!(owner[c.index].swap(pid, Ordering::Relaxed), 0);
                        // Visible through the slot's release/acquire pair only.
                        let prev = released_floor[c.index].load(Ordering::Relaxed);
                        let highest = c.floors_unix_us.into_iter().max().unwrap();
                        assert!(highest >= prev, "{highest} < {prev}");
                        let unit = pid as usize % TIME_UNITS;
                        let claimed = c.floors_unix_us[unit];
                        for _ in 0..3 {
                            let t = clock.fetch_add(1, Ordering::Relaxed) + 1;
                            slots[c.index].raise_floor(unit, t);
                            slots[c.index].count_issued(1);
                            // Hold the slot a while so claimers contend.
                            std::thread::yield_now();
                        }
                        assert!(slots[c.index].floor(unit) > claimed);
                        let floor = slots[c.index].highest_floor();
                        released_floor[c.index].store(floor, Ordering::Relaxed);
                        assert_eq!(owner[c.index].swap(0, Ordering::Relaxed), pid);
                        assert!(release(slots, c.index, pid));
                        done += 1;
                    }
                });
            }
        });
        assert_eq!(in_use(&slots), 0);
    }
}
