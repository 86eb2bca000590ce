//! What `snowflake_stats()`, `snowflake_worker_slots()` and `snowflake_directory()` report
//! (docs/monitoring.md).

use std::sync::atomic::Ordering;

use pgrx::prelude::*;
use snowflake_id_core::worker_ids;

use crate::pg::gucs;
use crate::pg::timestamps::{self};
use crate::shmem;
use crate::state::extension_directory;

/// The extension directory (docs/design.md §6), a row per database that holds an entry, and
/// this database: whether its entry is of the current generation, the layouts it holds, the
/// lookups it answered and those that read the catalogs instead, and why it is off, if it is.
// The row type must be spelled out here: pgrx reads the `name!` columns from the signature.
#[allow(clippy::type_complexity)]
#[pg_extern(sql = false)]
fn snowflake_directory() -> TableIterator<
    'static,
    (
        name!(database_oid, pg_sys::Oid),
        name!(database, Option<String>),
        name!(current, bool),
        name!(layouts, i32),
        name!(answered, i64),
        name!(looked_up, i64),
        name!(off, Option<String>),
    ),
> {
    shmem::require_preloaded();
    let rows: Vec<_> = extension_directory::status()
        .into_iter()
        .map(|row| {
            // SAFETY: a syscache lookup of a database by OID: a palloc'd copy of its name, or
            // null when it was dropped.
            let name = unsafe { pg_sys::get_database_name(row.database) };
            let name = (!name.is_null()).then(|| {
                // SAFETY: that copy, NUL-terminated.
                unsafe { std::ffi::CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned()
            });
            (
                row.database,
                name,
                row.current,
                row.layouts as i32,
                saturating_i64(row.answered),
                saturating_i64(row.looked_up),
                row.off.map(|off| off.name().to_owned()),
            )
        })
        .collect();
    TableIterator::new(rows)
}

/// One row per worker id in use; the `snowflake_workers` view names the database. The first
/// five columns are those of 0.5.0 and before, so a database not yet updated reads them.
// The row type must be spelled out here: pgrx reads the `name!` columns from the signature.
#[allow(clippy::type_complexity)]
#[pg_extern(sql = false)]
fn snowflake_worker_slots() -> TableIterator<
    'static,
    (
        name!(worker, i32),
        name!(pid, Option<i32>),
        name!(database_oid, pg_sys::Oid),
        name!(claimed_at, Option<TimestampWithTimeZone>),
        name!(ids_issued, i64),
        name!(worker_bits, i32),
        name!(sessions, i32),
    ),
> {
    let shared = shmem::state();
    let spaces = shared.spaces;
    let rows: Vec<_> = (0..spaces.count())
        .flat_map(|space| {
            shared
                .space(space)
                .iter()
                .enumerate()
                .filter(|(_, id)| id.sessions() > 0)
                .map(move |(worker, id)| {
                    (
                        worker as i32,
                        id.holder(),
                        // The taker's database, while the taker uses the id.
                        pg_sys::Oid::from(id.holder().map_or(0, |_| id.database_oid())),
                        timestamps::timestamptz(id.claimed_at_unix_us()),
                        saturating_i64(id.ids_issued()),
                        i32::from(spaces.width_of(space)),
                        id.sessions() as i32,
                    )
                })
        })
        .collect();
    TableIterator::new(rows)
}

/// Cluster-wide counters since the server started (or last crash-restarted).
// The row type must be spelled out here: pgrx reads the `name!` columns from the signature.
#[allow(clippy::type_complexity)]
#[pg_extern(sql = false)]
fn snowflake_stats() -> TableIterator<
    'static,
    (
        name!(backward_steps, i64),
        name!(largest_backward_step_ms, f64),
        name!(wall_clock_behind_ms, f64),
        name!(borrowed_ticks, i64),
        name!(throttle_sleeps, i64),
        name!(reservation_writes, i64),
        name!(reserved_until, Option<TimestampWithTimeZone>),
        name!(cluster_clock, Option<TimestampWithTimeZone>),
        name!(slots_in_use, i32),
        name!(max_workers, i32),
        name!(forward_jumps_followed, i64),
        name!(forward_jumps_ignored, i64),
        name!(durable_floor, Option<TimestampWithTimeZone>),
        name!(sharing_sessions, i32),
        name!(tick_conflicts, i64),
        name!(ids_issued, i64),
        name!(last_tick_end, Option<TimestampWithTimeZone>),
        name!(reservation_worker_writes, i64),
        name!(reservation_write_failures, i64),
        name!(floor_raises, i64),
        name!(floor_accepts, i64),
    ),
> {
    let shared = shmem::state();
    let counters = &shared.counters;
    let reading = shared.read_clock();
    let count =
        |counter: &std::sync::atomic::AtomicU64| saturating_i64(counter.load(Ordering::Relaxed));
    let row = (
        count(&counters.backward_steps),
        counters.largest_backward_step_us.load(Ordering::Relaxed) as f64 / 1_000.0,
        reading.wall_behind_us as f64 / 1_000.0,
        count(&counters.borrowed_ticks),
        count(&counters.throttle_sleeps),
        count(&counters.reservation_writes),
        timestamps::timestamptz_or_null(shared.reservation.until()),
        timestamps::timestamptz(reading.now_unix_us),
        worker_ids::in_use(shared.worker_ids()) as i32,
        gucs::MAX_WORKERS.get(),
        count(&counters.forward_jumps_followed),
        count(&counters.forward_jumps_ignored),
        timestamps::timestamptz_or_null(shared.reservation.durable_floor()),
        worker_ids::sharing_sessions(shared.worker_ids()) as i32,
        count(&counters.tick_conflicts),
        saturating_i64(worker_ids::ids_issued_since_start(
            shared.worker_ids(),
            &counters.ids_issued_retired,
            &counters.ids_issued_reported,
        )),
        timestamps::timestamptz_or_null(
            Some(shared.owned_high_water())
                .filter(|&end| end > 0)
                .unwrap_or(i64::MIN),
        ),
        count(&counters.reservation_worker_writes),
        count(&counters.reservation_write_failures),
        count(&counters.floor_raises),
        count(&counters.floor_accepts),
    );
    TableIterator::once(row)
}

/// A count as SQL's `bigint`, held at its largest beyond it.
fn saturating_i64(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
