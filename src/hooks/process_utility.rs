//! The utility hook (docs/design.md §6): every utility command passes here. Before it, the lock
//! check (`checks/locks.rs`) refuses a command of a role that is not a superuser that would
//! lock a state relation so as to stop IDs; after it, the same check looks at the locks it
//! left, and the publications check (`checks/publications.rs`) refuses a publication that
//! would carry the catalog table.

use once_cell::sync::OnceCell;
use pgrx::prelude::*;

use crate::checks::{locks, publications};
use crate::hooks::unguarded;

/// The hook installed before ours, called after the check (set once).
static PREVIOUS_PROCESS_UTILITY_HOOK: OnceCell<pg_sys::ProcessUtility_hook_type> = OnceCell::new();

/// Installs the utility hook (from `_PG_init`, while preloading).
pub fn install() {
    // `_PG_init` runs once per process before any query, single-threaded; the previous hook is
    // kept and called, so other extensions' hooks keep working.
    // SAFETY: reads PostgreSQL's hook global while nothing else runs (see above).
    PREVIOUS_PROCESS_UTILITY_HOOK.get_or_init(|| unsafe { pg_sys::ProcessUtility_hook });
    // SAFETY: sets it while nothing else runs; the previous hook is kept just above.
    unsafe { pg_sys::ProcessUtility_hook = Some(process_utility) };
}

#[pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    statement: *mut pg_sys::PlannedStmt,
    query: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    environment: *mut pg_sys::QueryEnvironment,
    destination: *mut pg_sys::DestReceiver,
    completion: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: PostgreSQL passes a planned utility statement, valid for the call.
    let utility = unsafe { (*statement).utilityStmt };
    // SAFETY: the statement's node (null or valid), whose tag is read before the command runs
    // (it may change the tree).
    let kind = unsafe { utility.as_ref() }.map(|node| node.type_);
    // SAFETY: the statement's node, inside the command's transaction.
    let before = unsafe { locks::before_command(utility, kind) };
    let publishes = kind.is_some_and(publications::may_publish_the_state);
    // PostgreSQL's own arguments, passed on unchanged; nothing of this frame needs dropping, so
    // an error below leaves by PostgreSQL's longjmp with all its fields (`unguarded.rs`).
    match PREVIOUS_PROCESS_UTILITY_HOOK.get().copied().flatten() {
        // SAFETY: the hook installed before ours, called as PostgreSQL calls ours (see above).
        Some(previous) => unsafe {
            previous(
                statement,
                query,
                read_only_tree,
                context,
                params,
                environment,
                destination,
                completion,
            )
        },
        // SAFETY: PostgreSQL's own ProcessUtility, called as it calls ours (see above).
        None => unsafe {
            unguarded::standard_process_utility(
                statement,
                query,
                read_only_tree,
                context,
                params,
                environment,
                destination,
                completion,
            )
        },
    }
    locks::after_command(before);
    if publishes {
        publications::refuse_publishing_the_state();
    }
}
