//! The errors and warnings of the reservation file, the floor in the database, and IDs stored
//! ahead of it (docs/design.md §5): part of `errors`, whose `Error` they build.

use pgrx::prelude::*;
use snowflake_id_core::reservation_file;

use super::error::Error;
use crate::pg::timestamps::format_unix_us;

// The reservation file (docs/design.md §5).

pub fn reservation_not_written(path: &str, error: &std::io::Error) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_IO_ERROR,
        format!("could not write snowflake reservation file \"{path}\": {error}"),
        Some("No ID was issued. Check the data directory's free space and permissions.".into()),
    )
}

pub fn reservation_unusable(path: &str, why: &reservation_file::ReadError) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!("snowflake reservation file \"{path}\" is unusable: {why}"),
        reservation_unusable_hint(),
    )
}

/// The file was unusable at startup but reads fine now: IDs stay refused until a restart.
pub fn reservation_was_unusable(path: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!(
            "snowflake reservation file \"{path}\" is unusable: it was unreadable or corrupt \
             when the server started"
        ),
        reservation_unusable_hint(),
    )
}

fn reservation_unusable_hint() -> Option<String> {
    Some(
        "IDs are refused because the last reserved time is unknown. Restore the file from a \
         backup, or write a time later than any ID issued (see docs/reference.md, \"Guarantees\") and \
         restart the server."
            .into(),
    )
}

// The floor in the database (docs/design.md §5.3).

/// The database's extension predates the floor relation (0.4.0, not yet updated).
pub fn floor_relation_missing(extension_schema: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "relation \"{extension_schema}.snowflake_floor\" does not exist: the snowflake_id \
             extension in this database is older than 0.5.0"
        ),
        Some("Run ALTER EXTENSION snowflake_id UPDATE; in this database.".into()),
    )
}

/// A member of the extension that the floor is read from is owned by a role that is not a
/// superuser, which could then set the floor of the whole server.
pub fn floor_relation_not_superuser_owned(relation: &str, owner: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "sequence {relation} of the extension snowflake_id is owned by \"{owner}\", who is \
             not a superuser: its value would count for every database"
        ),
        Some(format!(
            "A superuser runs: ALTER SEQUENCE {relation} OWNER TO <a superuser>;"
        )),
    )
}

/// The database's floor relation holds a value the extension did not write, further ahead of
/// the wall clock than it trusts such a value (docs/design.md §5.3).
pub fn floor_beyond_trust(
    relation: &str,
    floor_unix_us: i64,
    wall_unix_us: i64,
    limit_us: i64,
) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "the snowflake floor in {relation} is {}, more than {} s ahead of this server's wall \
             clock ({}), and this server did not write it: this session issues no ID of this \
             database until a superuser accepts it or sets it back",
            format_unix_us(floor_unix_us),
            limit_us / 1_000_000,
            format_unix_us(wall_unix_us)
        ),
        Some(format!(
            "Superusers, the database's owner (a restore) and members of pg_write_all_data can \
             set it. If a dump or a database from a cluster whose clock is ahead was restored \
             here, a superuser accepts the value: SELECT snowflake_accept_floor(); (the IDs of \
             every database then continue above it). Otherwise a superuser sets it back to \
             where this server's own IDs end: SELECT setval('{relation}', (SELECT \
             (EXTRACT(epoch FROM greatest(reserved_until, durable_floor)) * 1000000)::bigint \
             FROM snowflake_stats()));"
        )),
    )
}

