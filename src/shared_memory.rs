//! The shared-memory segment: cluster clock, reservation state, counters and the table of
//! worker ids (docs/design.md §3–§5).

use std::mem::size_of;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, Ordering};

use once_cell::sync::OnceCell;
use pgrx::prelude::*;

use snowflake_id_core::cluster_clock::{ClusterClock, Jump, JumpPolicy, Reading};
use snowflake_id_core::reservation;
use snowflake_id_core::worker_ids::{Spaces, WorkerId};

use crate::errors;
use crate::gucs;
use crate::wal;

/// A wall clock whose lag behind the cluster clock grows by more than this counts as a backward
/// step. Smaller changes are read jitter or a backend paused between its two clock reads; NTP
/// slews offsets below 128 ms instead of stepping.
const BACKWARD_STEP_THRESHOLD_US: i64 = 100_000;

/// Rarely written counters for `snowflake_stats()` (on their own cache line).
#[repr(C, align(64))]
#[derive(Default)]
pub struct Counters {
    pub backward_steps: AtomicU64,
    pub largest_backward_step_us: AtomicI64,
    /// The wall clock's lag at the last counted change, so one step is counted once.
    known_lag_us: AtomicI64,
    pub borrowed_ticks: AtomicU64,
    pub throttle_sleeps: AtomicU64,
    pub reservation_writes: AtomicU64,
    pub forward_jumps_followed: AtomicU64,
    pub forward_jumps_ignored: AtomicU64,
    /// Ticks a session found owned by another session sharing its worker id.
    pub tick_conflicts: AtomicU64,
}

/// The durable high-water mark (docs/design.md §5), read on every new tick, written about once per
/// `snowflake.reserve_ahead`.
#[repr(C, align(64))]
pub struct Reservation {
    /// No ID's tick may end after this; i64::MIN forces every new tick to the slow path.
    pub until_unix_us: AtomicI64,
    /// The durable floor this server learned from outside: the file at start, WAL replay, and
    /// the data (docs/design.md §5). No ID issued before has a tick ending after it.
    pub floor_unix_us: AtomicI64,
    /// The file was unreadable or corrupt at startup: no ID may be issued.
    pub broken: AtomicBool,
    /// There was no reservation file at startup (a new cluster, or a lost file): the databases'
    /// floor relations are all this server knows of IDs issued before (design §5.3).
    started_without_file: AtomicBool,
    /// The server started as a standby or in archive recovery (a PITR restore): before its
    /// first ID it moves its floor above the last reservation it replayed (design §5.2).
    promotion_pending: AtomicBool,
    /// Serialises extending the file (an LWLock from our named tranche).
    lock: AtomicPtr<pg_sys::LWLock>,
}

/// Header of the segment; the table of worker ids (`spaces.table_len()` of them) follows
/// it directly. Each part is cache-line aligned so the hot, read-mostly lines are not written
/// by the rare updates of others.
#[repr(C, align(64))]
pub struct SharedState {
    pub clock: ClusterClock,
    pub reservation: Reservation,
    pub counters: Counters,
    pub spaces: Spaces,
}

const SEGMENT_NAME: &std::ffi::CStr = c"snowflake_id";
/// PostgreSQL's `AddinShmemInitLock`, a C macro for `&MainLWLockArray[21].lock`
/// (storage/lwlocklist.h: the same index in 15 to 18), which pgrx cannot bind.
const ADDIN_SHMEM_INIT_LOCK: usize = 21;
const ALIGNMENT: usize = 64;

/// Set in the postmaster by the startup hook; backends inherit it through fork.
static SHARED: AtomicPtr<SharedState> = AtomicPtr::new(std::ptr::null_mut());

type Hook = Option<unsafe extern "C-unwind" fn()>;
static PREVIOUS_REQUEST_HOOK: OnceCell<Hook> = OnceCell::new();
static PREVIOUS_STARTUP_HOOK: OnceCell<Hook> = OnceCell::new();

