//! Bit layout of a Snowflake-style ID: `0 | time | node | worker | sequence | gene`,
//! most significant first. Pure arithmetic; every function is total (no panics, no
//! overflow) even on layouts that fail `validate`, because layouts come from user input.

use std::fmt;

/// Bit 63 is the sign bit of a bigint; IDs must stay non-negative.
pub const MAX_TOTAL_BITS: u32 = 63;
/// Widest node, worker, sequence or gene field (`snowflake_parts` holds them as integer).
pub const MAX_FIELD_BITS: u8 = 31;

/// Ticks are whole decimal fractions of a second so that tick boundaries line up with
/// human-readable timestamps.
pub const ALLOWED_TIME_UNITS_US: [i64; 4] = [1_000, 10_000, 100_000, 1_000_000];

/// Unix µs of 1970-01-01; epochs before it are rejected.
const UNIX_EPOCH_US: i64 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    Time,
    Node,
    Worker,
    Sequence,
    Gene,
}

impl Field {
    /// All fields, most significant first.
    pub const ALL: [Field; 5] = [
        Field::Time,
        Field::Node,
        Field::Worker,
        Field::Sequence,
        Field::Gene,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Field::Time => "time",
            Field::Node => "node",
            Field::Worker => "worker",
            Field::Sequence => "sequence",
            Field::Gene => "gene",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub time_bits: u8,
    pub node_bits: u8,
    pub worker_bits: u8,
    pub sequence_bits: u8,
    pub gene_bits: u8,
    pub time_unit_us: i64,
    pub epoch_unix_us: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Parts {
    pub tick: u64,
    pub node: u64,
    pub worker: u64,
    pub sequence: u64,
    pub gene: u64,
}

impl Parts {
    /// The value of one field.
    #[inline]
    pub fn get(&self, field: Field) -> u64 {
        match field {
            Field::Time => self.tick,
            Field::Node => self.node,
            Field::Worker => self.worker,
            Field::Sequence => self.sequence,
            Field::Gene => self.gene,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// Sum of widths > 63.
    TooManyBits { total: u32 },
    /// time_bits == 0 or sequence_bits == 0.
    ZeroBits { field: Field },
    /// Not in ALLOWED_TIME_UNITS_US.
    BadTimeUnit { unit_us: i64 },
    /// Node, worker, sequence and gene are decoded as `integer`: at most 31 bits each.
    FieldTooWide { field: Field, bits: u8 },
    /// Epoch before 1970-01-01, or epoch + (2^time_bits)*unit overflows i64.
    EpochOutOfRange { epoch_unix_us: i64 },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::TooManyBits { total } => write!(
                f,
                "the widths add up to {total} bits; at most {MAX_TOTAL_BITS} fit in a positive bigint"
            ),
            LayoutError::ZeroBits { field } => {
                write!(f, "the {field} field needs at least 1 bit")
            }
            LayoutError::BadTimeUnit { unit_us } => write!(
                f,
                "the time unit of {unit_us} microseconds is not allowed; use 1000 (1 ms), 10000 (10 ms), 100000 (100 ms) or 1000000 (1 s)"
            ),
            LayoutError::FieldTooWide { field, bits } => write!(
                f,
                "the {field} field has {bits} bits; at most {MAX_FIELD_BITS} fit (decode returns it as integer)"
            ),
            LayoutError::EpochOutOfRange { epoch_unix_us } => write!(
                f,
                "the epoch ({epoch_unix_us} microseconds since 1970-01-01) is out of range: it must not be before 1970-01-01, and the time field's last tick must end within a bigint of microseconds"
            ),
        }
    }
}

impl std::error::Error for LayoutError {}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Negative {
        id: i64,
    },
    /// Bits set above the layout's total width.
    BeyondLayout {
        id: i64,
        total_bits: u32,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Negative { id } => {
                write!(f, "the id {id} is negative; snowflake ids never are")
            }
            DecodeError::BeyondLayout { id, total_bits } => write!(
                f,
                "the id {id} has bits set above the layout's {total_bits} bits, so this layout did not make it"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// `value << shift`, or None if any set bit would be shifted out (so a caller never
/// silently produces a truncated value).
fn shl_exact(value: u64, shift: u32) -> Option<u64> {
    if value == 0 {
        return Some(0);
    }
    if shift >= 64 || value.leading_zeros() < shift {
        return None;
    }
    Some(value << shift)
}

/// 2^bits - 1, saturating at u64::MAX for widths of 64 or more.
#[inline]
fn mask(bits: u32) -> u64 {
    1u64.checked_shl(bits).map_or(u64::MAX, |v| v - 1)
}

/// Clamp an i128 into i64 (saturating arithmetic done in a wider type).
#[inline]
pub(crate) fn clamp_i64(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

impl Layout {
    pub fn validate(&self) -> Result<(), LayoutError> {
        let total = self.total_bits();
        if total > MAX_TOTAL_BITS {
            return Err(LayoutError::TooManyBits { total });
        }
        if self.time_bits == 0 {
            return Err(LayoutError::ZeroBits { field: Field::Time });
        }
        if self.sequence_bits == 0 {
            return Err(LayoutError::ZeroBits {
                field: Field::Sequence,
            });
        }
        for field in [Field::Node, Field::Worker, Field::Sequence, Field::Gene] {
            let bits = self.bits(field);
            if bits > MAX_FIELD_BITS {
                return Err(LayoutError::FieldTooWide { field, bits });
            }
        }
        if !ALLOWED_TIME_UNITS_US.contains(&self.time_unit_us) {
            return Err(LayoutError::BadTimeUnit {
                unit_us: self.time_unit_us,
            });
        }
        // time_bits <= 62 here, so the product fits easily in i128.
        let end =
            self.epoch_unix_us as i128 + (1i128 << self.time_bits) * self.time_unit_us as i128;
        if self.epoch_unix_us < UNIX_EPOCH_US || end > i64::MAX as i128 {
            return Err(LayoutError::EpochOutOfRange {
                epoch_unix_us: self.epoch_unix_us,
            });
        }
        Ok(())
    }

    pub fn total_bits(&self) -> u32 {
        Field::ALL.iter().map(|&f| u32::from(self.bits(f))).sum()
    }

    #[inline]
    pub fn bits(&self, field: Field) -> u8 {
        match field {
            Field::Time => self.time_bits,
            Field::Node => self.node_bits,
            Field::Worker => self.worker_bits,
            Field::Sequence => self.sequence_bits,
            Field::Gene => self.gene_bits,
        }
    }

    /// Position of the field's lowest bit: the widths of all less significant fields.
    #[inline]
    pub fn shift(&self, field: Field) -> u32 {
        Field::ALL
            .iter()
            .rev()
            .take_while(|&&f| f != field)
            .map(|&f| u32::from(self.bits(f)))
            .sum()
    }

    /// 2^bits - 1 (0 for 0 bits).
    #[inline]
    pub fn max_value(&self, field: Field) -> u64 {
        mask(u32::from(self.bits(field)))
    }

    /// value <= max_value.
    #[inline]
    pub fn fits(&self, field: Field, value: u64) -> bool {
        value <= self.max_value(field)
    }

    /// Largest tick the time field holds.
    #[inline]
    pub fn max_tick(&self) -> u64 {
        self.max_value(Field::Time)
    }

    /// Compose an ID. Precondition: every part fits (debug_assert); callers check with
    /// `fits` first. Release builds just shift-or (callers check), never panicking.
    #[inline]
    pub fn compose(&self, parts: Parts) -> i64 {
        debug_assert!(
            Field::ALL.iter().all(|&f| self.fits(f, parts.get(f))),
            "compose called with a part that does not fit: {parts:?} in {self:?}"
        );
        let id = Field::ALL.iter().fold(0u64, |acc, &f| {
            acc | parts.get(f).checked_shl(self.shift(f)).unwrap_or(0)
        });
        id as i64
    }

    /// The fields one issuer's IDs share (node and worker) composed once, so that each ID is
    /// two shifts and three ors ([`IdTemplate::compose`]). Precondition as for `compose`.
    pub fn template(&self, node: u64, worker: u64) -> IdTemplate {
        let shared = Parts {
            node,
            worker,
            ..Parts::default()
        };
        IdTemplate {
            fixed: self.compose(shared) as u64,
            time_shift: self.shift(Field::Time),
            sequence_shift: self.shift(Field::Sequence),
        }
    }

    pub fn decompose(&self, id: i64) -> Result<Parts, DecodeError> {
        if id < 0 {
            return Err(DecodeError::Negative { id });
        }
        let total_bits = self.total_bits();
        let raw = id as u64;
        if raw.checked_shr(total_bits).unwrap_or(0) != 0 {
            return Err(DecodeError::BeyondLayout { id, total_bits });
        }
        let get = |f: Field| raw.checked_shr(self.shift(f)).unwrap_or(0) & self.max_value(f);
        Ok(Parts {
            tick: get(Field::Time),
            node: get(Field::Node),
            worker: get(Field::Worker),
            sequence: get(Field::Sequence),
            gene: get(Field::Gene),
        })
    }

    /// Position of the time unit in `ALLOWED_TIME_UNITS_US` (a worker id keeps one floor per unit);
    /// the finest unit for a layout that fails `validate`.
    pub fn time_unit_index(&self) -> usize {
        ALLOWED_TIME_UNITS_US
            .iter()
            .position(|unit| *unit == self.time_unit_us)
            .unwrap_or(0)
    }

    /// The unit as used in arithmetic: at least 1 µs, so invalid layouts cannot divide by 0.
    #[inline]
    fn unit(&self) -> i128 {
        i128::from(self.time_unit_us.max(1))
    }

    /// Tick containing the instant `unix_us`; None if before the epoch. May exceed max
    /// tick (caller checks).
    #[inline]
    pub fn tick_at(&self, unix_us: i64) -> Option<u64> {
        let since = i128::from(unix_us) - i128::from(self.epoch_unix_us);
        if since < 0 {
            return None;
        }
        // since < 2^64 and unit >= 1, so the quotient fits in u64.
        Some((since / self.unit()) as u64)
    }

    /// epoch + tick*unit, saturating.
    #[inline]
    pub fn tick_start_unix_us(&self, tick: u64) -> i64 {
        // |epoch| < 2^63, tick*unit < 2^64 * 2^63: fits in i128.
        clamp_i64(i128::from(self.epoch_unix_us) + i128::from(tick) * self.unit())
    }

    /// The first tick whose start is >= unix_us (so a generator starts after a worker id's
    /// floor); 0 if before the epoch.
    pub fn first_tick_at_or_after(&self, unix_us: i64) -> u64 {
        let since = i128::from(unix_us) - i128::from(self.epoch_unix_us);
        if since <= 0 {
            return 0;
        }
        let unit = self.unit();
        // Ceiling division; since < 2^64 so the result fits in u64.
        ((since + unit - 1) / unit) as u64
    }

    /// Unix µs at which the time field runs out (epoch + 2^time_bits * unit), saturating.
    pub fn exhausted_at_unix_us(&self) -> i64 {
        if self.time_bits >= 64 {
            // epoch + 2^64 * unit exceeds i64::MAX for any epoch >= i64::MIN.
            return i64::MAX;
        }
        clamp_i64(i128::from(self.epoch_unix_us) + (1i128 << self.time_bits) * self.unit())
    }

    /// Smallest ID whose tick is `tick` (other fields 0); None if tick > max tick.
    pub fn min_id_of_tick(&self, tick: u64) -> Option<i64> {
        if !self.fits(Field::Time, tick) {
            return None;
        }
        let id = shl_exact(tick, self.shift(Field::Time))?;
        i64::try_from(id).ok()
    }

    /// Largest ID whose tick is `tick` (other fields all ones); None if tick > max tick.
    pub fn max_id_of_tick(&self, tick: u64) -> Option<i64> {
        let min = self.min_id_of_tick(tick)?;
        let low = mask(self.shift(Field::Time));
        i64::try_from(min as u64 | low).ok()
    }
}

/// 2025-01-01 00:00:00 UTC: the epoch of the built-in sequence and of every preset but `pgedge`.
pub const PRESET_EPOCH_UNIX_US: i64 = 1_735_689_600_000_000;

/// 2023-01-01 00:00:00 UTC: the epoch of pgEdge's snowflake extension.
pub const PGEDGE_EPOCH_UNIX_US: i64 = 1_672_531_200_000_000;

/// Named starting points for `snowflake_create_sequence` (docs/design.md §2).
pub const PRESETS: [(&str, Layout); 4] = [
    // The built-in sequence's layout: 41/0/10/12/0 at 1 ms, lasts until 2094.
    (
        "classic",
        Layout {
            time_bits: 41,
            node_bits: 0,
            worker_bits: 10,
            sequence_bits: 12,
            gene_bits: 0,
            time_unit_us: 1_000,
            epoch_unix_us: PRESET_EPOCH_UNIX_US,
        },
    ),
    // 64 nodes × 256 sessions × 1,024,000 IDs/s each; 39 bits of 1 ms last 17.4 years (to 2042-06).
    (
        "sharded",
        Layout {
            time_bits: 39,
            node_bits: 6,
            worker_bits: 8,
            sequence_bits: 10,
            gene_bits: 0,
            time_unit_us: 1_000,
            epoch_unix_us: PRESET_EPOCH_UNIX_US,
        },
    ),
    // Every ID below 2^53 (exact in a JavaScript number): 38 bits of 10 ms last 87 years,
    // 128 sessions × 25,600 IDs/s each.
    (
        "js53",
        Layout {
            time_bits: 38,
            node_bits: 0,
            worker_bits: 7,
            sequence_bits: 8,
            gene_bits: 0,
            time_unit_us: 10_000,
            epoch_unix_us: PRESET_EPOCH_UNIX_US,
        },
    ),
    // pgEdge's snowflake extension (`snowflake.nextval`): 41 bits of 1 ms since 2023-01-01 UTC,
    // 10 node bits, 12 counter bits, so its IDs decode as they are and a table moved from it
    // goes on with IDs of the same form. No worker bits: a node's sessions take turns by tick.
    (
        "pgedge",
        Layout {
            time_bits: 41,
            node_bits: 10,
            worker_bits: 0,
            sequence_bits: 12,
            gene_bits: 0,
            time_unit_us: 1_000,
            epoch_unix_us: PGEDGE_EPOCH_UNIX_US,
        },
    ),
];

/// The layout of preset `name`, if there is one.
pub fn preset(name: &str) -> Option<Layout> {
    PRESETS
        .iter()
        .find(|(preset, _)| *preset == name)
        .map(|(_, layout)| *layout)
}

/// An ID of one layout with its node and worker fields set (`Layout::template`); the gene field
/// is the lowest, so it needs no shift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdTemplate {
    fixed: u64,
    time_shift: u32,
    sequence_shift: u32,
}

impl IdTemplate {
    /// `Layout::compose` of these parts and the template's node and worker (same precondition:
    /// every part fits).
    #[inline]
    pub fn compose(&self, tick: u64, sequence: u64, gene: u64) -> i64 {
        let time = tick.checked_shl(self.time_shift).unwrap_or(0);
        let sequence = sequence.checked_shl(self.sequence_shift).unwrap_or(0);
        (self.fixed | time | sequence | gene) as i64
    }
}

/// A tick and the Unix µs where it starts and ends, so the tick of a time inside it is known
/// without `Layout::tick_at`'s 128-bit division: the hot path keeps the window its clock was last
/// in. `start <= t < end` exactly when `tick_at(t) == Some(tick)` (a window whose end saturated
/// at `i64::MAX` still holds only times of its tick).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickWindow {
    pub tick: u64,
    start_unix_us: i64,
    end_unix_us: i64,
}

impl TickWindow {
    /// Holds no time.
    pub const EMPTY: TickWindow = TickWindow {
        tick: 0,
        start_unix_us: 0,
        end_unix_us: 0,
    };

    /// The window of `tick` in `layout`.
    pub fn of(layout: &Layout, tick: u64) -> TickWindow {
        TickWindow {
            tick,
            start_unix_us: layout.tick_start_unix_us(tick),
            end_unix_us: layout.tick_start_unix_us(tick.saturating_add(1)),
        }
    }

    /// Where it starts and ends (Unix µs; the end is the next tick's start).
    pub fn bounds(&self) -> (i64, i64) {
        (self.start_unix_us, self.end_unix_us)
    }

    /// The window's tick if `unix_us` is in it.
    #[inline]
    pub fn tick_of(&self, unix_us: i64) -> Option<u64> {
        (self.start_unix_us <= unix_us && unix_us < self.end_unix_us).then_some(self.tick)
    }
}
