//! Configuration parameters (`snowflake_id.*`: PostgreSQL's convention, the extension's name as
//! the prefix). Up to 0.6.0 they were `snowflake.*`, a prefix pgEdge's `snowflake` extension
//! uses too; a configuration that still names one of them gets a WARNING at start naming the
//! new name, and the old setting has no effect (docs/design.md §6).

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

// Each setting's default and bounds, by name (docs/reference.md, "Configuration", gives the
// defaults and contexts; `pgrx-tests/tests/configuration_table.rs` checks it against what the
// server registers).

/// `snowflake_id.node_id` when the operator has not set it (its default and lower bound).
pub const NODE_ID_UNSET: i32 = -1;
const NODE_ID_MAX: i32 = i32::MAX;
const MAX_WORKERS_DEFAULT: i32 = 1024;
const MAX_WORKERS_MIN: i32 = 1;
/// Upper bound of `snowflake_id.max_workers`: more worker ids per space than sessions can use.
pub const MAX_WORKERS_LIMIT: i32 = 65_536;
const MAX_LEAD_DEFAULT_MS: i32 = 100;
const MAX_LEAD_MIN_MS: i32 = 0;
const MAX_LEAD_MAX_MS: i32 = 3_600_000;
const RESERVE_AHEAD_DEFAULT_MS: i32 = 1_000;
const RESERVE_AHEAD_MIN_MS: i32 = 1;
const RESERVE_AHEAD_MAX_MS: i32 = 86_400_000;
/// Our custom WAL resource manager id: 128–255 is the range PostgreSQL leaves to extensions
/// (128 is for development only). 176 is unused by the extensions we know of; an operator whose
/// other extension claims it moves ours here (docs/design.md §5.2).
const WAL_RMGR_ID_DEFAULT: i32 = 176;
const WAL_RMGR_ID_MIN: i32 = 129;
const WAL_RMGR_ID_MAX: i32 = 255;
const MAX_CLOCK_JUMP_DEFAULT_MS: i32 = 1_000;
const MAX_CLOCK_JUMP_MIN_MS: i32 = 0;
const MAX_CLOCK_JUMP_MAX_MS: i32 = i32::MAX;
const CLOCK_JUMP_CONFIRM_DEFAULT_MS: i32 = 10_000;
const CLOCK_JUMP_CONFIRM_MIN_MS: i32 = 0;
const CLOCK_JUMP_CONFIRM_MAX_MS: i32 = i32::MAX;
const FAILOVER_LAG_DEFAULT_MS: i32 = 500;
const FAILOVER_LAG_MIN_MS: i32 = 0;
const FAILOVER_LAG_MAX_MS: i32 = 3_600_000;

pub static NODE_ID: GucSetting<i32> = GucSetting::<i32>::new(NODE_ID_UNSET);
pub static MAX_WORKERS: GucSetting<i32> = GucSetting::<i32>::new(MAX_WORKERS_DEFAULT);
pub static MAX_LEAD_MS: GucSetting<i32> = GucSetting::<i32>::new(MAX_LEAD_DEFAULT_MS);
pub static RESERVE_AHEAD_MS: GucSetting<i32> = GucSetting::<i32>::new(RESERVE_AHEAD_DEFAULT_MS);
pub static WAL_RMGR_ID: GucSetting<i32> = GucSetting::<i32>::new(WAL_RMGR_ID_DEFAULT);
pub static MAX_CLOCK_JUMP_MS: GucSetting<i32> = GucSetting::<i32>::new(MAX_CLOCK_JUMP_DEFAULT_MS);
pub static CLOCK_JUMP_CONFIRM_MS: GucSetting<i32> =
    GucSetting::<i32>::new(CLOCK_JUMP_CONFIRM_DEFAULT_MS);
pub static FAILOVER_LAG_MS: GucSetting<i32> = GucSetting::<i32>::new(FAILOVER_LAG_DEFAULT_MS);

/// `snowflake_id.max_lead` as each ID reads it: one load, without the check of the calling
/// thread in `GucSetting::get` (a tenth of an ID's instructions).
pub fn max_lead_ms() -> i32 {
    // SAFETY: the setting's storage is a static PostgreSQL writes only when it assigns the
    // parameter, on the backend's one thread; this runs on that thread too (the extension starts
    // none, see backend.rs `BackendCell`), so no write runs during the read.
    unsafe { *MAX_LEAD_MS.as_ptr() }
}

