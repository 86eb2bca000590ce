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

use crate::catalog;
use crate::errors;

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
    let extension = catalog::Extension::installed()?;
    // SAFETY: makes the command's own catalog changes visible to the scans below, as
    // PostgreSQL does between two commands (`ALTER … SET SCHEMA` makes none itself).
    unsafe { pg_sys::CommandCounterIncrement() };
    extension.registered().iter().find_map(|&table| {
        // SAFETY: syscache lookups and catalog scans inside a transaction (the command's):
        // the relation's kind and schema, the publications for all tables, of that schema and
        // of the table itself; each list is read before the next call, and names are copied
        // at once.
        unsafe {
            if pg_sys::get_rel_relkind(table) as u8 != pg_sys::RELKIND_RELATION {
                return None;
            }
            let schema = pg_sys::get_rel_namespace(table);
            let publications = [
                pg_sys::GetAllTablesPublications(),
                pg_sys::GetSchemaPublications(schema),
                pg_sys::GetRelationPublications(table),
            ];
            let publication = publications
                .into_iter()
                .find_map(|list| PgList::<pg_sys::Oid>::from_pg(list).iter_oid().next())?;
            let name = pg_sys::get_publication_name(publication, false);
            Some((
                catalog::quoted(name),
                catalog::qualified(schema, pg_sys::get_rel_name(table)),
            ))
        }
    })
}
