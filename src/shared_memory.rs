//! The shared-memory segment: the cluster clock and the worker slot table (design.md §3, §4).

use std::mem::size_of;
use std::sync::atomic::{AtomicPtr, Ordering};

use once_cell::sync::OnceCell;
use pgrx::prelude::*;

use crate::cluster_clock::{ClusterClock, Reading};
use crate::errors;
use crate::gucs;
use crate::slots::Slot;

/// Header of the segment; `slot_count` slots follow it directly. Both are cache-line aligned so
/// the clock and each slot sit on lines of their own.
#[repr(C, align(64))]
pub struct SharedState {
    pub clock: ClusterClock,
    slot_count: usize,
}

const SEGMENT_NAME: &std::ffi::CStr = c"snowflake_id";
const ALIGNMENT: usize = 64;

/// Set in the postmaster by the startup hook; backends inherit it through fork.
static SHARED: AtomicPtr<SharedState> = AtomicPtr::new(std::ptr::null_mut());

type Hook = Option<unsafe extern "C-unwind" fn()>;
static PREVIOUS_REQUEST_HOOK: OnceCell<Hook> = OnceCell::new();
static PREVIOUS_STARTUP_HOOK: OnceCell<Hook> = OnceCell::new();

impl SharedState {
    pub fn slots(&self) -> &[Slot] {
        // SAFETY: init_shared_memory placed `slot_count` initialised slots right after this
        // header (which is 64-aligned and a multiple of 64 long), and the segment lives as long
        // as the process.
        unsafe {
            let first = (self as *const SharedState).add(1).cast::<Slot>();
            std::slice::from_raw_parts(first, self.slot_count)
        }
    }

    /// The cluster's forward-only time in unix microseconds.
    pub fn read_clock(&self) -> Reading {
        let (wall, monotonic) = system_clocks_us();
        self.clock.read(wall, monotonic)
    }
}

/// The shared state, or the "add shared_preload_libraries" error.
pub fn state() -> &'static SharedState {
    try_state().unwrap_or_else(|| errors::not_preloaded())
}

pub fn try_state() -> Option<&'static SharedState> {
    let pointer = SHARED.load(Ordering::Acquire);
    // SAFETY: non-null only after init_shared_memory initialised the segment, which is never
    // unmapped while this process runs.
    unsafe { pointer.as_ref() }
}

/// Reads CLOCK_REALTIME and CLOCK_MONOTONIC (system-wide, so comparable across backends).
pub fn system_clocks_us() -> (i64, i64) {
    fn read(clock: libc::clockid_t) -> i64 {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec and both clock ids exist on Linux.
        unsafe { libc::clock_gettime(clock, &mut now) };
        now.tv_sec * 1_000_000 + now.tv_nsec / 1_000
    }
    (read(libc::CLOCK_REALTIME), read(libc::CLOCK_MONOTONIC))
}

fn slot_count() -> usize {
    gucs::MAX_WORKERS.get().clamp(1, gucs::MAX_WORKERS_LIMIT) as usize
}

fn segment_size() -> usize {
    // Slack so the header can be moved up to a 64-byte boundary (ShmemInitStruct only
    // guarantees MAXALIGN).
    ALIGNMENT + size_of::<SharedState>() + slot_count() * size_of::<Slot>()
}

/// Chains our request and startup hooks in front of any previous ones. Called from _PG_init
/// while shared_preload_libraries is processed.
pub fn install_hooks() {
    // SAFETY: _PG_init runs single-threaded in the postmaster before shared memory exists;
    // reading and replacing the hook globals is what PostgreSQL expects a library to do there.
    unsafe {
        PREVIOUS_REQUEST_HOOK.get_or_init(|| pg_sys::shmem_request_hook);
        pg_sys::shmem_request_hook = Some(request_shared_memory);
        PREVIOUS_STARTUP_HOOK.get_or_init(|| pg_sys::shmem_startup_hook);
        pg_sys::shmem_startup_hook = Some(init_shared_memory);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn request_shared_memory() {
    // SAFETY: called by PostgreSQL in shmem_request_hook, where chaining the previous hook and
    // RequestAddinShmemSpace are allowed.
    unsafe {
        if let Some(previous) = PREVIOUS_REQUEST_HOOK.get().copied().flatten() {
            previous();
        }
        pg_sys::RequestAddinShmemSpace(segment_size());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn init_shared_memory() {
    // SAFETY: called by PostgreSQL in shmem_startup_hook (postmaster start and every crash
    // restart). AddinShmemInitLock (MainLWLockArray[21]) serialises segment creation; the
    // segment is `segment_size()` bytes as requested, so the aligned header plus the slots fit.
    unsafe {
        if let Some(previous) = PREVIOUS_STARTUP_HOOK.get().copied().flatten() {
            previous();
        }
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let raw = pg_sys::ShmemInitStruct(SEGMENT_NAME.as_ptr(), segment_size(), &mut found);
        let header = raw
            .cast::<u8>()
            .add(raw.cast::<u8>().align_offset(ALIGNMENT))
            .cast::<SharedState>();
        if !found {
            let slot_count = slot_count();
            header.write(SharedState {
                clock: ClusterClock::new(),
                slot_count,
            });
            let first_slot = header.add(1).cast::<Slot>();
            for index in 0..slot_count {
                first_slot.add(index).write(Slot::new());
            }
            let (wall, monotonic) = system_clocks_us();
            (*header).clock.start(wall, monotonic, i64::MIN);
        }
        pg_sys::LWLockRelease(init_lock);
        SHARED.store(header, Ordering::Release);
    }
}
