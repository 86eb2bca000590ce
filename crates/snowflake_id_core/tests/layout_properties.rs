//! The layout's arithmetic against its promises (docs/design.md §2): every layout error, IDs
//! that round-trip and sort by tick, decoding that never panics, the tick window, and the
//! presets' lifetimes and rates. Only the public API is used, as the glue uses it.

use proptest::prelude::*;

/// The built-in `'default'` sequence's layout (the install script, sql/snowflake_id--<version>.sql): the classic preset.
const DEFAULT: Layout = PRESETS[0].1;

/// `Layout::compose` the slow, checked way: None instead of a wrong ID when a part does not
/// fit or the layout is too wide for a non-negative bigint. The reference `compose` is held to.
fn try_compose(layout: &Layout, parts: Parts) -> Option<i64> {
    if layout.total_bits() > MAX_TOTAL_BITS {
        return None;
    }
    let mut id = 0u64;
    for field in Field::ALL {
        let value = parts.get(field);
        if !layout.fits(field, value) {
            return None;
        }
        let shift = layout.shift(field);
        if value != 0 && (shift >= 64 || value.leading_zeros() < shift) {
            return None;
        }
        id |= value.checked_shl(shift).unwrap_or(0);
    }
    i64::try_from(id).ok()
}
use snowflake_id_core::layout::*;

#[test]
fn default_validates_and_composes() {
    let l = DEFAULT;
    assert_eq!(l.validate(), Ok(()));
    assert_eq!(l.total_bits(), 63);
    assert_eq!(l.shift(Field::Time), 22);
    assert_eq!(l.shift(Field::Worker), 12);
    assert_eq!(l.shift(Field::Sequence), 0);
    let (t, w, s) = (123_456_789u64, 1023u64, 4095u64);
    let id = l.compose(Parts {
        tick: t,
        worker: w,
        sequence: s,
        ..Parts::default()
    });
    assert_eq!(id, ((t << 22) | (w << 12) | s) as i64);
    assert_eq!(id >> 22, t as i64);
    assert_eq!(l.decompose(id).unwrap().worker, w);
    assert_eq!(l.max_tick(), (1 << 41) - 1);
    assert_eq!(l.tick_at(1_735_689_600_000_999), Some(0));
    assert_eq!(l.tick_at(1_735_689_600_001_000), Some(1));
    assert_eq!(l.tick_at(1_735_689_599_999_999), None);
    assert_eq!(l.first_tick_at_or_after(1_735_689_600_000_001), 1);
    assert_eq!(l.first_tick_at_or_after(0), 0);
    assert_eq!(
        l.exhausted_at_unix_us(),
        1_735_689_600_000_000 + (1i64 << 41) * 1000
    );
    assert_eq!(l.min_id_of_tick(1 << 41), None);
    assert_eq!(l.max_id_of_tick((1 << 41) - 1), Some(i64::MAX));
    assert_eq!(
        try_compose(
            &l,
            Parts {
                worker: 1024,
                ..Parts::default()
            }
        ),
        None
    );
}

#[test]
fn field_names() {
    let names: Vec<_> = Field::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(names, ["time", "node", "worker", "sequence", "gene"]);
}

