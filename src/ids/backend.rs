//! This backend's worker ids and its per-sequence generators (docs/design.md §2–§5).
//!
//! The hot path (`next_id` after the first call of a sequence) reads the monotonic clock (the
//! wall clock only once per tick), a few read-mostly shared atomics, and writes only the line of
//! its worker id (IDs issued); it takes no lock, runs no SPI and allocates nothing. An ID that
//! continues the open tick (`Issuer::next_in_last_tick`) does nothing else. Once per tick
//! it claims the tick on its worker id (one compare-and-swap), checks the reservation (and, about
//! once per `snowflake_id.reserve_ahead`, extends it under a lock, logging it in the WAL) and that
//! the database's floor relation covers it (`database_floor`). The first call of a sequence in a
//! backend also looks up the catalog and reads that relation; the first of a worker width also
//! takes a worker id in that width's space.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::Ordering;

use pgrx::prelude::*;

use snowflake_id_core::generator::Generator;
use snowflake_id_core::layout::{Field, IdTemplate, Layout, TickWindow};
use snowflake_id_core::monotonic_span::MonotonicSpan;
use snowflake_id_core::protocol::{self, TickStep};
use snowflake_id_core::tick_claims::{next_owned, NextOwned, OwnedStep, OwnedTicks, TickClock};
use snowflake_id_core::worker_ids::WorkerId;

use crate::durability::database_floor::DatabaseFloor;
use crate::durability::reservation::{renewal_policy, ClusterReservation};
use crate::errors;
use crate::ids::worker_ids::{attachment_for, Attachment};
use crate::pg::gucs;
use crate::pg::system_clock;
use crate::shmem::{self, SharedState};
use crate::state::catalog::CatalogTable;
use crate::state::sequence_cache::{Entry, SequenceCache};

/// Longest single sleep while waiting for the clock, so interrupts are served promptly.
const MAX_SLEEP_US: i64 = 10_000;

/// What a backend needs to issue IDs of one sequence.
struct Issuer {
    generator: Generator,
    /// Its IDs with this cluster's node and the worker id filled in.
    template: IdTemplate,
    /// Which of the backend's worker ids it uses (an index into `Backend::worker_ids`).
    attachment: usize,
    /// That worker id in shared memory, where its IDs are counted.
    worker_id: &'static WorkerId,
    /// The layout's time unit, as ticks are owned per unit.
    unit: usize,
    /// Latest tick this backend owns and whose end is reserved.
    published_tick: Option<u64>,
    /// Borrowed ticks already added to the shared counter.
    counted_borrows: u64,
    /// The last ID this backend issued of the sequence (`snowflake_currval`).
    last_id: Option<i64>,
    /// Latest clock tick in which the wall clock was read (the hot path reads only the
    /// monotonic clock; once per tick the wall clock is read so forward steps are followed).
    wall_checked_tick: Option<u64>,
    /// The tick the clock was last in: the hot path finds the tick of a time in it without
    /// the 128-bit division of `Layout::tick_at`.
    window: TickWindow,
    /// While IDs may continue the last ID's tick without `issue` (the clock was in it, the
    /// wall clock read there and its end reserved): the monotonic times whose cluster time is in
    /// that tick, `window`'s. Holds no time while `issue` decides (also after it raised an
    /// error), which alone changes `window`.
    open: MonotonicSpan,
    /// `snowflake_id.max_lead` as last read (ms) and that lead in ticks of this layout; None
    /// before the first ID.
    lead: Option<(i32, u64)>,
}

struct Backend {
    /// One worker id per worker space this backend used.
    worker_ids: Vec<Attachment>,
    /// Each sequence's layout, with this backend's issuer for it once it made an ID.
    sequences: SequenceCache<Issuer>,
    /// The last ID this backend issued of any sequence (`snowflake_lastval`).
    last_id: Option<i64>,
    /// This database's floor relation, as this backend knows it.
    floor: DatabaseFloor,
    /// The names of the sequences this backend made an issuer for: a later issuer of one of
    /// them (its catalog row rewritten, or dropped and created again) starts after the worker
    /// id's floor, as its earlier issuer may have used the ticks this backend owns.
    issued_sequences: Vec<String>,
}

