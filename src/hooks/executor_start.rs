//! The executor start hook (docs/design.md §6): every plan of every database passes here; one
//! that writes a state relation marks its transaction as writing the extension's state
//! (`state/extension_directory.rs`).

use once_cell::sync::OnceCell;
use pgrx::prelude::*;
use pgrx::PgList;

use crate::hooks::unguarded;
use crate::state::extension_directory;

static PREVIOUS_EXECUTOR_START_HOOK: OnceCell<pg_sys::ExecutorStart_hook_type> = OnceCell::new();

/// Installs the hook (from `_PG_init`, while preloading).
pub fn install() {
    // `_PG_init` runs once per process before any query, single-threaded; the previous hook is
    // kept and called, so other extensions' hooks keep working.
    // SAFETY: reads PostgreSQL's hook global while nothing else runs (see above).
    PREVIOUS_EXECUTOR_START_HOOK.get_or_init(|| unsafe { pg_sys::ExecutorStart_hook });
    // SAFETY: sets it while nothing else runs; the previous hook is kept just above.
    unsafe { pg_sys::ExecutorStart_hook = Some(on_executor_start) };
}

/// A plan that writes a state relation (its result relations, data-modifying CTEs included)
/// bumps the generation at its commit. It counts once PostgreSQL started it, which checked the
/// plan's privileges (a role that may not write there moves nothing), and not for `EXPLAIN`
/// without `ANALYZE`. Every statement of the server passes here: the plan's lists are read in
/// place, and the schema's OID is kept (`internal_namespace`), so a statement that writes one
/// table costs about a syscache hit more.
#[pg_guard]
unsafe extern "C-unwind" fn on_executor_start(
    query: *mut pg_sys::QueryDesc,
    flags: std::ffi::c_int,
) {
    match PREVIOUS_EXECUTOR_START_HOOK.get().copied().flatten() {
        // SAFETY: the hook installed before ours, or PostgreSQL's own, with our arguments;
        // nothing of this frame needs dropping, so an error below leaves by PostgreSQL's
        // longjmp with all its fields (`hooks/unguarded.rs`).
        Some(previous) => unsafe { previous(query, flags) },
        // SAFETY: as above, PostgreSQL's own ExecutorStart.
        None => unsafe { unguarded::standard_executor_start(query, flags) },
    }
    if flags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY as std::ffi::c_int != 0 {
        return;
    }
    // SAFETY: the executor's query descriptor, valid for the call.
    let plan = unsafe { (*query).plannedstmt };
    // SAFETY: its planned statement, started above.
    let plan = unsafe { &*plan };
    // SAFETY: the plan's result relation list (null when empty): range table indexes, from 1.
    let results = unsafe { PgList::<i32>::from_pg(plan.resultRelations) };
    // SAFETY: the plan's range table, which holds every result relation's entry.
    let range_table = unsafe { PgList::<pg_sys::RangeTblEntry>::from_pg(plan.rtable) };
    // Both lists are read in place (PostgreSQL owns them; nothing is copied or freed).
    let writes_state = (0..results.len()).any(|position| {
        let entry = results
            .get_int(position)
            .and_then(|index| usize::try_from(index).ok()?.checked_sub(1))
            .and_then(|index| range_table.get_ptr(index));
        // SAFETY: a range table entry of the running plan.
        entry.is_some_and(|entry| extension_directory::is_state_relation(unsafe { (*entry).relid }))
    });
    if writes_state {
        extension_directory::forget_at_commit();
    }
}
