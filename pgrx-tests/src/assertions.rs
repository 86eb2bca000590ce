//! Small helpers for the tests' assertions: polling until a condition holds, and the parts of a
//! database error.

use std::time::{Duration, Instant};

use crate::PgError;

/// Polls `condition` every 50 ms until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SQLSTATE, message and hint of a database error, for assertions.
pub fn error_parts(error: &PgError) -> (String, String, String) {
    match error.as_db_error() {
        Some(db) => (
            db.code().code().to_owned(),
            db.message().to_owned(),
            db.hint().unwrap_or_default().to_owned(),
        ),
        None => (String::new(), error.to_string(), String::new()),
    }
}
