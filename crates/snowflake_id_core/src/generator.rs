//! Per-backend, per-sequence ID state machine over an injected clock (in ticks).
//!
//! Rules:
//! - The counter is never reset on a new tick (constant low bits would skew `id % N`
//!   sharding); it keeps incrementing, wrapping modulo 2^sequence_bits. A fresh generator
//!   starts at 0, so its first ID has sequence 1.
//! - Clock ahead of the last tick: issue at the clock's tick with counter + 1 (wrapping).
//! - Clock at or behind the last tick: stay in the last tick with counter + 1 while that
//!   does not wrap; when it wraps to 0 the tick is exhausted and the next tick is
//!   borrowed with counter 0.
//!
//! Within a tick the sequence therefore only grows, so issued (tick, sequence) pairs are
//! strictly increasing (hence unique and ordered as IDs) for any clock input. The price
//! is that a tick entered with counter c holds 2^sequence_bits - c IDs before borrowing.
//! (Stopping only when the counter comes back to the tick's first value would give every
//! tick full capacity, but sequences would then drop within a tick and IDs issued by one
//! backend would not be increasing.)
//!
//! No ID is issued more than `max_lead_ticks` ahead of the clock (`WaitUntil`), nor past
//! `max_tick` (`TimeExhausted`); both leave the state unchanged. No ID is issued in a tick at
//! or before `start_after`: the floor of the worker id at the start, raised by `skip_to` when
//! another session owns the tick the generator proposed (`worker_ids`).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Issue {
        tick: u64,
        sequence: u64,
    },
    /// Sleep until the clock reaches `tick`, then call again.
    WaitUntil {
        tick: u64,
    },
    TimeExhausted,
}

#[derive(Clone, Debug)]
pub struct Generator {
    /// 2^sequence_bits - 1.
    seq_mask: u64,
    /// Every ID must have a tick strictly after this (ticks other sessions own on the worker id).
    start_after: Option<u64>,
    /// Tick of the last issued ID; None until the first.
    last_tick: Option<u64>,
    /// Sequence value of the last issued ID (0 before the first).
    counter: u64,
    borrowed_ticks: u64,
}

impl Generator {
    /// sequence_bits in 1..=62 (callers validated the layout). Other values do not
    /// panic: 0 gives one ID per tick, 64 or more act as 64.
    pub fn new(sequence_bits: u8, start_after: Option<u64>) -> Generator {
        Generator {
            seq_mask: 1u64
                .checked_shl(u32::from(sequence_bits))
                .map_or(u64::MAX, |v| v - 1),
            start_after,
            last_tick: None,
            counter: 0,
            borrowed_ticks: 0,
        }
    }

    #[inline]
    pub fn next(&mut self, now_tick: u64, max_lead_ticks: u64, max_tick: u64) -> Step {
        let next_counter = self.counter.wrapping_add(1) & self.seq_mask;
        // The (tick, sequence) this call would issue, and whether it borrows a tick.
        let (tick, sequence, borrows) = match self.last_tick {
            None => (now_tick, next_counter, false),
            Some(last) if now_tick > last => (now_tick, next_counter, false),
            Some(last) if next_counter != 0 => (last, next_counter, false),
            Some(last) => match last.checked_add(1) {
                Some(t) => (t, 0, true),
                None => return Step::TimeExhausted,
            },
        };
        // Not at or before `start_after`: moving to a later tick keeps the pairs increasing.
        let (tick, borrows) = match self.start_after {
            Some(after) if tick <= after => match after.checked_add(1) {
                Some(t) => (t, false),
                // A floor of u64::MAX leaves no tick to issue in.
                None => return Step::TimeExhausted,
            },
            _ => (tick, borrows),
        };
        // Exhaustion first: waiting would never bring the tick back under max_tick.
        if tick > max_tick {
            return Step::TimeExhausted;
        }
        if tick > now_tick.saturating_add(max_lead_ticks) {
            // tick > now + lead, so tick - lead > now >= 0: no underflow, and the caller
            // is told a tick strictly ahead of its clock.
            return Step::WaitUntil {
                tick: tick - max_lead_ticks,
            };
        }
        self.last_tick = Some(tick);
        self.counter = sequence;
        if borrows {
            self.borrowed_ticks = self.borrowed_ticks.saturating_add(1);
        }
        Step::Issue { tick, sequence }
    }

