//! The SQL functions (design.md §6).

use std::sync::atomic::Ordering;

use pgrx::prelude::*;

use crate::backend::{self, POSTGRES_EPOCH_UNIX_US};
use crate::errors::raise;
use crate::layout::Layout;
use crate::shared_memory;

/// Next ID of a snowflake sequence: unique, and increasing within this session.
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_nextval(seq: default!(&str, "'default'")) -> i64 {
    backend::next_id(seq)
}

/// The fields of an ID: tick start time, node, worker, sequence and gene.
#[pg_extern(stable, parallel_safe)]
fn snowflake_decode(
    id: i64,
    seq: default!(&str, "'default'"),
) -> pgrx::composite_type!('static, "snowflake_parts") {
    let layout = backend::layout_of(seq);
    let parts = layout.decompose(id).unwrap_or_else(|problem| {
        raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{id} is not an ID of snowflake sequence \"{seq}\": {problem}"),
            Some("Pass the name of the sequence that made the ID as the second argument.".into()),
        )
    });
    let type_name = format!("{}.snowflake_parts", backend::extension_schema());
    let mut tuple = PgHeapTuple::new_composite_type(&type_name)
        .unwrap_or_else(|error| raise_internal(format!("type {type_name}: {error}")));
    let field = |value: u64| i32::try_from(value).ok();
    let set =
        |tuple: &mut PgHeapTuple<'static, AllocatedByRust>, name: &str, value: Option<i32>| {
            tuple
                .set_by_name(name, value)
                .unwrap_or_else(|error| raise_internal(format!("field {name}: {error}")))
        };
    tuple
        .set_by_name(
            "ts",
            timestamptz(seq, &layout, layout.tick_start_unix_us(parts.tick)),
        )
        .unwrap_or_else(|error| raise_internal(format!("field ts: {error}")));
    set(&mut tuple, "node", field(parts.node));
    set(&mut tuple, "worker", field(parts.worker));
    set(&mut tuple, "sequence", field(parts.sequence));
    set(&mut tuple, "gene", field(parts.gene));
    tuple
}

/// One row per worker slot in use; the `snowflake_workers` view names the database.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_worker_slots() -> TableIterator<
    'static,
    (
        name!(slot, i32),
        name!(pid, i32),
        name!(database_oid, pg_sys::Oid),
        name!(claimed_at, Option<TimestampWithTimeZone>),
        name!(ids_issued, i64),
    ),
> {
    let shared = shared_memory::state();
    let rows: Vec<_> = shared
        .slots()
        .iter()
        .enumerate()
        .filter_map(|(index, slot)| {
            let pid = slot.holder_pid.load(Ordering::Acquire);
            (pid != 0).then(|| {
                (
                    index as i32,
                    pid,
                    pg_sys::Oid::from(slot.database_oid.load(Ordering::Relaxed)),
                    TimestampWithTimeZone::try_from(
                        slot.claimed_at_unix_us.load(Ordering::Relaxed) - POSTGRES_EPOCH_UNIX_US,
                    )
                    .ok(),
                    i64::try_from(slot.ids_issued.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
                )
            })
        })
        .collect();
    TableIterator::new(rows)
}

fn timestamptz(seq: &str, layout: &Layout, unix_us: i64) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(unix_us.saturating_sub(POSTGRES_EPOCH_UNIX_US)).unwrap_or_else(
        |_| {
            raise(
                PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
                format!(
                    "the time of this ID of snowflake sequence \"{seq}\" is out of range \
                     (tick unit {} µs)",
                    layout.time_unit_us
                ),
                None,
            )
        },
    )
}

fn raise_internal(message: String) -> ! {
    raise(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, message, None)
}
