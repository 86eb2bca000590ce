//! The hot path: this backend's worker ids and generators (docs/design.md §3.3, §4).

pub mod backend;
pub mod worker_ids;
