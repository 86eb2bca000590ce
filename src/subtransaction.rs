//! Running a step in a subtransaction of its own, as PL/pgSQL's `BEGIN … EXCEPTION` does: a
//! step whose ERROR must not end the statement around it (the stored-IDs check leaves the
//! command that fired it alone) rolls back only what it did.

use pgrx::prelude::*;

use crate::errors;

/// Runs `step` in a subtransaction: its value when it ends normally (the subtransaction is
/// released), or the message of the ERROR it raised (everything it did is rolled back; the
/// error is reported by nobody else). A query cancel or a shutdown is raised again.
pub fn run<T>(step: impl FnOnce() -> T + std::panic::UnwindSafe) -> Result<T, String> {
    // SAFETY: inside a transaction (the caller's statement). The memory context and resource
    // owner in place before are restored after the subtransaction ends either way, as
    // PL/pgSQL's exception blocks do; pgrx has copied and flushed PostgreSQL's error state by
    // the time the catch handler runs.
    unsafe {
        let context = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(context);
        let outcome = PgTryBuilder::new(|| {
            let value = step();
            pg_sys::ReleaseCurrentSubTransaction();
            Ok(value)
        })
        .catch_others(|error| {
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            pg_sys::CurrentResourceOwner = owner;
            Err(errors::caught_message(error))
        })
        .execute();
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
        outcome
    }
}