/// Registers the parameters; only called while `shared_preload_libraries` is being processed,
/// because postmaster-level parameters cannot be defined later.
pub fn register() {
    GucRegistry::define_int_guc(
        c"snowflake_id.node_id",
        c"Node number of this PostgreSQL cluster in snowflake IDs (-1 = unset).",
        c"Must be unique among all clusters whose IDs meet. Only settable in postgresql.conf or on \
          the server command line, so no session can forge another node's IDs.",
        &NODE_ID,
        NODE_ID_UNSET,
        NODE_ID_MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.max_workers",
        c"Worker ids per worker space: sessions that generate IDs of one worker width without \
          sharing a worker id.",
        c"A session holds a worker id of a sequence's width from its first ID until it exits; \
          past this many (or 2^worker_bits) sessions, further sessions share worker ids.",
        &MAX_WORKERS,
        MAX_WORKERS_MIN,
        MAX_WORKERS_LIMIT,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.max_lead",
        c"How far IDs may run ahead of the clock when a backend exhausts a tick.",
        c"Past this lead a backend sleeps until the clock catches up.",
        &MAX_LEAD_MS,
        MAX_LEAD_MIN_MS,
        MAX_LEAD_MAX_MS,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.reserve_ahead",
        c"How far ahead of the IDs issued the reservation file is written.",
        c"The reservation is fsynced about once per this window; after a restart or crash IDs \
          start after it, whatever the clock says.",
        &RESERVE_AHEAD_MS,
        RESERVE_AHEAD_MIN_MS,
        RESERVE_AHEAD_MAX_MS,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.wal_rmgr_id",
        c"Id of snowflake_id's custom WAL resource manager (129 to 255).",
        c"Change it only if another extension uses the same id, on every server of a \
          replication group at once, after a clean shutdown: WAL written with the old id can no \
          longer be replayed.",
        &WAL_RMGR_ID,
        WAL_RMGR_ID_MIN,
        WAL_RMGR_ID_MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.max_clock_jump",
        c"Largest forward jump of the wall clock that is followed at once.",
        c"A larger jump is followed only after it has lasted snowflake_id.clock_jump_confirm; a \
          glitch that goes away before then leaves no trace in the IDs.",
        &MAX_CLOCK_JUMP_MS,
        MAX_CLOCK_JUMP_MIN_MS,
        MAX_CLOCK_JUMP_MAX_MS,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.clock_jump_confirm",
        c"How long a forward jump larger than snowflake_id.max_clock_jump must last to be followed.",
        c"Until then the cluster clock continues at real speed from its last trusted reading.",
        &CLOCK_JUMP_CONFIRM_MS,
        CLOCK_JUMP_CONFIRM_MIN_MS,
        CLOCK_JUMP_CONFIRM_MAX_MS,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.failover_lag",
        c"Asynchronous replication lag a promoted standby covers, in the old primary's time.",
        c"At its first ID after leaving standby mode or archive recovery, a server moves its \
          clock this much (plus snowflake_id.max_lead and the coarsest tick, less half of \
          snowflake_id.reserve_ahead) above the last reservation it replayed.",
        &FAILOVER_LAG_MS,
        FAILOVER_LAG_MIN_MS,
        FAILOVER_LAG_MAX_MS,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    // SAFETY: called from _PG_init in the postmaster; the prefix is a static C string.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"snowflake_id".as_ptr()) };
    for old in RENAMED {
        if let Some(value) = old_setting(old) {
            pgrx::warning!(
                "snowflake_id: \"snowflake.{old} = {value}\" is no longer read: since 0.7.0 the \
                 setting is \"snowflake_id.{old}\"; rename it in postgresql.conf"
            );
        }
    }
}

/// The names (after the prefix) of the settings that were `snowflake.<name>` up to 0.6.0 and
/// are `snowflake_id.<name>` now.
const RENAMED: [&str; 8] = [
    "node_id",
    "max_workers",
    "max_lead",
    "reserve_ahead",
    "wal_rmgr_id",
    "max_clock_jump",
    "clock_jump_confirm",
    "failover_lag",
];

/// The value of the pre-0.7.0 setting `snowflake.<name>`, if the configuration still sets it
/// (PostgreSQL keeps an unknown `prefix.name` as a placeholder, a string).
pub fn old_setting(name: &str) -> Option<String> {
    let full = std::ffi::CString::new(format!("snowflake.{name}")).ok()?;
    // SAFETY: looks a setting up by a NUL-terminated name, missing_ok; the returned string (if
    // any) is PostgreSQL's and is copied before anything else can change it.
    unsafe {
        let value = pgrx::pg_sys::GetConfigOption(full.as_ptr(), true, false);
        (!value.is_null()).then(|| {
            std::ffi::CStr::from_ptr(value)
                .to_string_lossy()
                .into_owned()
        })
    }
}
