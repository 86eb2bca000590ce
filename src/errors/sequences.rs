//! The errors of sequences: their names, layouts and catalog rows, and the IDs they issue.

use pgrx::prelude::*;
use snowflake_id_core::layout::Layout;
use snowflake_id_core::sequence_options::OptionsError;

use crate::pg::timestamps::format_unix_us;

use super::error::Error;

// Sequences.

pub fn sequence_not_found(sequence: &str, extension_schema: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
        format!("snowflake sequence \"{sequence}\" does not exist"),
        Some(format!(
            "Names are compared exactly as written, case included (\"Orders\" is not \
             \"orders\"). SELECT name FROM {extension_schema}.snowflake_sequences lists the \
             sequences; snowflake_create_sequence() creates one."
        )),
    )
}

pub fn sequence_exists(sequence: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
        format!("snowflake sequence \"{sequence}\" already exists"),
        Some("Choose another name; a layout never changes once created.".into()),
    )
}

pub fn citus_worker_cannot_change_sequences(function: &str, sequence: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("{function}(\"{sequence}\") must run on the Citus coordinator, not on a worker"),
        Some(
            "Connect to the coordinator and run it there: it applies the change to every node \
             in the same transaction."
                .into(),
        ),
    )
}

/// `nodes`: where the other layout is ("this Citus worker", or the workers' host:port list).
pub fn citus_sequence_differs(sequence: &str, extension_schema: &str, nodes: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_DUPLICATE_OBJECT,
        format!(
            "snowflake sequence \"{sequence}\" exists with another layout than on the \
             coordinator on {nodes}"
        ),
        Some(format!(
            "Compare the fingerprints in {extension_schema}.snowflake_sequences on both nodes. If \
             that sequence made no IDs you keep, remove it there with SELECT \
             {extension_schema}.snowflake_citus_forget_sequence('{sequence}') and try again."
        )),
    )
}

pub fn cannot_drop_default() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST,
        "cannot drop snowflake sequence \"default\": it is part of the extension".into(),
        Some("DROP EXTENSION snowflake_id removes it.".into()),
    )
}

pub fn null_sequence_name() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
        "snowflake sequence name must not be NULL".into(),
        None,
    )
}

pub fn invalid_sequence_name(sequence: &str, max_bytes: usize) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!(
            "invalid snowflake sequence name \"{sequence}\": name must be 1 to {max_bytes} bytes"
        ),
        None,
    )
}

pub fn invalid_options(sequence: &str, problem: &OptionsError) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("invalid layout for snowflake sequence \"{sequence}\": {problem}"),
        problem.hint(),
    )
}

pub fn no_gene_bits(sequence: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("snowflake sequence \"{sequence}\" has no gene bits"),
        Some(format!(
            "Call snowflake_nextval('{sequence}') without a key, or create a sequence with \
             gene_bits."
        )),
    )
}

pub fn time_exhausted(sequence: &str, layout: &Layout) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
        format!(
            "snowflake sequence \"{sequence}\" has run out of time: its {}-bit time field ended \
             at {}",
            layout.time_bits,
            format_unix_us(layout.exhausted_at_unix_us())
        ),
        Some("Create a new sequence with a later epoch or more time bits.".into()),
    )
}

pub fn stored_layout_invalid(sequence: &str, problem: &dyn std::fmt::Display) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!("snowflake sequence \"{sequence}\" has an invalid layout: {problem}"),
        Some("The catalog table was changed by hand; recreate the sequence.".into()),
    )
}

/// A row of the catalog table updated or deleted other than by the extension's functions.
pub fn catalog_written_by_hand(command: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "{command} of snowflake_id_internal.snowflake_sequence_catalog: a snowflake \
             sequence's layout never changes, and only snowflake_drop_sequence removes one"
        ),
        Some(
            "Create a new sequence with snowflake_create_sequence, or drop one with \
             snowflake_drop_sequence (its name then starts a new ID space)."
                .into(),
        ),
    )
}

