//! The shared-memory segment's size, its request (with its three LWLocks) and its creation in
//! the postmaster (docs/design.md §7): called from the shared-memory hooks (`hooks/shmem.rs`).

use std::mem::size_of;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, Ordering};

use pgrx::prelude::*;
use snowflake_id_core::cluster_clock::{ClusterClock, JumpPolicy};
use snowflake_id_core::protocol;
use snowflake_id_core::reservation_file;
use snowflake_id_core::worker_ids::{Spaces, WorkerId};

use crate::pg::gucs;
use crate::pg::system_clock;
use crate::shmem::counters::Counters;
use crate::shmem::directory::Directory;
use crate::shmem::floor_writes::{FloorWriteSlot, FloorWrites};
use crate::shmem::published_reservation::PublishedReservation;
use crate::shmem::{SharedState, SHARED};

const SEGMENT_NAME: &std::ffi::CStr = c"snowflake_id";
/// The floor writes' LWLock has a tranche of its own, so its waits show apart from the
/// reservation's in `pg_stat_activity` (wait event `LWLock` / `snowflake_id_floor`).
const FLOOR_WRITES_TRANCHE: &std::ffi::CStr = c"snowflake_id_floor";
/// The extension directory's LWLock (`extension_directory.rs`), in a tranche of its own too.
const DIRECTORY_TRANCHE: &std::ffi::CStr = c"snowflake_id_directory";
/// PostgreSQL's `AddinShmemInitLock`, a C macro for `&MainLWLockArray[21].lock`
/// (storage/lwlocklist.h: the same index in 15 to 18), which pgrx cannot bind.
const ADDIN_SHMEM_INIT_LOCK: usize = 21;
const ALIGNMENT: usize = 64;

/// The worker spaces `snowflake_id.max_workers` gives.
fn spaces() -> Spaces {
    Spaces::new(gucs::MAX_WORKERS.get().clamp(1, gucs::MAX_WORKERS_LIMIT) as usize)
}

fn segment_size() -> usize {
    // Slack so the header can be moved up to a 64-byte boundary (ShmemInitStruct only
    // guarantees MAXALIGN).
    ALIGNMENT + size_of::<SharedState>() + spaces().table_len() * size_of::<WorkerId>()
}

/// Requests the segment and the three LWLocks' tranches.
///
/// # Safety
/// Called in `shmem_request_hook`, where RequestAddinShmemSpace and RequestNamedLWLockTranche
/// are allowed.
pub unsafe fn request() {
    // SAFETY: in shmem_request_hook (see the contract).
    unsafe { pg_sys::RequestAddinShmemSpace(segment_size()) };
    // SAFETY: in shmem_request_hook; a static name.
    unsafe { pg_sys::RequestNamedLWLockTranche(SEGMENT_NAME.as_ptr(), 1) };
    // SAFETY: as above.
    unsafe { pg_sys::RequestNamedLWLockTranche(FLOOR_WRITES_TRANCHE.as_ptr(), 1) };
    // SAFETY: as above.
    unsafe { pg_sys::RequestNamedLWLockTranche(DIRECTORY_TRANCHE.as_ptr(), 1) };
}

