//! The durable reservation (docs/design.md §5): a time no issued ID's tick ends after, renewed
//! ahead of the IDs and kept in the WAL and in a file of the data directory, and the durable
//! floor, what this server learned of IDs issued elsewhere. Here are the reservation as the
//! core's `protocol` sees it (whose steps renew it, by the core's `renewal` policy), the floor,
//! the lock that serialises both, the shutdown write, and the custom WAL resource manager
//! whose one record says "no ID's tick ends after this time":
//! replaying it (on a standby, in crash recovery, in point-in-time recovery) raises that
//! server's durable floor, so the floor travels with the data to every server that has the rows.
//! The state itself is part of the segment (`shmem/published_reservation.rs`).

use std::ffi::CStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use pgrx::prelude::*;

use snowflake_id_core::protocol;
use snowflake_id_core::renewal::RenewalPolicy;
use snowflake_id_core::reservation_file;

use crate::errors;
use crate::pg::gucs;
use crate::pg::lwlocks::{lwlock_section, with_lwlock};
use crate::pg::system_clock;
use crate::shmem::{self, SharedState};

/// The cluster's reservation as the protocol (`snowflake_id_core::protocol`) sees it: shared
/// memory, the WAL (`log_reservation`) and the file.
pub struct ClusterReservation<'a>(pub &'a SharedState);

/// Why a reservation was not written.
pub enum ReservationFailure {
    /// The file was found unusable at startup: no reservation is written until it is repaired.
    Broken,
    /// Writing the file failed.
    NotWritten(reservation_file::WriteError),
}

impl ReservationFailure {
    /// Raises it for a session (counting a failed write).
    pub fn raise(self, shared: &SharedState) -> ! {
        match self {
            ReservationFailure::Broken => reservation_broken(),
            ReservationFailure::NotWritten(error) => {
                ClusterReservation(shared).count_write_failure();
                errors::reservation_not_written(&in_data_dir(&error.path), &error.error).raise()
            }
        }
    }
}

impl protocol::DurableReservation for ClusterReservation<'_> {
    type Error = ReservationFailure;

    fn reserved_until(&self) -> i64 {
        self.0.reservation.until()
    }

    fn durable_floor(&self) -> i64 {
        self.0.reservation.durable_floor()
    }

    fn now(&self) -> i64 {
        self.0.read_clock().now_unix_us
    }

    fn writable(&self) -> Result<(), ReservationFailure> {
        match self.0.reservation.broken.load(Ordering::Relaxed) {
            true => Err(ReservationFailure::Broken),
            false => Ok(()),
        }
    }

    fn with_lock<T>(&mut self, wait: bool, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        let shared = self.0;
        lwlock_section(
            &shared.reservation.lock,
            pg_sys::LWLockMode::LW_EXCLUSIVE,
            wait,
            || f(self),
        )
    }

    /// The WAL first: a standby, a crash recovery and a restored backup learn the reservation
    /// from it; the file carries it past the next checkpoint.
    fn write(&mut self, until: i64) -> Result<(), ReservationFailure> {
        log_reservation(until);
        reservation_file::write(Path::new("."), until)
            .map(|()| {
                self.0
                    .reservation
                    .until_unix_us
                    .store(until, Ordering::Release);
                self.0
                    .counters
                    .reservation_writes
                    .fetch_add(1, Ordering::Relaxed);
            })
            .map_err(ReservationFailure::NotWritten)
    }

    fn raise_durable_floor(&mut self, floor: i64) {
        self.raise_floor(floor);
    }

    fn log_durable_floor(&mut self, floor: i64) {
        self.log_and_raise_durable_floor(floor);
    }
}

