//! Ticks owned on a worker id (docs/design.md §2.3 step 4, §4): uniqueness never rests on a
//! session being alone on its id. A session issues in a tick of a worker id only after it owns
//! the tick: it raised the id's floor for the tick's time unit to the tick's end by
//! compare-and-swap from a value at or below the tick's start, or the tick lies in an interval it
//! owns that way ([`OwnedTicks`]). Floors only rise, so intervals owned by different sessions (or
//! successive holders) never overlap. A session alone on an id pays one uncontended
//! compare-and-swap per tick and no lock; one that shares the id takes the ticks the others left,
//! so the sharers of an id take turns tick by tick.

use crate::generator::{Generator, Step};
use crate::layout::Layout;
use crate::sync::Ordering;
use crate::worker_ids::WorkerId;

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

    /// Where a session's first generator of a sequence (a new ID space) may start on this
    /// worker id, the id's floor for the unit being `floor`: after the floor, unless the floor
    /// is the end of this session's own interval (nobody claimed since), which the generator
    /// may then use from its start, as the session's other sequences' IDs in those ticks are of
    /// other ID spaces. A second generator of one sequence must start after the floor: its
    /// first generator may have issued in the interval.
    pub fn first_start_for_new_sequence(&self, floor: i64) -> i64 {
        if floor == self.to && self.from < self.to {
            self.from
        } else {
            floor
        }
    }
}

/// The outcome of [`claim_tick`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickClaim {
    /// The session owns the tick.
    Owned,
    /// Other sessions own time up to this floor: the session needs a tick that starts at or
    /// after it.
    TakenUntil(i64),
}

/// The clock as [`next_owned`] reads it, in ticks of the sequence's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickClock {
    /// The tick the clock is in.
    pub now: u64,
    /// How many ticks IDs may run ahead of it (`snowflake_id.max_lead`).
    pub max_lead: u64,
}

/// One step of [`next_owned`].
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

/// What [`next_owned`] found: its step, and how many ticks it found other sessions
/// own on the way (`snowflake_stats().tick_conflicts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextOwned {
    pub step: OwnedStep,
    pub conflicts: u64,
}

