//! Configuration parameters (`snowflake_id.*`: PostgreSQL's convention, the extension's name as
//! the prefix). Up to 0.6.0 they were `snowflake.*`, a prefix pgEdge's `snowflake` extension
//! uses too; a configuration that still names one of them gets a WARNING at start naming the
//! new name, and the old setting has no effect (docs/design.md §6).

use std::ffi::CStr;

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

use snowflake_id_core::layout::MAX_FIELD_BITS;

// Each setting's default and bounds, by name (docs/reference.md, "Configuration", gives the
// defaults and contexts; `pgrx-tests/tests/configuration_table.rs` checks it against what the
// server registers).

/// `snowflake_id.node_id` when the operator has not set it (its default and lower bound).
pub const NODE_ID_UNSET: i32 = -1;
/// The most a node field can hold in any layout (`MAX_FIELD_BITS` bits): a larger node id fits
/// no sequence, so the server refuses it when it is set. Whether it fits a given sequence's node
/// bits is known only in that sequence's database, at its first ID (22023).
const NODE_ID_MAX: i32 = ((1_u32 << MAX_FIELD_BITS) - 1) as i32;
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
const IDLE_RENEWAL_DEFAULT_MS: i32 = 300_000;
const IDLE_RENEWAL_MIN_MS: i32 = 0;
const IDLE_RENEWAL_MAX_MS: i32 = i32::MAX;
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
pub static IDLE_RENEWAL_MS: GucSetting<i32> = GucSetting::<i32>::new(IDLE_RENEWAL_DEFAULT_MS);
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

/// When a setting may change.
enum Change {
    /// Only in postgresql.conf or on the command line, at the server's start.
    AtStart,
    /// Also on a reload (SIGHUP).
    OnReload,
}

/// One integer setting as PostgreSQL registers it. Its name after the prefix is also what it was
/// called after `snowflake.` up to 0.6.0.
struct Setting {
    name: &'static CStr,
    short: &'static CStr,
    long: &'static CStr,
    value: &'static GucSetting<i32>,
    min: i32,
    max: i32,
    change: Change,
    milliseconds: bool,
}

impl Setting {
    /// The name after `snowflake_id.` (and, up to 0.6.0, after `snowflake.`).
    fn suffix(&self) -> &'static str {
        let name = self.name.to_str().expect("setting names are ASCII");
        name.strip_prefix("snowflake_id.").unwrap_or(name)
    }
}

