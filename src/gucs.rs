//! Configuration parameters (`snowflake.*`).

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// `snowflake.node_id` when the operator has not set it.
pub const NODE_ID_UNSET: i32 = -1;
/// Upper bound of `snowflake.max_workers`: more worker ids per space than sessions can use.
pub const MAX_WORKERS_LIMIT: i32 = 65_536;

pub static NODE_ID: GucSetting<i32> = GucSetting::<i32>::new(NODE_ID_UNSET);
pub static MAX_WORKERS: GucSetting<i32> = GucSetting::<i32>::new(1024);
pub static MAX_LEAD_MS: GucSetting<i32> = GucSetting::<i32>::new(100);
pub static RESERVE_AHEAD_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// Our custom WAL resource manager id: 128–255 is the range PostgreSQL leaves to extensions
/// (128 is for development only). 176 is unused by the extensions we know of; an operator whose
/// other extension claims it moves ours here (docs/design.md §5.2).
pub static WAL_RMGR_ID: GucSetting<i32> = GucSetting::<i32>::new(176);
pub static MAX_CLOCK_JUMP_MS: GucSetting<i32> = GucSetting::<i32>::new(1_000);
pub static CLOCK_JUMP_CONFIRM_MS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub static FAILOVER_LAG_MS: GucSetting<i32> = GucSetting::<i32>::new(500);

/// Registers the parameters; only called while `shared_preload_libraries` is being processed,
/// because postmaster-level parameters cannot be defined later.
pub fn register() {
    GucRegistry::define_int_guc(
        c"snowflake.node_id",
        c"Node number of this PostgreSQL cluster in snowflake IDs (-1 = unset).",
        c"Must be unique among all clusters whose IDs meet. Only settable in postgresql.conf or on \
          the server command line, so no session can forge another node's IDs.",
        &NODE_ID,
        NODE_ID_UNSET,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake.max_workers",
        c"Worker ids per worker space: sessions that generate IDs of one worker width without \
          sharing a worker id.",
        c"A session holds a worker id of a sequence's width from its first ID until it exits; \
          past this many (or 2^worker_bits) sessions, further sessions share worker ids.",
        &MAX_WORKERS,
        1,
        MAX_WORKERS_LIMIT,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake.max_lead",
        c"How far IDs may run ahead of the clock when a backend exhausts a tick.",
        c"Past this lead a backend sleeps until the clock catches up.",
        &MAX_LEAD_MS,
        0,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake.reserve_ahead",
        c"How far ahead of the IDs issued the reservation file is written.",
        c"The reservation is fsynced about once per this window; after a restart or crash IDs \
          start after it, whatever the clock says.",
        &RESERVE_AHEAD_MS,
        1,
        86_400_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake.wal_rmgr_id",
        c"Id of snowflake_id's custom WAL resource manager (129 to 255).",
        c"Change it only if another extension uses the same id, on every server of a \
          replication group at once, after a clean shutdown: WAL written with the old id can no \
          longer be replayed.",
        &WAL_RMGR_ID,
        129,
        255,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake.max_clock_jump",
        c"Largest forward jump of the wall clock that is followed at once.",
        c"A larger jump is followed only after it has lasted snowflake.clock_jump_confirm; a \
          glitch that goes away before then leaves no trace in the IDs.",
        &MAX_CLOCK_JUMP_MS,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake.clock_jump_confirm",
        c"How long a forward jump larger than snowflake.max_clock_jump must last to be followed.",
        c"Until then the cluster clock continues at real speed from its last trusted reading.",
        &CLOCK_JUMP_CONFIRM_MS,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake.failover_lag",
        c"Asynchronous replication lag a promoted standby covers, in the old primary's time.",
        c"At its first ID after leaving standby mode or archive recovery, a server moves its \
          clock this much (plus snowflake.max_lead and the coarsest tick, less half of \
          snowflake.reserve_ahead) above the last reservation it replayed.",
        &FAILOVER_LAG_MS,
        0,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    // SAFETY: called from _PG_init in the postmaster; the prefix is a static C string.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"snowflake".as_ptr()) };
}
