//! The worker ids this backend holds (docs/design.md §4): one per worker width it issues IDs of,
//! taken from the table in shared memory at its first ID of that width and given back when it
//! exits.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pgrx::prelude::*;

use snowflake_id_core::layout::Layout;
use snowflake_id_core::tick_claims::OwnedTicks;
use snowflake_id_core::worker_ids::{self, WorkerId, MAX_SPACES, TIME_UNITS};

use crate::durability::reservation::ClusterReservation;
use crate::errors;
use crate::shmem::{self, SharedState};

/// Longest single sleep while waiting for the clock, so interrupts are served promptly.
/// A worker id this backend uses from its first ID of a sequence of that space until it exits.
pub struct Attachment {
    pub space: usize,
    /// The worker id: its index in the space and the worker field of the IDs.
    pub worker: usize,
    /// The worker id in shared memory (which stays mapped while the process runs).
    pub id: &'static WorkerId,
    /// Per time unit, the ticks this backend owns on the id.
    pub owned: [OwnedTicks; TIME_UNITS],
}

/// The worker id this backend took in each space (its index in the table + 1; 0: none). Kept
/// apart from `Backend` so that the exit callback can read it whatever state `Backend` is in,
/// and set right after an id is taken, before anything that can fail.
static HELD: [AtomicUsize; MAX_SPACES] = [const { AtomicUsize::new(0) }; MAX_SPACES];
/// Whether `detach_worker_ids` is registered (once: PostgreSQL has room for few exit callbacks).
static DETACH_REGISTERED: AtomicBool = AtomicBool::new(false);

/// Which of this backend's worker ids serves sequences of `layout`'s worker width: the one it
/// took in that width's space, or one it takes now.
#[cold]
#[inline(never)]
pub fn attachment_for(
    worker_ids: &mut Vec<Attachment>,
    shared: &'static SharedState,
    layout: &Layout,
) -> usize {
    let space = shared.spaces.space_of(layout.worker_bits);
    if let Some(index) = worker_ids.iter().position(|held| held.space == space) {
        return index;
    }
    let table_index = match HELD[space].load(Ordering::Relaxed) {
        0 => take_worker_id(shared, space),
        held => held - 1,
    };
    worker_ids.push(Attachment {
        space,
        worker: table_index - shared.spaces.range(space).start,
        id: &shared.worker_ids()[table_index],
        owned: [OwnedTicks::NONE; TIME_UNITS],
    });
    worker_ids.len() - 1
}

/// Takes a worker id in `space` until this backend exits; its index in the table of all ids.
fn take_worker_id(shared: &SharedState, space: usize) -> usize {
    // SAFETY: a plain read of a backend-local flag (shared memory once it changed).
    let in_recovery = unsafe { pg_sys::RecoveryInProgress() };
    // SAFETY: a backend-local value PostgreSQL set before any query runs.
    let pid = unsafe { pg_sys::MyProcPid };
    // SAFETY: as above.
    let database = unsafe { pg_sys::MyDatabaseId };
    if in_recovery {
        errors::during_recovery("snowflake_nextval").raise();
    }
    ClusterReservation(shared).cover_failover_lag();
    if !DETACH_REGISTERED.swap(true, Ordering::Relaxed) {
        // SAFETY: registering a callback without argument; PostgreSQL calls it once at backend
        // exit while shared memory is still attached. Registered before any id is taken, so no
        // id is held without it.
        unsafe { pg_sys::before_shmem_exit(Some(detach_worker_ids), pg_sys::Datum::from(0)) };
    }
    let now = shared.read_clock().now_unix_us;
    let ids = shared.space(space);
    let retired = &shared.counters.ids_issued_retired;
    let worker = worker_ids::attach(ids, pid, database.to_u32(), now, process_is_alive, retired);
    let table_index = shared.spaces.range(space).start + worker;
    HELD[space].store(table_index + 1, Ordering::Relaxed);
    table_index
}

#[pg_guard]
unsafe extern "C-unwind" fn detach_worker_ids(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    if let Some(shared) = shmem::try_state() {
        // SAFETY: MyProcPid is this process's pid, set at backend start.
        let pid = unsafe { pg_sys::MyProcPid };
        for held in &HELD {
            let index = held.swap(0, Ordering::Relaxed);
            if index != 0 {
                worker_ids::detach(shared.worker_ids(), index - 1, pid);
            }
        }
    }
}

fn process_is_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists; it delivers nothing.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}