/// The largest ID `column` (`table.column`, quoted) of snowflake sequence `sequence` holds
/// (`stored_ids`) lies after where this database's new IDs begin. The value is the table
/// owner's (`owner`, quoted), not the extension's: the message says whose it is, how far ahead
/// the server's IDs would go, and that carrying it is a superuser's call.
pub fn stored_ids_ahead(
    column: &str,
    owner: &str,
    sequence: &str,
    stored_until_unix_us: i64,
    new_from_unix_us: i64,
    wall_unix_us: i64,
    limit_us: i64,
) -> Error {
    let until = format_unix_us(stored_until_unix_us);
    let ahead_s = stored_until_unix_us.saturating_sub(wall_unix_us) / 1_000_000;
    let step = if stored_until_unix_us.saturating_sub(wall_unix_us) <= limit_us {
        format!("SELECT snowflake_raise_floor('{until}');")
    } else {
        format!(
            "SELECT setval('snowflake_id_internal.snowflake_floor', {stored_until_unix_us}); \
             SELECT snowflake_accept_floor(); (beyond the {} s that snowflake_raise_floor takes)",
            limit_us / 1_000_000
        )
    };
    Error::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "{column} holds IDs of snowflake sequence \"{sequence}\" up to {until}, after {} \
             where this database's new IDs begin: new IDs can repeat them",
            format_unix_us(new_from_unix_us)
        ),
        Some(format!(
            "These values are in a table of role {owner}, not snowflake_id's: rows that came without \
             their database's floor do this (a dump made with pg_dump -n or -t but without \
             --extension=snowflake_id, rows copied from another server), and so does a value \
             typed in. Carrying them moves the IDs of every database of this server to {until}, \
             {ahead_s} s ahead of its wall clock ({}); only a superuser decides that, after \
             checking where the rows came from. Then, before new IDs are issued here: {step} \
             (docs/reference.md, \"Moving to a new cluster\").",
            format_unix_us(wall_unix_us)
        )),
    )
}

/// The stored-IDs check of one index could not run (a corrupted catalog row, say): a WARNING,
/// and the command that fired it goes on.
pub fn stored_ids_not_compared(problem: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "snowflake_id could not compare the IDs the command indexed with this database's \
             floor: {problem}"
        ),
        None,
    )
}

/// The event trigger's function was called some other way (only a superuser can declare one).
pub fn not_called_as_event_trigger() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        "snowflake_id_internal.stored_ids_ahead_of_new_indexes() can only be called as an event \
         trigger"
            .into(),
        None,
    )
}

/// A table's column holds IDs of a sequence this database does not have (a WARNING when an
/// index is built over it: rows of a partial dump, which brings no catalog rows).
pub fn stored_ids_of_a_missing_sequence(table: &str, column: &str, sequence: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "{table}.{column} holds IDs of snowflake sequence \"{sequence}\", which this \
             database does not have: new IDs of it, once it is created, can repeat them"
        ),
        Some(format!(
            "A dump made with pg_dump -n or -t but without --extension=snowflake_id brings \
             neither the sequence nor the floor. Create the sequence with the layout that made \
             these IDs (snowflake_create_sequence), then, before new IDs are issued here, a \
             superuser runs SELECT snowflake_raise_floor(snowflake_timestamp(max({column}), \
             '{literal}') + interval '1 second') FROM {table}; (docs/reference.md, \"Moving \
             to a new cluster\").",
            literal = sequence.replace('\'', "''")
        )),
    )
}

// Raising the floor (`snowflake_raise_floor`).

/// `snowflake_raise_floor` was given `infinity` or `-infinity`.
pub fn floor_not_finite(until: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("snowflake floor {until} is not a finite time"),
        Some(
            "Pass the time the other cluster reserved last (its snowflake_stats().reserved_until)."
                .into(),
        ),
    )
}

/// `snowflake_raise_floor` was given a time further ahead of the wall clock than its bound.
pub fn floor_too_far_ahead(until_unix_us: i64, wall_unix_us: i64, limit_us: i64) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!(
            "snowflake floor {} is more than {} s ahead of the wall clock ({})",
            format_unix_us(until_unix_us),
            limit_us / 1_000_000,
            format_unix_us(wall_unix_us)
        ),
        Some(
            "Pass the time the other cluster reserved last (its snowflake_stats().reserved_until), \
             after checking that the two clusters' clocks agree; the bound is \
             snowflake_id.reserve_ahead + snowflake_id.idle_renewal + 60 s ahead of this \
             server's wall clock."
                .into(),
        ),
    )
}
