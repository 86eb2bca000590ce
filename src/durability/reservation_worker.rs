//! The reservation worker: a background process that renews the durable reservation ahead of
//! the IDs (docs/design.md §5.1, "Extending"), so that no session pays for the WAL flush and
//! the fsyncs of a renewal in its own statement. It starts once the server accepts writes (not
//! on a standby; after a promotion it starts), wakes every sixteenth of `snowflake_id.reserve_ahead`,
//! and writes only while IDs are being issued and for `snowflake_id.idle_renewal` after the last
//! one. Sessions keep their own renewal as the fallback.

use std::time::Duration;

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::prelude::*;

use crate::durability::reservation::{renewal_policy, ClusterReservation};
use crate::shmem;

/// Registers the worker; called from `_PG_init` while shared_preload_libraries is processed.
pub fn register() {
    BackgroundWorkerBuilder::new("snowflake_id reservation")
        .set_type("snowflake_id reservation")
        .set_function("snowflake_reservation_worker_main")
        .set_library("snowflake_id")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// The worker's main loop, until the server stops it.
#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn snowflake_reservation_worker_main(_argument: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let Some(shared) = shmem::try_state() else {
        return;
    };
    while BackgroundWorker::wait_latch(Some(period())) {
        if BackgroundWorker::sighup_received() {
            // SAFETY: re-reads the configuration in this process, as every process does on
            // SIGHUP; called from the main loop, not from a signal handler.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        ClusterReservation(shared).renew_for_sessions(standby_streaming);
    }
}

/// The worker's period under `snowflake_id.reserve_ahead` as it is set now
/// (`RenewalPolicy::worker_period`).
fn period() -> Duration {
    Duration::from_micros(renewal_policy().worker_period().unsigned_abs())
}

/// Whether a WAL sender is streaming to a standby (or a logical subscriber): while one is, the
/// worker keeps the reservation renewed even when no ID is issued, so the standby's last
/// reservation is never older than an eighth of a window when IDs come again (design §5.2).
fn standby_streaming() -> bool {
    // WalSndCtl is PostgreSQL's shared array of max_wal_senders WAL sender slots, set up before
    // any background worker starts and never freed; reading a slot's pid and state without its
    // spinlock gives a value that may be a moment old, which is all this needs.
    // SAFETY: a plain read of the array's address (see above).
    let control = unsafe { pg_sys::WalSndCtl };
    if control.is_null() {
        return false;
    }
    // SAFETY: a plain read of a setting fixed at server start.
    let slots = unsafe { pg_sys::max_wal_senders }.max(0) as usize;
    // SAFETY: the non-null array (see above).
    let control = unsafe { &*control };
    // SAFETY: its `max_wal_senders` slots.
    let senders = unsafe { control.walsnds.as_slice(slots) };
    senders
        .iter()
        .any(|sender| sender.pid != 0 && sender.state == pg_sys::WalSndState::WALSNDSTATE_STREAMING)
}