/// Creates the segment (the postmaster's start, a crash restart), or finds it (a backend under
/// `EXEC_BACKEND`), and publishes it to `shmem::state`; whether it was created.
///
/// # Safety
/// Called in `shmem_startup_hook`, after `request` asked for the segment and its tranches.
pub unsafe fn create_or_find() -> bool {
    // Called by PostgreSQL in shmem_startup_hook (postmaster start and every crash restart),
    // once MainLWLockArray exists; AddinShmemInitLock (MainLWLockArray[21]) serialises the
    // creation of add-in segments.
    // SAFETY: a plain read of the array's address, set before this hook runs (see above).
    let main_locks = unsafe { pg_sys::MainLWLockArray };
    let padded = main_locks.wrapping_add(ADDIN_SHMEM_INIT_LOCK);
    // SAFETY: AddinShmemInitLock's place in the array: its address, nothing read.
    let init_lock = unsafe { &raw mut (*padded).lock };
    // SAFETY: PostgreSQL's own LWLock for this, released below.
    unsafe { pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
    let mut found = false;
    // SAFETY: the segment `request` asked for, by its name and size.
    let raw = unsafe { pg_sys::ShmemInitStruct(SEGMENT_NAME.as_ptr(), segment_size(), &mut found) };
    let header = raw
        .cast::<u8>()
        .wrapping_add(raw.cast::<u8>().align_offset(ALIGNMENT))
        .cast::<SharedState>();
    if !found {
        // SAFETY: in shmem_startup_hook, after `request` requested the tranche.
        let reservation_lock = unsafe { tranche_lock(SEGMENT_NAME) };
        // SAFETY: as above.
        let floor_writes_lock = unsafe { tranche_lock(FLOOR_WRITES_TRANCHE) };
        // SAFETY: as above.
        let directory_lock = unsafe { tranche_lock(DIRECTORY_TRANCHE) };
        let state = new_shared_state((reservation_lock, floor_writes_lock, directory_lock));
        let worker_ids = state.spaces.table_len();
        // The segment is `segment_size()` bytes: the header aligned to ALIGNMENT, then
        // `table_len()` worker ids; nobody reads it before SHARED is stored below.
        // SAFETY: the header's place in the segment (see above).
        unsafe { header.write(state) };
        let first_id = header.wrapping_add(1).cast::<WorkerId>();
        for index in 0..worker_ids {
            // SAFETY: the place of worker id `index` in the segment (see above).
            unsafe { first_id.wrapping_add(index).write(WorkerId::new()) };
        }
        // SAFETY: written just above, and never moved or freed.
        start_clock(unsafe { &*header });
    }
    // SAFETY: acquired above.
    unsafe { pg_sys::LWLockRelease(init_lock) };
    SHARED.store(header, Ordering::Release);
    !found
}

/// The one LWLock of tranche `name`.
///
/// # Safety
/// In shmem_startup_hook, after `request` requested the tranche, one lock.
unsafe fn tranche_lock(name: &std::ffi::CStr) -> *mut pg_sys::LWLock {
    // SAFETY: see the contract: the tranche's array of one padded LWLock.
    let padded = unsafe { pg_sys::GetNamedLWLockTranche(name.as_ptr()) };
    // SAFETY: that element: its lock's address, nothing read.
    unsafe { &raw mut (*padded).lock }
}

/// The shared state of a server starting (the postmaster's start or a crash restart), with its
/// three LWLocks (the reservation's, the floor writes', the directory's): a restart (clean or after a crash)
/// continues after the persisted reservation, whatever the wall clock says now (docs/design.md
/// §5).
fn new_shared_state(
    (reservation_lock, floor_writes_lock, directory_lock): (
        *mut pg_sys::LWLock,
        *mut pg_sys::LWLock,
        *mut pg_sys::LWLock,
    ),
) -> SharedState {
    let file = reservation_file::read(Path::new(".")).map_err(|error| {
        pgrx::warning!("snowflake_id: the reservation file is unusable ({error}); IDs are refused");
    });
    let broken = file.is_err();
    let start = protocol::start(file);
    SharedState {
        clock: ClusterClock::new(),
        reservation: PublishedReservation {
            until_unix_us: AtomicI64::new(i64::MIN),
            floor_unix_us: AtomicI64::new(start.durable_floor),
            broken: AtomicBool::new(broken),
            started_without_file: AtomicBool::new(start.without_reservation),
            // The signal files of standby mode and targeted recovery (the data directory is
            // the working directory).
            promotion_pending: AtomicBool::new(
                Path::new("standby.signal").exists() || Path::new("recovery.signal").exists(),
            ),
            lock: AtomicPtr::new(reservation_lock),
        },
        counters: Counters::default(),
        floor_writes: FloorWrites {
            lock: AtomicPtr::new(floor_writes_lock),
            slots: std::array::from_fn(|_| FloorWriteSlot::empty()),
        },
        directory: Directory::new(directory_lock),
        spaces: spaces(),
    }
}

/// Starts the cluster clock at the durable floor the state was made with. Starting after the
/// reservation is not a clock step: only later changes count as the wall clock's lag.
fn start_clock(state: &SharedState) {
    let (wall, monotonic) = system_clock::wall_and_monotonic_us();
    state
        .clock
        .start(wall, monotonic, state.reservation.durable_floor());
    let lag = state
        .clock
        .read(wall, monotonic, JumpPolicy::TRUST_ALL)
        .wall_behind_us;
    state.counters.known_lag_us.store(lag, Ordering::Relaxed);
}