/// This backend's state, in a plain static: a thread-local would cost a TLS look-up on every
/// call from a shared library. `busy` turns a call that reaches the extension again while the
/// state is in use into a clean error instead of a second, aliasing reference (a guard: the
/// lookups made while it is in use read indexes directly and run no code of any role).
struct BackendCell {
    busy: Cell<bool>,
    backend: UnsafeCell<Backend>,
}

// SAFETY: a PostgreSQL backend is one process with one thread that runs SQL; the extension
// starts no threads, and pgrx refuses calls into PostgreSQL from any other thread. So only that
// thread ever touches the cell.
unsafe impl Sync for BackendCell {}

static BACKEND: BackendCell = BackendCell {
    busy: Cell::new(false),
    backend: UnsafeCell::new(Backend {
        worker_ids: Vec::new(),
        sequences: SequenceCache::new(),
        last_id: None,
        floor: DatabaseFloor::new(),
        issued_sequences: Vec::new(),
    }),
};

/// Runs `f` on this backend's state (55000 when reached again from inside `f`).
fn with_backend<R>(f: impl FnOnce(&mut Backend) -> R) -> R {
    if BACKEND.busy.replace(true) {
        errors::reentered().raise();
    }
    // Clears `busy` also when `f` raises an ERROR (pgrx unwinds through this frame).
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            BACKEND.busy.set(false);
        }
    }
    let _release = Release;
    // SAFETY: `busy` was false, so no other reference to the state exists until `_release`
    // drops, and only this thread reaches the cell (see `impl Sync`).
    f(unsafe { &mut *BACKEND.backend.get() })
}

/// Where the catalog table is (looked up once per backend, again after it changed).
pub fn catalog_table() -> CatalogTable {
    with_backend(|backend| *backend.sequences.catalog_table())
}

/// The layout of sequence `name`; raises 42704 when it does not exist.
pub fn layout_of(name: &str) -> Layout {
    shmem::require_preloaded();
    with_backend(|backend| backend.sequences.entry(name).layout)
}

/// Issues the next ID of sequence `name` (its bytes as the caller passed them) for this
/// backend, with `gene` in the gene field.
pub fn next_id(name: &[u8], gene: Option<i64>) -> i64 {
    let shared = shmem::state();
    with_backend(|backend| {
        let Backend {
            worker_ids,
            sequences,
            last_id,
            floor,
            issued_sequences,
        } = backend;
        // Looked up once: the gene check needs the layout before a worker id is taken.
        let (catalog, entry) = sequences.entry_and_catalog(name);
        let Entry {
            name: entry_name,
            layout,
            state,
            ..
        } = entry;
        let gene = match gene {
            None => 0,
            Some(_) if layout.gene_bits == 0 => errors::no_gene_bits(&lossy(name)).raise(),
            // The key's low bits, two's complement for negative keys.
            Some(key) => key as u64 & layout.max_value(Field::Gene),
        };
        let issuer = match state {
            Some(issuer) => issuer,
            state => {
                // Every issuer is made anew after the catalog changed (another extension has
                // other rows), so the floor follows the catalog table here, not at each ID.
                floor.follow(catalog);
                let attachment = attachment_for(worker_ids, shared, layout);
                let first_of_sequence = !issued_sequences.contains(entry_name);
                if first_of_sequence {
                    issued_sequences.push(entry_name.clone());
                }
                state.insert(new_issuer(
                    name,
                    layout,
                    attachment,
                    &worker_ids[attachment],
                    first_of_sequence,
                    shared,
                    floor,
                ))
            }
        };
        let (tick, sequence) = match issuer.next_in_last_tick(shared) {
            Some(continued) => continued,
            None => {
                let attachment = &mut worker_ids[issuer.attachment];
                let on = OnWorkerId {
                    id: attachment.id,
                    owned: &mut attachment.owned[issuer.unit],
                };
                issue(shared, on, name, layout, issuer, floor)
            }
        };
        issuer.worker_id.count_issued(1);
        let id = issuer.template.compose(tick, sequence, gene);
        issuer.last_id = Some(id);
        *last_id = Some(id);
        id
    })
}

