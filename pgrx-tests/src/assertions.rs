//! Small helpers for the tests' assertions: polling until a condition holds, a scenario retried
//! when the machine was too slow for it, and the parts of a database error.

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

/// Runs `scenario` up to `tries` times until it returns `Ok`, printing what each try reported;
/// panics with every try's report when none passed. For a scenario whose condition depends on
/// the machine's speed and cannot be arranged (a background process that must keep up under
/// load, say): one slow try does not fail the suite, a property broken every time still does.
pub fn within_tries<T>(
    test: &str,
    tries: u32,
    mut scenario: impl FnMut() -> Result<T, String>,
) -> T {
    let mut reports = Vec::new();
    for attempt in 1..=tries {
        match scenario() {
            Ok(value) => {
                println!("[{test}] try {attempt} of {tries} passed");
                return value;
            }
            Err(report) => {
                println!("[{test}] try {attempt} of {tries}: {report}");
                reports.push(format!("try {attempt}: {report}"));
            }
        }
    }
    panic!("{test}: no try of {tries} passed\n{}", reports.join("\n"));
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