/// The catalog table's guard trigger function attached to another table.
pub fn catalog_guard_elsewhere() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id_internal.catalog_guard() guards only \
         snowflake_id_internal.snowflake_sequence_catalog"
            .into(),
        Some("Drop the trigger that calls it on this table.".into()),
    )
}

/// A row inserted into the catalog table by hand (a restore, a member of `pg_write_all_data`)
/// that names no sequence the extension could serve.
pub fn catalog_row_refused(sequence: &str, problem: &dyn std::fmt::Display) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_CHECK_VIOLATION,
        format!(
            "new row of snowflake_id_internal.snowflake_sequence_catalog for snowflake sequence \
             \"{sequence}\" is refused: {problem}"
        ),
        Some("Create sequences with snowflake_create_sequence, which checks the layout.".into()),
    )
}

/// The sequence's catalog row was changed in place (the extension only inserts and deletes).
pub fn stored_layout_edited(sequence: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
        format!(
            "snowflake sequence \"{sequence}\" was changed in place in \
             snowflake_id_internal.snowflake_sequence_catalog: its IDs could repeat stored ones"
        ),
        Some(
            "A layout never changes. A superuser deletes the row and inserts it again as it was \
             (from a dump or a backup), or drops the sequence with snowflake_drop_sequence and \
             creates a new one (a new ID space)."
                .into(),
        ),
    )
}

/// An ID decodes, under the layout it was decoded with, to a time far ahead of the clock
/// (a WARNING: the ID was made by a sequence of another layout).
pub fn decoded_beyond_clock(sequence: &str, id: i64, tick_start_unix_us: i64) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "ID {id} decodes to {} under the layout of snowflake sequence \"{sequence}\", more \
             than a day ahead of this server's clock: it was made by another sequence",
            format_unix_us(tick_start_unix_us)
        ),
        Some(format!(
            "Decode it with the sequence that made it: snowflake_decode(id, '<that sequence>') \
             (snowflake_timestamp likewise); SELECT name FROM snowflake_sequences lists them. \
             \"{sequence}\" is what a call without a sequence uses."
        )),
    )
}

/// A range or partition function with a sequence without node bits on a cluster whose node id
/// is set (a WARNING: this cluster issues no ID of that sequence).
pub fn sequence_without_node_bits(sequence: &str, node_id: i32, function: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_WARNING,
        format!(
            "snowflake sequence \"{sequence}\" has no node bits, but snowflake_id.node_id is \
             {node_id}: this cluster issues none of its IDs, so {function} misses the IDs it \
             issues now"
        ),
        Some(format!(
            "Pass the sequence your IDs come from: {function}(…, '<that sequence>'), and the \
             same to snowflake_decode, snowflake_min_id, snowflake_max_id and \
             snowflake_partition_bounds. For IDs of \"{sequence}\" made before the node id was \
             set, this warning does not apply."
        )),
    )
}

/// The cluster clock reads a time before the sequence's epoch (a machine whose clock was reset).
pub fn clock_before_epoch(sequence: &str, layout: &Layout, now_unix_us: i64) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "snowflake sequence \"{sequence}\" starts at {}, but the server's clock reads {}",
            format_unix_us(layout.epoch_unix_us),
            format_unix_us(now_unix_us)
        ),
        Some(
            "Set the server's clock right (for example with NTP); a sequence makes no IDs \
             before its epoch."
                .into(),
        ),
    )
}

pub fn currval_undefined(sequence: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("currval of snowflake sequence \"{sequence}\" is not yet defined in this session"),
        Some(format!(
            "Call snowflake_nextval('{sequence}') in this session first."
        )),
    )
}

pub fn lastval_undefined() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake lastval is not yet defined in this session".into(),
        Some("Call snowflake_nextval() in this session first.".into()),
    )
}
