//! The executor start hook (docs/design.md §6): every plan of every database passes here; one
//! that writes a state relation marks its transaction as writing the extension's state
//! (`state/extension_directory.rs`).

use once_cell::sync::OnceCell;
use pgrx::prelude::*;

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
    // The plan's result relation list (null when empty) holds range table indexes, from 1,
    // into its range table, a list of range table entries; both are read in place.
    // SAFETY: the executor's query descriptor, valid for the call.
    let plan = unsafe { (*query).plannedstmt };
    // SAFETY: its planned statement, started above.
    let plan = unsafe { &*plan };
    let results = plan.resultRelations;
    let count = if results.is_null() {
        0
    } else {
        // SAFETY: a non-null list.
        unsafe { (*results).length }
    };
    let writes_state = (0..count as usize).any(|position| {
        // SAFETY: an integer list of `count` cells.
        let cell = unsafe { list_cell(results, position) };
        // SAFETY: an integer list's cells hold ints.
        let index = unsafe { cell.int_value } as usize;
        // SAFETY: the range table, which holds every result relation's entry.
        let cell = unsafe { list_cell(plan.rtable, index - 1) };
        // SAFETY: a pointer list's cells hold pointers, here to a RangeTblEntry.
        let entry = unsafe { cell.ptr_value }.cast::<pg_sys::RangeTblEntry>();
        // SAFETY: a range table entry of the running plan.
        extension_directory::is_state_relation(unsafe { (*entry).relid })
    });
    if writes_state {
        extension_directory::forget_at_commit();
    }
}

/// Cell `position` of `list`, read in place, as PostgreSQL's `list_nth_cell` does.
///
/// # Safety
/// `list` is a valid list of more than `position` cells.
#[inline]
unsafe fn list_cell(list: *mut pg_sys::List, position: usize) -> pg_sys::ListCell {
    // SAFETY: a valid list (see the contract).
    let cells = unsafe { (*list).elements };
    // SAFETY: `position` is below its length, so inside its array of cells.
    let cell = unsafe { cells.add(position) };
    // SAFETY: a cell of the list.
    unsafe { *cell }
}
