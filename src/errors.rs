//! Every error the extension's Rust code raises, in one place (with `errors/floor.rs`, those of
//! the reservation file and the floor): a SQLSTATE, a message that names the object, and a hint
//! where there is a fix. The reference's error table (docs/reference.md) lists exactly the
//! SQLSTATEs used here and in the PL/pgSQL of `sql/` (checked by
//! pgrx-tests/tests/error_table.rs), so no other Rust file raises an error itself.

use std::ffi::CStr;

use pgrx::pg_sys::panic::{CaughtError, ErrorReport};
use pgrx::prelude::*;
use snowflake_id_core::base32;
use snowflake_id_core::layout::{DecodeError, Field, Layout};
use snowflake_id_core::partitions::SpanError;
use snowflake_id_core::sequence_options::OptionsError;

use crate::gucs;
use crate::timestamps::format_unix_us;

mod floor;
pub use floor::*;

/// An error about to be raised.
#[must_use = "an error does nothing until it is raised"]
pub struct Error {
    code: PgSqlErrorCode,
    message: String,
    hint: Option<String>,
}

impl Error {
    fn new(code: PgSqlErrorCode, message: String, hint: Option<String>) -> Error {
        Error {
            code,
            message,
            hint,
        }
    }

    /// Sends it as a WARNING to the client and the log; the call goes on.
    pub fn warn(self) {
        let mut report = ErrorReport::new(self.code, self.message, "snowflake_id");
        if let Some(hint) = self.hint {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::WARNING);
    }

    /// Raises the ERROR; pgrx turns the unwind into `ereport` at the function boundary, so no
    /// Rust panic crosses into PostgreSQL.
    pub fn raise(self) -> ! {
        let mut report = ErrorReport::new(self.code, self.message, "snowflake_id");
        if let Some(hint) = self.hint {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ereport(ERROR) returned")
    }
}

// Setup and configuration.

/// Raised by every function when the library was not preloaded (docs/design.md §4).
pub fn not_preloaded() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id must be loaded via shared_preload_libraries".into(),
        Some(
            "Add shared_preload_libraries = 'snowflake_id' to postgresql.conf \
             (append it to any libraries already listed there) and restart PostgreSQL."
                .into(),
        ),
    )
}

pub fn extension_not_installed() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT,
        "extension \"snowflake_id\" is not installed in this database".into(),
        Some("Run CREATE EXTENSION snowflake_id;".into()),
    )
}

pub fn node_id_unset(sequence: &str, layout: &Layout) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("snowflake sequence \"{sequence}\" needs snowflake_id.node_id, which is not set"),
        Some(match gucs::old_setting("node_id") {
            Some(old) => format!(
                "The configuration sets snowflake.node_id = {old}, the name up to 0.6.0, which is \
                 no longer read: rename it to snowflake_id.node_id in postgresql.conf and restart \
                 PostgreSQL."
            ),
            None => format!(
                "Set snowflake_id.node_id in postgresql.conf to this cluster's unique node number \
                 (0 to {}) and restart PostgreSQL.",
                layout.max_value(Field::Node)
            ),
        }),
    )
}

pub fn node_id_does_not_fit(sequence: &str, layout: &Layout, node_id: i32) -> Error {
    let bits = layout.node_bits;
    Error::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!(
            "snowflake_id.node_id = {node_id} does not fit the {bits} node bits of snowflake \
             sequence \"{sequence}\""
        ),
        Some(if bits == 0 {
            "This sequence has no node bits, so its IDs cannot carry a node id. For several \
             clusters, switch each column to a sequence with node bits: \
             SELECT snowflake_create_sequence('purchases', preset => 'sharded'); then \
             SELECT snowflake_convert_column('purchases', 'id', 'purchases'); for one \
             cluster instead, unset snowflake_id.node_id and restart."
                .into()
        } else {
            format!(
                "Node ids of this sequence range from 0 to {}.",
                layout.max_value(Field::Node)
            )
        }),
    )
}

// Worker ids.

pub fn during_recovery(function: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
        format!("cannot execute {function}() during recovery"),
        Some("Generate IDs on the primary server; a standby only reads them.".into()),
    )
}

/// A function that changes the catalog called in a read-only transaction (PostgreSQL's own
/// check would name only the INSERT or DELETE below it).
pub fn in_read_only_transaction(function: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
        format!("cannot execute {function}() in a read-only transaction"),
        Some(
            "Run it in a read-write transaction (SET TRANSACTION READ WRITE, or unset \
             default_transaction_read_only), on the primary server."
                .into(),
        ),
    )
}

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

// Decoding and the text form.

pub fn not_an_id_of(sequence: &str, id: i64, problem: &DecodeError) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        format!("{id} is not an ID of snowflake sequence \"{sequence}\": {problem}"),
        Some(match problem {
            DecodeError::Negative { .. } => "No snowflake sequence makes a negative ID: the \
                value came from elsewhere (another generator, a sign flipped in a cast or by a \
                client reading it as unsigned)."
                .into(),
            DecodeError::BeyondLayout { .. } => {
                "Pass the name of the sequence that made the ID as the second argument.".into()
            }
        }),
    )
}

