//! The SQL functions that issue IDs (docs/design.md §6): `snowflake_nextval`, its gene form,
//! `snowflake_currval`, `snowflake_lastval`.

use pgrx::prelude::*;

use crate::ids::backend;

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
