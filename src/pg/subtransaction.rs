//! Running a step in a subtransaction of its own, as PL/pgSQL's `BEGIN … EXCEPTION` does: a
//! step whose ERROR must not end the statement around it (the stored-IDs check leaves the
//! command that fired it alone) rolls back only what it did.

use pgrx::prelude::*;

use crate::errors;

/// Runs `step` in a subtransaction: its value when it ends normally (the subtransaction is
/// released), or the message of the ERROR it raised (everything it did is rolled back; the
/// error is reported by nobody else). A query cancel or a shutdown is raised again.
pub fn run<T>(step: impl FnOnce() -> T + std::panic::UnwindSafe) -> Result<T, String> {
    // Inside a transaction (the caller's statement). The memory context and resource owner in
    // place before are restored after the subtransaction ends either way, as PL/pgSQL's
    // exception blocks do.
    // SAFETY: a plain read of this backend's current memory context.
    let context = unsafe { pg_sys::CurrentMemoryContext };
    // SAFETY: a plain read of this backend's current resource owner.
    let owner = unsafe { pg_sys::CurrentResourceOwner };
    // SAFETY: inside a transaction; the subtransaction ends below, released or rolled back.
    unsafe { pg_sys::BeginInternalSubTransaction(std::ptr::null()) };
    // SAFETY: the caller's context, which outlives the subtransaction.
    unsafe { pg_sys::MemoryContextSwitchTo(context) };
    let outcome = PgTryBuilder::new(|| {
        let value = step();
        // SAFETY: the subtransaction begun above, the current one again once `step` returned.
        unsafe { pg_sys::ReleaseCurrentSubTransaction() };
        Ok(value)
    })
    .catch_others(|error| {
        // SAFETY: the caller's context, as above.
        unsafe { pg_sys::MemoryContextSwitchTo(context) };
        // SAFETY: the subtransaction begun above; pgrx has copied and flushed PostgreSQL's
        // error state by the time this handler runs.
        unsafe { pg_sys::RollbackAndReleaseCurrentSubTransaction() };
        // SAFETY: the caller's resource owner, read above, which the rollback leaves unset.
        unsafe { pg_sys::CurrentResourceOwner = owner };
        Err(errors::caught_message(error))
    })
    .execute();
    // SAFETY: the caller's context, as above.
    unsafe { pg_sys::MemoryContextSwitchTo(context) };
    // SAFETY: the caller's resource owner, read above.
    unsafe { pg_sys::CurrentResourceOwner = owner };
    outcome
}
