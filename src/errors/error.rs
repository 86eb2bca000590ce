//! The `Error` every constructor builds (a SQLSTATE, a message naming the object, a hint where
//! there is a fix), raised or sent as a WARNING; and the errors of setup, of calls the server
//! or the transaction refuses, and of the extension's own state.

use std::ffi::CStr;

use pgrx::pg_sys::panic::{CaughtError, ErrorReport};
use pgrx::prelude::*;
use snowflake_id_core::layout::{Field, Layout};

use crate::pg::gucs;

/// An error about to be raised.
#[must_use = "an error does nothing until it is raised"]
pub struct Error {
    code: PgSqlErrorCode,
    message: String,
    hint: Option<String>,
}

impl Error {
    pub(super) fn new(code: PgSqlErrorCode, message: String, hint: Option<String>) -> Error {
        Error {
            code,
            message,
            hint,
        }
    }

    /// Sends it as a WARNING to the client and the log; the call goes on.
    pub fn warn(self) {
        let mut report = ErrorReport::new(self.code, self.message, "snowflake_id");
        if let Some(hint) = self.hint {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::WARNING);
    }

    /// Raises the ERROR; pgrx turns the unwind into `ereport` at the function boundary, so no
    /// Rust panic crosses into PostgreSQL.
    pub fn raise(self) -> ! {
        let mut report = ErrorReport::new(self.code, self.message, "snowflake_id");
        if let Some(hint) = self.hint {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ereport(ERROR) returned")
    }
}

// Setup and configuration.

/// Raised by every function when the library was not preloaded (docs/design.md §4).
pub fn not_preloaded() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id must be loaded via shared_preload_libraries".into(),
        Some(
            "Add shared_preload_libraries = 'snowflake_id' to postgresql.conf \
             (append it to any libraries already listed there) and restart PostgreSQL."
                .into(),
        ),
    )
}

pub fn extension_not_installed() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
        "extension \"snowflake_id\" is not installed in this database".into(),
        Some("Run CREATE EXTENSION snowflake_id;".into()),
    )
}

pub fn node_id_unset(sequence: &str, layout: &Layout) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("snowflake sequence \"{sequence}\" needs snowflake_id.node_id, which is not set"),
        Some(match gucs::old_setting("node_id") {
            Some(old) => format!(
                "The configuration sets snowflake.node_id = {old}, the name up to 0.6.0, which is \
                 no longer read: rename it to snowflake_id.node_id in postgresql.conf and restart \
                 PostgreSQL."
            ),
            None => format!(
                "Set snowflake_id.node_id in postgresql.conf to this cluster's unique node number \
                 (0 to {}) and restart PostgreSQL.",
                layout.max_value(Field::Node)
            ),
        }),
    )
}

pub fn node_id_does_not_fit(sequence: &str, layout: &Layout, node_id: i32) -> Error {
    let bits = layout.node_bits;
    Error::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!(
            "snowflake_id.node_id = {node_id} does not fit the {bits} node bits of snowflake \
             sequence \"{sequence}\""
        ),
        Some(if bits == 0 {
            "This sequence has no node bits, so its IDs cannot carry a node id. For several \
             clusters, switch each column to a sequence with node bits: \
             SELECT snowflake_create_sequence('purchases', preset => 'sharded'); then \
             SELECT snowflake_convert_column('purchases', 'id', 'purchases'); for one \
             cluster instead, unset snowflake_id.node_id and restart."
                .into()
        } else {
            format!(
                "Node ids of this sequence range from 0 to {}.",
                layout.max_value(Field::Node)
            )
        }),
    )
}

// Worker ids.

pub fn during_recovery(function: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
        format!("cannot execute {function}() during recovery"),
        Some("Generate IDs on the primary server; a standby only reads them.".into()),
    )
}

/// A function that changes the catalog called in a read-only transaction (PostgreSQL's own
/// check would name only the INSERT or DELETE below it).
pub fn in_read_only_transaction(function: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
        format!("cannot execute {function}() in a read-only transaction"),
        Some(
            "Run it in a read-write transaction (SET TRANSACTION READ WRITE, or unset \
             default_transaction_read_only), on the primary server."
                .into(),
        ),
    )
}

/// A privileged function called by a role it does not serve (`privileges::require`): decided
/// when it runs, whatever EXECUTE grants the role holds.
pub fn caller_not_allowed(function: &str, allowed: &str, how_to_allow: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("permission denied for function {function}: only {allowed} may call it"),
        Some(how_to_allow.into()),
    )
}

/// A role that is not a superuser locks the extension's state in a mode that would make other
/// sessions' IDs wait (`checks/locks.rs`).
pub fn maintenance_of_the_state(relation: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!(
            "only a superuser may lock, VACUUM FULL, CLUSTER or REINDEX {relation}: it is \
             snowflake_id's state, and every session's IDs wait while it is locked"
        ),
        Some("Autovacuum keeps it; a superuser may run the command if it is ever needed.".into()),
    )
}

/// A publication would publish the extension's catalog table (`publications.rs`).
pub fn publication_of_the_state(publication: &str, table: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!(
            "publication {publication} would publish {table}, snowflake_id's state: a \
             subscriber's sessions would not follow what its apply worker writes there"
        ),
        Some(
            "Publish your own tables (FOR TABLE ..., or FOR TABLES IN SCHEMA public), and \
             create the sequences on each node with snowflake_create_sequence."
                .into(),
        ),
    )
}

/// snowflake_id was called from inside one of its own catalog lookups.
pub fn reentered() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id was called again while it was looking up a sequence".into(),
        Some("Code run by that lookup calls snowflake_id; remove that call.".into()),
    )
}

/// A failure inside PostgreSQL that the caller cannot fix (an SPI or type-system error).
pub fn internal(message: String) -> Error {
    Error::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, message, None)
}

/// The message of an ERROR that `subtransaction::run` caught and rolled back. An operator's
/// intervention (SQLSTATE class 57: a query cancel, a statement timeout, a shutdown), which
/// PL/pgSQL's `WHEN OTHERS` does not catch either, is raised again to end the statement.
pub fn caught_message(error: CaughtError) -> String {
    let report = match &error {
        CaughtError::PostgresError(report)
        | CaughtError::ErrorReport(report)
        | CaughtError::RustPanic {
            ereport: report, ..
        } => report,
    };
    // SAFETY: unpack_sql_state formats any code into a static buffer.
    let sqlstate = unsafe { pg_sys::unpack_sql_state(report.sql_error_code() as i32) };
    // SAFETY: that buffer, NUL-terminated, read before anything else formats into it.
    let sqlstate = unsafe { CStr::from_ptr(sqlstate) };
    if sqlstate.to_bytes().starts_with(b"57") {
        error.rethrow();
    }
    report.message().to_owned()
}
