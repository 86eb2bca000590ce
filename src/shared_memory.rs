//! The shared-memory segment and its lifecycle (docs/design.md §3–§6): its layout (the cluster
//! clock, the reservation state, counters, the latest floor writes, the extension directory,
//! the table of worker ids),
//! requesting and creating it in the postmaster, finding it from a backend, and the callback at
//! a clean shutdown. What is done with each part lives with that part: `cluster_time.rs` reads
//! the clock, `reservation.rs` renews the reservation and raises the floor,
//! `database_floor.rs` writes the floor relations, `backend.rs` takes worker ids.

use std::cell::UnsafeCell;
use std::mem::size_of;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use once_cell::sync::OnceCell;
use pgrx::prelude::*;

use snowflake_id_core::cluster_clock::{ClusterClock, JumpPolicy};
use snowflake_id_core::directory_trust::DirectoryTrust;
use snowflake_id_core::layout::Layout;
use snowflake_id_core::protocol;
use snowflake_id_core::reservation_file;
use snowflake_id_core::worker_ids::{Spaces, WorkerId};

use crate::catalog::{CatalogTable, RowVersion, MAX_NAME_BYTES};
use crate::errors;
use crate::gucs;
use crate::system_clock;

/// Rarely written counters for `snowflake_stats()` (on their own cache line).
#[repr(C, align(64))]
#[derive(Default)]
pub struct Counters {
    pub backward_steps: AtomicU64,
    pub largest_backward_step_us: AtomicI64,
    /// The wall clock's lag at the last counted change, so one step is counted once.
    pub known_lag_us: AtomicI64,
    pub borrowed_ticks: AtomicU64,
    pub throttle_sleeps: AtomicU64,
    pub reservation_writes: AtomicU64,
    /// Renewals the reservation worker made (the rest were made by sessions: the worker was
    /// late, stopped, or IDs came after an idle time).
    pub reservation_worker_writes: AtomicU64,
    /// Reservation writes that failed (WAL flush or file), by the worker or a session.
    pub reservation_write_failures: AtomicU64,
    /// IDs of earlier claims of worker ids (`worker_ids::ids_issued_since_start`).
    pub ids_issued_retired: AtomicU64,
    /// The highest count of IDs issued reported so far, so that reports never fall.
    pub ids_issued_reported: AtomicU64,
    pub forward_jumps_followed: AtomicU64,
    pub forward_jumps_ignored: AtomicU64,
    /// Ticks a session found owned by another session sharing its worker id.
    pub tick_conflicts: AtomicU64,
    /// Completed `snowflake_raise_floor` calls: an operator's step, apart from clock faults.
    pub floor_raises: AtomicU64,
    /// Completed `snowflake_accept_floor` calls, likewise.
    pub floor_accepts: AtomicU64,
}

/// The published reservation (docs/design.md §5, "Names"): the durable reservation as this
/// server's sessions read it, on every new tick, published only once the file and the WAL hold
/// it; written about once per eighth of `snowflake_id.reserve_ahead`.
#[repr(C, align(64))]
pub struct PublishedReservation {
    /// No ID's tick may end after this; i64::MIN forces every new tick to the slow path.
    pub until_unix_us: AtomicI64,
    /// The durable floor this server learned from outside: the file at start, WAL replay, and
    /// the data (docs/design.md §5). No ID issued before has a tick ending after it.
    pub floor_unix_us: AtomicI64,
    /// The file was unreadable or corrupt at startup: no ID may be issued.
    pub broken: AtomicBool,
    /// There was no reservation file at startup (a new cluster, or a lost file): the databases'
    /// floor relations are all this server knows of IDs issued before (design §5.3).
    pub started_without_file: AtomicBool,
    /// The server started as a standby or in archive recovery (a PITR restore): before its
    /// first ID it moves its floor above the last reservation it replayed (design §5.2).
    pub promotion_pending: AtomicBool,
    /// Serialises extending the file (an LWLock from our named tranche).
    pub lock: AtomicPtr<pg_sys::LWLock>,
}

/// How many floor relations' latest writes are kept: one slot per database, found by probing
/// from a hash of the database and relation. When every slot a key may use holds another
/// relation, the one written longest ago is forgotten: its next write by this server then reads
/// as a change from elsewhere, which moves the cluster clock up to that value (at most
/// `reserve_ahead` ahead), once.
pub const FLOOR_WRITE_SLOTS: usize = 1024;

