//! The SQL functions (docs/design.md §6).

use std::sync::atomic::{AtomicI64, Ordering};

use pgrx::prelude::*;
use snowflake_id_core::base32;
use snowflake_id_core::layout::{Layout, Parts};
use snowflake_id_core::partitions::{Bounds, Span, SpanError};
use snowflake_id_core::sequence_options::{self, SequenceOptions};
use snowflake_id_core::worker_ids;

use crate::backend;
use crate::catalog;
use crate::citus;
use crate::errors;
use crate::extension_directory;
use crate::gucs;
use crate::privileges::{self, Caller};
use crate::shared_memory;
use crate::system_clock;
use crate::timestamps::{self, unix_us};

/// `snowflake_nextval(seq text DEFAULT 'default') → bigint`: the next ID of a snowflake
/// sequence, unique, and increasing within this session. A bare version-1 C function rather
/// than a `#[pg_extern]`: it is the hot path, and pgrx's generic wrapper (argument unboxing
/// through a guarded detoast call, a memory-context switch) cost more than the ID itself.
/// Declared in the install script under the symbol name pgrx gave it before, so databases
/// created by earlier versions call it unchanged.
///
/// # Safety
/// PostgreSQL calls it with a valid `fcinfo` for that declaration: one `text` argument, never
/// null (STRICT).
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn snowflake_nextval_wrapper(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls it with a valid fcinfo (see above).
    let arguments = unsafe { &(*fcinfo).args };
    // SAFETY: one argument, not null (see above).
    let argument = unsafe { arguments.as_slice(1) }[0].value;
    // SAFETY: a `text` datum, as declared.
    let name = unsafe { text_argument(argument) };
    pg_sys::Datum::from(backend::next_id(name, None))
}

/// Version-1 calling convention of `snowflake_nextval_wrapper`, which PostgreSQL looks up.
#[no_mangle]
pub extern "C" fn pg_finfo_snowflake_nextval_wrapper() -> &'static pg_sys::Pg_finfo_record {
    static VERSION_1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &VERSION_1
}

/// The bytes of a `text` datum, read in place when stored plain (a name in a query always is),
/// detoasted otherwise. They are not checked as UTF-8 here: the sequence cache compares bytes,
/// and decodes them only to look a name up or to show it in a message.
///
/// # Safety
/// `datum` is a non-null `text` datum valid for the current call.
#[inline(always)]
unsafe fn text_argument<'a>(datum: pg_sys::Datum) -> &'a [u8] {
    let text = datum.cast_mut_ptr::<pg_sys::varlena>();
    use pgrx::varlena::*;
    // A constant's header is the 4-byte one, a column value's usually the short one; each form
    // read directly, as `varlena_to_byte_slice` would after testing for all of them. The value
    // lives in memory that outlives this call.
    // SAFETY: `text` points at a varlena header (see the contract).
    if unsafe { varatt_is_4b_u(text) } {
        // SAFETY: a plain value with the 4-byte header: its data follows it.
        let data = unsafe { vardata_4b(text) };
        // SAFETY: as above; the header holds the size.
        let length = unsafe { varsize_4b(text) } - pg_sys::VARHDRSZ;
        // SAFETY: the value's bytes after its header.
        return unsafe { std::slice::from_raw_parts(data.cast(), length) };
    }
    // SAFETY: `text` points at a varlena header.
    let short = unsafe { varatt_is_1b(text) }
        // SAFETY: as above.
        && !unsafe { varatt_is_1b_e(text) };
    if short {
        // SAFETY: a plain value with the short header, which holds the size.
        let length = unsafe { varsize_1b(text) } - pg_sys::VARHDRSZ_SHORT;
        // SAFETY: as above: its data follows the header.
        let data = unsafe { vardata_1b(text) };
        // SAFETY: the value's bytes after its header.
        return unsafe { std::slice::from_raw_parts(data.cast(), length) };
    }
    // SAFETY: a compressed or external `text`, expanded by PostgreSQL into the current memory
    // context, which outlives this call.
    let expanded = unsafe { detoasted(text) };
    // SAFETY: the expanded value, a plain varlena.
    unsafe { varlena_to_byte_slice(expanded) }
}

/// `text` expanded (compressed or external). Out of line: the hot path's frame would otherwise
/// carry the guarded call's setup.
///
/// # Safety
/// As for `text_argument`.
#[cold]
#[inline(never)]
unsafe fn detoasted(text: *mut pg_sys::varlena) -> *mut pg_sys::varlena {
    // SAFETY: see `text_argument`.
    unsafe { pg_sys::pg_detoast_datum_packed(text) }
}

/// Next ID with the low `gene_bits` bits of `gene` (a shard or routing key) in the gene field.
#[pg_extern(sql = false)]
fn snowflake_nextval_with_gene(seq: &str, gene: i64) -> i64 {
    backend::next_id(seq.as_bytes(), Some(gene))
}

