//! What the library puts under PostgreSQL: one file per hook, each small, calling into the part
//! of the extension it serves (docs/design.md §7, the table of hooks).

pub mod executor_start;
pub mod fmgr;
pub mod object_access;
pub mod process_utility;
pub mod shmem;
pub mod subtransactions;
pub mod unguarded;

use crate::durability::{reservation, reservation_worker};

/// Installs every hook and registers every callback and process the library needs from the
/// start (from `_PG_init`, while shared_preload_libraries is processed: the only time
/// PostgreSQL allows the resource manager, the shared memory and the background worker).
pub fn install() {
    reservation::register_wal_resource_manager();
    shmem::install();
    fmgr::install();
    process_utility::install();
    object_access::install();
    executor_start::install();
    subtransactions::install();
    reservation_worker::register();
}
