//! Time partitions of a layout's IDs (docs/partitioning.md): every layout keeps the tick in its
//! top bits, so a span of whole ticks is a range of IDs. Spans are counted from the layout's
//! epoch, so with an epoch at a UTC midnight (every preset's) a one-day span is a UTC day.

use crate::layout::{Field, Layout};

/// Why a span cannot partition a layout's IDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanError {
    /// Zero or negative.
    NotPositive,
    /// Not a whole number of ticks of `tick_us`.
    NotWholeTicks { tick_us: i64 },
    /// Longer than the layout's whole time field: one partition would hold every ID.
    LongerThanTimeField,
}

impl std::fmt::Display for SpanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpanError::NotPositive => write!(f, "the span is not positive"),
            SpanError::NotWholeTicks { tick_us } => {
                write!(f, "the span is not a whole number of {tick_us} µs ticks")
            }
            SpanError::LongerThanTimeField => {
                write!(f, "the span is longer than the sequence's whole time field")
            }
        }
    }
}

/// A span of whole ticks of one layout: the unit of a partition scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    ticks: u64,
    time_shift: u32,
    max_tick: u64,
}

/// The IDs of one partition: `lower <= id < upper`, `upper` None past the largest `bigint`
/// (`MAXVALUE` in a partition bound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub lower: i64,
    pub upper: Option<i64>,
}

impl Span {
    /// The span of `span_us` µs in `layout`.
    pub fn new(layout: &Layout, span_us: i64) -> Result<Span, SpanError> {
        if span_us <= 0 {
            return Err(SpanError::NotPositive);
        }
        let tick_us = layout.time_unit_us;
        if span_us % tick_us != 0 {
            return Err(SpanError::NotWholeTicks { tick_us });
        }
        let ticks = (span_us / tick_us) as u64;
        if ticks > layout.max_tick() {
            return Err(SpanError::LongerThanTimeField);
        }
        Ok(Span {
            ticks,
            time_shift: layout.shift(Field::Time),
            max_tick: layout.max_tick(),
        })
    }

    /// How many IDs a partition of this span covers (every field below the tick included).
    pub fn width(&self) -> i64 {
        // ticks <= max_tick, so ticks << time_shift < 2^63.
        (self.ticks << self.time_shift) as i64
    }

    /// The partition that holds the IDs of `tick` (a tick of the layout).
    pub fn bounds_of_tick(&self, tick: u64) -> Bounds {
        let first = tick.min(self.max_tick) / self.ticks * self.ticks;
        let id_of = |tick: u64| i64::try_from(u128::from(tick) << self.time_shift).ok();
        Bounds {
            lower: id_of(first).expect("a tick of the layout is an ID"),
            upper: first
                .checked_add(self.ticks)
                .filter(|&end| end <= self.max_tick)
                .and_then(id_of),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{preset, Parts};
    use proptest::prelude::*;

    const DAY_US: i64 = 86_400_000_000;

    fn layout(name: &str) -> Layout {
        preset(name).unwrap()
    }

    #[test]
    fn a_day_of_the_classic_layout_is_86_400_000_ticks_of_4_mi_ids() {
        let span = Span::new(&layout("classic"), DAY_US).unwrap();
        assert_eq!(span.width(), 86_400_000 << 22);
        let bounds = span.bounds_of_tick(86_400_000 * 3 + 17);
        assert_eq!(bounds.lower, (86_400_000 * 3) << 22);
        assert_eq!(bounds.upper, Some((86_400_000 * 4) << 22));
    }

    #[test]
    fn spans_that_are_not_whole_ticks_or_not_positive_are_refused() {
        let js53 = layout("js53");
        assert_eq!(
            Span::new(&js53, 15_000),
            Err(SpanError::NotWholeTicks { tick_us: 10_000 })
        );
        assert_eq!(Span::new(&js53, 0), Err(SpanError::NotPositive));
        assert_eq!(Span::new(&js53, -DAY_US), Err(SpanError::NotPositive));
        assert_eq!(
            Span::new(&js53, i64::MAX / 10_000 * 10_000),
            Err(SpanError::LongerThanTimeField)
        );
        assert!(Span::new(&js53, 20_000).is_ok());
    }

    #[test]
    fn the_last_partition_of_a_63_bit_layout_ends_at_maxvalue() {
        let classic = layout("classic");
        let span = Span::new(&classic, DAY_US).unwrap();
        assert_eq!(span.bounds_of_tick(classic.max_tick()).upper, None);
    }

    fn layouts() -> impl Strategy<Value = Layout> {
        prop::sample::select(vec!["classic", "sharded", "js53", "pgedge"]).prop_map(layout)
    }

    proptest! {
        /// Every ID of a tick lies in its tick's partition, the partitions of consecutive spans
        /// meet, and each starts at a whole number of spans from the epoch.
        #[test]
        fn every_id_lies_in_the_partition_of_its_tick(
            layout in layouts(),
            span_ticks in 1u64..10_000_000,
            tick_fraction in 0.0f64..1.0,
            low_fields in any::<u64>(),
        ) {
            let span_us = span_ticks as i64 * layout.time_unit_us;
            let span = Span::new(&layout, span_us).unwrap();
            let tick = (layout.max_tick() as f64 * tick_fraction) as u64;
            let bounds = span.bounds_of_tick(tick);
            let parts = Parts {
                tick,
                node: low_fields % (layout.max_value(Field::Node) + 1),
                worker: (low_fields >> 20) % (layout.max_value(Field::Worker) + 1),
                sequence: (low_fields >> 40) % (layout.max_value(Field::Sequence) + 1),
                gene: 0,
            };
            let id = layout.compose(parts);
            prop_assert!(bounds.lower <= id);
            prop_assert!(bounds.upper.is_none_or(|upper| id < upper));
            prop_assert_eq!(bounds.lower % span.width(), 0);
            if let Some(upper) = bounds.upper {
                prop_assert_eq!(upper - bounds.lower, span.width());
                let next = layout.decompose(upper).unwrap().tick;
                prop_assert_eq!(span.bounds_of_tick(next).lower, upper);
                prop_assert_eq!(
                    layout.tick_start_unix_us(next) - layout.tick_start_unix_us(tick - tick % span_ticks),
                    span_us
                );
            }
        }
    }
}
