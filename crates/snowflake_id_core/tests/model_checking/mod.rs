//! What the model checks share (`protocol_model.rs`, `directory_model.rs`): stateright's checker
//! run through every state a model reaches in a depth bound, what it explored printed, and the
//! broken properties with the histories that break them.

use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

use stateright::{Checker, Model};

/// Explores every state `model` reaches in `depth` events, on `threads` threads, and prints
/// `label` with the count of states and the time; returns each broken property with its
/// history, one event a line.
pub fn explore<M>(
    model: M,
    depth: usize,
    threads: usize,
    label: &str,
) -> Vec<(&'static str, String)>
where
    M: Model + Send + Sync + 'static,
    M::State: Hash + Send + Sync + Clone + PartialEq + 'static,
    M::Action: Clone + PartialEq + Debug,
{
    let started = Instant::now();
    let checker = model
        .checker()
        .threads(threads)
        .target_max_depth(depth)
        .spawn_dfs()
        .join();
    println!(
        "{label}: {} states ({} unique), depth {}, in {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed().as_secs_f64()
    );
    checker
        .discoveries()
        .into_iter()
        .map(|(name, path)| {
            let steps: Vec<String> = path
                .into_actions()
                .iter()
                .map(|action| format!("{action:?}"))
                .collect();
            (name, steps.join("\n  "))
        })
        .collect()
}

/// Fails with every property broken and its history.
pub fn assert_kept(found: Vec<(&'static str, String)>) {
    for (name, path) in &found {
        println!("\"{name}\" broken:\n  {path}");
    }
    assert!(found.is_empty(), "{} properties broken", found.len());
}

/// Fails unless `found` has `property` broken (by `what`, a seeded bug); prints its history.
pub fn assert_broken(found: &[(&'static str, String)], property: &str, what: &str) {
    let (name, path) = found
        .iter()
        .find(|(name, _)| *name == property)
        .unwrap_or_else(|| panic!("{what} not caught by \"{property}\"; found {found:?}"));
    println!("{what} breaks \"{name}\":\n  {path}");
}
