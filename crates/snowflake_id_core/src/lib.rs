//! The pure core of snowflake_id: everything that decides an ID's value, with no PostgreSQL in
//! it (docs/design.md §7). The extension crate at the repository's top level is only the glue
//! that places these types in shared memory and calls them from SQL.
//!
//! - [`layout`]: the bit layout of an ID, composing, decomposing and validating (§2).
//! - [`sequence_options`]: a preset plus per-field overrides into a validated layout (§2, §6).
//! - [`generator`]: one backend's tick + counter state machine over an injected clock (§3).
//! - [`cluster_clock`]: the cluster's forward-only clock over four atomics (§3).
//! - [`monotonic_span`]: the monotonic times whose cluster time lies in a tick, which the ID hot
//!   path tests its clock reading against (§3.2).
//! - [`worker_ids`]: worker ids per worker width, shared when they run out (§4).
//! - [`tick_claims`]: the ticks a session owns on its worker id, which keep the sessions of one
//!   id apart (§2.3, §4).
//! - [`reservation_file`]: the durable reservation's file format and atomic write (§5.1).
//! - [`renewal`]: when the reservation is renewed, by whom and to where (§5.1, §5.2).
//! - [`floor`]: what a backend knows of its database's floor relation, and when it reads,
//!   raises and flushes it (§5.3).
//! - [`directory_trust`]: when a backend may trust the server's directory of extensions, or
//!   leave there what it looked up: the writers followed and the generation (§6).
//! - [`state_writes`]: which of a transaction's writes of the extension's state can still
//!   commit, through its subtransactions (§6).
//! - [`protocol`]: a server's start and clean shutdown, the steps before the first ID of a tick,
//!   the worker's renewal, raising the floor and a promotion's start, over traits the extension implements with PostgreSQL and
//!   the model checker in memory (§5).
//! - [`base32`]: the compact text form of an ID and its parser (§6).
//! - [`names`]: the comparison of sequence names the ID hot path looks its sequence up with (§6).
//! - [`partitions`]: the ID ranges of time partitions (docs/partitioning.md).
//!
//! The functions on the ID hot path are `#[inline]`: the extension calls them across the crate
//! boundary, where Rust does not inline a non-generic function otherwise.
#![forbid(unsafe_code)]

pub mod base32;
pub mod cluster_clock;
pub mod directory_trust;
pub mod floor;
pub mod generator;
pub mod layout;
pub mod monotonic_span;
pub mod names;
pub mod partitions;
pub mod protocol;
pub mod renewal;
pub mod reservation_file;
pub mod sequence_options;
pub mod state_writes;
pub mod tick_claims;
pub mod worker_ids;

/// std's atomics, or loom's when built with `--cfg loom` for the model-checked test of
/// `worker_ids` (tests/worker_id_sharing_model.rs).
mod sync {
    #[cfg(loom)]
    pub use loom::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};
    #[cfg(not(loom))]
    pub use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};
}
