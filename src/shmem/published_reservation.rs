//! The published reservation (docs/design.md §5, "Names") and the durable floor, in shared
//! memory: what this server's sessions read on each new tick. `durability/reservation.rs`
//! writes them.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, Ordering};

use pgrx::prelude::*;

/// The published reservation (docs/design.md §5, "Names"): the durable reservation as this
/// server's sessions read it, on every new tick, published only once the file and the WAL hold
/// it; written about once per eighth of `snowflake_id.reserve_ahead`.
#[repr(C, align(64))]
pub struct PublishedReservation {
    /// No ID's tick may end after this; i64::MIN forces every new tick to the slow path.
    pub until_unix_us: AtomicI64,
    /// The durable floor this server learned from outside: the file at start, WAL replay, and
    /// the data (docs/design.md §5). No ID issued before has a tick ending after it.
    pub floor_unix_us: AtomicI64,
    /// The file was unreadable or corrupt at startup: no ID may be issued.
    pub broken: AtomicBool,
    /// There was no reservation file at startup (a new cluster, or a lost file): the databases'
    /// floor relations are all this server knows of IDs issued before (design §5.3).
    pub started_without_file: AtomicBool,
    /// The server started as a standby or in archive recovery (a PITR restore): before its
    /// first ID it moves its floor above the last reservation it replayed (design §5.2).
    pub promotion_pending: AtomicBool,
    /// Serialises extending the file (an LWLock from our named tranche).
    pub lock: AtomicPtr<pg_sys::LWLock>,
}

impl PublishedReservation {
    /// The published reservation (i64::MIN before the first): no ID's tick ends after it.
    pub fn until(&self) -> i64 {
        self.until_unix_us.load(Ordering::Acquire)
    }

    /// The durable floor: no ID issued before (here, or where the WAL or the database came
    /// from) has a tick ending after it.
    pub fn durable_floor(&self) -> i64 {
        self.floor_unix_us.load(Ordering::Acquire)
    }

    /// Whether the server started without a reservation file (design §5.3).
    pub fn started_without_file(&self) -> bool {
        self.started_without_file.load(Ordering::Relaxed)
    }
}
