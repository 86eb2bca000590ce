//! The SQL functions that read IDs (docs/design.md §6): `snowflake_decode`, `snowflake_timestamp`,
//! the base32 text form, and the IDs of a time (`snowflake_min_id`, `snowflake_max_id`).

use std::sync::atomic::{AtomicI64, Ordering};

use pgrx::prelude::*;
use snowflake_id_core::base32;
use snowflake_id_core::layout::{Layout, Parts};

use crate::errors;
use crate::ids::backend;
use crate::pg::gucs;
use crate::pg::system_clock;
use crate::pg::timestamps::{self, unix_us};

/// The ID as 13 characters of Crockford base32, in the IDs' order (docs/design.md §6).
#[pg_extern(sql = false)]
fn snowflake_to_base32(id: i64) -> String {
    base32::encode(id).unwrap_or_else(|| errors::negative_id(id).raise())
}

/// The ID a text of `snowflake_to_base32` stands for (case-insensitive; O reads as 0, I and L as 1).
#[pg_extern(sql = false)]
fn snowflake_from_base32(text: &str) -> i64 {
    base32::parse(text).unwrap_or_else(|problem| errors::invalid_base32(text, &problem).raise())
}

/// The fields of an ID: tick start time, node, worker, sequence and gene.
#[pg_extern(sql = false)]
fn snowflake_decode(
    id: i64,
    seq: default!(&str, "'default'"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "snowflake_parts") {
    let layout = backend::layout_of(seq);
    let parts = decompose(seq, &layout, id);
    // The row type this function was declared with, by OID: a type of that name that a role
    // made elsewhere (in a schema it owns, or one renamed and made again) is never used.
    // SAFETY: PostgreSQL called this function with a valid fcinfo.
    let flinfo = unsafe { (*fcinfo).flinfo };
    // SAFETY: and a valid flinfo, of this function.
    let function = unsafe { (*flinfo).fn_oid };
    // SAFETY: a syscache lookup of this function, inside a transaction.
    let row_type = unsafe { pg_sys::get_func_rettype(function) };
    let mut tuple = PgHeapTuple::new_composite_type_by_oid(row_type).unwrap_or_else(|error| {
        errors::internal(format!("the row type of snowflake_decode: {error}")).raise()
    });
    let ts = decoded_time(seq, &layout, id, &parts);
    let fields = [
        ("node", parts.node),
        ("worker", parts.worker),
        ("sequence", parts.sequence),
        ("gene", parts.gene),
    ];
    tuple
        .set_by_name("ts", ts)
        .unwrap_or_else(|error| errors::internal(format!("field ts: {error}")).raise());
    for (name, value) in fields {
        // Layouts keep these fields within 31 bits (snowflake_id_core::layout::MAX_FIELD_BITS).
        let value = i32::try_from(value).unwrap_or(i32::MAX);
        tuple
            .set_by_name(name, value)
            .unwrap_or_else(|error| errors::internal(format!("field {name}: {error}")).raise());
    }
    tuple
}

/// When the ID's tick started.
#[pg_extern(sql = false)]
fn snowflake_timestamp(id: i64, seq: default!(&str, "'default'")) -> TimestampWithTimeZone {
    let layout = backend::layout_of(seq);
    let parts = decompose(seq, &layout, id);
    decoded_time(seq, &layout, id, &parts)
}

/// The smallest ID of the tick containing `ts`: `id >= snowflake_min_id(ts)` selects the IDs
/// made at or after that tick (all of them for a time before the epoch).
#[pg_extern(sql = false)]
fn snowflake_min_id(ts: TimestampWithTimeZone, seq: default!(&str, "'default'")) -> i64 {
    let layout = backend::layout_of(seq);
    warn_if_not_this_clusters(seq, &layout, "snowflake_min_id");
    match tick_containing(&layout, ts) {
        TickOf::BeforeEpoch => 0,
        TickOf::Tick(tick) => layout.min_id_of_tick(tick).unwrap_or(i64::MAX),
        TickOf::AfterEnd => last_id(&layout).saturating_add(1),
    }
}

/// The largest ID of the tick containing `ts`: `id <= snowflake_max_id(ts)` selects the IDs
/// made up to and including that tick (none for a time before the epoch).
#[pg_extern(sql = false)]
fn snowflake_max_id(ts: TimestampWithTimeZone, seq: default!(&str, "'default'")) -> i64 {
    let layout = backend::layout_of(seq);
    warn_if_not_this_clusters(seq, &layout, "snowflake_max_id");
    match tick_containing(&layout, ts) {
        TickOf::BeforeEpoch => -1,
        TickOf::Tick(tick) => layout.max_id_of_tick(tick).unwrap_or(i64::MAX),
        TickOf::AfterEnd => last_id(&layout),
    }
}

pub enum TickOf {
    BeforeEpoch,
    Tick(u64),
    AfterEnd,
}

pub fn tick_containing(layout: &Layout, ts: TimestampWithTimeZone) -> TickOf {
    match layout.tick_at(unix_us(ts)) {
        None => TickOf::BeforeEpoch,
        Some(tick) if tick > layout.max_tick() => TickOf::AfterEnd,
        Some(tick) => TickOf::Tick(tick),
    }
}

/// The largest ID a layout can make.
fn last_id(layout: &Layout) -> i64 {
    layout.max_id_of_tick(layout.max_tick()).unwrap_or(i64::MAX)
}

pub fn decompose(seq: &str, layout: &Layout, id: i64) -> Parts {
    layout
        .decompose(id)
        .unwrap_or_else(|problem| errors::not_an_id_of(seq, id, &problem).raise())
}

/// How far ahead of this server's wall clock a decoded time may lie before the ID is taken for
/// one of another layout: far beyond any lead this or another cluster's IDs can have (the lead
/// bounds are seconds), far below the years a wrong layout gives (an ID of `'sharded'` read as
/// `'default'` decodes about six years ahead).
const DECODED_FUTURE_SLACK_US: i64 = 24 * 3_600 * 1_000_000;

/// The start of the tick of `id` under `seq`'s layout, with a WARNING (once per statement) when
/// it lies more than a day ahead of the wall clock: the ID was made by another layout.
fn decoded_time(seq: &str, layout: &Layout, id: i64, parts: &Parts) -> TimestampWithTimeZone {
    let start = layout.tick_start_unix_us(parts.tick);
    let (wall, _) = system_clock::wall_and_monotonic_us();
    if start.saturating_sub(wall) > DECODED_FUTURE_SLACK_US
        && first_warning_of_statement(&DECODED_FUTURE)
    {
        errors::decoded_beyond_clock(seq, id, start).warn();
    }
    timestamptz(seq, start)
}

/// A WARNING (once per statement) when `function` is called with a sequence without node bits
/// on a cluster whose node id is set to more than 0: none of its IDs now come from that
/// sequence (it cannot issue any, 22023), so its ranges miss them.
pub fn warn_if_not_this_clusters(seq: &str, layout: &Layout, function: &str) {
    let node_id = gucs::NODE_ID.get();
    if layout.node_bits == 0 && node_id > 0 && first_warning_of_statement(&NODE_BITS_MISSING) {
        errors::sequence_without_node_bits(seq, node_id, function).warn();
    }
}

/// When each warning was last given: the start of that statement (µs since 2000).
static DECODED_FUTURE: AtomicI64 = AtomicI64::new(i64::MIN);
static NODE_BITS_MISSING: AtomicI64 = AtomicI64::new(i64::MIN);

/// Whether the warning last given at `last` was not given in this statement; marks it given.
fn first_warning_of_statement(last: &AtomicI64) -> bool {
    // SAFETY: reads this backend's statement start time, set for every statement.
    let statement = unsafe { pg_sys::GetCurrentStatementStartTimestamp() };
    last.swap(statement, Ordering::Relaxed) != statement
}

fn timestamptz(seq: &str, unix_us: i64) -> TimestampWithTimeZone {
    timestamps::timestamptz(unix_us).unwrap_or_else(|| errors::time_out_of_range(seq).raise())
}