impl SharedState {
    /// Every worker id, of every space.
    pub fn worker_ids(&self) -> &[WorkerId] {
        // SAFETY: init_shared_memory placed `spaces.table_len()` initialised worker ids right
        // after this header (which is 64-aligned and a multiple of 64 long), and the segment
        // lives as long as the process.
        unsafe {
            let first = (self as *const SharedState).add(1).cast::<WorkerId>();
            std::slice::from_raw_parts(first, self.spaces.table_len())
        }
    }

    /// The worker ids of one space (`Spaces::space_of`).
    pub fn space(&self, space: usize) -> &[WorkerId] {
        &self.worker_ids()[self.spaces.range(space)]
    }

    /// The cluster's time; notes backward steps and decided forward jumps of the wall clock.
    pub fn read_clock(&self) -> Reading {
        let (wall, monotonic) = system_clocks_us();
        let policy = JumpPolicy {
            max_jump_us: i64::from(gucs::MAX_CLOCK_JUMP_MS.get()) * 1_000,
            confirm_us: i64::from(gucs::CLOCK_JUMP_CONFIRM_MS.get()) * 1_000,
        };
        let reading = self.clock.read(wall, monotonic, policy);
        let counters = &self.counters;
        match reading.jump {
            Some(Jump::Followed) => counters
                .forward_jumps_followed
                .fetch_add(1, Ordering::Relaxed),
            Some(Jump::Ignored) => counters
                .forward_jumps_ignored
                .fetch_add(1, Ordering::Relaxed),
            None => 0,
        };
        let known_lag = counters.known_lag_us.load(Ordering::Relaxed);
        if (reading.wall_behind_us - known_lag).abs() > BACKWARD_STEP_THRESHOLD_US {
            // Rare path: confirm with a second reading, so a stale wall read (this backend was
            // paused between its two clock reads, or raced a forward step) is not counted.
            let (wall, monotonic) = system_clocks_us();
            let lag = self.clock.read(wall, monotonic, policy).wall_behind_us;
            if (lag - known_lag).abs() > BACKWARD_STEP_THRESHOLD_US
                && counters
                    .known_lag_us
                    .compare_exchange(known_lag, lag, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                && lag > known_lag
            {
                counters.backward_steps.fetch_add(1, Ordering::Relaxed);
                counters
                    .largest_backward_step_us
                    .fetch_max(lag - known_lag, Ordering::Relaxed);
            }
        }
        reading
    }

    /// The cluster's time from CLOCK_MONOTONIC alone: the hot path within a tick whose wall
    /// clock was already checked with `read_clock`.
    pub fn read_clock_monotonic(&self) -> i64 {
        let monotonic = read_system_clock(libc::CLOCK_MONOTONIC);
        self.clock
            .read_monotonic(monotonic)
            .unwrap_or_else(|| self.read_clock().now_unix_us)
    }

    /// Makes sure the reservation covers `end_unix_us` (the end of a tick about to be used) with
    /// room to spare, renewing it (WAL record, flush, file) ahead of need. Raises when the file
    /// cannot be written or was found broken at startup.
    pub fn ensure_reserved(&self, end_unix_us: i64) {
        let reservation = &self.reservation;
        let ahead_us = i64::from(gucs::RESERVE_AHEAD_MS.get()) * 1_000;
        let left = |until: i64| until.saturating_sub(end_unix_us);
        // Three marks (design §5.1). With less than three quarters of the window left, the
        // reservation worker renews it. A backend that finds less than five eighths left (the
        // worker is late) tries the lock without waiting and renews it itself, while the others
        // go on under the current one. With less than half left, a backend waits for the
        // renewal: the latest record a standby has then always covers half a window beyond the
        // IDs issued, the asynchronous replication lag covered (§5.2). Under steady load no
        // session reaches the last two.
        let renew_below = session_renew_mark(ahead_us);
        let wait_below = ahead_us / 2;
        let until = reservation.until_unix_us.load(Ordering::Acquire);
        if left(until) >= renew_below {
            return;
        }
        if reservation.broken.load(Ordering::Relaxed) {
            reservation_broken();
        }
        let result = if left(until) < wait_below {
            Some(self.with_reservation_lock(|| {
                self.renew(end_unix_us, wait_below, self.read_clock().now_unix_us)
            }))
        } else {
            self.try_with_reservation_lock(|| {
                self.renew(end_unix_us, renew_below, self.read_clock().now_unix_us)
            })
        };
        if let Some(Err(error)) = result {
            errors::reservation_not_written(&in_data_dir(&error.path), &error.error).raise();
        }
    }

    /// The reservation worker's turn (`reservation_worker.rs`): when IDs were issued lately (or
    /// a standby is streaming) and less than three quarters of a window is left beyond them and
    /// the clock, it renews the reservation, so sessions find it renewed and none pays for the
    /// WAL flush and fsyncs itself, and a standby's last reservation is never older than a
    /// quarter window (design §5.2). An idle server without standbys writes nothing.
    pub fn renew_for_sessions(&self, standby_streaming: impl FnOnce() -> bool) {
        let ahead_us = i64::from(gucs::RESERVE_AHEAD_MS.get()) * 1_000;
        let issued = self.owned_high_water();
        // The cluster clock through the monotonic clock only: the worker neither starts the
        // clock nor reads the wall clock, whose steps the sessions observe and count.
        let Some(now) = self
            .clock
            .read_monotonic(read_system_clock(libc::CLOCK_MONOTONIC))
        else {
            return;
        };
        if self.reservation.broken.load(Ordering::Relaxed)
            || (issued < now.saturating_sub(ahead_us) && !standby_streaming())
        {
            return;
        }
        let horizon = issued.max(now);
        let until = self.reservation.until_unix_us.load(Ordering::Acquire);
        if until.saturating_sub(horizon) >= renew_mark(ahead_us) {
            return;
        }
        let written =
            self.try_with_reservation_lock(|| self.renew(horizon, renew_mark(ahead_us), now));
        if let Some(Err(error)) = written {
            pgrx::warning!(
                "snowflake_id: could not renew the reservation in \"{}\": {error}",
                in_data_dir(&error.path)
            );
        }
    }

    /// Under the reservation lock: renews the reservation beyond `end_unix_us` (and the cluster
    /// clock's `now_unix_us`) unless it already reaches `enough` past it (another process
    /// renewed it meanwhile).
    fn renew(
        &self,
        end_unix_us: i64,
        enough: i64,
        now_unix_us: i64,
    ) -> Result<(), reservation::WriteError> {
        let reservation = &self.reservation;
        // Saturating: `until` starts at i64::MIN (nothing reserved yet).
        let until = reservation.until_unix_us.load(Ordering::Acquire);
        if until.saturating_sub(end_unix_us) >= enough {
            return Ok(());
        }
        let ahead_us = i64::from(gucs::RESERVE_AHEAD_MS.get()) * 1_000;
        // At least the durable floor too, so the file never goes below it.
        let until = end_unix_us
            .max(now_unix_us)
            .max(reservation.floor_unix_us.load(Ordering::Acquire))
            .saturating_add(ahead_us);
        // The WAL first: a standby, a crash recovery and a restored backup learn the
        // reservation from it; the file carries it past the next checkpoint.
        wal::log_reservation(until);
        reservation::write(Path::new("."), until).map(|()| {
            reservation.until_unix_us.store(until, Ordering::Release);
            self.counters
                .reservation_writes
                .fetch_add(1, Ordering::Relaxed);
        })
    }

    /// The published reservation (i64::MIN before the first): no ID's tick ends after it.
    pub fn reserved_until(&self) -> i64 {
        self.reservation.until_unix_us.load(Ordering::Acquire)
    }

    /// Whether the server started without a reservation file (design §5.3).
    pub fn started_without_reservation(&self) -> bool {
        self.reservation
            .started_without_file
            .load(Ordering::Relaxed)
    }

    /// The durable floor: no ID issued before (here, or where the WAL or the database came
    /// from) has a tick ending after it.
    pub fn durable_floor(&self) -> i64 {
        self.reservation.floor_unix_us.load(Ordering::Acquire)
    }

    /// `snowflake_raise_floor`: logs `floor_unix_us` as a reservation (flushed), so standbys and
    /// restored backups learn it, then raises the durable floor to it.
    pub fn log_and_raise_durable_floor(&self, floor_unix_us: i64) {
        wal::log_reservation(floor_unix_us);
        self.raise_durable_floor(floor_unix_us);
    }

    /// Raises the durable floor to `floor_unix_us` (a replayed WAL record, a database's floor
    /// relation, `snowflake_raise_floor`): the cluster clock moves up to it, and the file keeps
    /// it past the next checkpoint. Called in the startup process during replay, and in backends.
    pub fn raise_durable_floor(&self, floor_unix_us: i64) {
        if !self.raise_floor_and_clock(floor_unix_us) {
            return;
        }
        // The published reservation is already in the file (it is published only once written):
        // a floor at or below it is durable as it is. A database's floor relation holds what
        // this server reserved, so a session's first ID writes nothing. A file found unusable
        // at startup is left as it was (no ID is issued until the operator repairs it).
        if floor_unix_us <= self.reservation.until_unix_us.load(Ordering::Acquire)
            || self.reservation.broken.load(Ordering::Relaxed)
        {
            return;
        }
        // Under the lock, so it cannot race a reservation being written.
        let written = self.with_reservation_lock(|| raise_file(floor_unix_us));
        if let Err(error) = written {
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
            .reservation
            .floor_unix_us
            .fetch_max(floor_unix_us, Ordering::AcqRel);
        if floor_unix_us <= previous {
            return false;
        }
        let (_, monotonic) = system_clocks_us();
        self.clock.raise_to(floor_unix_us, monotonic);
        true
    }

    /// Before the first ID after standby mode or archive recovery (a promotion, a point-in-time
    /// restore): moves the durable floor and the clock the failover margin above the last
    /// reservation replayed, so that the IDs the old primary issued under reservations this
    /// server never received are below it, for a lag up to `snowflake.failover_lag` (design
    /// §5.2). Once per server start; sessions that come while it is applied wait for it.
    pub fn cover_failover_lag(&self) {
        let pending = &self.reservation.promotion_pending;
        if !pending.load(Ordering::Acquire) {
            return;
        }
        let written = self.with_reservation_lock(|| {
            if !pending.load(Ordering::Acquire) {
                return Ok(());
            }
            let replayed = self.reservation.floor_unix_us.load(Ordering::Acquire);
            let mut written = Ok(());
            if replayed != i64::MIN {
                let floor = replayed.saturating_add(failover_margin_us());
                self.raise_floor_and_clock(floor);
                written = raise_file(floor);
            }
            pending.store(false, Ordering::Release);
            written
        });
        if let Err(error) = written {
            errors::reservation_not_written(&in_data_dir(&error.path), &error.error).raise();
        }
    }

    /// Runs `f` holding the LWLock that serialises writing the reservation (WAL and file).
    fn with_reservation_lock<T>(&self, f: impl FnOnce() -> T) -> T {
        let lock = self.reservation.lock.load(Ordering::Relaxed);
        // SAFETY: `lock` is our tranche's LWLock in shared memory, set at startup. If `f` raises
        // an ERROR (a WAL insert can), PostgreSQL's error recovery releases every LWLock held.
        unsafe { pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
        let result = f();
        // SAFETY: we acquired this lock above.
        unsafe { pg_sys::LWLockRelease(lock) };
        result
    }

    /// [`Self::with_reservation_lock`] without waiting: `None` when another backend holds it.
    fn try_with_reservation_lock<T>(&self, f: impl FnOnce() -> T) -> Option<T> {
        let lock = self.reservation.lock.load(Ordering::Relaxed);
        // SAFETY: as in with_reservation_lock; a conditional acquire never sleeps.
        let acquired =
            unsafe { pg_sys::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
        if !acquired {
            return None;
        }
        let result = f();
        // SAFETY: we acquired this lock above.
        unsafe { pg_sys::LWLockRelease(lock) };
        Some(result)
    }

    /// The end of the latest tick any ID used, as far as this server knows: its durable floor
    /// and every worker id's floors (valid while no backend issues IDs).
    fn issued_high_water(&self) -> i64 {
        self.owned_high_water()
            .max(self.reservation.floor_unix_us.load(Ordering::Acquire))
    }

    /// The end of the latest tick any session owns on any worker id (0 if none).
    fn owned_high_water(&self) -> i64 {
        self.worker_ids()
            .iter()
            .map(WorkerId::highest_floor)
            .max()
            .unwrap_or(0)
    }
}

/// The shared state, or the "add shared_preload_libraries" error.
pub fn state() -> &'static SharedState {
    try_state().unwrap_or_else(|| errors::not_preloaded().raise())
}

/// Raises "add shared_preload_libraries" (55000) unless the library was preloaded: for the
/// functions that need the preloaded library but not the segment itself.
pub fn require_preloaded() {
    state();
}

pub fn try_state() -> Option<&'static SharedState> {
    let pointer = SHARED.load(Ordering::Acquire);
    // SAFETY: non-null only after init_shared_memory initialised the segment, which is never
    // unmapped while this process runs.
    unsafe { pointer.as_ref() }
}

/// How much of a `reserve_ahead` window must be left beyond the IDs before the reservation
/// worker renews the reservation: three quarters.
fn renew_mark(ahead_us: i64) -> i64 {
    ahead_us - ahead_us / 4
}

/// Below this much left, a session renews without waiting, as the worker is late: five eighths,
/// an eighth of a window (a worker's two periods) after the worker's mark.
fn session_renew_mark(ahead_us: i64) -> i64 {
    ahead_us - ahead_us * 3 / 8
}

/// Under the reservation lock: the file rises to `floor_unix_us` (it never goes down).
fn raise_file(floor_unix_us: i64) -> Result<(), reservation::WriteError> {
    match reservation::read(Path::new(".")) {
        Ok(Some(file)) if file >= floor_unix_us => Ok(()),
        _ => reservation::write(Path::new("."), floor_unix_us),
    }
}

/// The coarsest time unit a sequence can have: the end of a tick issued at time t is at most
/// this (plus the lead) beyond t.
const COARSEST_TICK_US: i64 = 1_000_000;

/// How far above the last replayed reservation a promoted standby starts (design §5.2): the
/// last record it has was written at most `failover_lag` + half a window before the failure,
/// and reserved a whole window beyond the clock then; the IDs issued until the failure end at
/// most `max_lead` and a tick beyond the clock.
fn failover_margin_us() -> i64 {
    let ms = |setting: &pgrx::GucSetting<i32>| i64::from(setting.get()) * 1_000;
    (ms(&gucs::FAILOVER_LAG_MS) + ms(&gucs::MAX_LEAD_MS) + COARSEST_TICK_US
        - ms(&gucs::RESERVE_AHEAD_MS) / 2)
        .max(0)
}

/// Longest gap between the two monotonic reads around a wall-clock read that still counts the
/// three as one instant.
const SIMULTANEOUS_US: i64 = 20;

/// Reads CLOCK_REALTIME and CLOCK_MONOTONIC (system-wide, so comparable across backends) as one
/// instant: the wall clock between two monotonic reads, retried a few times when the process
/// was preempted in between. The cluster clock keeps the wall clock's offset to the monotonic
/// clock, and a preemption between the reads would make that offset wrong by its length.
pub fn system_clocks_us() -> (i64, i64) {
    let mut best = (0, 0, i64::MAX);
    for _ in 0..4 {
        let before = read_system_clock(libc::CLOCK_MONOTONIC);
        let wall = read_system_clock(libc::CLOCK_REALTIME);
        let after = read_system_clock(libc::CLOCK_MONOTONIC);
        let gap = after - before;
        if gap < best.2 {
            best = (wall, before + gap / 2, gap);
        }
        if gap <= SIMULTANEOUS_US {
            break;
        }
    }
    (best.0, best.1)
}

fn read_system_clock(clock: libc::clockid_t) -> i64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec and the callers' clock ids exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut now) };
    now.tv_sec * 1_000_000 + now.tv_nsec / 1_000
}

/// The reservation file's full path, for messages.
fn reservation_path() -> String {
    in_data_dir(Path::new(reservation::FILE_NAME))
}

/// The full path of `relative`, a path relative to the data directory (the working directory).
fn in_data_dir(relative: &Path) -> String {
    // SAFETY: DataDir is set before shared memory exists and never changes afterwards.
    let data_dir = unsafe { std::ffi::CStr::from_ptr(pg_sys::DataDir) };
    let data_dir = Path::new(std::ffi::OsStr::from_bytes(data_dir.to_bytes()));
    match relative.strip_prefix(".") {
        Ok(inside) if inside.as_os_str().is_empty() => data_dir.display().to_string(),
        Ok(inside) => data_dir.join(inside).display().to_string(),
        Err(_) => data_dir.join(relative).display().to_string(),
    }
}

fn reservation_broken() -> ! {
    let path = reservation_path();
    match reservation::read(Path::new(".")) {
        Err(why) => errors::reservation_unusable(&path, &why).raise(),
        Ok(_) => errors::reservation_was_unusable(&path).raise(),
    }
}

/// The worker spaces `snowflake.max_workers` gives.
fn spaces() -> Spaces {
    Spaces::new(gucs::MAX_WORKERS.get().clamp(1, gucs::MAX_WORKERS_LIMIT) as usize)
}

fn segment_size() -> usize {
    // Slack so the header can be moved up to a 64-byte boundary (ShmemInitStruct only
    // guarantees MAXALIGN).
    ALIGNMENT + size_of::<SharedState>() + spaces().table_len() * size_of::<WorkerId>()
}

/// Chains our request and startup hooks in front of any previous ones. Called from _PG_init
/// while shared_preload_libraries is processed.
pub fn install_hooks() {
    // SAFETY: _PG_init runs single-threaded in the postmaster before shared memory exists;
    // reading and replacing the hook globals is what PostgreSQL expects a library to do there.
    unsafe {
        PREVIOUS_REQUEST_HOOK.get_or_init(|| pg_sys::shmem_request_hook);
        pg_sys::shmem_request_hook = Some(request_shared_memory);
        PREVIOUS_STARTUP_HOOK.get_or_init(|| pg_sys::shmem_startup_hook);
        pg_sys::shmem_startup_hook = Some(init_shared_memory);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn request_shared_memory() {
    // SAFETY: called by PostgreSQL in shmem_request_hook, where chaining the previous hook,
    // RequestAddinShmemSpace and RequestNamedLWLockTranche are allowed.
    unsafe {
        if let Some(previous) = PREVIOUS_REQUEST_HOOK.get().copied().flatten() {
            previous();
        }
        pg_sys::RequestAddinShmemSpace(segment_size());
        pg_sys::RequestNamedLWLockTranche(SEGMENT_NAME.as_ptr(), 1);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn init_shared_memory() {
    // SAFETY: called by PostgreSQL in shmem_startup_hook (postmaster start and every crash
    // restart), with the data directory as working directory. AddinShmemInitLock
    // (MainLWLockArray[21]) serialises segment creation; the segment is `segment_size()` bytes
    // as requested, so the aligned header plus the worker ids fit.
    unsafe {
        if let Some(previous) = PREVIOUS_STARTUP_HOOK.get().copied().flatten() {
            previous();
        }
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(ADDIN_SHMEM_INIT_LOCK)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let raw = pg_sys::ShmemInitStruct(SEGMENT_NAME.as_ptr(), segment_size(), &mut found);
        let header = raw
            .cast::<u8>()
            .add(raw.cast::<u8>().align_offset(ALIGNMENT))
            .cast::<SharedState>();
        if !found {
            let spaces = spaces();
            let lock = &raw mut (*pg_sys::GetNamedLWLockTranche(SEGMENT_NAME.as_ptr())).lock;
            // A restart (clean or after a crash) continues after the persisted reservation,
            // whatever the wall clock says now (docs/design.md §5).
            let (floor, broken) = match reservation::read(Path::new(".")) {
                Ok(Some(until)) => (until, false),
                Ok(None) => (i64::MIN, false),
                Err(error) => {
                    pgrx::warning!(
                        "snowflake_id: the reservation file is unusable ({error}); IDs are refused"
                    );
                    (i64::MIN, true)
                }
            };
            header.write(SharedState {
                clock: ClusterClock::new(),
                reservation: Reservation {
                    until_unix_us: AtomicI64::new(i64::MIN),
                    floor_unix_us: AtomicI64::new(floor),
                    broken: AtomicBool::new(broken),
                    started_without_file: AtomicBool::new(floor == i64::MIN && !broken),
                    // The signal files of standby mode and targeted recovery (the data
                    // directory is the working directory).
                    promotion_pending: AtomicBool::new(
                        Path::new("standby.signal").exists()
                            || Path::new("recovery.signal").exists(),
                    ),
                    lock: AtomicPtr::new(lock),
                },
                counters: Counters::default(),
                spaces,
            });
            let first_id = header.add(1).cast::<WorkerId>();
            for index in 0..spaces.table_len() {
                first_id.add(index).write(WorkerId::new());
            }
            let (wall, monotonic) = system_clocks_us();
            (*header).clock.start(wall, monotonic, floor);
            // Starting after the reservation is not a clock step: count only later changes.
            let lag = (*header)
                .clock
                .read(wall, monotonic, JumpPolicy::TRUST_ALL)
                .wall_behind_us;
            (*header)
                .counters
                .known_lag_us
                .store(lag, Ordering::Relaxed);
            pg_sys::on_shmem_exit(Some(write_floor_at_exit), pg_sys::Datum::from(0));
        }
        pg_sys::LWLockRelease(init_lock);
        SHARED.store(header, Ordering::Release);
    }
}

/// At a clean shutdown of the postmaster (every backend has exited), replaces the reservation
/// in the file with the end of the latest tick actually used, so a restart continues from
/// there instead of a whole `snowflake.reserve_ahead` ahead (docs/design.md §5.1). After a crash
/// (any other exit code) the reservation stays, as the worker ids' floors may not be
/// trustworthy.
#[pg_guard]
unsafe extern "C-unwind" fn write_floor_at_exit(code: std::ffi::c_int, _arg: pg_sys::Datum) {
    let Some(shared) = try_state() else { return };
    if code != 0 || shared.reservation.broken.load(Ordering::Relaxed) {
        return;
    }
    let high_water = shared.issued_high_water();
    if high_water > 0 {
        if let Err(error) = reservation::write(Path::new("."), high_water) {
            pgrx::warning!(
                "snowflake_id: could not write the floor at shutdown to \"{}\": {error}",
                in_data_dir(&error.path)
            );
        }
    }
}
