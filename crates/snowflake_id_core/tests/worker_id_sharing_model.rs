//! Model check (loom) of the switch from a worker id held alone to a shared one: every
//! interleaving of a holder issuing IDs and a second session attaching to the same id and
//! issuing at the same clock. No (tick, sequence) is issued twice, and each session's IDs
//! increase.
//!
//! Runs only under `RUSTFLAGS="--cfg loom"` (scripts/test.sh does, in target/loom); a plain
//! `cargo test` builds nothing here, so the file is not a test that passes without running.
#![cfg(loom)]

use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;

use snowflake_id_core::generator::Generator;
use snowflake_id_core::layout::PRESETS;
use snowflake_id_core::tick_claims::{next_owned, OwnedStep, OwnedTicks, TickClock};
use snowflake_id_core::worker_ids::{attach, detach, WorkerId};

/// Issues `count` IDs at clock tick `now` (lead 4) on the worker id `space[worker]`.
fn issue(space: &[WorkerId], worker: usize, now: u64, count: usize) -> Vec<(u64, u64)> {
    let layout = PRESETS[0].1;
    let id = &space[worker];
    // One sequence bit: two IDs per tick, so the third borrows the next tick.
    let mut generator = Generator::new(1, None);
    let (mut owned, mut published, mut out) = (OwnedTicks::NONE, None, Vec::new());
    while out.len() < count {
        match next_owned(
            id,
            &mut generator,
            &layout,
            &mut owned,
            published,
            TickClock { now, max_lead: 4 },
        )
        .step
        {
            OwnedStep::Issue { tick, sequence, .. } => {
                published = published.max(Some(tick));
                out.push((tick, sequence));
            }
            other => panic!("{other:?} within the lead"),
        }
    }
    out
}

#[test]
fn a_holder_and_a_session_joining_its_worker_id_never_issue_the_same_id() {
    loom::model(|| {
        let space: Arc<Vec<WorkerId>> = Arc::new(vec![WorkerId::new()]);
        let holder = attach(&space, 1, 1, 0, |_| true, &AtomicU64::new(0));
        assert_eq!(space[holder].sessions(), 1);
        let joiner = {
            let space = Arc::clone(&space);
            thread::spawn(move || {
                let worker = attach(&space, 2, 1, 0, |_| true, &AtomicU64::new(0));
                assert_eq!(worker, holder, "the only id, shared");
                let ids = issue(&space, worker, 100, 3);
                assert!(detach(&space, worker, 2));
                ids
            })
        };
        let mine = issue(&space, holder, 100, 3);
        let theirs = joiner.join().unwrap();
        for ids in [&mine, &theirs] {
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        }
        for id in &mine {
            assert!(
                !theirs.contains(id),
                "{id:?} issued by both: {mine:?} {theirs:?}"
            );
        }
        assert!(detach(&space, holder, 1));
        assert_eq!(space[0].sessions(), 0);
    });
}