/// A sequence name for a message: the caller's bytes, invalid UTF-8 replaced.
fn lossy(name: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(name)
}

/// `snowflake_raise_floor`: no ID issued from now on, by any session of this server or by a
/// server that gets its WAL or this database, is at or below `until_unix_us`. Returns the
/// durable floor.
pub fn raise_floor(until_unix_us: i64) -> i64 {
    let shared = shmem::state();
    // SAFETY: a plain read of a backend-local flag.
    if unsafe { pg_sys::RecoveryInProgress() } {
        errors::during_recovery("snowflake_raise_floor").raise();
    }
    // Bounded by the wall clock, which no call moves (the cluster clock, which a raise moves,
    // would let repeated calls ratchet every database's IDs ahead without limit).
    let (wall, _) = system_clock::wall_and_monotonic_us();
    let policy = renewal_policy();
    if policy.beyond_trusted_lead(until_unix_us, wall) {
        errors::floor_too_far_ahead(until_unix_us, wall, policy.trusted_lead()).raise();
    }
    with_backend(|backend| {
        let catalog = backend.sequences.catalog_table();
        backend.floor.follow(catalog);
        backend.floor.raise(catalog, until_unix_us, shared);
    });
    shared.counters.floor_raises.fetch_add(1, Ordering::Relaxed);
    shared.reservation.durable_floor()
}

/// `snowflake_accept_floor`: the server's durable floor rises to the value of this database's
/// floor relation, whoever wrote it and however far ahead (a superuser's decision: the function
/// is revoked from PUBLIC), logged in the WAL and written to the reservation file. Returns the
/// durable floor.
pub fn accept_floor() -> i64 {
    let shared = shmem::state();
    // SAFETY: a plain read of a backend-local flag.
    if unsafe { pg_sys::RecoveryInProgress() } {
        errors::during_recovery("snowflake_accept_floor").raise();
    }
    with_backend(|backend| {
        let catalog = backend.sequences.catalog_table();
        backend.floor.follow(catalog);
        let value = backend.floor.value_now(catalog);
        protocol::accept_floor(&mut ClusterReservation(shared), value);
    });
    shared
        .counters
        .floor_accepts
        .fetch_add(1, Ordering::Relaxed);
    shared.reservation.durable_floor()
}

/// Where new IDs of this database begin at the earliest: the server's durable floor, this
/// database's floor relation (above every tick issued here) and the wall clock, the latest of
/// them. Rows whose IDs lie above it were not issued here (`stored_ids`).
pub fn issued_or_covered_until() -> i64 {
    let shared = shmem::state();
    let (wall, _) = system_clock::wall_and_monotonic_us();
    let relation = with_backend(|backend| {
        let catalog = backend.sequences.catalog_table();
        backend.floor.follow(catalog);
        backend.floor.value_now(catalog)
    });
    wall.max(shared.reservation.durable_floor()).max(relation)
}

/// The last ID this session issued of sequence `name` (55000 if none, 42704 if no such sequence).
pub fn current_id(name: &str) -> i64 {
    shmem::require_preloaded();
    with_backend(|backend| {
        let entry = backend.sequences.entry(name);
        entry
            .state
            .as_ref()
            .and_then(|issuer| issuer.last_id)
            .unwrap_or_else(|| errors::currval_undefined(name).raise())
    })
}

/// The last ID this session issued of any sequence (55000 if none).
pub fn last_id() -> i64 {
    shmem::require_preloaded();
    with_backend(|backend| backend.last_id).unwrap_or_else(|| errors::lastval_undefined().raise())
}