/// The latest writes of the databases' floor relations made by this server (design §5.3):
/// `lock` serialises them, so the relation only rises, and a backend that reads a value written
/// a moment ago, whose WAL is not flushed yet, finds the write before it, which usually is.
#[repr(C, align(64))]
pub struct FloorWrites {
    /// Held exclusively around a write and its slot's update, shared to read a slot.
    pub lock: AtomicPtr<pg_sys::LWLock>,
    pub slots: [FloorWriteSlot; FLOOR_WRITE_SLOTS],
}

/// One floor relation's two latest writes by this server; read and written under
/// `FloorWrites::lock`. A value of i64::MIN means no write.
#[repr(C)]
pub struct FloorWriteSlot {
    pub database: AtomicU32,
    pub relation: AtomicU32,
    pub newest_value: AtomicI64,
    /// The end of the WAL record of the newest write.
    pub newest_lsn: AtomicU64,
    pub previous_value: AtomicI64,
    pub previous_lsn: AtomicU64,
}

impl FloorWriteSlot {
    fn empty() -> FloorWriteSlot {
        FloorWriteSlot {
            database: AtomicU32::new(0),
            relation: AtomicU32::new(0),
            newest_value: AtomicI64::new(i64::MIN),
            newest_lsn: AtomicU64::new(0),
            previous_value: AtomicI64::new(i64::MIN),
            previous_lsn: AtomicU64::new(0),
        }
    }
}

/// How many databases the extension directory keeps (`extension_directory.rs`), an entry each;
/// a database beyond them takes the entry of another (whose next new connection looks its
/// extension up again).
pub const DIRECTORY_DATABASES: usize = 64;
/// How many sequences' layouts a directory entry keeps; the first IDs of further sequences look
/// their layouts up in the catalog table.
pub const DIRECTORY_LAYOUTS: usize = 16;
/// How many transactions that wrote the extension's state the directory follows at once
/// (committing, or prepared, or prepared before the server started): beyond them it is off
/// until shared memory starts again (`snowflake_id_core::directory_trust`).
pub const DIRECTORY_WRITERS: usize = 256;

/// The databases' extensions, as backends found them (`extension_directory.rs` reads and fills
/// it): entries read under `lock` held shared, written under it held exclusively; whether they
/// may be trusted is `trust`'s rule.
#[repr(C, align(64))]
pub struct Directory {
    pub lock: AtomicPtr<pg_sys::LWLock>,
    pub trust: DirectoryTrust<DIRECTORY_WRITERS>,
    pub entries: UnsafeCell<[Option<DirectoryEntry>; DIRECTORY_DATABASES]>,
    /// Per entry, for `snowflake_directory()`: lookups its entry answered, and lookups that
    /// read the catalogs instead while the database held it (both since the database took it).
    pub answered: [AtomicU64; DIRECTORY_DATABASES],
    pub looked_up: [AtomicU64; DIRECTORY_DATABASES],
}

/// A database's floor relations and their owner, as `database_floor.rs` found them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FloorRelations {
    pub floor: pg_sys::Oid,
    pub writer: pg_sys::Oid,
    pub owner: pg_sys::Oid,
}

/// One database's extension.
#[derive(Clone, Copy)]
pub struct DirectoryEntry {
    pub database: pg_sys::Oid,
    /// The directory's generation when the lookups that filled it began.
    pub generation: u64,
    pub catalog: CatalogTable,
    /// None until a backend looked them up (and where the extension predates them), with the
    /// floor relation's schema.
    pub floor: Option<(FloorRelations, pg_sys::Oid)>,
    pub layouts: [Option<NamedLayout>; DIRECTORY_LAYOUTS],
}

/// A sequence's layout and the catalog row it came from.
#[derive(Clone, Copy)]
pub struct NamedLayout {
    pub name: [u8; MAX_NAME_BYTES],
    pub length: u8,
    pub layout: Layout,
    pub row: RowVersion,
}