impl ClusterReservation<'_> {
    /// The reservation worker's turn (`reservation_worker.rs`): `protocol::renew_for_worker`,
    /// so sessions find the reservation renewed and none pays for the WAL flush and fsyncs
    /// itself, and a standby's last reservation is never older than an eighth of a window
    /// (design §5.2). It goes on for `snowflake_id.idle_renewal` after the last ID, so the first
    /// ID after a quiet spell finds the reservation renewed too; after that an idle server
    /// without standbys writes nothing.
    pub fn renew_for_sessions(&self, standby_streaming: impl FnOnce() -> bool) {
        // The cluster clock through the monotonic clock only: the worker neither starts the
        // clock nor reads the wall clock, whose steps the sessions observe and count.
        let Some(now) = self.0.clock.read_monotonic(system_clock::monotonic_us()) else {
            return;
        };
        let policy = renewal_policy();
        let written = protocol::renew_for_worker(
            &mut ClusterReservation(self.0),
            &policy,
            self.0.owned_high_water(),
            now,
            standby_streaming,
        );
        match written {
            Ok(true) => {
                self.0
                    .counters
                    .reservation_worker_writes
                    .fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) | Err(ReservationFailure::Broken) => {}
            Err(ReservationFailure::NotWritten(error)) => {
                self.count_write_failure();
                pgrx::warning!(
                    "snowflake_id: could not renew the reservation in \"{}\": {error}",
                    in_data_dir(&error.path)
                );
            }
        }
    }

    /// Counts a reservation write that failed (`snowflake_stats().reservation_write_failures`).
    pub fn count_write_failure(&self) {
        self.0
            .counters
            .reservation_write_failures
            .fetch_add(1, Ordering::Relaxed);
    }

    /// `snowflake_raise_floor`: logs `floor_unix_us` as a reservation (flushed), so standbys and
    /// restored backups learn it, then raises the durable floor to it.
    pub fn log_and_raise_durable_floor(&self, floor_unix_us: i64) {
        log_reservation(floor_unix_us);
        self.raise_floor(floor_unix_us);
    }

    /// Raises the durable floor to `floor_unix_us` (a replayed WAL record, a database's floor
    /// relation, `snowflake_raise_floor`): the cluster clock moves up to it, and the file keeps
    /// it past the next checkpoint. Called in the startup process during replay, and in backends.
    pub fn raise_floor(&self, floor_unix_us: i64) {
        if !self.raise_floor_and_clock(floor_unix_us) {
            return;
        }
        // A file found unusable at startup is left as it was (no ID is issued until the
        // operator repairs it).
        let published = self.0.reservation.until_unix_us.load(Ordering::Acquire);
        if !protocol::file_takes_raised_floor(floor_unix_us, published)
            || self.0.reservation.broken.load(Ordering::Relaxed)
        {
            return;
        }
        // Under the lock, so it cannot race a reservation being written.
        let written = self.with_reservation_lock(|| raise_file(floor_unix_us));
        if let Err(error) = written {
            self.count_write_failure();
            // Replay must go on; the WAL still holds the record until the next checkpoint.
            pgrx::warning!(
                "snowflake_id: could not write the raised floor to \"{}\": {error}",
                in_data_dir(&error.path)
            );
        }
    }

    /// Raises the durable floor, and the cluster clock with it, to `floor_unix_us` in shared
    /// memory; whether the floor rose.
    fn raise_floor_and_clock(&self, floor_unix_us: i64) -> bool {
        let previous = self
            .0
            .reservation
            .floor_unix_us
            .fetch_max(floor_unix_us, Ordering::AcqRel);
        if floor_unix_us <= previous {
            return false;
        }
        let (wall, monotonic) = system_clock::wall_and_monotonic_us();
        self.0.clock.raise_to(floor_unix_us, monotonic);
        // The wall clock is now behind the cluster clock by what the floor rose above it: an
        // operator's step (a raise, an accept, a restored or promoted floor), not the wall
        // clock stepping back, so it is known lag and no backward step is counted for it.
        self.0
            .counters
            .known_lag_us
            .fetch_max(floor_unix_us.saturating_sub(wall), Ordering::Relaxed);
        true
    }

    /// Before the first ID after standby mode or archive recovery (a promotion, a point-in-time
    /// restore): moves the durable floor and the clock the failover margin above the last
    /// reservation replayed, so that the IDs the old primary issued under reservations this
    /// server never received are below it, for a lag up to `snowflake_id.failover_lag` (design
    /// §5.2). Once per server start; sessions that come while it is applied wait for it.
    pub fn cover_failover_lag(&self) {
        let pending = &self.0.reservation.promotion_pending;
        if !pending.load(Ordering::Acquire) {
            return;
        }
        let written = self.with_reservation_lock(|| {
            if !pending.load(Ordering::Acquire) {
                return Ok(());
            }
            let replayed = self.0.reservation.floor_unix_us.load(Ordering::Acquire);
            let floor = protocol::floor_after_promotion(
                &renewal_policy(),
                promotion_leads(),
                replayed,
                self.0.read_clock().now_unix_us,
            );
            self.raise_floor_and_clock(floor);
            pending.store(false, Ordering::Release);
            raise_file(floor)
        });
        if let Err(error) = written {
            self.count_write_failure();
            errors::reservation_not_written(&in_data_dir(&error.path), &error.error).raise();
        }
    }

    /// Runs `f` holding the LWLock that serialises writing the reservation (WAL and file).
    fn with_reservation_lock<T>(&self, f: impl FnOnce() -> T) -> T {
        with_lwlock(
            &self.0.reservation.lock,
            pg_sys::LWLockMode::LW_EXCLUSIVE,
            f,
        )
    }
}