/// Out of line, like `attachment_for`: once per sequence and backend, not on the hot path.
#[cold]
#[inline(never)]
fn new_issuer(
    name: &[u8],
    layout: &Layout,
    attachment: usize,
    on: &Attachment,
    first_of_sequence: bool,
    shared: &SharedState,
    floor: &mut DatabaseFloor,
) -> Issuer {
    let node_id = gucs::NODE_ID.get();
    let node = match (node_id, layout.node_bits) {
        (gucs::NODE_ID_UNSET, 0) => 0,
        (gucs::NODE_ID_UNSET, _) => errors::node_id_unset(&lossy(name), layout).raise(),
        (id, _) if layout.fits(Field::Node, id as u64) => id as u64,
        (id, _) => errors::node_id_does_not_fit(&lossy(name), layout, id).raise(),
    };
    // A floor this database brought from a cluster or timeline this server does not continue
    // (pg_upgrade, a restored dump, a promotion, a lost reservation file) raises the cluster
    // clock first.
    floor.learn(shared);
    // Ticks before the worker id's floor for this unit are owned by other sessions (or were by
    // earlier ones): start after it rather than find each of them taken. When the floor is the
    // end of this backend's own claim, this backend's first issuer of a sequence (a new ID
    // space) uses those ticks instead of waiting for the next one (a one-second sequence's first
    // ID would wait up to a second).
    let unit = layout.time_unit_index();
    let worker_floor = on.id.floor(unit);
    let start = match first_of_sequence {
        true => on.owned[unit].first_start_for_new_sequence(worker_floor),
        false => worker_floor,
    };
    let start_after = layout.first_tick_at_or_after(start).checked_sub(1);
    Issuer {
        generator: Generator::new(layout.sequence_bits, start_after),
        template: layout.template(node, on.worker as u64),
        attachment,
        worker_id: on.id,
        unit,
        published_tick: None,
        counted_borrows: 0,
        last_id: None,
        wall_checked_tick: None,
        window: TickWindow::EMPTY,
        open: MonotonicSpan::EMPTY,
        lead: None,
    }
}

impl Issuer {
    /// `snowflake_id.max_lead` in ticks of `layout`, computed again only when the setting changed.
    fn lead_ticks(&mut self, layout: &Layout) -> u64 {
        let max_lead_ms = gucs::max_lead_ms();
        match self.lead {
            Some((setting_ms, ticks)) if setting_ms == max_lead_ms => ticks,
            _ => {
                let ticks = (i64::from(max_lead_ms) * 1_000 / layout.time_unit_us) as u64;
                self.lead = Some((max_lead_ms, ticks));
                ticks
            }
        }
    }

    /// The (tick, sequence) of the next ID when `issue` would only continue the last ID's tick:
    /// the cluster clock still in the open tick (see `open`; the monotonic clock compared with
    /// the times whose cluster time is in it) and the generator staying in it
    /// (`Generator::next_in_last_tick`). None otherwise: then `issue` decides. Nothing else is
    /// done per ID.
    #[inline]
    fn next_in_last_tick(&mut self, shared: &SharedState) -> Option<(u64, u64)> {
        if !shared.clock_in(&self.open) {
            return None;
        }
        let tick = self.window.tick;
        let sequence = self.generator.next_in_last_tick(tick)?;
        Some((tick, sequence))
    }

    /// Opens the tick of the ID `issue` just made to the IDs that continue it, if the clock is
    /// in it (not behind a borrowed tick). `issue` returns only a tick whose end is reserved,
    /// and `clock_tick` read the wall clock in the clock's tick.
    fn open_tick(&mut self, shared: &SharedState, tick: u64) {
        if self.window.tick == tick {
            self.open = shared.clock_span(&self.window);
        }
    }

    /// The cluster clock (µs) and its tick: the monotonic clock, and the wall clock too at the
    /// first reading in each tick, so forward steps are followed.
    fn clock_tick(&mut self, shared: &SharedState, name: &[u8], layout: &Layout) -> (i64, u64) {
        let now = shared.read_clock_monotonic();
        let tick = self.tick_at(now, name, layout);
        if self.wall_checked_tick >= Some(tick) {
            return (now, tick);
        }
        let now = shared.read_clock().now_unix_us;
        let tick = self.tick_at(now, name, layout);
        self.wall_checked_tick = Some(tick);
        (now, tick)
    }

