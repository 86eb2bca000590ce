//! What `snowflake_create_sequence` does with its arguments: start from a preset, override any
//! field by name, and validate the result (docs/design.md §2, §6). Every argument comes from a
//! user, so each problem is a [`OptionsError`] that names what to change, never a panic.

use std::fmt;

use crate::layout::{self, Layout, LayoutError, ALLOWED_TIME_UNITS_US, MAX_TOTAL_BITS, PRESETS};

const MICROSECONDS_PER_DAY: i64 = 86_400_000_000;

/// A SQL interval as PostgreSQL stores it; months have no fixed length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

/// The arguments of `snowflake_create_sequence` after the name; `None` keeps the preset's value
/// (except `preset`, where SQL NULL is an error).
#[derive(Clone, Copy, Debug, Default)]
pub struct SequenceOptions<'a> {
    pub preset: Option<&'a str>,
    pub epoch_unix_us: Option<i64>,
    pub time_unit: Option<Interval>,
    pub time_bits: Option<i32>,
    pub node_bits: Option<i32>,
    pub worker_bits: Option<i32>,
    pub sequence_bits: Option<i32>,
    pub gene_bits: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionsError {
    NullPreset,
    UnknownPreset { preset: String },
    BitsOutOfRange { field: &'static str, value: i32 },
    BadTimeUnit,
    EpochInFuture,
    Invalid(LayoutError),
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionsError::NullPreset => f.write_str("preset must not be NULL"),
            OptionsError::UnknownPreset { preset } => write!(f, "unknown preset \"{preset}\""),
            OptionsError::BitsOutOfRange { field, value } => {
                write!(
                    f,
                    "{field} = {value} is out of range (0 to {MAX_TOTAL_BITS})"
                )
            }
            OptionsError::BadTimeUnit => {
                f.write_str("time_unit must be 1 ms, 10 ms, 100 ms or 1 s")
            }
            OptionsError::EpochInFuture => f.write_str("epoch is in the future"),
            OptionsError::Invalid(problem) => problem.fmt(f),
        }
    }
}

impl OptionsError {
    /// How to fix it, where the message alone does not say.
    pub fn hint(&self) -> Option<String> {
        match self {
            OptionsError::UnknownPreset { .. } => {
                let names: Vec<&str> = PRESETS.iter().map(|(name, _)| *name).collect();
                Some(format!("Presets: {}.", names.join(", ")))
            }
            OptionsError::BadTimeUnit => Some("For example time_unit => interval '10 ms'.".into()),
            OptionsError::EpochInFuture => Some("Use an epoch at or before now.".into()),
            _ => None,
        }
    }
}

impl std::error::Error for OptionsError {}

impl SequenceOptions<'_> {
    /// The validated layout these options describe. `now_unix_us` is read only when an epoch is
    /// given (an epoch in the future would issue IDs only after it).
    pub fn resolve(&self, now_unix_us: impl FnOnce() -> i64) -> Result<Layout, OptionsError> {
        let preset = self.preset.ok_or(OptionsError::NullPreset)?;
        let mut layout = layout::preset(preset).ok_or_else(|| OptionsError::UnknownPreset {
            preset: preset.to_owned(),
        })?;
        for (field, value, target) in [
            ("time_bits", self.time_bits, &mut layout.time_bits),
            ("node_bits", self.node_bits, &mut layout.node_bits),
            ("worker_bits", self.worker_bits, &mut layout.worker_bits),
            (
                "sequence_bits",
                self.sequence_bits,
                &mut layout.sequence_bits,
            ),
            ("gene_bits", self.gene_bits, &mut layout.gene_bits),
        ] {
            if let Some(value) = value {
                *target = u8::try_from(value)
                    .ok()
                    .filter(|bits| u32::from(*bits) <= MAX_TOTAL_BITS)
                    .ok_or(OptionsError::BitsOutOfRange { field, value })?;
            }
        }
        if let Some(unit) = self.time_unit {
            layout.time_unit_us = time_unit_us(unit).ok_or(OptionsError::BadTimeUnit)?;
        }
        if let Some(epoch_unix_us) = self.epoch_unix_us {
            if epoch_unix_us > now_unix_us() {
                return Err(OptionsError::EpochInFuture);
            }
            layout.epoch_unix_us = epoch_unix_us;
        }
        layout.validate().map_err(OptionsError::Invalid)?;
        Ok(layout)
    }
}

