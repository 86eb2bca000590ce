//! snowflake_id: Snowflake-style 64-bit IDs generated inside PostgreSQL.
//!
//! This crate is the PostgreSQL glue only; everything that decides an ID's value is in the pure
//! core crate `snowflake_id_core` (crates/snowflake_id_core). What each module below faces, and
//! every hook and callback `_PG_init` puts under PostgreSQL: docs/design.md §7 (a test keeps
//! it true to the tree).
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(clippy::multiple_unsafe_ops_per_block)]

use pgrx::prelude::*;

mod checks;
mod durability;
mod errors;
mod hooks;
mod ids;
mod pg;
mod shmem;
mod sql_api;
mod state;

#[cfg(any(test, feature = "pg_test"))]
mod tests;

::pgrx::pg_module_magic!(name, version);

// The install script, written by hand as the current version defines the extension (every
// function is declared there, none by pgrx: `#[pg_extern(sql = false)]`); the update scripts
// beside it carry a database made by an earlier release to the same objects.
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.15.0.sql",
    name = "install",
    bootstrap
);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // pgrx attaches a captured Rust backtrace to the DETAIL of errors that pass through Rust
    // frames (a query cancel while a backend sleeps, say) whenever RUST_BACKTRACE is set in the
    // server's environment. Clients must only ever see PostgreSQL's own error fields, so the
    // capture is switched off for this process and (set in the postmaster) every backend.
    // RUST_LIB_BACKTRACE governs captures only; panics still print to the server log as set.
    std::env::set_var("RUST_LIB_BACKTRACE", "0");
    // SAFETY: a plain read of a postmaster global while this library is being loaded.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        // Loaded by CREATE EXTENSION or a call without preloading: set nothing up, so every
        // function reports the missing shared_preload_libraries entry (errors::not_preloaded).
        return;
    }
    pg::gucs::register();
    hooks::install();
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'snowflake_id'"]
    }
}