/// At a clean shutdown of the postmaster (every backend has exited; `hooks/shmem.rs` calls it
/// then only): replaces the reservation in the file with the end of the latest tick actually
/// used (the worker ids' floors and the durable floor), so a restart continues from there
/// instead of a whole `snowflake_id.reserve_ahead` ahead (docs/design.md §5.1). After a crash the
/// reservation stays, as the worker ids' floors may not be trustworthy.
pub fn write_floor_at_shutdown(shared: &SharedState) {
    if shared.reservation.broken.load(Ordering::Relaxed) {
        return;
    }
    let floor = protocol::floor_at_shutdown(
        shared.owned_high_water(),
        shared.reservation.durable_floor(),
    );
    if let Some(high_water) = floor {
        if let Err(error) = reservation_file::write(Path::new("."), high_water) {
            pgrx::warning!(
                "snowflake_id: could not write the floor at shutdown to \"{}\": {error}",
                in_data_dir(&error.path)
            );
        }
    }
}

/// The renewal marks of `snowflake_id.reserve_ahead`, and `snowflake_id.idle_renewal` (how long
/// the worker renews after the last ID, and the floor lead), as they are set now.
pub fn renewal_policy() -> RenewalPolicy {
    RenewalPolicy::new(i64::from(gucs::RESERVE_AHEAD_MS.get()) * 1_000)
        .renewing_while_idle_for(i64::from(gucs::IDLE_RENEWAL_MS.get()) * 1_000)
}

/// Under the reservation lock: the file rises to `floor_unix_us` (it never goes down).
fn raise_file(floor_unix_us: i64) -> Result<(), reservation_file::WriteError> {
    match reservation_file::read(Path::new(".")) {
        Ok(Some(file)) if file >= floor_unix_us => Ok(()),
        _ => reservation_file::write(Path::new("."), floor_unix_us),
    }
}

/// The coarsest time unit a sequence can have: the end of a tick issued at time t is at most
/// this (plus the lead) beyond t.
const COARSEST_TICK_US: i64 = 1_000_000;

/// A setting in milliseconds, in µs.
fn setting_us(setting: &pgrx::GucSetting<i32>) -> i64 {
    i64::from(setting.get()) * 1_000
}

/// What a promotion's floor depends on besides the policy, from the settings (µs).
fn promotion_leads() -> protocol::PromotionLeads {
    protocol::PromotionLeads {
        failover_lag: setting_us(&gucs::FAILOVER_LAG_MS),
        max_lead: setting_us(&gucs::MAX_LEAD_MS),
        coarsest_tick: COARSEST_TICK_US,
    }
}

/// The full path of `relative`, a path relative to the data directory (the working directory).
pub fn in_data_dir(relative: &Path) -> String {
    // SAFETY: DataDir is set before shared memory exists and never changes afterwards.
    let data_dir = unsafe { pg_sys::DataDir };
    // SAFETY: the data directory's path, NUL-terminated.
    let data_dir = unsafe { CStr::from_ptr(data_dir) };
    let data_dir = Path::new(std::ffi::OsStr::from_bytes(data_dir.to_bytes()));
    match relative.strip_prefix(".") {
        Ok(inside) if inside.as_os_str().is_empty() => data_dir.display().to_string(),
        Ok(inside) => data_dir.join(inside).display().to_string(),
        Err(_) => data_dir.join(relative).display().to_string(),
    }
}

fn reservation_broken() -> ! {
    let path = in_data_dir(Path::new(reservation_file::FILE_NAME));
    match reservation_file::read(Path::new(".")) {
        Err(why) => errors::reservation_unusable(&path, &why).raise(),
        Ok(_) => errors::reservation_was_unusable(&path).raise(),
    }
}

// The reservation in the WAL (design §5.2). Every extension of the reservation is logged and
// flushed before an ID under it leaves.

const RMGR_NAME: &CStr = c"snowflake_id";
/// The record's info bits (the high four bits of xl_info are the resource manager's).
const XLOG_SNOWFLAKE_RESERVE: u8 = 0x10;

/// The resource manager id the server runs with (`snowflake_id.wal_rmgr_id`, fixed at start).
fn rmgr_id() -> u8 {
    gucs::WAL_RMGR_ID.get().clamp(
        pg_sys::RM_MIN_CUSTOM_ID as i32,
        pg_sys::RM_MAX_CUSTOM_ID as i32,
    ) as u8
}

