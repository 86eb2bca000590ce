//! The subtransaction callback (docs/design.md §6): a subtransaction's end hands its marks of
//! writes of the extension's state to its parent, or drops them
//! (`state/extension_directory.rs`), so a write rolled back moves nothing.

use pgrx::prelude::*;

use crate::state::extension_directory;

/// Registers the callback once for the life of the process (from `_PG_init`, while
/// preloading).
pub fn install() {
    // SAFETY: registers a plain function for the life of the process, with no argument.
    unsafe { pg_sys::RegisterSubXactCallback(Some(on_subtransaction_event), std::ptr::null_mut()) };
}

#[pg_guard]
unsafe extern "C-unwind" fn on_subtransaction_event(
    event: pg_sys::SubXactEvent::Type,
    _subtransaction: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _argument: *mut std::ffi::c_void,
) {
    use pg_sys::SubXactEvent::{SUBXACT_EVENT_ABORT_SUB, SUBXACT_EVENT_COMMIT_SUB};
    match event {
        SUBXACT_EVENT_COMMIT_SUB => extension_directory::subtransaction_ended(true),
        SUBXACT_EVENT_ABORT_SUB => extension_directory::subtransaction_ended(false),
        _ => {}
    }
}
