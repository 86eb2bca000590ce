//! This database's `snowflake_id` extension, as `pg_extension` and its members say now
//! (docs/design.md §6): its schema, the relations its scripts registered, and the catalog table
//! among them. Catalog scans, not SQL: a new connection's first ID plans no query.

use std::ffi::CStr;
use std::num::NonZeroUsize;

use pgrx::prelude::*;

use crate::errors;
use crate::pg::guards::{Lock, OpenRelation};

use crate::state::catalog::{CatalogTable, ACCESS_SHARE, CATALOG_TABLE_NAME, INTERNAL_SCHEMA};

/// Finds the catalog table of this database's extension; raises 42704 when it is not installed.
pub fn locate() -> CatalogTable {
    find().unwrap_or_else(|| errors::extension_not_installed().raise())
}

/// The catalog table of this database's extension, or None when it is not installed here.
///
/// Catalog scans, not SQL: a new connection's first ID plans no query (docs/design.md §5.3), and
/// no code of any role (an operator, a row-level security policy) runs inside the lookup.
pub fn find() -> Option<CatalogTable> {
    let extension = Extension::installed()?;
    // Only the extension's own table: a role's table of that name is never read as it.
    let oid = extension.member(CATALOG_TABLE_NAME, pg_sys::RELKIND_RELATION)?;
    Some(CatalogTable::new(oid, extension.namespace))
}

/// This database's `snowflake_id` extension, as its row in `pg_extension` says now.
pub struct Extension {
    namespace: pg_sys::Oid,
    /// The schema `snowflake_id_internal` that the extension's 0.10.0 script created and
    /// moved its state into (InvalidOid in a database not updated yet).
    internal_namespace: pg_sys::Oid,
    /// The relations its scripts registered with `pg_extension_config_dump` (`extconfig`).
    registered: Vec<pg_sys::Oid>,
}

impl Extension {
    /// The extension's row, read now; None when it is not installed in this database.
    pub fn installed() -> Option<Extension> {
        // Opened as PostgreSQL's own get_extension_oid does, and closed (releasing the lock)
        // before the lookup below; nothing read from it is kept past the close.
        let row = {
            let extensions = OpenRelation::table(
                pg_sys::ExtensionRelationId,
                ACCESS_SHARE,
                Lock::ReleasedAtClose,
            );
            // SAFETY: `extensions` is pg_extension, open.
            unsafe { extension_row(extensions.as_ptr()) }
        };
        let (namespace, registered) = row?;
        Some(Extension {
            namespace,
            // SAFETY: a syscache lookup of a static name.
            internal_namespace: unsafe {
                pg_sys::get_namespace_oid(INTERNAL_SCHEMA.as_ptr(), true)
            },
            registered,
        })
    }

    /// The member relation `name` of kind `kind` in the extension's own schema (or, in a
    /// database not updated to 0.10.0 yet, the schema it was created in), found among the
    /// relations its scripts registered with `pg_extension_config_dump` (`extconfig`), where
    /// PostgreSQL lists a relation only while it is a member (`pg_extension_config_dump`
    /// refuses any other, `ALTER EXTENSION … DROP` takes it out). The scripts that create the
    /// catalog table and both floor relations register them. Each registered relation is
    /// opened (locked for reading until the transaction ends) and its name read from its
    /// relcache entry: a new connection's first ID opens these relations anyway, where a lookup
    /// by name would cost it a syscache miss (a `pg_class` index scan) per relation.
    pub fn member(&self, name: &CStr, kind: u8) -> Option<pg_sys::Oid> {
        self.registered.iter().copied().find(|&relation| {
            let Some(opened) =
                OpenRelation::try_open(relation, ACCESS_SHARE, Lock::KeptToTransactionEnd)
            else {
                return false;
            };
            let row = opened.class();
            (row.relnamespace == self.internal_namespace || row.relnamespace == self.namespace)
                && row.relkind as u8 == kind
                // SAFETY: a relation's name is a NUL-terminated NameData.
                && unsafe { CStr::from_ptr(row.relname.data.as_ptr()) } == name
        })
    }

    /// The relations its scripts registered, wherever they are now.
    pub fn registered(&self) -> &[pg_sys::Oid] {
        &self.registered
    }

    /// Whether `relation` is one of the extension's registered members (see [`Self::member`]).
    pub fn registers(&self, relation: pg_sys::Oid) -> bool {
        self.registered.contains(&relation)
    }
}

/// The `snowflake_id` row of `pg_extension` (`extensions`): its schema and the relations its
/// scripts registered (`extconfig`), copied out; None when there is no such row. The table is
/// read whole rather than through its name index: it has a row per extension (a page or two),
/// and a new connection's first ID then opens no index of it.
///
/// # Safety
/// `extensions` is `pg_extension`, open inside a transaction.
unsafe fn extension_row(extensions: pg_sys::Relation) -> Option<(pg_sys::Oid, Vec<pg_sys::Oid>)> {
    let mut key = pg_sys::ScanKeyData::default();
    // SAFETY: fills `key` with a comparison of the name column to a static name.
    unsafe {
        pg_sys::ScanKeyInit(
            &mut key,
            pg_sys::Anum_pg_extension_extname as pg_sys::AttrNumber,
            pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
            pg_sys::Oid::from(pg_sys::F_NAMEEQ),
            pg_sys::Datum::from(c"snowflake_id".as_ptr()),
        )
    };
    // SAFETY: `extensions` is open (see the contract); `key` lives until the scan ends.
    let scan = unsafe {
        pg_sys::systable_beginscan(
            extensions,
            pg_sys::Oid::from(pg_sys::ExtensionNameIndexId),
            false,
            std::ptr::null_mut(),
            1,
            &mut key,
        )
    };
    // SAFETY: the scan just begun; the row it returns stays valid until the scan ends.
    let row = unsafe { pg_sys::systable_getnext(scan) };
    // SAFETY: `extensions` is open, so its relcache entry is valid.
    let descriptor = unsafe { (*extensions).rd_att };
    let column = |attribute: u32| {
        (!row.is_null())
            .then(|| {
                // SAFETY: a row of pg_extension, described by its descriptor, read while the
                // scan lasts.
                unsafe {
                    pgrx::heap_getattr_raw(row, NonZeroUsize::new(attribute as usize)?, descriptor)
                }
            })
            .flatten()
    };
    let namespace = column(pg_sys::Anum_pg_extension_extnamespace)
        // SAFETY: extnamespace is an oid column.
        .and_then(|datum| unsafe { pg_sys::Oid::from_datum(datum, false) });
    let registered = column(pg_sys::Anum_pg_extension_extconfig)
        // SAFETY: extconfig is an oid[] column; the array is copied out before the scan ends.
        .and_then(|datum| unsafe { Vec::<Option<pg_sys::Oid>>::from_datum(datum, false) })
        .map(|oids| oids.into_iter().flatten().collect())
        .unwrap_or_default();
    // SAFETY: ends the scan begun above, once; nothing read from its row is used after.
    unsafe { pg_sys::systable_endscan(scan) };
    Some((namespace?, registered))
}