#[test]
fn every_layout_error() {
    let d = DEFAULT;
    let e = Layout { gene_bits: 1, ..d }.validate().unwrap_err();
    assert_eq!(e, LayoutError::TooManyBits { total: 64 });
    assert_eq!(
        e.to_string(),
        "the widths add up to 64 bits; at most 63 fit in a positive bigint"
    );
    // Widths far above 63 must not overflow the sum.
    let wide = Layout {
        time_bits: 255,
        node_bits: 255,
        worker_bits: 255,
        sequence_bits: 255,
        gene_bits: 255,
        ..d
    };
    assert_eq!(
        wide.validate(),
        Err(LayoutError::TooManyBits { total: 1275 })
    );
    let e = Layout { time_bits: 0, ..d }.validate().unwrap_err();
    assert_eq!(e, LayoutError::ZeroBits { field: Field::Time });
    assert!(e.to_string().contains("time"));
    let e = Layout {
        sequence_bits: 0,
        ..d
    }
    .validate()
    .unwrap_err();
    assert_eq!(
        e,
        LayoutError::ZeroBits {
            field: Field::Sequence
        }
    );
    assert!(e.to_string().contains("sequence"));
    let e = Layout {
        time_unit_us: 500,
        ..d
    }
    .validate()
    .unwrap_err();
    assert_eq!(e, LayoutError::BadTimeUnit { unit_us: 500 });
    assert!(e.to_string().contains("500"));
    let e = Layout {
        epoch_unix_us: -1,
        ..d
    }
    .validate()
    .unwrap_err();
    assert_eq!(e, LayoutError::EpochOutOfRange { epoch_unix_us: -1 });
    assert!(e.to_string().contains("epoch"));
    // 2^53 ms fits from 1970, 2^54 ms does not.
    let big = Layout {
        time_bits: 53,
        worker_bits: 0,
        sequence_bits: 1,
        epoch_unix_us: 0,
        ..d
    };
    assert_eq!(big.validate(), Ok(()));
    assert_eq!(
        Layout {
            time_bits: 54,
            ..big
        }
        .validate(),
        Err(LayoutError::EpochOutOfRange { epoch_unix_us: 0 })
    );
    assert_eq!(
        Layout {
            epoch_unix_us: i64::MAX,
            ..d
        }
        .validate(),
        Err(LayoutError::EpochOutOfRange {
            epoch_unix_us: i64::MAX
        })
    );
}

#[test]
fn decode_errors() {
    let d = DEFAULT;
    let e = d.decompose(-5).unwrap_err();
    assert_eq!(e, DecodeError::Negative { id: -5 });
    assert!(e.to_string().contains("-5"));
    let small = Layout { time_bits: 30, ..d };
    assert_eq!(small.total_bits(), 52);
    assert!(small.decompose((1 << 52) - 1).is_ok());
    let e = small.decompose(1 << 52).unwrap_err();
    assert_eq!(
        e,
        DecodeError::BeyondLayout {
            id: 1 << 52,
            total_bits: 52
        }
    );
    assert!(e.to_string().contains("52"));
    assert!(d.decompose(i64::MAX).is_ok());
}

#[test]
fn invalid_layouts_never_panic() {
    let weird = Layout {
        time_bits: 200,
        node_bits: 70,
        worker_bits: 64,
        sequence_bits: 0,
        gene_bits: 255,
        time_unit_us: 0,
        epoch_unix_us: i64::MIN,
    };
    for f in Field::ALL {
        let _ = weird.max_value(f);
        let _ = weird.shift(f);
    }
    let p = Parts {
        tick: u64::MAX,
        node: u64::MAX,
        worker: u64::MAX,
        sequence: u64::MAX,
        gene: u64::MAX,
    };
    assert_eq!(try_compose(&weird, p), None);
    let _ = weird.decompose(i64::MAX);
    let _ = weird.tick_at(i64::MAX);
    let _ = weird.tick_at(i64::MIN);
    assert_eq!(weird.tick_start_unix_us(u64::MAX), i64::MAX);
    let _ = weird.first_tick_at_or_after(i64::MAX);
    assert_eq!(weird.exhausted_at_unix_us(), i64::MAX);
    let _ = weird.min_id_of_tick(u64::MAX);
    let _ = weird.max_id_of_tick(1);
    let neg_unit = Layout {
        time_unit_us: -7,
        ..DEFAULT
    };
    let _ = neg_unit.tick_at(i64::MAX);
    let _ = neg_unit.first_tick_at_or_after(i64::MAX);
}

const YEAR_2100_US: i64 = 4_102_444_800_000_000;

