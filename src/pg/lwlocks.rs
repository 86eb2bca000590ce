//! The extension's LWLocks held for a section of code (docs/design.md §7, `pg/`).

use std::sync::atomic::{AtomicPtr, Ordering};

use pgrx::prelude::*;

/// Runs `f` holding `lock`, one of the extension's LWLocks, in `mode`.
pub fn with_lwlock<T>(
    lock: &AtomicPtr<pg_sys::LWLock>,
    mode: pg_sys::LWLockMode::Type,
    f: impl FnOnce() -> T,
) -> T {
    lwlock_section(lock, mode, true, f).expect("a waiting acquire returns holding the lock")
}

/// Runs `f` holding `lock`, one of the extension's LWLocks, in `mode`: waiting for it, or,
/// when `wait` is false, only if it can be taken at once (None otherwise).
pub fn lwlock_section<T>(
    lock: &AtomicPtr<pg_sys::LWLock>,
    mode: pg_sys::LWLockMode::Type,
    wait: bool,
    f: impl FnOnce() -> T,
) -> Option<T> {
    // `lock` is an LWLock of our tranches in shared memory, set at startup. If `f` raises an
    // ERROR (a WAL insert can), PostgreSQL's error recovery releases every LWLock held. (Not a
    // guard: a release while the ERROR unwinds would lower the interrupt holdoff count that
    // the ERROR has already reset to zero.)
    let lock = lock.load(Ordering::Relaxed);
    let held = if wait {
        // SAFETY: an LWLock of ours (see above). Its result says whether it had to wait, not
        // whether it holds the lock: it does.
        unsafe { pg_sys::LWLockAcquire(lock, mode) };
        true
    } else {
        // SAFETY: an LWLock of ours (see above); a conditional acquire never sleeps.
        unsafe { pg_sys::LWLockConditionalAcquire(lock, mode) }
    };
    if !held {
        return None;
    }
    let result = f();
    // SAFETY: we acquired this lock above.
    unsafe { pg_sys::LWLockRelease(lock) };
    Some(result)
}
