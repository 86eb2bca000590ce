//! PostgreSQL's own functions that the library's hooks hand control on to, declared here to be
//! called without pgrx's FFI guard (docs/design.md §6, "Hooks"). pgrx wraps every function of
//! its bindings in a `sigsetjmp` that catches a PostgreSQL error and raises a copy of it with
//! only its level, SQLSTATE, message, detail, hint and location: an error of the command under
//! the hook would lose its position, internal query, context and schema, table, column, data
//! type and constraint names, which clients and PL/pgSQL's `GET STACKED DIAGNOSTICS` read. Called
//! through these declarations, an error leaves by PostgreSQL's own `longjmp`, untouched, to the
//! `PG_TRY` above the hook, exactly as when no library is loaded.
//!
//! Sound because a hook that calls one holds nothing that needs dropping at that call (its
//! frame and the pgrx guard's around it are plain old frames for the `longjmp` to leave): each
//! caller says so.

use std::ffi::{c_char, c_int};

use pgrx::pg_sys;

unsafe extern "C-unwind" {
    /// `standard_ExecutorStart` of executor/execMain.c (15 to 18).
    #[link_name = "standard_ExecutorStart"]
    pub fn standard_executor_start(query: *mut pg_sys::QueryDesc, flags: c_int);

    /// `standard_ProcessUtility` of tcop/utility.c (15 to 18).
    #[link_name = "standard_ProcessUtility"]
    #[allow(clippy::too_many_arguments)]
    pub fn standard_process_utility(
        statement: *mut pg_sys::PlannedStmt,
        query: *const c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        environment: *mut pg_sys::QueryEnvironment,
        destination: *mut pg_sys::DestReceiver,
        completion: *mut pg_sys::QueryCompletion,
    );
}
