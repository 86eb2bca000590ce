//! The catalog table's guard trigger (docs/design.md §6): rows are only ever inserted, and
//! deleted by the extension's own functions; a row changed or deleted by hand is refused, and
//! so is a row inserted that the extension could not serve.

use pgrx::prelude::*;

use crate::errors;

use crate::state::catalog;
use crate::state::extension;

/// The guard trigger of the catalog table, `BEFORE INSERT OR UPDATE OR DELETE … FOR EACH ROW`
/// (`sql/snowflake_id--0.10.0--0.11.0.sql`): rows are only ever inserted, and deleted by
/// `snowflake_drop_sequence` (and on a Citus worker `snowflake_citus_forget_sequence`), so a
/// row changed or deleted by hand, by whoever may write the table (a member of
/// `pg_write_all_data`), would change a layout that issued IDs: 55000. A row inserted (a
/// restore by the database's owner, a member of `pg_write_all_data`) must be one the
/// extension can serve, or every reader of the view would fail on it: 23514 otherwise. A bare
/// version-1 C function, declared in the extension's own schema only.
///
/// # Safety
/// PostgreSQL calls it as a row trigger, with `fcinfo->context` its `TriggerData`.
#[no_mangle]
#[pg_guard]
pub unsafe extern "C-unwind" fn snowflake_catalog_guard(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: called by the trigger manager (see above) with a valid fcinfo.
    let context = unsafe { (*fcinfo).context };
    // SAFETY: the context is a TriggerData, valid for this call.
    let trigger = unsafe { &*context.cast::<pg_sys::TriggerData>() };
    let (event, row) = (trigger.tg_event, trigger.tg_trigtuple);
    // SAFETY: the relation the trigger fired on, open for this call.
    let relation = unsafe { &*trigger.tg_relation };
    let table = relation.rd_id;
    // Everybody may execute the function (privileges are decided when functions run): it
    // guards the extension's catalog table and nothing else, whose columns it reads by type.
    if extension::find().map(|catalog| catalog.oid()) != Some(table) {
        errors::catalog_guard_elsewhere().raise();
    }
    let operation = event & pg_sys::TRIGGER_EVENT_OPMASK;
    if operation == pg_sys::TRIGGER_EVENT_INSERT {
        // SAFETY: the inserted row of this table, described by its relation's descriptor.
        unsafe { refuse_unservable_row(row, relation.rd_att) };
        return pg_sys::Datum::from(row);
    }
    let deleting = operation == pg_sys::TRIGGER_EVENT_DELETE;
    if !(deleting && catalog::deleting()) {
        errors::catalog_written_by_hand(if deleting { "DELETE" } else { "UPDATE" }).raise();
    }
    pg_sys::Datum::from(row)
}

/// Refuses (23514) a catalog row that names no sequence a function could create: a name of 1 to
/// 63 bytes and a valid layout (`layout::validate`).
///
/// # Safety
/// As for [`stored_layout`].
unsafe fn refuse_unservable_row(row: pg_sys::HeapTuple, descriptor: pg_sys::TupleDesc) {
    // SAFETY: see the contract.
    let name = unsafe { catalog::stored_name(row, descriptor) };
    // SAFETY: see the contract.
    let layout = unsafe { catalog::stored_layout(row, descriptor) };
    let name = name.unwrap_or_default();
    if !catalog::name_fits(&name) {
        errors::catalog_row_refused(
            &name,
            &format!("a name must have 1 to {} bytes", catalog::MAX_NAME_BYTES),
        )
        .raise();
    }
    if let Err(problem) = layout.validate() {
        errors::catalog_row_refused(&name, &problem).raise();
    }
}

/// Version-1 calling convention of `snowflake_catalog_guard`, which PostgreSQL looks up.
#[no_mangle]
pub extern "C" fn pg_finfo_snowflake_catalog_guard() -> &'static pg_sys::Pg_finfo_record {
    static VERSION_1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &VERSION_1
}
