//! Converting between the core's Unix microseconds and PostgreSQL's `timestamptz`, whose
//! epoch is 2000-01-01.

use pgrx::prelude::*;

/// Microseconds between 1970-01-01 and PostgreSQL's timestamp epoch, 2000-01-01.
const POSTGRES_EPOCH_UNIX_US: i64 = 946_684_800_000_000;

/// The instant as Unix microseconds (infinities saturate).
pub fn unix_us(ts: TimestampWithTimeZone) -> i64 {
    pg_sys::TimestampTz::from(ts).saturating_add(POSTGRES_EPOCH_UNIX_US)
}

/// The `timestamptz` of Unix microseconds, or None outside its range.
pub fn timestamptz(unix_us: i64) -> Option<TimestampWithTimeZone> {
    TimestampWithTimeZone::try_from(unix_us.saturating_sub(POSTGRES_EPOCH_UNIX_US)).ok()
}

/// Unix microseconds as timestamp text in the session's style, for messages.
pub fn format_unix_us(unix_us: i64) -> String {
    // SAFETY: timestamptz_to_str takes any value (it prints infinities and out-of-range values
    // as such) and returns a pointer to a static buffer.
    let text =
        unsafe { pg_sys::timestamptz_to_str(unix_us.saturating_sub(POSTGRES_EPOCH_UNIX_US)) };
    // SAFETY: that buffer, NUL-terminated, copied at once.
    unsafe { std::ffi::CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// The time `unix_us` as a timestamptz, or NULL for i64::MIN (nothing reserved or learned yet).
pub fn timestamptz_or_null(unix_us: i64) -> Option<TimestampWithTimeZone> {
    (unix_us != i64::MIN)
        .then(|| timestamptz(unix_us))
        .flatten()
}
