//! The extension's state kept out of logical replication (docs/design.md §6): an apply worker
//! writes the tables it subscribes to without an executor plan or a row trigger of ours, so no
//! hook of the subscriber would see a change of its catalog table, and neither its extension
//! directory nor its sessions would follow it. A publication that would publish a relation of
//! `snowflake_id_internal` is therefore refused where it is made: `CREATE PUBLICATION` and
//! `ALTER PUBLICATION` (`FOR ALL TABLES`, `FOR TABLES IN SCHEMA snowflake_id_internal`, or
//! the table named), `CREATE EXTENSION` or `ALTER EXTENSION … UPDATE` in a database whose
//! publication for all tables would take the extension's tables in, and `ALTER … SET SCHEMA`
//! of the catalog table into a published schema. The check runs after the
//! command, on the publications PostgreSQL then holds, so it judges what the command did, not
//! how it was spelled; its error rolls the command back.

use pgrx::prelude::*;
use pgrx::PgList;

use crate::errors;
use crate::state::catalog;
use crate::state::extension::Extension;

/// Whether a statement of this kind can make a publication publish the extension's tables.
pub fn may_publish_the_state(kind: pg_sys::NodeTag) -> bool {
    [
        pg_sys::NodeTag::T_CreatePublicationStmt,
        pg_sys::NodeTag::T_AlterPublicationStmt,
        pg_sys::NodeTag::T_CreateExtensionStmt,
        pg_sys::NodeTag::T_AlterExtensionStmt,
        pg_sys::NodeTag::T_AlterObjectSchemaStmt,
    ]
    .contains(&kind)
}

/// Raises 0A000, naming the publication, when one of this database's publications publishes a
/// table of the extension's schema.
pub fn refuse_publishing_the_state() {
    if let Some((publication, table)) = publication_of_the_state() {
        errors::publication_of_the_state(&publication, &table).raise();
    }
}

/// The first publication (and the table it would publish) that publishes a table the extension
/// registered (its catalog table), for all tables, for its schema or by name, wherever the table
/// is now; None where the extension is not installed.
fn publication_of_the_state() -> Option<(String, String)> {
    let extension = Extension::installed()?;
    // SAFETY: makes the command's own catalog changes visible to the scans below, as
    // PostgreSQL does between two commands (`ALTER … SET SCHEMA` makes none itself).
    unsafe { pg_sys::CommandCounterIncrement() };
    // Syscache lookups and catalog scans inside the command's transaction: the relation's kind
    // and schema, the publications for all tables, of that schema and of the table itself (each
    // a new list); names are copied at once.
    extension.registered().iter().find_map(|&table| {
        // SAFETY: a syscache lookup of a relation (see above).
        if unsafe { pg_sys::get_rel_relkind(table) } as u8 != pg_sys::RELKIND_RELATION {
            return None;
        }
        // SAFETY: a syscache lookup of a relation.
        let schema = unsafe { pg_sys::get_rel_namespace(table) };
        // SAFETY: a scan of pg_publication.
        let for_all_tables = unsafe { pg_sys::GetAllTablesPublications() };
        // SAFETY: a syscache lookup of a schema's publications.
        let of_schema = unsafe { pg_sys::GetSchemaPublications(schema) };
        // SAFETY: a syscache lookup of a relation's publications.
        let of_table = unsafe { pg_sys::GetRelationPublications(table) };
        let publication = [for_all_tables, of_schema, of_table]
            .into_iter()
            .find_map(|list| {
                // SAFETY: each an OID list (null when empty), read before anything else runs.
                unsafe { PgList::<pg_sys::Oid>::from_pg(list) }
                    .iter_oid()
                    .next()
            })?;
        // SAFETY: a syscache lookup of a publication found just now: a palloc'd copy of its
        // name (an error if it is gone).
        let name = unsafe { pg_sys::get_publication_name(publication, false) };
        // SAFETY: that copy.
        let publication = unsafe { catalog::quoted(name) };
        // SAFETY: a syscache lookup of a relation: a palloc'd copy of its name, or null.
        let name = unsafe { pg_sys::get_rel_name(table) };
        // SAFETY: `name` is null or that copy.
        let table = unsafe { catalog::qualified(schema, name) };
        Some((publication, table))
    })
}