/// Makes the session whose intervals are `owned` the owner of the tick [start, end) of time
/// unit `unit` on `worker_id`, unless another session owns part of it.
pub fn claim_tick(
    worker_id: &WorkerId,
    unit: usize,
    owned: &mut OwnedTicks,
    start: i64,
    end: i64,
) -> TickClaim {
    if owned.covers(start, end) {
        return TickClaim::Owned;
    }
    let floor = &worker_id.floors_unix_us[unit];
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

/// The next ID of `generator` (a sequence of `layout`) in a tick the session owns on
/// `worker_id`: proposes ticks as [`Generator::next`] does and claims each tick later than
/// `published`, skipping past ticks other sessions own (counted in its result).
#[inline]
pub fn next_owned(
    worker_id: &WorkerId,
    generator: &mut Generator,
    layout: &Layout,
    owned: &mut OwnedTicks,
    published: Option<u64>,
    clock: TickClock,
) -> NextOwned {
    let mut conflicts = 0;
    let step = loop {
        match generator.next(clock.now, clock.max_lead, layout.max_tick()) {
            Step::Issue { tick, sequence } => {
                let new_tick = published < Some(tick);
                if new_tick {
                    let start = layout.tick_start_unix_us(tick);
                    let end = layout.tick_start_unix_us(tick.saturating_add(1));
                    let unit = layout.time_unit_index();
                    if let TickClaim::TakenUntil(floor) =
                        claim_tick(worker_id, unit, owned, start, end)
                    {
                        conflicts += 1;
                        generator.skip_to(layout.first_tick_at_or_after(floor));
                        continue;
                    }
                }
                break OwnedStep::Issue {
                    tick,
                    sequence,
                    new_tick,
                };
            }
            Step::WaitUntil { tick } => break OwnedStep::WaitUntil { tick },
            Step::TimeExhausted => break OwnedStep::TimeExhausted,
        }
    };
    NextOwned { step, conflicts }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layout::PRESETS;
    use crate::sync::AtomicU64;
    use crate::worker_ids::tests::{alive, table};
    use crate::worker_ids::{attach, detach, in_use, TIME_UNITS};
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn claims_extend_own_intervals_and_skip_the_others() {
        let id = WorkerId::new();
        let (mut a, mut b) = (OwnedTicks::NONE, OwnedTicks::NONE);
        assert_eq!(claim_tick(&id, 0, &mut a, 1_000, 2_000), TickClaim::Owned);
        assert_eq!(a, OwnedTicks { from: 0, to: 2_000 });
        // Inside its interval: no write.
        assert_eq!(claim_tick(&id, 0, &mut a, 1_500, 2_000), TickClaim::Owned);
        // The next tick extends it.
        assert_eq!(claim_tick(&id, 0, &mut a, 2_000, 3_000), TickClaim::Owned);
        assert_eq!((a.from, a.to, id.floor(0)), (0, 3_000, 3_000));
        // Another session cannot have any of it, nor a tick reaching into it.
        assert_eq!(
            claim_tick(&id, 0, &mut b, 2_000, 3_000),
            TickClaim::TakenUntil(3_000)
        );
        assert_eq!(
            claim_tick(&id, 0, &mut b, 2_500, 3_500),
            TickClaim::TakenUntil(3_000)
        );
        assert_eq!(claim_tick(&id, 0, &mut b, 3_000, 4_000), TickClaim::Owned);
        assert_eq!(
            b,
            OwnedTicks {
                from: 3_000,
                to: 4_000
            }
        );
        // Now `a` cannot extend over `b`'s tick; it starts a new interval past it.
        assert_eq!(
            claim_tick(&id, 0, &mut a, 3_000, 4_000),
            TickClaim::TakenUntil(4_000)
        );
        assert_eq!(claim_tick(&id, 0, &mut a, 5_000, 6_000), TickClaim::Owned);
        assert_eq!(
            a,
            OwnedTicks {
                from: 4_000,
                to: 6_000
            }
        );
        // Units are independent.
        assert_eq!(claim_tick(&id, 1, &mut b, 0, 10_000), TickClaim::Owned);
        assert_eq!(
            (id.floor(0), id.floor(1), id.highest_floor()),
            (6_000, 10_000, 10_000)
        );
    }

    #[test]
    fn a_new_sequence_starts_in_the_sessions_own_interval_only_while_nobody_claimed_after_it() {
        let id = WorkerId::new();
        let (mut a, mut b) = (OwnedTicks::NONE, OwnedTicks::NONE);
        assert_eq!(
            claim_tick(&id, 0, &mut a, 1_000_000, 2_000_000),
            TickClaim::Owned
        );
        // Only this session's claim is in the way: its interval is free for another sequence.
        assert_eq!(a.first_start_for_new_sequence(id.floor(0)), 0);
        // Another session claimed after it: after the floor.
        assert_eq!(
            claim_tick(&id, 0, &mut b, 2_000_000, 3_000_000),
            TickClaim::Owned
        );
        assert_eq!(a.first_start_for_new_sequence(id.floor(0)), 3_000_000);
        assert_eq!(b.first_start_for_new_sequence(id.floor(0)), 2_000_000);
        // A session that owns nothing starts after the floor.
        assert_eq!(OwnedTicks::NONE.first_start_for_new_sequence(7), 7);
        assert_eq!(
            OwnedTicks::NONE.first_start_for_new_sequence(i64::MIN),
            i64::MIN
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
            let next = next_owned(
                &id,
                g,
                &layout,
                owned,
                published,
                TickClock { now, max_lead: 100 },
            );
            *c += next.conflicts;
            next.step
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
        let waits = next_owned(
            &id,
            &mut gc,
            &layout,
            &mut c,
            None,
            TickClock {
                now: 52,
                max_lead: 0,
            },
        );
        assert_eq!(waits.step, OwnedStep::WaitUntil { tick: 53 });
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
                        let worker = attach(space, pid, 1, 0, alive, &AtomicU64::new(0));
                        let id = &space[worker];
                        let mut owned = OwnedTicks::NONE;
                        let unit = layout.time_unit_index();
                        let mut generator = Generator::new(
                            layout.sequence_bits,
                            layout.first_tick_at_or_after(id.floor(unit)).checked_sub(1),
                        );
                        let (mut published, mut out) = (None, Vec::new());
                        while out.len() < IDS_PER_THREAD {
                            // A shared fake clock that moves a tick every 64 calls.
                            let now = clock.fetch_add(1, Ordering::Relaxed) / 64;
                            let next = next_owned(
                                id,
                                &mut generator,
                                &layout,
                                &mut owned,
                                published,
                                TickClock { now, max_lead: 10 },
                            );
                            match next.step {
                                OwnedStep::Issue { tick, sequence, .. } => {
                                    published = published.max(Some(tick));
                                    out.push((worker as u64, tick, sequence));
                                }
                                OwnedStep::WaitUntil { .. } => std::thread::yield_now(),
                                OwnedStep::TimeExhausted => unreachable!(),
                            }
                        }
                        assert!(detach(space, worker, pid));
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

    /// Where a session's first generator of a sequence starts.
    #[derive(Clone, Copy, Debug)]
    enum Start {
        AtTheClock,
        AfterTheFloor,
        /// `OwnedTicks::first_start_for_new_sequence`, as `src/ids/backend.rs` does.
        AsTheGlueDoes,
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
            (sessions, layouts, ops, ids, lead, start) in (2usize..6, 1usize..4)
                .prop_flat_map(|(sessions, sequences)| (
                    Just(sessions),
                    prop::collection::vec(layout(), sequences),
                    prop::collection::vec(op(sessions, sequences), 1..300),
                    1usize..=3,
                    0u64..3,
                    prop_oneof![Just(Start::AtTheClock), Just(Start::AfterTheFloor),
                                Just(Start::AsTheGlueDoes)],
                ))
        ) {
            let space = table(ids);
            let mut next_pid = 1;
            let new_session = |space: &[WorkerId], next_pid: &mut i32| {
                *next_pid += 1;
                Session {
                    pid: *next_pid,
                    worker: attach(space, *next_pid, 1, 0, alive, &AtomicU64::new(0)),
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
                        let owned = session.owned[unit];
                        let (generator, published) = session.generators[q].get_or_insert_with(|| {
                            // A session's first generator of a sequence: uniqueness must not
                            // need any start hint (a second generator of one sequence would
                            // need the floor: the glue makes one only for a new ID space).
                            let floor = id.floor(unit);
                            let from = match start {
                                Start::AtTheClock => None,
                                Start::AfterTheFloor => Some(floor),
                                Start::AsTheGlueDoes => Some(owned.first_start_for_new_sequence(floor)),
                            };
                            let after = from
                                .and_then(|from| layout.first_tick_at_or_after(from).checked_sub(1));
                            (Generator::new(layout.sequence_bits, after), None)
                        });
                        loop {
                            let now_tick = layout.tick_at(now).unwrap();
                            let clock = TickClock { now: now_tick, max_lead: lead };
                            match next_owned(id, generator, layout, &mut session.owned[unit],
                                                *published, clock).step {
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