    /// The next ID's sequence when it continues the tick of the last one: what [`Generator::next`]
    /// issues (with any lead, and any `max_tick` the last ID was within) when the clock is in that
    /// tick and the counter does not wrap; None otherwise, and then only `next` decides. The hot
    /// path's whole step (its property test drives it beside `next`).
    #[inline]
    pub fn next_in_last_tick(&mut self, now_tick: u64) -> Option<u64> {
        let continues = self.last_tick == Some(now_tick)
            && self.start_after < Some(now_tick)
            && self.counter != self.seq_mask;
        continues.then(|| {
            self.counter += 1;
            self.counter
        })
    }

    /// From now on, IDs have a tick at or after `tick` (the tick last proposed was owned by
    /// another session sharing the worker id). Issued pairs stay increasing: only later ticks
    /// are skipped to.
    pub fn skip_to(&mut self, tick: u64) {
        let after = tick.checked_sub(1);
        if after > self.start_after {
            self.start_after = after;
        }
    }

    /// Tick of the last issued ID, if any.
    #[cfg(test)]
    pub fn last_tick(&self) -> Option<u64> {
        self.last_tick
    }

    /// Number of times a tick was borrowed (exhausted tick → next tick ahead of or at
    /// the clock). For stats.
    #[inline]
    pub fn borrowed_ticks(&self) -> u64 {
        self.borrowed_ticks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;

    const NO_LIMIT: u64 = u64::MAX;

    fn issue(g: &mut Generator, now: u64, lead: u64) -> (u64, u64) {
        match g.next(now, lead, NO_LIMIT) {
            Step::Issue { tick, sequence } => (tick, sequence),
            other => panic!("expected an ID, got {other:?}"),
        }
    }

    #[test]
    fn first_id_is_at_now_with_sequence_one() {
        let mut g = Generator::new(12, None);
        assert_eq!(g.last_tick(), None);
        assert_eq!(issue(&mut g, 7, 0), (7, 1));
        assert_eq!(g.last_tick(), Some(7));
        let mut g = Generator::new(12, None);
        assert_eq!(issue(&mut g, 0, 0), (0, 1));
    }

    #[test]
    fn new_tick_continues_counter() {
        let mut g = Generator::new(12, None);
        assert_eq!(issue(&mut g, 10, 0), (10, 1));
        assert_eq!(issue(&mut g, 10, 0), (10, 2));
        assert_eq!(issue(&mut g, 11, 0), (11, 3));
        assert_eq!(issue(&mut g, 50, 0), (50, 4));
    }

    #[test]
    fn same_tick_and_backwards_clock_stay_in_last_tick() {
        let mut g = Generator::new(12, None);
        assert_eq!(issue(&mut g, 100, 0), (100, 1));
        assert_eq!(issue(&mut g, 100, 0), (100, 2));
        // Clock stepped back: IDs stay in the last tick, which is then ahead of the clock,
        // so they need enough lead.
        assert_eq!(g.next(90, 5, NO_LIMIT), Step::WaitUntil { tick: 95 });
        assert_eq!(issue(&mut g, 90, 10), (100, 3));
        assert_eq!(issue(&mut g, 95, 5), (100, 4));
    }

    #[test]
    fn the_last_tick_continues_only_where_next_would_stay_in_it() {
        let mut g = Generator::new(2, None); // sequences 0..=3
        assert_eq!(g.next_in_last_tick(5), None); // no ID yet
        assert_eq!(issue(&mut g, 5, 1), (5, 1));
        assert_eq!(g.next_in_last_tick(5), Some(2));
        assert_eq!(g.next_in_last_tick(6), None); // the clock moved on
        assert_eq!(g.next_in_last_tick(4), None); // behind: `next` checks the lead
        assert_eq!(g.next_in_last_tick(5), Some(3));
        assert_eq!(g.next_in_last_tick(5), None); // the counter would wrap: a borrow
        assert_eq!(issue(&mut g, 6, 1), (6, 0));
        g.skip_to(6); // no effect: tick 6 is after the floor 5
        assert_eq!(g.next_in_last_tick(6), Some(1));
        g.skip_to(7); // another session owns tick 6 from here on
        assert_eq!(g.next_in_last_tick(6), None);
        assert_eq!(issue(&mut g, 6, 1), (7, 2));
    }

    #[test]
    fn exhausted_tick_borrows_next() {
        let mut g = Generator::new(2, None); // sequences 0..=3
        assert_eq!(issue(&mut g, 5, 1), (5, 1));
        assert_eq!(issue(&mut g, 5, 1), (5, 2));
        assert_eq!(issue(&mut g, 5, 1), (5, 3));
        assert_eq!(g.borrowed_ticks(), 0);
        assert_eq!(issue(&mut g, 5, 1), (6, 0));
        assert_eq!(g.borrowed_ticks(), 1);
        assert_eq!(issue(&mut g, 5, 1), (6, 1));
        assert_eq!(issue(&mut g, 5, 1), (6, 2));
        assert_eq!(issue(&mut g, 5, 1), (6, 3));
        // Borrowing tick 7 would be 2 ahead of the clock at 5: wait for tick 6.
        assert_eq!(g.next(5, 1, NO_LIMIT), Step::WaitUntil { tick: 6 });
        assert_eq!(issue(&mut g, 6, 1), (7, 0));
        assert_eq!(g.borrowed_ticks(), 2);
    }

    #[test]
    fn wait_when_lead_exceeded_leaves_state_unchanged() {
        let mut g = Generator::new(1, None); // sequences 0..=1
        assert_eq!(issue(&mut g, 3, 0), (3, 1));
        let before = format!("{g:?}");
        assert_eq!(g.next(3, 0, NO_LIMIT), Step::WaitUntil { tick: 4 });
        assert_eq!(g.next(1, 0, NO_LIMIT), Step::WaitUntil { tick: 4 });
        assert_eq!(g.next(1, 2, NO_LIMIT), Step::WaitUntil { tick: 2 });
        assert_eq!(format!("{g:?}"), before);
        assert_eq!(issue(&mut g, 4, 0), (4, 0));
        assert_eq!(g.borrowed_ticks(), 0); // clock reached it: new-tick branch
    }

    #[test]
    fn time_exhausted_leaves_state_unchanged() {
        let mut g = Generator::new(1, None);
        assert_eq!(g.next(11, 0, 10), Step::TimeExhausted);
        assert_eq!(g.last_tick(), None);
        assert_eq!(
            g.next(10, 0, 10),
            Step::Issue {
                tick: 10,
                sequence: 1
            }
        );
        // Borrowing tick 11 is past max_tick even with lead to spare.
        let before = format!("{g:?}");
        assert_eq!(g.next(10, 5, 10), Step::TimeExhausted);
        assert_eq!(format!("{g:?}"), before);
        // At u64::MAX there is no next tick at all.
        let mut g = Generator::new(1, None);
        assert_eq!(issue(&mut g, u64::MAX, 0), (u64::MAX, 1));
        assert_eq!(g.next(u64::MAX, 0, u64::MAX), Step::TimeExhausted);
        assert_eq!(
            Generator::new(12, Some(u64::MAX)).next(0, 0, u64::MAX),
            Step::TimeExhausted
        );
    }

    #[test]
    fn floor_respected_even_with_clock_below() {
        let mut g = Generator::new(12, Some(20));
        assert_eq!(g.next(15, 3, NO_LIMIT), Step::WaitUntil { tick: 18 });
        assert_eq!(g.last_tick(), None);
        assert_eq!(issue(&mut g, 15, 6), (21, 1));
        assert_eq!(issue(&mut g, 15, 6), (21, 2));
        let mut g = Generator::new(12, Some(20));
        assert_eq!(issue(&mut g, 30, 0), (30, 1));
        let mut g = Generator::new(12, Some(20));
        assert_eq!(issue(&mut g, 20, 1), (21, 1));
    }

    #[test]
    fn skip_to_moves_later_only_and_keeps_the_counter() {
        let mut g = Generator::new(12, None);
        assert_eq!(issue(&mut g, 10, 5), (10, 1));
        g.skip_to(12);
        assert_eq!(issue(&mut g, 10, 5), (12, 2));
        // An earlier skip changes nothing.
        g.skip_to(3);
        assert_eq!(issue(&mut g, 10, 5), (12, 3));
        // Past the lead: wait, unchanged.
        g.skip_to(20);
        assert_eq!(g.next(12, 5, NO_LIMIT), Step::WaitUntil { tick: 15 });
        assert_eq!(issue(&mut g, 15, 5), (20, 4));
        assert_eq!(g.borrowed_ticks(), 0);
        // Before the first ID too; skipping to tick 0 is no floor.
        let mut g = Generator::new(12, None);
        g.skip_to(0);
        assert_eq!(issue(&mut g, 0, 0), (0, 1));
        g.skip_to(u64::MAX);
        assert_eq!(g.next(0, 0, u64::MAX), Step::WaitUntil { tick: u64::MAX });
    }

    #[test]
    fn counter_not_reset_on_new_tick() {
        let mut g = Generator::new(12, None);
        let seqs: Vec<u64> = (0..100).map(|t| issue(&mut g, t, 0).1).collect();
        assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
        // Low bits cycle evenly at one ID per tick.
        let mut g = Generator::new(4, None);
        let mut buckets = [0u32; 4];
        for t in 0..1600 {
            let (tick, seq) = issue(&mut g, t, 0);
            assert_eq!(tick, t);
            buckets[(seq % 4) as usize] += 1;
        }
        assert_eq!(buckets, [400; 4]);
        assert_eq!(g.borrowed_ticks(), 0);
    }

    #[test]
    fn odd_sequence_widths_do_not_panic() {
        let mut g = Generator::new(0, None);
        assert_eq!(issue(&mut g, 0, 10), (0, 0));
        assert_eq!(issue(&mut g, 0, 10), (1, 0));
        let mut g = Generator::new(255, None);
        assert_eq!(issue(&mut g, 0, 0), (0, 1));
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Calls without moving the clock.
        Burst(u16),
        Back(u64),
        Forward(u64),
        /// Another session owns ticks up to this far after the last one (`skip_to`).
        Skip(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u16..8).prop_map(Op::Burst),
            1 => (1u16..3000).prop_map(Op::Burst),
            2 => (1u64..50).prop_map(Op::Back),
            2 => (1u64..4).prop_map(Op::Forward),
            1 => (4u64..100).prop_map(Op::Forward),
            1 => (0u64..4).prop_map(Op::Skip),
        ]
    }

