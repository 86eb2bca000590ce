//! Rows that arrive without their database's floor (docs/design.md §5.3, "Rows that come
//! without the database"): a dump made with `pg_dump -n` or `-t` but without
//! `--extension=snowflake_id`, rows copied from another server. Nothing carries their floor, so
//! new IDs can repeat theirs where this server's clock is behind the one that made them, and no
//! value a role writes into a table may move the floor. `pg_restore` builds a table's keys after
//! its rows: the event trigger `snowflake_id_warn_of_stored_ids_ahead` (sql/) calls
//! `warn_of_stored_ids_ahead` for each column that an index now orders and whose default is
//! `snowflake_nextval(['<sequence>'])`, which warns, naming a superuser's step, when the
//! column's largest ID lies beyond where this database's new IDs begin.

use pgrx::prelude::*;

use crate::backend;
use crate::catalog;
use crate::database_floor;
use crate::errors;
use crate::shared_memory;
use crate::system_clock;

/// `snowflake_id_internal.warn_of_stored_ids_ahead(tbl oid, col text, seq text)`, declared in
/// sql/ for the event trigger: a WARNING when the largest ID stored in `tbl.col` ends after the
/// time from which this database issues IDs of `seq`, or when `seq` does not exist here. It
/// changes nothing. It learns something of the table's rows, so it answers only a role with
/// its owner's rights (the one whose command fired the trigger), and reads them as the owner in
/// a security-restricted operation, as PostgreSQL's maintenance code does: no code of the owner
/// runs with another role's rights.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn warn_of_stored_ids_ahead(table: pg_sys::Oid, column: &str, seq: &str) {
    if shared_memory::try_state().is_none() {
        return;
    }
    let Some(OwnedColumn {
        owner,
        table,
        column,
        largest_query,
    }) = owned_column(table, column)
    else {
        return;
    };
    let shown = format!("{table}.{column}");
    let largest = database_floor::as_owner(owner, || Spi::get_one::<i64>(&largest_query));
    let Ok(Some(largest)) = largest else {
        return;
    };
    let catalog = backend::catalog_table();
    let Some((layout, _)) = catalog::load_layout(&catalog, seq) else {
        // Rows of a sequence this database does not have (a partial dump brings no catalog
        // rows): their IDs cannot be placed, so the step is said without its time.
        errors::stored_ids_of_a_missing_sequence(&table, &column, seq).warn();
        return;
    };
    let Ok(parts) = layout.decompose(largest) else {
        return;
    };
    let stored_until = layout.tick_start_unix_us(parts.tick.saturating_add(1));
    let new_from = backend::issued_or_covered_until();
    if stored_until > new_from {
        let (wall, _) = system_clock::wall_and_monotonic_us();
        let limit = database_floor::trusted_lead_us();
        errors::stored_ids_ahead(&shown, seq, stored_until, new_from, wall, limit).warn();
    }
}

/// A column whose values the current role may learn, through its table's owner.
struct OwnedColumn {
    owner: pg_sys::Oid,
    /// The table's name, schema-qualified, and the column's, each quoted for SQL text.
    table: String,
    column: String,
    /// The query of the column's largest value.
    largest_query: String,
}

/// `table`'s column `column`, when the current role has the rights of the table's owner.
fn owned_column(table: pg_sys::Oid, column: &str) -> Option<OwnedColumn> {
    Spi::connect(|client| {
        let row = client
            .select(
                "SELECT c.relowner, \
                        pg_catalog.format('%I.%I', n.nspname, c.relname), \
                        pg_catalog.quote_ident($2), \
                        pg_catalog.format('SELECT pg_catalog.max(%I) FROM %I.%I', \
                                          $2, n.nspname, c.relname) \
                   FROM pg_catalog.pg_class c \
                   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
                  WHERE c.oid OPERATOR(pg_catalog.=) $1 \
                    AND pg_catalog.pg_has_role(c.relowner, 'USAGE')",
                Some(1),
                &[table.into(), column.into()],
            )
            .ok()?
            .first();
        Some(OwnedColumn {
            owner: row.get::<pg_sys::Oid>(1).ok()??,
            table: row.get::<String>(2).ok()??,
            column: row.get::<String>(3).ok()??,
            largest_query: row.get::<String>(4).ok()??,
        })
    })
}
