//! snowflake_id: Snowflake-style 64-bit IDs generated inside PostgreSQL.
//!
//! This crate is the PostgreSQL glue only (docs/design.md §7); everything that decides an ID's
//! value is in the pure core crate `snowflake_id_core` (crates/snowflake_id_core).
//! Glue files, named by what they face: `gucs`, `shared_memory`, `system_clock`, `cluster_time`,
//! `reservation`, `reservation_worker`, `catalog`, `sequence_cache`, `database_floor`,
//! `backend`, `citus`, `sql_api`, `stored_ids`, `privileges`, `maintenance`, `timestamps`,
//! `errors`.

use pgrx::prelude::*;

mod backend;
mod catalog;
mod citus;
mod cluster_time;
mod database_floor;
mod errors;
mod gucs;
mod maintenance;
mod privileges;
mod reservation;
mod reservation_worker;
mod sequence_cache;
mod shared_memory;
mod sql_api;
mod stored_ids;
mod system_clock;
mod timestamps;

#[cfg(any(test, feature = "pg_test"))]
mod catalog_tests;
#[cfg(any(test, feature = "pg_test"))]
mod convert_column_tests;
#[cfg(any(test, feature = "pg_test"))]
mod partition_tests;
#[cfg(any(test, feature = "pg_test"))]
mod pg_test_helpers;
#[cfg(any(test, feature = "pg_test"))]
mod sql_tests;

::pgrx::pg_module_magic!(name, version);

pgrx::extension_sql_file!("../sql/bootstrap.sql", name = "bootstrap", bootstrap);
// Version 0.2.0's additions: the update script from 0.1.0 is also part of a fresh install.
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.1.0--0.2.0.sql",
    name = "convert_column",
    requires = ["bootstrap"]
);
// Version 0.3.0's changes, likewise part of a fresh install (it recreates snowflake_stats as
// 0.3.0 declared it; 0.6.0's script recreates it as the function is declared now).
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.2.0--0.3.0.sql",
    name = "durable_floor_and_hardening",
    requires = [
        "convert_column",
        sql_api::snowflake_create_sequence,
        sql_api::snowflake_drop_sequence,
        sql_api::snowflake_stats,
        sql_api::snowflake_currval,
        sql_api::snowflake_lastval,
        sql_api::snowflake_to_base32,
        sql_api::snowflake_from_base32
    ]
);
// Version 0.4.0's additions (Citus), likewise part of a fresh install.
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.3.0--0.4.0.sql",
    name = "citus",
    requires = [
        "durable_floor_and_hardening",
        sql_api::snowflake_citus_receive_sequence,
        sql_api::snowflake_citus_forget_sequence
    ]
);
// Version 0.5.0's additions (the floor in each database), likewise part of a fresh install.
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.4.0--0.5.0.sql",
    name = "database_floor",
    requires = ["citus", sql_api::snowflake_raise_floor]
);
// Version 0.6.0's changes (worker ids per space, shared when full), likewise part of a fresh
// install: it recreates snowflake_worker_slots and snowflake_stats exactly as the functions in
// sql_api are declared, and creates the view snowflake_workers.
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.5.0--0.6.0.sql",
    name = "worker_spaces",
    requires = [
        "database_floor",
        sql_api::snowflake_worker_slots,
        sql_api::snowflake_stats
    ]
);

// Version 0.7.0's changes (the snowflake_id.* settings, moving over from pgEdge's snowflake),
// likewise part of a fresh install: snowflake_citus_node_ids() and snowflake_convert_column.
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.6.0--0.7.0.sql",
    name = "pgedge_and_setting_names",
    requires = ["worker_spaces"]
);

// Version 0.9.0's changes (the floor relations readable, for pg_dump by any role that can dump
// the database; snowflake_stats() with the monitoring columns), likewise part of a fresh install:
// after 0.7.0's, so that the install script is the same for every major (two scripts that only
// follow worker_spaces come in either order).
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.8.0--0.9.0.sql",
    name = "floor_readable_and_stats",
    requires = ["database_floor", "pgedge_and_setting_names"]
);

// Version 0.10.0's changes (the extension's state in its own schema, snowflake_id_internal),
// likewise part of a fresh install: after every script that creates or grants on the objects
// it moves; finalize.sql (last) names the catalog table there.
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.9.0--0.10.0.sql",
    name = "own_schema",
    requires = ["floor_readable_and_stats", sql_api::snowflake_accept_floor]
);

// Version 0.11.0's changes (sealed by construction: the views without any name a role controls,
// read-only; the guard on inserted catalog rows; the stored-IDs check through an index; every
// member's privileges set to the documented ones), likewise part of a fresh install, last.
pgrx::extension_sql_file!(
    "../sql/snowflake_id--0.10.0--0.11.0.sql",
    name = "sealed",
    finalize
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
    gucs::register();
    reservation::register_wal_resource_manager();
    shared_memory::install_hooks(reservation::write_floor_at_shutdown);
    citus::install_hooks();
    maintenance::install_hook();
    reservation_worker::register();
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
