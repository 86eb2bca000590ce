//! The shared-memory hooks (docs/design.md §7): the request hook asks for the segment and its
//! LWLocks, the startup hook creates it (`shmem/segment.rs`) and, in the postmaster, registers
//! the callback that writes the floor to the reservation file at a clean shutdown
//! (`durability/reservation.rs`).

use once_cell::sync::OnceCell;
use pgrx::prelude::*;

use crate::durability::reservation;
use crate::shmem::{self, segment};

type Hook = Option<unsafe extern "C-unwind" fn()>;
static PREVIOUS_REQUEST_HOOK: OnceCell<Hook> = OnceCell::new();
static PREVIOUS_STARTUP_HOOK: OnceCell<Hook> = OnceCell::new();

/// Chains our request and startup hooks in front of any previous ones. Called from _PG_init
/// while shared_preload_libraries is processed.
pub fn install() {
    // _PG_init runs single-threaded in the postmaster before shared memory exists; reading and
    // replacing the hook globals is what PostgreSQL expects a library to do there.
    // SAFETY: reads the hook global while nothing else runs (see above).
    PREVIOUS_REQUEST_HOOK.get_or_init(|| unsafe { pg_sys::shmem_request_hook });
    // SAFETY: sets it while nothing else runs; the previous hook is kept just above.
    unsafe { pg_sys::shmem_request_hook = Some(request_shared_memory) };
    // SAFETY: as for the request hook.
    PREVIOUS_STARTUP_HOOK.get_or_init(|| unsafe { pg_sys::shmem_startup_hook });
    // SAFETY: as for the request hook.
    unsafe { pg_sys::shmem_startup_hook = Some(init_shared_memory) };
}

#[pg_guard]
unsafe extern "C-unwind" fn request_shared_memory() {
    // Called by PostgreSQL in shmem_request_hook, where chaining the previous hook,
    // RequestAddinShmemSpace and RequestNamedLWLockTranche are allowed.
    if let Some(previous) = PREVIOUS_REQUEST_HOOK.get().copied().flatten() {
        // SAFETY: the hook installed before ours, called where PostgreSQL calls ours.
        unsafe { previous() };
    }
    // SAFETY: in shmem_request_hook (see above).
    unsafe { segment::request() };
}

#[pg_guard]
unsafe extern "C-unwind" fn init_shared_memory() {
    if let Some(previous) = PREVIOUS_STARTUP_HOOK.get().copied().flatten() {
        // SAFETY: the hook that was installed before ours, called where PostgreSQL calls ours.
        unsafe { previous() };
    }
    // SAFETY: in shmem_startup_hook, after the request hook above asked for the segment.
    let created = unsafe { segment::create_or_find() };
    if created {
        // SAFETY: registers a callback in the postmaster, with no argument.
        unsafe { pg_sys::on_shmem_exit(Some(at_exit), pg_sys::Datum::from(0)) };
    }
}

/// At the postmaster's exit: a clean shutdown (code 0) writes the floor to the reservation
/// file; after a crash nothing is written, as the worker ids' floors may not be trustworthy.
#[pg_guard]
unsafe extern "C-unwind" fn at_exit(code: std::ffi::c_int, _arg: pg_sys::Datum) {
    if let (0, Some(shared)) = (code, shmem::try_state()) {
        reservation::write_floor_at_shutdown(shared);
    }
}