/// The last ID this session made of a snowflake sequence, like `currval()`.
#[pg_extern(sql = false)]
fn snowflake_currval(seq: default!(&str, "'default'")) -> i64 {
    backend::current_id(seq)
}

/// The last ID this session made of any snowflake sequence, like `lastval()`.
#[pg_extern(sql = false)]
fn snowflake_lastval() -> i64 {
    backend::last_id()
}

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

/// Creates a named sequence from a preset, with any field overridden by name. For the
/// database's owner and superusers (`privileges`), whatever EXECUTE grants say; the catalog
/// is written as its owner.
#[allow(clippy::too_many_arguments)]
#[pg_extern(sql = false)]
fn snowflake_create_sequence(
    name: Option<&str>,
    preset: default!(Option<&str>, "'classic'"),
    epoch: default!(Option<TimestampWithTimeZone>, "NULL"),
    time_unit: default!(Option<Interval>, "NULL"),
    time_bits: default!(Option<i32>, "NULL"),
    node_bits: default!(Option<i32>, "NULL"),
    worker_bits: default!(Option<i32>, "NULL"),
    sequence_bits: default!(Option<i32>, "NULL"),
    gene_bits: default!(Option<i32>, "NULL"),
) {
    privileges::require(Caller::DatabaseCreator, "snowflake_create_sequence");
    refuse_in_read_only_transaction("snowflake_create_sequence");
    shared_memory::require_preloaded();
    let name = checked_name(name);
    let citus = citus::role();
    citus.refuse_on_worker("snowflake_create_sequence", name);
    let options = SequenceOptions {
        preset,
        epoch_unix_us: epoch.map(unix_us),
        time_unit: time_unit.map(|unit| sequence_options::Interval {
            months: unit.months(),
            days: unit.days(),
            micros: unit.micros(),
        }),
        time_bits,
        node_bits,
        worker_bits,
        sequence_bits,
        gene_bits,
    };
    let layout = options
        .resolve(|| shared_memory::state().read_clock().now_unix_us)
        .unwrap_or_else(|problem| errors::invalid_options(name, &problem).raise());
    let preset = options.preset.unwrap_or_default(); // resolve() refused a NULL preset
    let catalog = backend::catalog_table();
    privileges::as_owner(catalog.owner(), || {
        catalog::insert(&catalog, name, preset, &layout);
        citus.propagate_create(&catalog, name, preset, &layout);
    });
}

/// 25006 for `function`, which changes the catalog, in a read-only transaction.
fn refuse_in_read_only_transaction(function: &str) {
    // SAFETY: a plain read of this backend's transaction state.
    if unsafe { pg_sys::XactReadOnly } {
        errors::in_read_only_transaction(function).raise();
    }
}

/// Drops a named sequence. IDs it issued stay valid numbers, but can no longer be decoded
/// with its name, and a new sequence of the same name is a new ID space. Callers as for
/// `snowflake_create_sequence`.
#[pg_extern(sql = false)]
fn snowflake_drop_sequence(name: &str) {
    privileges::require(Caller::DatabaseCreator, "snowflake_drop_sequence");
    refuse_in_read_only_transaction("snowflake_drop_sequence");
    shared_memory::require_preloaded();
    if name == "default" {
        errors::cannot_drop_default().raise();
    }
    let citus = citus::role();
    citus.refuse_on_worker("snowflake_drop_sequence", name);
    let catalog = backend::catalog_table();
    privileges::as_owner(catalog.owner(), || {
        if !catalog::delete(&catalog, name) {
            errors::sequence_not_found(name, &catalog.extension_schema()).raise();
        }
        citus.propagate_drop(name);
    });
}

/// `snowflake_raise_floor(until timestamptz) → timestamptz`: no ID issued from now on is at or
/// below `until`, in any session of this server, on a server that gets its WAL, or in a copy of
/// this database (docs/design.md §5.3). The step that carries another cluster's IDs over where
/// neither its WAL nor this database's floor relation came along (a logical-replication move,
/// rows copied from elsewhere). For the database's owner and superusers (`privileges`): the
/// bound keeps any one call within a minute of the wall clock. Returns the server's durable
/// floor.
#[pg_extern(sql = false)]
fn snowflake_raise_floor(until: TimestampWithTimeZone) -> Option<TimestampWithTimeZone> {
    privileges::require(Caller::DatabaseOwner, "snowflake_raise_floor");
    match pg_sys::TimestampTz::from(until) {
        i64::MAX => errors::floor_not_finite("infinity").raise(),
        i64::MIN => errors::floor_not_finite("-infinity").raise(),
        _ => timestamps::timestamptz(backend::raise_floor(unix_us(until))),
    }
}

