//! The object access hook (docs/design.md §6): a `TRUNCATE`, `DROP` or `ALTER` of a state
//! relation, and `DROP DATABASE`, mark the transaction as writing the extension's state
//! (`state/extension_directory.rs`), as no row trigger fires for them.

use once_cell::sync::OnceCell;
use pgrx::prelude::*;

use crate::state::extension_directory;

static PREVIOUS_OBJECT_ACCESS_HOOK: OnceCell<pg_sys::object_access_hook_type> = OnceCell::new();

/// Installs the hook (from `_PG_init`, while preloading).
pub fn install() {
    // `_PG_init` runs once per process before any query, single-threaded; the previous hook is
    // kept and called, so other extensions' hooks keep working.
    // SAFETY: reads PostgreSQL's hook global while nothing else runs (see above).
    PREVIOUS_OBJECT_ACCESS_HOOK.get_or_init(|| unsafe { pg_sys::object_access_hook });
    // SAFETY: sets it while nothing else runs; the previous hook is kept just above.
    unsafe { pg_sys::object_access_hook = Some(on_object_access) };
}

/// A `TRUNCATE`, `DROP` or `ALTER` (a rename, another schema, another owner) of a state relation
/// bumps the generation at its commit, and so does `DROP DATABASE` (a database made later with
/// the same OID, once the OID counter wrapped around, and from the same template, would find the
/// same floor relation in place). After an `ALTER … SET SCHEMA` the relation's schema is the new
/// one: the relations the directory holds count too.
#[pg_guard]
unsafe extern "C-unwind" fn on_object_access(
    access: pg_sys::ObjectAccessType::Type,
    class: pg_sys::Oid,
    object: pg_sys::Oid,
    sub_id: std::ffi::c_int,
    argument: *mut std::ffi::c_void,
) {
    use pg_sys::ObjectAccessType::{OAT_DROP, OAT_POST_ALTER, OAT_TRUNCATE};
    let relation = class == pg_sys::RelationRelationId;
    let changes_state = match access {
        OAT_TRUNCATE => extension_directory::is_state_relation(object),
        OAT_DROP => {
            class == pg_sys::DatabaseRelationId
                || (relation && extension_directory::is_state_relation(object))
        }
        OAT_POST_ALTER => {
            relation
                && (extension_directory::is_state_relation(object)
                    || extension_directory::holds(object))
        }
        _ => false,
    };
    if changes_state {
        extension_directory::forget_at_commit();
    }
    if let Some(previous) = PREVIOUS_OBJECT_ACCESS_HOOK.get().copied().flatten() {
        // SAFETY: the hook installed before ours, called with the arguments we were given.
        unsafe { previous(access, class, object, sub_id, argument) };
    }
}