pub fn negative_id(id: i64) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        format!("{id} is not a snowflake ID: IDs are never negative"),
        None,
    )
}

pub fn invalid_base32(text: &str, problem: &base32::ParseError) -> Error {
    let code = match problem {
        base32::ParseError::OutOfRange => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        _ => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
    };
    Error::new(
        code,
        format!(
            "invalid snowflake base32 text \"{}\": {problem}",
            text.escape_default()
        ),
        Some(format!(
            "A snowflake ID in base32 is {} characters of 0-9 and A-Z without I, L, O and U \
             (case does not matter; O reads as 0, I and L as 1), as snowflake_to_base32() writes.",
            base32::TEXT_LEN
        )),
    )
}

pub fn time_out_of_range(sequence: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
        format!("the time of this ID of snowflake sequence \"{sequence}\" is out of range"),
        None,
    )
}

// Time partitions (docs/partitioning.md).

/// A partition span that is not a whole, positive number of the sequence's ticks, or has months.
pub fn invalid_partition_span(
    sequence: &str,
    layout: &Layout,
    span: &str,
    problem: Option<&SpanError>,
) -> Error {
    let problem = problem.map_or_else(
        || "months and years have no fixed length".to_owned(),
        SpanError::to_string,
    );
    Error::new(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("interval '{span}' cannot partition snowflake sequence \"{sequence}\": {problem}"),
        Some(format!(
            "Use a positive interval of days, hours, minutes or seconds that is a whole number \
             of the sequence's {} µs ticks, such as '1 day'.",
            layout.time_unit_us
        )),
    )
}

/// A time outside the sequence's IDs (before its epoch or after its time field runs out).
pub fn time_outside_sequence(sequence: &str, layout: &Layout, unix_us: i64) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
        format!(
            "snowflake sequence \"{sequence}\" makes no IDs at {}: its IDs run from {} to {}",
            format_unix_us(unix_us),
            format_unix_us(layout.epoch_unix_us),
            format_unix_us(layout.exhausted_at_unix_us())
        ),
        None,
    )
}

/// A privileged function called by a role it does not serve (`privileges::require`): decided
/// when it runs, whatever EXECUTE grants the role holds.
pub fn caller_not_allowed(function: &str, allowed: &str, how_to_allow: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("permission denied for function {function}: only {allowed} may call it"),
        Some(how_to_allow.into()),
    )
}

/// A role that is not a superuser locks the extension's state in a mode that would make other
/// sessions' IDs wait (`maintenance.rs`).
pub fn maintenance_of_the_state(relation: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!(
            "only a superuser may lock, VACUUM FULL, CLUSTER or REINDEX {relation}: it is \
             snowflake_id's state, and every session's IDs wait while it is locked"
        ),
        Some("Autovacuum keeps it; a superuser may run the command if it is ever needed.".into()),
    )
}

/// A publication would publish the extension's catalog table (`publications.rs`).
pub fn publication_of_the_state(publication: &str, table: &str) -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!(
            "publication {publication} would publish {table}, snowflake_id's state: a \
             subscriber's sessions would not follow what its apply worker writes there"
        ),
        Some(
            "Publish your own tables (FOR TABLE ..., or FOR TABLES IN SCHEMA public), and \
             create the sequences on each node with snowflake_create_sequence."
                .into(),
        ),
    )
}

/// snowflake_id was called from inside one of its own catalog lookups.
pub fn reentered() -> Error {
    Error::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id was called again while it was looking up a sequence".into(),
        Some("Code run by that lookup calls snowflake_id; remove that call.".into()),
    )
}

/// A failure inside PostgreSQL that the caller cannot fix (an SPI or type-system error).
pub fn internal(message: String) -> Error {
    Error::new(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, message, None)
}

/// The message of an ERROR that `subtransaction::run` caught and rolled back. An operator's
/// intervention (SQLSTATE class 57: a query cancel, a statement timeout, a shutdown), which
/// PL/pgSQL's `WHEN OTHERS` does not catch either, is raised again to end the statement.
pub fn caught_message(error: CaughtError) -> String {
    let report = match &error {
        CaughtError::PostgresError(report)
        | CaughtError::ErrorReport(report)
        | CaughtError::RustPanic {
            ereport: report, ..
        } => report,
    };
    // SAFETY: unpack_sql_state formats any code into a static buffer.
    let sqlstate = unsafe { pg_sys::unpack_sql_state(report.sql_error_code() as i32) };
    // SAFETY: that buffer, NUL-terminated, read before anything else formats into it.
    let sqlstate = unsafe { CStr::from_ptr(sqlstate) };
    if sqlstate.to_bytes().starts_with(b"57") {
        error.rethrow();
    }
    report.message().to_owned()
}