    #[derive(Debug, Clone)]
    struct Case {
        seq_bits: u8,
        lead: u64,
        floor: Option<u64>,
        start: u64,
        max_tick: u64,
        oversleep: u64,
        ops: Vec<Op>,
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            prop_oneof![1u8..=4, Just(12u8)],
            0u64..=5,
            prop::option::of(0u64..300),
            0u64..300,
            prop_oneof![1 => 0u64..2000, 3 => Just(u64::MAX)],
            prop_oneof![3 => Just(0u64), 1 => 1u64..3],
            prop::collection::vec(op(), 1..200),
        )
            .prop_map(
                |(seq_bits, lead, floor, start, max_tick, oversleep, ops)| Case {
                    seq_bits,
                    lead,
                    floor,
                    start,
                    max_tick,
                    oversleep,
                    ops,
                },
            )
    }

    /// How often each outcome occurred in a run.
    #[derive(Default)]
    struct Seen {
        waits: usize,
        exhausted: usize,
        borrowed: u64,
        back_in_last_tick: usize,
        skips: usize,
        /// Calls `next_in_last_tick` answered (and `next` issued the same).
        continued: usize,
    }

    /// Drives a generator through `c`, checking every invariant; returns the issued IDs.
    fn run(c: &Case) -> Result<(Vec<(u64, u64)>, Seen), TestCaseError> {
        let mut seen = Seen::default();
        const MAX_CALLS: usize = 2000;
        let mut g = Generator::new(c.seq_bits, c.floor);
        let mut floor = c.floor;
        let mut now = c.start;
        let mut issued: Vec<(u64, u64)> = Vec::new();
        let mut calls = 0usize;
        'ops: for op in &c.ops {
            let n = match *op {
                Op::Burst(n) => n,
                Op::Back(d) => {
                    now = now.saturating_sub(d);
                    1
                }
                Op::Forward(d) => {
                    now += d;
                    1
                }
                Op::Skip(d) => {
                    let to = g.last_tick().unwrap_or(now).saturating_add(d);
                    g.skip_to(to);
                    floor = floor.max(to.checked_sub(1));
                    seen.skips += 1;
                    1
                }
            };
            for _ in 0..n {
                calls += 1;
                if calls > MAX_CALLS {
                    break 'ops;
                }
                let mut slept = false;
                loop {
                    let before = g.clone();
                    let step = g.next(now, c.lead, c.max_tick);
                    let mut shortcut = before.clone();
                    if let Some(sequence) = shortcut.next_in_last_tick(now) {
                        // The hot path's step issues what `next` does and leaves the same state.
                        prop_assert_eq!(
                            step,
                            Step::Issue {
                                tick: now,
                                sequence
                            }
                        );
                        prop_assert_eq!(format!("{shortcut:?}"), format!("{g:?}"));
                        seen.continued += 1;
                    } else {
                        prop_assert_eq!(format!("{shortcut:?}"), format!("{before:?}"));
                    }
                    // What it would issue given unlimited lead and time.
                    let unbounded = before.clone().next(now, NO_LIMIT, NO_LIMIT);
                    match step {
                        Step::Issue { tick, sequence } => {
                            prop_assert_eq!(unbounded, step);
                            prop_assert!(tick <= now + c.lead);
                            prop_assert!(tick <= c.max_tick);
                            prop_assert!(sequence < 1 << c.seq_bits);
                            if let Some(f) = floor {
                                prop_assert!(tick > f);
                            }
                            if let Some(&prev) = issued.last() {
                                prop_assert!((tick, sequence) > prev);
                            } else {
                                prop_assert_eq!(sequence, 1 & ((1 << c.seq_bits) - 1));
                            }
                            prop_assert_eq!(g.last_tick(), Some(tick));
                            if tick > now {
                                seen.back_in_last_tick += 1;
                            }
                            issued.push((tick, sequence));
                        }
                        Step::WaitUntil { tick: wake } => {
                            // Having slept until the asked tick, it must not wait again.
                            prop_assert!(!slept);
                            prop_assert_eq!(format!("{g:?}"), format!("{before:?}"));
                            let Step::Issue { tick: would, .. } = unbounded else {
                                return Err(TestCaseError::fail("unbounded must issue"));
                            };
                            prop_assert!(would > now + c.lead);
                            prop_assert!(would <= c.max_tick);
                            prop_assert_eq!(wake, would - c.lead);
                            prop_assert!(wake > now);
                            // Simulate the sleep (possibly overslept), then call again.
                            now = wake + c.oversleep;
                            seen.waits += 1;
                            slept = true;
                            continue;
                        }
                        Step::TimeExhausted => {
                            prop_assert_eq!(format!("{g:?}"), format!("{before:?}"));
                            let Step::Issue { tick: would, .. } = unbounded else {
                                return Err(TestCaseError::fail("unbounded must issue"));
                            };
                            prop_assert!(would > c.max_tick);
                            seen.exhausted += 1;
                        }
                    }
                    break;
                }
            }
        }
        seen.borrowed = g.borrowed_ticks();
        Ok((issued, seen))
    }

    #[test]
    fn driver_reaches_every_branch() {
        // Guards the proptest below against silently never waiting, borrowing, etc.
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut total = Seen::default();
        for _ in 0..256 {
            let c = case().new_tree(&mut runner).unwrap().current();
            let (_, s) = run(&c).unwrap();
            total.waits += s.waits;
            total.exhausted += s.exhausted;
            total.borrowed += s.borrowed;
            total.back_in_last_tick += s.back_in_last_tick;
            total.skips += s.skips;
            total.continued += s.continued;
        }
        assert!(total.waits > 0);
        assert!(total.exhausted > 0);
        assert!(total.borrowed > 0);
        assert!(total.back_in_last_tick > 0);
        assert!(total.skips > 0);
        assert!(total.continued > 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn invariants_hold_for_any_clock(c in case()) {
            let (issued, _) = run(&c)?;
            let mut sorted = issued.clone();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), issued.len());
        }

        #[test]
        fn steady_clock_issues_at_clock(bits in 1u8..=12, start in 0u64..1000, n in 1usize..2000) {
            // One call per tick never borrows or waits, even with no lead.
            let mut g = Generator::new(bits, None);
            for i in 0..n as u64 {
                let step = g.next(start + i, 0, NO_LIMIT);
                prop_assert_eq!(step, Step::Issue {
                    tick: start + i,
                    sequence: (i + 1) & ((1 << bits) - 1),
                });
            }
            prop_assert_eq!(g.borrowed_ticks(), 0);
        }
    }
}