/// Registers the WAL resource manager; called from `_PG_init` while shared_preload_libraries is
/// processed (the only time PostgreSQL allows it). A clash with another extension's id stops the
/// server with PostgreSQL's own message naming both; `snowflake_id.wal_rmgr_id` moves ours.
pub fn register_wal_resource_manager() {
    let mut rmgr = pg_sys::RmgrData {
        rm_name: RMGR_NAME.as_ptr(),
        rm_redo: Some(redo),
        rm_desc: Some(describe),
        rm_identify: Some(identify),
        ..Default::default()
    };
    // SAFETY: called in the postmaster during shared_preload_libraries; PostgreSQL copies the
    // struct into its table, and the name it points to is a static string. (A raw pointer:
    // PostgreSQL 16 on takes `const RmgrData *`, earlier majors `RmgrData *`.)
    unsafe { pg_sys::RegisterCustomRmgr(rmgr_id(), &raw mut rmgr) };
}

/// Logs a reservation up to `until_unix_us` and waits until the record is flushed, so no ID
/// under it can leave before the WAL holds it.
fn log_reservation(until_unix_us: i64) {
    let mut payload = until_unix_us.to_le_bytes();

    // Called outside recovery, where inserting WAL is allowed: by sessions issuing IDs
    // (`take_worker_id` refuses during recovery), by the reservation worker (started once
    // recovery has finished) and by `snowflake_raise_floor` / `snowflake_accept_floor` (which
    // refuse during recovery). An ERROR inside unwinds through pgrx's guard.
    // SAFETY: begins a record outside recovery (see above).
    unsafe { pg_sys::XLogBeginInsert() };
    // SAFETY: 8 bytes of main data that live until XLogInsert returns (it copies them).
    // `as _`: the length is `int` up to PostgreSQL 15 and `uint32` from 16 on; 8 fits both.
    unsafe { pg_sys::XLogRegisterData(payload.as_mut_ptr().cast(), payload.len() as _) };
    // SAFETY: inserts the record begun above, of our resource manager.
    let lsn = unsafe { pg_sys::XLogInsert(rmgr_id(), XLOG_SNOWFLAKE_RESERVE) };
    // SAFETY: flushes WAL up to a position just inserted, outside a critical section.
    unsafe { pg_sys::XLogFlush(lsn) };
}

/// The reserved time a record carries, if it is ours and well-formed.
///
/// SAFETY: `record` is the record being replayed or described, as PostgreSQL passes it.
unsafe fn record_reserved_until(record: *mut pg_sys::XLogReaderState) -> Option<i64> {
    // SAFETY: PostgreSQL hands a valid reader state.
    let decoded = unsafe { (*record).record };
    // SAFETY: its decoded record (null or valid), whose main data pointer and length agree.
    let decoded = unsafe { decoded.as_ref() }?;
    if decoded.header.xl_info & !(pg_sys::XLR_INFO_MASK as u8) != XLOG_SNOWFLAKE_RESERVE
        || decoded.main_data_len as usize != std::mem::size_of::<i64>()
    {
        return None;
    }
    // SAFETY: main_data holds main_data_len (= 8) readable bytes, maybe unaligned.
    let bytes = unsafe { std::ptr::read_unaligned(decoded.main_data.cast::<[u8; 8]>()) };
    Some(i64::from_le_bytes(bytes))
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL calls redo with the record being replayed.
    match unsafe { record_reserved_until(record) } {
        Some(until) => ClusterReservation(shmem::state()).raise_floor(until),
        None => errors::internal(format!(
            "snowflake_id: unknown WAL record in resource manager {}",
            rmgr_id()
        ))
        .raise(),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn describe(
    buf: pg_sys::StringInfo,
    record: *mut pg_sys::XLogReaderState,
) {
    // SAFETY: PostgreSQL calls rm_desc with a valid buffer and record.
    if let Some(until) = unsafe { record_reserved_until(record) } {
        let text = std::ffi::CString::new(format!("reserved until {until} µs since 1970"))
            .unwrap_or_default();
        // SAFETY: appends a NUL-terminated string to PostgreSQL's buffer.
        unsafe { pg_sys::appendStringInfoString(buf, text.as_ptr()) };
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
    if info & !(pg_sys::XLR_INFO_MASK as u8) == XLOG_SNOWFLAKE_RESERVE {
        c"RESERVE".as_ptr()
    } else {
        std::ptr::null()
    }
}
