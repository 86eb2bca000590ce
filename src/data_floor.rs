//! The floor that lives in the data (docs/design.md §5.3). What the WAL does not carry from one
//! cluster to another (`pg_upgrade`, a dump restored into a new cluster, a lost reservation
//! file) still arrives with the rows: before a backend first issues IDs of a sequence, it looks
//! up the largest ID stored in every indexed `bigint` column whose default calls that sequence,
//! and raises the durable floor (and with it the cluster clock) above that ID's tick.

use pgrx::prelude::*;
use snowflake_id_core::layout::Layout;

use crate::citus;
use crate::errors;
use crate::shared_memory;

/// Raises the durable floor above the largest ID of `sequence` stored in this database.
pub fn raise_above_stored_ids(sequence: &str, layout: &Layout) {
    let citus = citus::role() != citus::Role::Standalone;
    let Some(highest) = as_superuser(|| highest_stored_id(sequence, citus)) else {
        return;
    };
    // A value the layout cannot have made (e.g. a serial value from before a conversion
    // decodes to an early tick, a foreign ID not at all) raises nothing it should not.
    if let Ok(parts) = layout.decompose(highest) {
        let floor = layout.tick_start_unix_us(parts.tick.saturating_add(1));
        shared_memory::state().raise_durable_floor(floor);
    }
}

/// Runs `f` as the bootstrap superuser, so the lookup reads every table whatever the caller may
/// read (row-level security included), and cannot run the caller's code.
fn as_superuser<T>(f: impl FnOnce() -> T) -> T {
    let (mut user, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: reads and sets the current user the way SECURITY DEFINER functions do. An ERROR
    // inside `f` aborts the (sub)transaction, which restores the previous user itself.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(
            pg_sys::Oid::from(pg_sys::BOOTSTRAP_SUPERUSERID),
            context
                | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32
                | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        );
    }
    let result = f();
    // SAFETY: restores exactly what was read above.
    unsafe { pg_sys::SetUserIdAndSecContext(user, context) };
    result
}

/// The largest value in the indexed `bigint` columns whose default calls
/// `snowflake_nextval('<sequence>'…)`. Every name is schema-qualified, as this runs under the
/// caller's search_path. With `citus`, Citus's distributed and reference tables are left out:
/// their own relations hold no rows, and reading them would run a distributed query from
/// inside the statement that asked for an ID (docs/design.md §9).
fn highest_stored_id(sequence: &str, citus: bool) -> Option<i64> {
    // How the default reads back (`pg_get_expr`): with the name as a text constant, or, for
    // 'default', also with no argument at all (the stored call keeps the argument omitted).
    let call = format!("snowflake_nextval('{}'::text", sequence.replace('\'', "''"));
    let bare_call = (sequence == "default").then_some("snowflake_nextval()");
    let not_citus_table = if citus {
        "AND NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                          WHERE p.logicalrelid OPERATOR(pg_catalog.=) d.adrelid)"
    } else {
        ""
    };
    Spi::connect(|client| {
        let queries = client.select(
            &format!(
                "SELECT pg_catalog.format('SELECT pg_catalog.max(%I) FROM %s', a.attname,
                                      d.adrelid::pg_catalog.regclass)
               FROM pg_catalog.pg_attrdef d
               JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.adrelid
                                             AND a.attnum OPERATOR(pg_catalog.=) d.adnum
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.adrelid
              WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{{r,p}}'::pg_catalog.\"char\"[])
                AND NOT a.attisdropped
                AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype
                AND (pg_catalog.strpos(pg_catalog.pg_get_expr(d.adbin, d.adrelid), $1)
                         OPERATOR(pg_catalog.>) 0
                     OR pg_catalog.strpos(pg_catalog.pg_get_expr(d.adbin, d.adrelid), $2)
                         OPERATOR(pg_catalog.>) 0)
                AND EXISTS (SELECT FROM pg_catalog.pg_index i
                             WHERE i.indrelid OPERATOR(pg_catalog.=) d.adrelid
                               AND i.indpred IS NULL
                               AND i.indkey[0] OPERATOR(pg_catalog.=) a.attnum)
                {not_citus_table}"
            ),
            None,
            &[call.as_str().into(), bare_call.into()],
        )?;
        let queries: Vec<String> = queries
            .map(|row| row.get::<String>(1))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        let mut highest = None;
        for query in queries {
            let value = client
                .select(&query, Some(1), &[])?
                .first()
                .get_one::<i64>()?;
            highest = highest.max(value);
        }
        Ok::<_, pgrx::spi::Error>(highest)
    })
    .unwrap_or_else(|error| {
        errors::internal(format!(
            "could not read the IDs stored for snowflake sequence \"{sequence}\": {error}"
        ))
        .raise()
    })
}