/// Every setting, in the order `register` defines them.
static SETTINGS: [Setting; 9] = [
    Setting {
        name: c"snowflake_id.node_id",
        short: c"Node number of this PostgreSQL cluster in snowflake IDs (-1 = unset).",
        long:
            c"Must be unique among all clusters whose IDs meet. Only settable in postgresql.conf \
                or on the server command line, so no session can forge another node's IDs.",
        value: &NODE_ID,
        min: NODE_ID_UNSET,
        max: NODE_ID_MAX,
        change: Change::AtStart,
        milliseconds: false,
    },
    Setting {
        name: c"snowflake_id.max_workers",
        short: c"Worker ids per worker space: sessions that generate IDs of one worker width \
                 without sharing a worker id.",
        long: c"A session holds a worker id of a sequence's width from its first ID until it \
                exits; past this many (or 2^worker_bits) sessions, further sessions share worker \
                ids.",
        value: &MAX_WORKERS,
        min: MAX_WORKERS_MIN,
        max: MAX_WORKERS_LIMIT,
        change: Change::AtStart,
        milliseconds: false,
    },
    Setting {
        name: c"snowflake_id.max_lead",
        short: c"How far IDs may run ahead of the clock when a backend exhausts a tick.",
        long: c"Past this lead a backend sleeps until the clock catches up.",
        value: &MAX_LEAD_MS,
        min: MAX_LEAD_MIN_MS,
        max: MAX_LEAD_MAX_MS,
        change: Change::OnReload,
        milliseconds: true,
    },
    Setting {
        name: c"snowflake_id.reserve_ahead",
        short: c"How far ahead of the IDs issued the reservation file is written.",
        long: c"The reservation is fsynced about once per this window; after a restart or crash \
                IDs start after it, whatever the clock says.",
        value: &RESERVE_AHEAD_MS,
        min: RESERVE_AHEAD_MIN_MS,
        max: RESERVE_AHEAD_MAX_MS,
        change: Change::OnReload,
        milliseconds: true,
    },
    Setting {
        name: c"snowflake_id.idle_renewal",
        short: c"How long after the last ID the reservation worker keeps the reservation renewed, \
                 and how far beyond it sessions write their database's floor relation.",
        long: c"The first ID after a quiet spell up to this long waits for no write of the \
                extension; meanwhile the worker writes a WAL record and fsyncs the reservation \
                file about eight times per snowflake_id.reserve_ahead. A restore, pg_upgrade or \
                promotion may move IDs up to this much ahead. 0 stops after one reserve_ahead.",
        value: &IDLE_RENEWAL_MS,
        min: IDLE_RENEWAL_MIN_MS,
        max: IDLE_RENEWAL_MAX_MS,
        change: Change::OnReload,
        milliseconds: true,
    },
    Setting {
        name: c"snowflake_id.wal_rmgr_id",
        short: c"Id of snowflake_id's custom WAL resource manager (129 to 255).",
        long: c"Change it only if another extension uses the same id, on every server of a \
                replication group at once, after a clean shutdown: WAL written with the old id \
                can no longer be replayed.",
        value: &WAL_RMGR_ID,
        min: WAL_RMGR_ID_MIN,
        max: WAL_RMGR_ID_MAX,
        change: Change::AtStart,
        milliseconds: false,
    },
    Setting {
        name: c"snowflake_id.max_clock_jump",
        short: c"Largest forward jump of the wall clock that is followed at once.",
        long: c"A larger jump is followed only after it has lasted \
                snowflake_id.clock_jump_confirm; a glitch that goes away before then leaves no \
                trace in the IDs.",
        value: &MAX_CLOCK_JUMP_MS,
        min: MAX_CLOCK_JUMP_MIN_MS,
        max: MAX_CLOCK_JUMP_MAX_MS,
        change: Change::OnReload,
        milliseconds: true,
    },
    Setting {
        name: c"snowflake_id.clock_jump_confirm",
        short: c"How long a forward jump larger than snowflake_id.max_clock_jump must last to be \
                 followed.",
        long: c"Until then the cluster clock continues at real speed from its last trusted \
                reading.",
        value: &CLOCK_JUMP_CONFIRM_MS,
        min: CLOCK_JUMP_CONFIRM_MIN_MS,
        max: CLOCK_JUMP_CONFIRM_MAX_MS,
        change: Change::OnReload,
        milliseconds: true,
    },
    Setting {
        name: c"snowflake_id.failover_lag",
        short: c"Asynchronous replication lag a promoted standby covers, in the old primary's \
                 time.",
        long: c"At its first ID after leaving standby mode or archive recovery, a server moves \
                its clock this much (plus snowflake_id.max_lead and the coarsest tick, less half \
                of snowflake_id.reserve_ahead) above the last reservation it replayed.",
        value: &FAILOVER_LAG_MS,
        min: FAILOVER_LAG_MIN_MS,
        max: FAILOVER_LAG_MAX_MS,
        change: Change::OnReload,
        milliseconds: true,
    },
];

/// Registers the parameters; only called while `shared_preload_libraries` is being processed,
/// because postmaster-level parameters cannot be defined later. A configuration that still sets
/// one by its pre-0.7.0 name gets a WARNING naming the new one.
pub fn register() {
    for setting in &SETTINGS {
        GucRegistry::define_int_guc(
            setting.name,
            setting.short,
            setting.long,
            setting.value,
            setting.min,
            setting.max,
            match setting.change {
                Change::AtStart => GucContext::Postmaster,
                Change::OnReload => GucContext::Sighup,
            },
            match setting.milliseconds {
                true => GucFlags::UNIT_MS,
                false => GucFlags::default(),
            },
        );
    }
    // SAFETY: called from _PG_init in the postmaster; the prefix is a static C string.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"snowflake_id".as_ptr()) };
    for old in SETTINGS.iter().map(Setting::suffix) {
        if let Some(value) = old_setting(old) {
            pgrx::warning!(
                "snowflake_id: \"snowflake.{old} = {value}\" is no longer read: since 0.7.0 the \
                 setting is \"snowflake_id.{old}\"; rename it in postgresql.conf"
            );
        }
    }
}

/// The value of the pre-0.7.0 setting `snowflake.<name>`, if the configuration still sets it
/// (PostgreSQL keeps an unknown `prefix.name` as a placeholder, a string).
pub fn old_setting(name: &str) -> Option<String> {
    let full = std::ffi::CString::new(format!("snowflake.{name}")).ok()?;
    // SAFETY: looks a setting up by a NUL-terminated name, missing_ok: PostgreSQL's string of
    // its value, or null.
    let value = unsafe { pgrx::pg_sys::GetConfigOption(full.as_ptr(), true, false) };
    (!value.is_null()).then(|| {
        // SAFETY: that string, copied before anything else can change it.
        unsafe { std::ffi::CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned()
    })
}