/// The interval in microseconds when it is one of the allowed time units.
fn time_unit_us(unit: Interval) -> Option<i64> {
    if unit.months != 0 {
        return None;
    }
    i64::from(unit.days)
        .checked_mul(MICROSECONDS_PER_DAY)?
        .checked_add(unit.micros)
        .filter(|us| ALLOWED_TIME_UNITS_US.contains(us))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{preset, PRESET_EPOCH_UNIX_US};
    use proptest::prelude::*;

    const NOW: i64 = 1_790_000_000_000_000;

    fn with_preset(name: &str) -> SequenceOptions<'_> {
        SequenceOptions {
            preset: Some(name),
            ..SequenceOptions::default()
        }
    }

    fn ms(millis: i64) -> Interval {
        Interval {
            months: 0,
            days: 0,
            micros: millis * 1_000,
        }
    }

    #[test]
    fn every_preset_resolves_to_itself() {
        for (name, layout) in PRESETS {
            assert_eq!(with_preset(name).resolve(|| NOW), Ok(layout));
        }
    }

    #[test]
    fn overrides_replace_only_their_field() {
        let options = SequenceOptions {
            worker_bits: Some(8),
            sequence_bits: Some(14),
            time_unit: Some(ms(10)),
            epoch_unix_us: Some(PRESET_EPOCH_UNIX_US + 1_000_000),
            ..with_preset("classic")
        };
        let expected = Layout {
            worker_bits: 8,
            sequence_bits: 14,
            time_unit_us: 10_000,
            epoch_unix_us: PRESET_EPOCH_UNIX_US + 1_000_000,
            ..preset("classic").unwrap()
        };
        assert_eq!(options.resolve(|| NOW), Ok(expected));
    }

    #[test]
    fn each_problem_is_named_with_its_fix() {
        let cases: [(SequenceOptions, &str, Option<&str>); 7] = [
            (SequenceOptions::default(), "preset must not be NULL", None),
            (
                with_preset("tiny"),
                "unknown preset \"tiny\"",
                Some("Presets: classic, sharded, js53, pgedge."),
            ),
            (
                SequenceOptions {
                    gene_bits: Some(-1),
                    ..with_preset("classic")
                },
                "gene_bits = -1 is out of range (0 to 63)",
                None,
            ),
            (
                SequenceOptions {
                    node_bits: Some(64),
                    ..with_preset("classic")
                },
                "node_bits = 64 is out of range (0 to 63)",
                None,
            ),
            (
                SequenceOptions {
                    time_unit: Some(Interval {
                        months: 1,
                        days: 0,
                        micros: 0,
                    }),
                    ..with_preset("classic")
                },
                "time_unit must be 1 ms, 10 ms, 100 ms or 1 s",
                Some("For example time_unit => interval '10 ms'."),
            ),
            (
                SequenceOptions {
                    epoch_unix_us: Some(NOW + 1),
                    ..with_preset("classic")
                },
                "epoch is in the future",
                Some("Use an epoch at or before now."),
            ),
            (
                SequenceOptions {
                    worker_bits: Some(11),
                    ..with_preset("classic")
                },
                "the widths add up to 64 bits; at most 63 fit in a positive bigint",
                None,
            ),
        ];
        for (options, message, hint) in cases {
            let error = options.resolve(|| NOW).unwrap_err();
            assert_eq!(error.to_string(), message);
            assert_eq!(error.hint().as_deref(), hint);
        }
    }

    #[test]
    fn the_clock_is_read_only_for_an_epoch() {
        let resolved = with_preset("js53").resolve(|| panic!("clock read without an epoch"));
        assert_eq!(resolved, Ok(preset("js53").unwrap()));
    }

    #[test]
    fn a_time_unit_counts_days_and_microseconds() {
        let one_second = Interval {
            months: 0,
            days: 0,
            micros: 1_000_000,
        };
        assert_eq!(time_unit_us(one_second), Some(1_000_000));
        let a_day = Interval {
            months: 0,
            days: 1,
            micros: 0,
        };
        assert_eq!(time_unit_us(a_day), None);
        let extreme = Interval {
            months: 0,
            days: i32::MAX,
            micros: i64::MAX,
        };
        assert_eq!(time_unit_us(extreme), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the arguments, the result is a valid layout or an error; never a panic,
        /// and never a layout that `validate` rejects.
        #[test]
        fn any_arguments_give_a_valid_layout_or_an_error(
            preset_index in 0usize..4,
            bits in proptest::array::uniform5(proptest::option::of(-2i32..70)),
            unit in proptest::option::of((0i32..2, -1i32..2, -2_000_000i64..2_000_000)),
            epoch in proptest::option::of(-1i64..NOW + 10),
        ) {
            let names = ["classic", "sharded", "js53", "nope"];
            let options = SequenceOptions {
                preset: Some(names[preset_index]),
                epoch_unix_us: epoch,
                time_unit: unit.map(|(months, days, micros)| Interval { months, days, micros }),
                time_bits: bits[0],
                node_bits: bits[1],
                worker_bits: bits[2],
                sequence_bits: bits[3],
                gene_bits: bits[4],
            };
            if let Ok(layout) = options.resolve(|| NOW) {
                prop_assert_eq!(layout.validate(), Ok(()));
                prop_assert!(layout.epoch_unix_us <= NOW);
                for (value, got) in bits.iter().zip([
                    layout.time_bits,
                    layout.node_bits,
                    layout.worker_bits,
                    layout.sequence_bits,
                    layout.gene_bits,
                ]) {
                    if let Some(value) = value {
                        prop_assert_eq!(i32::from(got), *value);
                    }
                }
            }
        }
    }
}