impl Directory {
    fn new(lock: *mut pg_sys::LWLock) -> Directory {
        Directory {
            lock: AtomicPtr::new(lock),
            trust: DirectoryTrust::new(),
            entries: UnsafeCell::new([None; DIRECTORY_DATABASES]),
            answered: std::array::from_fn(|_| AtomicU64::new(0)),
            looked_up: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Header of the segment; the table of worker ids (`spaces.table_len()` of them) follows
/// it directly. Each part is cache-line aligned so the hot, read-mostly lines are not written
/// by the rare updates of others.
#[repr(C, align(64))]
pub struct SharedState {
    pub clock: ClusterClock,
    pub reservation: PublishedReservation,
    pub counters: Counters,
    pub floor_writes: FloorWrites,
    pub directory: Directory,
    pub spaces: Spaces,
}

const SEGMENT_NAME: &std::ffi::CStr = c"snowflake_id";
/// The floor writes' LWLock has a tranche of its own, so its waits show apart from the
/// reservation's in `pg_stat_activity` (wait event `LWLock` / `snowflake_id_floor`).
const FLOOR_WRITES_TRANCHE: &std::ffi::CStr = c"snowflake_id_floor";
/// The extension directory's LWLock (`extension_directory.rs`), in a tranche of its own too.
const DIRECTORY_TRANCHE: &std::ffi::CStr = c"snowflake_id_directory";
/// PostgreSQL's `AddinShmemInitLock`, a C macro for `&MainLWLockArray[21].lock`
/// (storage/lwlocklist.h: the same index in 15 to 18), which pgrx cannot bind.
const ADDIN_SHMEM_INIT_LOCK: usize = 21;
const ALIGNMENT: usize = 64;

/// Set in the postmaster by the startup hook; backends inherit it through fork.
static SHARED: AtomicPtr<SharedState> = AtomicPtr::new(std::ptr::null_mut());

type Hook = Option<unsafe extern "C-unwind" fn()>;
static PREVIOUS_REQUEST_HOOK: OnceCell<Hook> = OnceCell::new();
static PREVIOUS_STARTUP_HOOK: OnceCell<Hook> = OnceCell::new();
/// What runs at a clean shutdown of the postmaster (`install_hooks`).
static AT_CLEAN_SHUTDOWN: OnceCell<fn(&SharedState)> = OnceCell::new();

impl SharedState {
    /// Every worker id, of every space.
    pub fn worker_ids(&self) -> &[WorkerId] {
        let first = (self as *const SharedState)
            .wrapping_add(1)
            .cast::<WorkerId>();
        // SAFETY: init_shared_memory placed `spaces.table_len()` initialised worker ids right
        // after this header (which is 64-aligned and a multiple of 64 long), and the segment
        // lives as long as the process.
        unsafe { std::slice::from_raw_parts(first, self.spaces.table_len()) }
    }

    /// The worker ids of one space (`Spaces::space_of`).
    pub fn space(&self, space: usize) -> &[WorkerId] {
        &self.worker_ids()[self.spaces.range(space)]
    }
}

/// Runs `f` holding `lock`, one of the extension's LWLocks, in `mode`.
pub fn with_lwlock<T>(
    lock: &AtomicPtr<pg_sys::LWLock>,
    mode: pg_sys::LWLockMode::Type,
    f: impl FnOnce() -> T,
) -> T {
    lwlock_section(lock, mode, true, f).expect("a waiting acquire returns holding the lock")
}

/// Runs `f` holding `lock`, one of the extension's LWLocks, in `mode`: waiting for it, or,
/// when `wait` is false, only if it can be taken at once (None otherwise).
pub fn lwlock_section<T>(
    lock: &AtomicPtr<pg_sys::LWLock>,
    mode: pg_sys::LWLockMode::Type,
    wait: bool,
    f: impl FnOnce() -> T,
) -> Option<T> {
    // `lock` is an LWLock of our tranches in shared memory, set at startup. If `f` raises an
    // ERROR (a WAL insert can), PostgreSQL's error recovery releases every LWLock held. (Not a
    // guard: a release while the ERROR unwinds would lower the interrupt holdoff count that
    // the ERROR has already reset to zero.)
    let lock = lock.load(Ordering::Relaxed);
    let held = if wait {
        // SAFETY: an LWLock of ours (see above). Its result says whether it had to wait, not
        // whether it holds the lock: it does.
        unsafe { pg_sys::LWLockAcquire(lock, mode) };
        true
    } else {
        // SAFETY: an LWLock of ours (see above); a conditional acquire never sleeps.
        unsafe { pg_sys::LWLockConditionalAcquire(lock, mode) }
    };
    if !held {
        return None;
    }
    let result = f();
    // SAFETY: we acquired this lock above.
    unsafe { pg_sys::LWLockRelease(lock) };
    Some(result)
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

/// The worker spaces `snowflake_id.max_workers` gives.
fn spaces() -> Spaces {
    Spaces::new(gucs::MAX_WORKERS.get().clamp(1, gucs::MAX_WORKERS_LIMIT) as usize)
}

fn segment_size() -> usize {
    // Slack so the header can be moved up to a 64-byte boundary (ShmemInitStruct only
    // guarantees MAXALIGN).
    ALIGNMENT + size_of::<SharedState>() + spaces().table_len() * size_of::<WorkerId>()
}

/// Chains our request and startup hooks in front of any previous ones, and notes what runs at
/// a clean shutdown of the postmaster, after every backend has exited. Called from _PG_init
/// while shared_preload_libraries is processed.
pub fn install_hooks(at_clean_shutdown: fn(&SharedState)) {
    AT_CLEAN_SHUTDOWN.get_or_init(|| at_clean_shutdown);
    // _PG_init runs single-threaded in the postmaster before shared memory exists; reading and
    // replacing the hook globals is what PostgreSQL expects a library to do there.
    // SAFETY: reads the hook global while nothing else runs (see above).
    PREVIOUS_REQUEST_HOOK.get_or_init(|| unsafe { pg_sys::shmem_request_hook });
    // SAFETY: sets it while nothing else runs; the previous hook is kept just above.
    unsafe { pg_sys::shmem_request_hook = Some(request_shared_memory) };
    // SAFETY: as for the request hook.
    PREVIOUS_STARTUP_HOOK.get_or_init(|| unsafe { pg_sys::shmem_startup_hook });
    // SAFETY: as for the request hook.
    unsafe { pg_sys::shmem_startup_hook = Some(init_shared_memory) };
}

#[pg_guard]
unsafe extern "C-unwind" fn request_shared_memory() {
    // Called by PostgreSQL in shmem_request_hook, where chaining the previous hook,
    // RequestAddinShmemSpace and RequestNamedLWLockTranche are allowed.
    if let Some(previous) = PREVIOUS_REQUEST_HOOK.get().copied().flatten() {
        // SAFETY: the hook installed before ours, called where PostgreSQL calls ours.
        unsafe { previous() };
    }
    // SAFETY: in shmem_request_hook (see above).
    unsafe { pg_sys::RequestAddinShmemSpace(segment_size()) };
    // SAFETY: in shmem_request_hook; a static name.
    unsafe { pg_sys::RequestNamedLWLockTranche(SEGMENT_NAME.as_ptr(), 1) };
    // SAFETY: as above.
    unsafe { pg_sys::RequestNamedLWLockTranche(FLOOR_WRITES_TRANCHE.as_ptr(), 1) };
    // SAFETY: as above.
    unsafe { pg_sys::RequestNamedLWLockTranche(DIRECTORY_TRANCHE.as_ptr(), 1) };
}

#[pg_guard]
unsafe extern "C-unwind" fn init_shared_memory() {
    if let Some(previous) = PREVIOUS_STARTUP_HOOK.get().copied().flatten() {
        // SAFETY: the hook that was installed before ours, called where PostgreSQL calls ours.
        unsafe { previous() };
    }
    // Called by PostgreSQL in shmem_startup_hook (postmaster start and every crash restart),
    // once MainLWLockArray exists; AddinShmemInitLock (MainLWLockArray[21]) serialises the
    // creation of add-in segments.
    // SAFETY: a plain read of the array's address, set before this hook runs (see above).
    let main_locks = unsafe { pg_sys::MainLWLockArray };
    let padded = main_locks.wrapping_add(ADDIN_SHMEM_INIT_LOCK);
    // SAFETY: AddinShmemInitLock's place in the array: its address, nothing read.
    let init_lock = unsafe { &raw mut (*padded).lock };
    // SAFETY: PostgreSQL's own LWLock for this, released below.
    unsafe { pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
    let mut found = false;
    // SAFETY: the segment `request_shared_memory` asked for, by its name and size.
    let raw = unsafe { pg_sys::ShmemInitStruct(SEGMENT_NAME.as_ptr(), segment_size(), &mut found) };
    let header = raw
        .cast::<u8>()
        .wrapping_add(raw.cast::<u8>().align_offset(ALIGNMENT))
        .cast::<SharedState>();
    if !found {
        // SAFETY: in shmem_startup_hook, after `request_shared_memory` requested the tranche.
        let reservation_lock = unsafe { tranche_lock(SEGMENT_NAME) };
        // SAFETY: as above.
        let floor_writes_lock = unsafe { tranche_lock(FLOOR_WRITES_TRANCHE) };
        // SAFETY: as above.
        let directory_lock = unsafe { tranche_lock(DIRECTORY_TRANCHE) };
        let state = new_shared_state((reservation_lock, floor_writes_lock, directory_lock));
        let worker_ids = state.spaces.table_len();
        // The segment is `segment_size()` bytes: the header aligned to ALIGNMENT, then
        // `table_len()` worker ids; nobody reads it before SHARED is stored below.
        // SAFETY: the header's place in the segment (see above).
        unsafe { header.write(state) };
        let first_id = header.wrapping_add(1).cast::<WorkerId>();
        for index in 0..worker_ids {
            // SAFETY: the place of worker id `index` in the segment (see above).
            unsafe { first_id.wrapping_add(index).write(WorkerId::new()) };
        }
        // SAFETY: written just above, and never moved or freed.
        start_clock(unsafe { &*header });
        // SAFETY: registers a callback in the postmaster, with no argument.
        unsafe { pg_sys::on_shmem_exit(Some(at_exit), pg_sys::Datum::from(0)) };
    }
    // SAFETY: acquired above.
    unsafe { pg_sys::LWLockRelease(init_lock) };
    SHARED.store(header, Ordering::Release);
}

/// The one LWLock of tranche `name`.
///
/// # Safety
/// In shmem_startup_hook, after `request_shared_memory` requested the tranche, one lock.
unsafe fn tranche_lock(name: &std::ffi::CStr) -> *mut pg_sys::LWLock {
    // SAFETY: see the contract: the tranche's array of one padded LWLock.
    let padded = unsafe { pg_sys::GetNamedLWLockTranche(name.as_ptr()) };
    // SAFETY: that element: its lock's address, nothing read.
    unsafe { &raw mut (*padded).lock }
}

/// The shared state of a server starting (the postmaster's start or a crash restart), with its
/// three LWLocks (the reservation's, the floor writes', the directory's): a restart (clean or after a crash)
/// continues after the persisted reservation, whatever the wall clock says now (docs/design.md
/// §5).
fn new_shared_state(
    (reservation_lock, floor_writes_lock, directory_lock): (
        *mut pg_sys::LWLock,
        *mut pg_sys::LWLock,
        *mut pg_sys::LWLock,
    ),
) -> SharedState {
    let file = reservation_file::read(Path::new(".")).map_err(|error| {
        pgrx::warning!("snowflake_id: the reservation file is unusable ({error}); IDs are refused");
    });
    let broken = file.is_err();
    let start = protocol::start(file);
    SharedState {
        clock: ClusterClock::new(),
        reservation: PublishedReservation {
            until_unix_us: AtomicI64::new(i64::MIN),
            floor_unix_us: AtomicI64::new(start.durable_floor),
            broken: AtomicBool::new(broken),
            started_without_file: AtomicBool::new(start.without_reservation),
            // The signal files of standby mode and targeted recovery (the data directory is
            // the working directory).
            promotion_pending: AtomicBool::new(
                Path::new("standby.signal").exists() || Path::new("recovery.signal").exists(),
            ),
            lock: AtomicPtr::new(reservation_lock),
        },
        counters: Counters::default(),
        floor_writes: FloorWrites {
            lock: AtomicPtr::new(floor_writes_lock),
            slots: std::array::from_fn(|_| FloorWriteSlot::empty()),
        },
        directory: Directory::new(directory_lock),
        spaces: spaces(),
    }
}

/// Starts the cluster clock at the durable floor the state was made with. Starting after the
/// reservation is not a clock step: only later changes count as the wall clock's lag.
fn start_clock(state: &SharedState) {
    let (wall, monotonic) = system_clock::wall_and_monotonic_us();
    state.clock.start(wall, monotonic, state.durable_floor());
    let lag = state
        .clock
        .read(wall, monotonic, JumpPolicy::TRUST_ALL)
        .wall_behind_us;
    state.counters.known_lag_us.store(lag, Ordering::Relaxed);
}

/// At the postmaster's exit: a clean shutdown (code 0) runs the callback `install_hooks` was
/// given; after a crash nothing is written, as the worker ids' floors may not be trustworthy.
#[pg_guard]
unsafe extern "C-unwind" fn at_exit(code: std::ffi::c_int, _arg: pg_sys::Datum) {
    if let (0, Some(shared), Some(callback)) = (code, try_state(), AT_CLEAN_SHUTDOWN.get()) {
        callback(shared);
    }
}