    /// The tick of `now`: from the cached window while `now` is in it, else computed (and a
    /// clock before the epoch has no tick: refuse rather than wait for years).
    fn tick_at(&mut self, now: i64, name: &[u8], layout: &Layout) -> u64 {
        if let Some(tick) = self.window.tick_of(now) {
            return tick;
        }
        let tick = layout
            .tick_at(now)
            .unwrap_or_else(|| errors::clock_before_epoch(&lossy(name), layout, now).raise());
        self.window = TickWindow::of(layout, tick);
        tick
    }
}

/// Sleeps until `tick` starts (at most `MAX_SLEEP_US`), serving interrupts. Kept out of line:
/// inlined, the address its PostgreSQL calls check the thread with (a TLS look-up) was computed
/// on every call of the hot path.
#[cold]
#[inline(never)]
fn wait_for_tick(shared: &SharedState, layout: &Layout, tick: u64, now: i64) {
    shared
        .counters
        .throttle_sleeps
        .fetch_add(1, Ordering::Relaxed);
    let wait_us = (layout.tick_start_unix_us(tick) - now).clamp(1, MAX_SLEEP_US);
    // SAFETY: pg_usleep only sleeps; interrupts are checked right after.
    unsafe { pg_sys::pg_usleep(wait_us) };
    pg_sys::check_for_interrupts!();
}

/// The work of a tick this backend owns now, before its first ID leaves: the tick's end reserved
/// durably, in the cluster and in this database, and the borrowed ticks counted. Returns false,
/// with the generator moved past it, when the durable floor covers the tick. Apart from the
/// per-ID path, which it would only make longer.
#[inline(never)]
fn publish_tick(
    shared: &SharedState,
    layout: &Layout,
    issuer: &mut Issuer,
    floor: &mut DatabaseFloor,
    tick: u64,
) -> bool {
    let end = layout.tick_start_unix_us(tick + 1);
    // The policy read once per tick (a setting's value): the reservation's and the floor's steps.
    let policy = renewal_policy();
    let step = floor.first_id_of_tick(end, shared, &policy);
    if let TickStep::SkipTo { floor } = step {
        issuer
            .generator
            .skip_to(layout.first_tick_at_or_after(floor));
        return false;
    }
    issuer.published_tick = Some(tick);
    let borrows = issuer.generator.borrowed_ticks();
    if borrows > issuer.counted_borrows {
        shared
            .counters
            .borrowed_ticks
            .fetch_add(borrows - issuer.counted_borrows, Ordering::Relaxed);
        issuer.counted_borrows = borrows;
    }
    true
}

/// The worker id an ID is issued on, and the ticks this backend owns there in its unit.
struct OnWorkerId<'a> {
    id: &'a WorkerId,
    owned: &'a mut OwnedTicks,
}

/// The (tick, sequence) of the next ID of sequence `name` this backend issues on worker id
/// `on`: a tick it owns there, reserved before its first ID leaves. Out of line: the hot path
/// takes it only when `Issuer::next_in_last_tick` declines, about once per tick.
#[inline(never)]
fn issue(
    shared: &SharedState,
    on: OnWorkerId,
    name: &[u8],
    layout: &Layout,
    issuer: &mut Issuer,
    floor: &mut DatabaseFloor,
) -> (u64, u64) {
    issuer.open = MonotonicSpan::EMPTY;
    let max_lead = issuer.lead_ticks(layout);
    loop {
        let (now, now_tick) = issuer.clock_tick(shared, name, layout);
        let NextOwned { step, conflicts } = next_owned(
            on.id,
            &mut issuer.generator,
            layout,
            on.owned,
            issuer.published_tick,
            TickClock {
                now: now_tick,
                max_lead,
            },
        );
        if conflicts > 0 {
            shared
                .counters
                .tick_conflicts
                .fetch_add(conflicts, Ordering::Relaxed);
        }
        match step {
            OwnedStep::Issue {
                tick,
                sequence,
                new_tick,
            } => {
                if new_tick && !publish_tick(shared, layout, issuer, floor, tick) {
                    continue;
                }
                issuer.open_tick(shared, tick);
                return (tick, sequence);
            }
            OwnedStep::WaitUntil { tick } => wait_for_tick(shared, layout, tick, now),
            OwnedStep::TimeExhausted => errors::time_exhausted(&lossy(name), layout).raise(),
        }
    }
}