/// Valid layouts: unit and epoch first, then the widest time field that still fits,
/// then the other widths from what is left of the 63 bits.
fn valid_layout() -> impl Strategy<Value = Layout> {
    (
        prop::sample::select(ALLOWED_TIME_UNITS_US.to_vec()),
        0i64..YEAR_2100_US,
    )
        .prop_flat_map(|(unit, epoch)| {
            let max_t = (1u8..=62)
                .rev()
                .find(|&t| epoch as i128 + (1i128 << t) * unit as i128 <= i64::MAX as i128)
                .unwrap_or(1);
            (Just(unit), Just(epoch), 1u8..=max_t)
        })
        .prop_flat_map(|(unit, epoch, t)| {
            (
                Just(unit),
                Just(epoch),
                Just(t),
                1u8..=(63 - t).min(MAX_FIELD_BITS),
            )
        })
        .prop_flat_map(|(unit, epoch, t, s)| {
            (
                Just(unit),
                Just(epoch),
                Just(t),
                Just(s),
                0u8..=(63 - t - s).min(MAX_FIELD_BITS),
            )
        })
        .prop_flat_map(|(unit, epoch, t, s, w)| {
            (
                Just(unit),
                Just(epoch),
                Just(t),
                Just(s),
                Just(w),
                0u8..=(63 - t - s - w).min(MAX_FIELD_BITS),
            )
        })
        .prop_flat_map(|(unit, epoch, t, s, w, n)| {
            (
                Just(unit),
                Just(epoch),
                Just(t),
                Just(s),
                Just(w),
                Just(n),
                0u8..=(63 - t - s - w - n).min(MAX_FIELD_BITS),
            )
        })
        .prop_map(|(unit, epoch, t, s, w, n, g)| Layout {
            time_bits: t,
            node_bits: n,
            worker_bits: w,
            sequence_bits: s,
            gene_bits: g,
            time_unit_us: unit,
            epoch_unix_us: epoch,
        })
}

fn parts_in(l: Layout) -> impl Strategy<Value = Parts> {
    (
        0..=l.max_value(Field::Time),
        0..=l.max_value(Field::Node),
        0..=l.max_value(Field::Worker),
        0..=l.max_value(Field::Sequence),
        0..=l.max_value(Field::Gene),
    )
        .prop_map(|(tick, node, worker, sequence, gene)| Parts {
            tick,
            node,
            worker,
            sequence,
            gene,
        })
}

