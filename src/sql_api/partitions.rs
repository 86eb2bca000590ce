//! The time-partition helpers (docs/partitioning.md): a span of whole ticks and the ID bounds of
//! the partition holding a time or an ID.

use pgrx::prelude::*;
use snowflake_id_core::layout::Layout;
use snowflake_id_core::partitions::{Bounds, Span, SpanError};

use crate::errors;
use crate::ids::backend;
use crate::pg::timestamps::unix_us;
use crate::sql_api::decode::{decompose, tick_containing, warn_if_not_this_clusters, TickOf};

/// How many IDs of sequence `seq` a span of time covers: the width of a time partition of its
/// IDs (docs/partitioning.md).
#[pg_extern(sql = false)]
fn snowflake_partition_width(span: Interval, seq: default!(&str, "'default'")) -> i64 {
    let layout = backend::layout_of(seq);
    partition_span(seq, &layout, span).width()
}

/// The partition of `span` (counted from the sequence's epoch) that holds the IDs made at `ts`:
/// `lower <= id < upper`, `upper` NULL past the largest `bigint` (`MAXVALUE`).
#[pg_extern(sql = false)]
fn snowflake_partition_bounds_at(
    ts: TimestampWithTimeZone,
    span: Interval,
    seq: default!(&str, "'default'"),
) -> TableIterator<'static, (name!(lower, i64), name!(upper, Option<i64>))> {
    let layout = backend::layout_of(seq);
    warn_if_not_this_clusters(seq, &layout, "snowflake_partition_bounds");
    let span = partition_span(seq, &layout, span);
    let TickOf::Tick(tick) = tick_containing(&layout, ts) else {
        errors::time_outside_sequence(seq, &layout, unix_us(ts)).raise()
    };
    bounds_row(span.bounds_of_tick(tick))
}

/// The partition of `span` that holds ID `id` of the sequence.
#[pg_extern(sql = false)]
fn snowflake_partition_bounds_of(
    id: i64,
    span: Interval,
    seq: default!(&str, "'default'"),
) -> TableIterator<'static, (name!(lower, i64), name!(upper, Option<i64>))> {
    let layout = backend::layout_of(seq);
    let span = partition_span(seq, &layout, span);
    bounds_row(span.bounds_of_tick(decompose(seq, &layout, id).tick))
}

/// `span` as a partition span of `layout`; raises for months, or a span not a whole positive
/// number of ticks. Days are 24 hours: partitions follow UTC, not a time zone's daylight saving.
fn partition_span(seq: &str, layout: &Layout, span: Interval) -> Span {
    let invalid = |problem: Option<&SpanError>| {
        errors::invalid_partition_span(seq, layout, &span.to_string(), problem).raise()
    };
    if span.months() != 0 {
        invalid(None);
    }
    let span_us = i64::from(span.days())
        .checked_mul(DAY_US)
        .and_then(|days| days.checked_add(span.micros()))
        .unwrap_or(i64::MAX);
    Span::new(layout, span_us).unwrap_or_else(|problem| invalid(Some(&problem)))
}

const DAY_US: i64 = 86_400_000_000;

fn bounds_row(
    bounds: Bounds,
) -> TableIterator<'static, (name!(lower, i64), name!(upper, Option<i64>))> {
    TableIterator::once((bounds.lower, bounds.upper))
}
