//! Raising PostgreSQL errors with a SQLSTATE, a message naming the object, and a hint.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// Raises an ERROR; pgrx turns the unwind into `ereport` at the function boundary, so no Rust
/// panic crosses into PostgreSQL.
pub fn raise(code: PgSqlErrorCode, message: String, hint: Option<String>) -> ! {
    let mut report = ErrorReport::new(code, message, "snowflake_id");
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ereport(ERROR) returned")
}

/// The error every function raises when the library was not preloaded (design.md §4).
pub fn not_preloaded() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id must be loaded via shared_preload_libraries".into(),
        Some(
            "Add shared_preload_libraries = 'snowflake_id' to postgresql.conf \
             (append it to any libraries already listed there) and restart PostgreSQL."
                .into(),
        ),
    )
}
