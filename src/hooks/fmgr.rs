//! With Citus, the function-manager hooks around the functions that add a node (docs/design.md
//! §9): PostgreSQL asks `needs_fmgr_hook` whether a function wants them, and calls `fmgr_hook`
//! around its call; after one of Citus's node activators returns, inside its transaction,
//! every sequence is pushed to the workers (`citus.rs`), so the new node commits with them or
//! not at all.

use std::ffi::CStr;

use once_cell::sync::OnceCell;
use pgrx::prelude::*;

use crate::state::citus;

/// The hooks installed before ours, called first (set once).
static PREVIOUS_NEEDS_FMGR_HOOK: OnceCell<pg_sys::needs_fmgr_hook_type> = OnceCell::new();
static PREVIOUS_FMGR_HOOK: OnceCell<pg_sys::fmgr_hook_type> = OnceCell::new();

/// Installs the function-manager hooks (from `_PG_init`, while preloading) when Citus is
/// preloaded too. Without it no node can be activated, and the hooks would only cost every
/// lookup of a function outside the built-ins a syscache read.
pub fn install() {
    // SAFETY: the GUC's string is set before preloading begins and not changed during it.
    let libraries = unsafe { pg_sys::shared_preload_libraries_string };
    if libraries.is_null() {
        return;
    }
    // SAFETY: a non-null GUC string is a NUL-terminated C string.
    let libraries = unsafe { CStr::from_ptr(libraries) }.to_string_lossy();
    if !citus::lists_citus(&libraries) {
        return;
    }
    // `_PG_init` runs once per process before any query, single-threaded; the previous hooks
    // are kept and called, so other extensions' hooks keep working.
    // SAFETY: reads PostgreSQL's hook global while nothing else runs (see above).
    PREVIOUS_NEEDS_FMGR_HOOK.get_or_init(|| unsafe { pg_sys::needs_fmgr_hook });
    // SAFETY: sets it while nothing else runs; the previous hook is kept just above.
    unsafe { pg_sys::needs_fmgr_hook = Some(needs_fmgr_hook) };
    // SAFETY: as for needs_fmgr_hook.
    PREVIOUS_FMGR_HOOK.get_or_init(|| unsafe { pg_sys::fmgr_hook });
    // SAFETY: as for needs_fmgr_hook.
    unsafe { pg_sys::fmgr_hook = Some(fmgr_hook) };
}

#[pg_guard]
unsafe extern "C-unwind" fn needs_fmgr_hook(function: pg_sys::Oid) -> bool {
    // SAFETY: the previous hook was installed by another library for this same call.
    let previous = PREVIOUS_NEEDS_FMGR_HOOK
        .get()
        .copied()
        .flatten()
        .is_some_and(|previous| unsafe { previous(function) });
    previous || citus::is_node_activator(function)
}

#[pg_guard]
unsafe extern "C-unwind" fn fmgr_hook(
    event: pg_sys::FmgrHookEventType::Type,
    flinfo: *mut pg_sys::FmgrInfo,
    private: *mut pg_sys::Datum,
) {
    if let Some(previous) = PREVIOUS_FMGR_HOOK.get().copied().flatten() {
        // SAFETY: passes PostgreSQL's own arguments on to the previous hook.
        unsafe { previous(event, flinfo, private) };
    }
    if event == pg_sys::FmgrHookEventType::FHET_END
        // SAFETY: PostgreSQL passes the FmgrInfo of the function being called.
        && citus::is_node_activator(unsafe { (*flinfo).fn_oid })
    {
        citus::push_all_sequences();
    }
}