/// `snowflake_accept_floor() → timestamptz`: takes the value of this database's floor relation,
/// which the extension did not write and which lies further ahead of the wall clock than it
/// trusts such a value (a dump restored from a cluster whose clock is ahead), into the server's
/// durable floor, so that IDs continue above it (docs/design.md §5.3). Superusers only
/// (`privileges`): it moves the IDs of every database, without a bound. Returns the server's
/// durable floor.
#[pg_extern(sql = false)]
fn snowflake_accept_floor() -> Option<TimestampWithTimeZone> {
    privileges::require(Caller::Superuser, "snowflake_accept_floor");
    timestamps::timestamptz(backend::accept_floor())
}

/// Citus only (docs/design.md §9): what the coordinator sends a worker (as a superuser, the only
/// caller it serves) so that it has sequence `name` with this layout. Creates it when absent;
/// an equal layout is left as it is; another layout is refused (42710), failing the
/// coordinator's transaction on every node.
#[allow(clippy::too_many_arguments)]
#[pg_extern(sql = false)]
fn snowflake_citus_receive_sequence(
    name: &str,
    preset: &str,
    epoch_unix_us: i64,
    time_unit_us: i64,
    time_bits: i32,
    node_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
    gene_bits: i32,
) {
    privileges::require(Caller::Superuser, "snowflake_citus_receive_sequence");
    shared_memory::require_preloaded();
    let name = checked_name(Some(name));
    let width = |bits: i32| u8::try_from(bits).unwrap_or(u8::MAX);
    let layout = Layout {
        time_bits: width(time_bits),
        node_bits: width(node_bits),
        worker_bits: width(worker_bits),
        sequence_bits: width(sequence_bits),
        gene_bits: width(gene_bits),
        time_unit_us,
        epoch_unix_us,
    };
    if let Err(problem) = layout.validate() {
        errors::stored_layout_invalid(name, &problem).raise();
    }
    let catalog = backend::catalog_table();
    match catalog::load_layout(&catalog, name) {
        None => catalog::insert(&catalog, name, preset, &layout),
        Some((existing, _)) if existing == layout => {}
        Some(_) => {
            errors::citus_sequence_differs(name, &catalog.extension_schema(), "this Citus worker")
                .raise()
        }
    }
}

/// Citus only (docs/design.md §9): what the coordinator sends a worker when it drops sequence
/// `name`. Deletes it if this node has it.
#[pg_extern(sql = false)]
fn snowflake_citus_forget_sequence(name: &str) {
    privileges::require(Caller::Superuser, "snowflake_citus_forget_sequence");
    shared_memory::require_preloaded();
    catalog::delete(&backend::catalog_table(), name);
}

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
    shared_memory::require_preloaded();
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
    let shared = shared_memory::state();
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
    let shared = shared_memory::state();
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
        set_timestamptz(shared.reserved_until()),
        timestamps::timestamptz(reading.now_unix_us),
        worker_ids::in_use(shared.worker_ids()) as i32,
        gucs::MAX_WORKERS.get(),
        count(&counters.forward_jumps_followed),
        count(&counters.forward_jumps_ignored),
        set_timestamptz(shared.durable_floor()),
        worker_ids::sharing_sessions(shared.worker_ids()) as i32,
        count(&counters.tick_conflicts),
        saturating_i64(worker_ids::ids_issued_since_start(
            shared.worker_ids(),
            &counters.ids_issued_retired,
            &counters.ids_issued_reported,
        )),
        set_timestamptz(
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

/// The time `unix_us` as a timestamptz, or NULL for i64::MIN (nothing reserved or learned yet).
fn set_timestamptz(unix_us: i64) -> Option<TimestampWithTimeZone> {
    (unix_us != i64::MIN)
        .then(|| timestamps::timestamptz(unix_us))
        .flatten()
}

enum TickOf {
    BeforeEpoch,
    Tick(u64),
    AfterEnd,
}

fn tick_containing(layout: &Layout, ts: TimestampWithTimeZone) -> TickOf {
    match layout.tick_at(unix_us(ts)) {
        None => TickOf::BeforeEpoch,
        Some(tick) if tick > layout.max_tick() => TickOf::AfterEnd,
        Some(tick) => TickOf::Tick(tick),
    }
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

/// The largest ID a layout can make.
fn last_id(layout: &Layout) -> i64 {
    layout.max_id_of_tick(layout.max_tick()).unwrap_or(i64::MAX)
}

fn decompose(seq: &str, layout: &Layout, id: i64) -> Parts {
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
fn warn_if_not_this_clusters(seq: &str, layout: &Layout, function: &str) {
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

fn checked_name(name: Option<&str>) -> &str {
    let name = name.unwrap_or_else(|| errors::null_sequence_name().raise());
    if !catalog::name_fits(name) {
        errors::invalid_sequence_name(name, catalog::MAX_NAME_BYTES).raise();
    }
    name
}

/// A count as SQL's `bigint`, held at its largest beyond it.
fn saturating_i64(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