fn layout_and_parts() -> impl Strategy<Value = (Layout, Parts, u64)> {
    valid_layout().prop_flat_map(|l| (Just(l), parts_in(l), 0..=l.max_tick()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn roundtrip_and_order((l, p, other_tick) in layout_and_parts()) {
        prop_assert_eq!(l.validate(), Ok(()));
        let id = l.compose(p);
        prop_assert!(id >= 0);
        prop_assert_eq!(l.decompose(id), Ok(p));
        prop_assert_eq!(try_compose(&l, p), Some(id));

        let q = Parts { tick: other_tick, ..p };
        let id_q = l.compose(q);
        prop_assert_eq!(p.tick.cmp(&other_tick), id.cmp(&id_q));

        let lo = l.min_id_of_tick(p.tick).unwrap();
        let hi = l.max_id_of_tick(p.tick).unwrap();
        prop_assert!(lo <= id && id <= hi);
        prop_assert_eq!(l.decompose(lo).unwrap().tick, p.tick);
        prop_assert_eq!(l.decompose(hi).unwrap().tick, p.tick);
        prop_assert_eq!(l.min_id_of_tick(l.max_tick().wrapping_add(1)), None);

        let start = l.tick_start_unix_us(p.tick);
        prop_assert_eq!(l.tick_at(start), Some(p.tick));
        prop_assert_eq!(l.tick_at(start + l.time_unit_us - 1), Some(p.tick));
        prop_assert_eq!(l.first_tick_at_or_after(start), p.tick);
        prop_assert_eq!(l.first_tick_at_or_after(start + 1), p.tick + 1);
        prop_assert!(start < l.exhausted_at_unix_us());
        prop_assert_eq!(
            l.tick_at(l.exhausted_at_unix_us()),
            Some(l.max_tick() + 1)
        );
    }

    #[test]
    fn a_template_composes_what_the_layout_composes((l, p, _) in layout_and_parts()) {
        let template = l.template(p.node, p.worker);
        prop_assert_eq!(template.compose(p.tick, p.sequence, p.gene), l.compose(p));
    }

    #[test]
    fn tick_window_agrees_with_tick_at(
        (l, p, _) in layout_and_parts(),
        offset in -3_000_000i64..3_000_000,
    ) {
        let window = TickWindow::of(&l, p.tick);
        let t = l.tick_start_unix_us(p.tick).saturating_add(offset);
        match window.tick_of(t) {
            Some(tick) => prop_assert_eq!(l.tick_at(t), Some(tick)),
            None => prop_assert_ne!(l.tick_at(t), Some(p.tick)),
        }
        prop_assert_eq!(TickWindow::EMPTY.tick_of(t), None);
    }

    #[test]
    fn decompose_never_panics(l in valid_layout(), id in any::<i64>()) {
        match l.decompose(id) {
            Ok(p) => prop_assert_eq!(l.compose(p), id),
            Err(DecodeError::Negative { .. }) => prop_assert!(id < 0),
            Err(DecodeError::BeyondLayout { total_bits, .. }) => {
                prop_assert!((id as u64) >> total_bits != 0)
            }
        }
    }
}

const YEAR_US: i128 = 365 * 24 * 3600 * 1_000_000;

fn ids_per_second(l: &Layout) -> i128 {
    (1i128 << l.sequence_bits) * 1_000_000 / i128::from(l.time_unit_us)
}

#[test]
fn fields_decoded_as_integer_are_limited_to_31_bits() {
    let wide = Layout {
        time_bits: 20,
        sequence_bits: 32,
        worker_bits: 0,
        ..DEFAULT
    };
    assert_eq!(
        wide.validate(),
        Err(LayoutError::FieldTooWide {
            field: Field::Sequence,
            bits: 32
        })
    );
    assert!(wide
        .validate()
        .unwrap_err()
        .to_string()
        .contains("sequence field has 32 bits"));
}

#[test]
fn presets_meet_their_promises() {
    for (name, layout) in PRESETS {
        assert_eq!(layout.validate(), Ok(()), "{name}");
    }
    // The built-in sequence's row in the install script (sql/snowflake_id--<version>.sql): 41/0/10/12/0 at 1 ms from 2025.
    let classic = preset("classic").unwrap();
    let widths = [classic.time_bits, classic.node_bits, classic.worker_bits];
    assert_eq!(widths, [41, 0, 10]);
    assert_eq!((classic.sequence_bits, classic.gene_bits), (12, 0));
    assert_eq!(
        (classic.time_unit_us, classic.epoch_unix_us),
        (1_000, 1_735_689_600_000_000)
    );
    let sharded = preset("sharded").unwrap();
    assert!(sharded.max_value(Field::Node) + 1 >= 64);
    assert!(sharded.max_value(Field::Worker) + 1 >= 256);
    assert!(ids_per_second(&sharded) >= 1_000_000);
    let js53 = preset("js53").unwrap();
    assert!(js53.total_bits() <= 53);
    let largest = js53.max_id_of_tick(js53.max_tick()).unwrap();
    assert!(largest < 1 << 53, "{largest}");
    let lifetime = i128::from(js53.exhausted_at_unix_us() - js53.epoch_unix_us);
    assert!(
        lifetime >= 50 * YEAR_US,
        "js53 lasts {} years",
        lifetime / YEAR_US
    );
    // pgEdge's IDs: (ms since 2023-01-01) << 22 | node << 12 | counter (its snowflake.c).
    let pgedge = preset("pgedge").unwrap();
    let ms_2027 = 1_798_761_600_000 - 1_672_531_200_000; // 2027-01-01 in pgEdge's ms
    let pgedge_id = ms_2027 << 22 | 7 << 12 | 4_095;
    let parts = pgedge.decompose(pgedge_id).unwrap();
    assert_eq!(
        (parts.tick, parts.node, parts.worker),
        (ms_2027 as u64, 7, 0)
    );
    assert_eq!(parts.sequence, 4_095);
    assert_eq!(pgedge.tick_start_unix_us(parts.tick), 1_798_761_600_000_000);
    assert_eq!(pgedge.max_value(Field::Node), 1_023);
    assert_eq!(preset("nope"), None);
}
