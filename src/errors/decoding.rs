//! The errors of decoding IDs, their text form, and the time partitions of a sequence.

use pgrx::prelude::*;
use snowflake_id_core::base32;
use snowflake_id_core::layout::{DecodeError, Layout};
use snowflake_id_core::partitions::SpanError;

use crate::pg::timestamps::format_unix_us;

use super::error::Error;

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
