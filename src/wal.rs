//! The reservation in the WAL (docs/design.md §5.2): a custom WAL resource manager whose one
//! record says "no ID's tick ends after this time". Every extension of the reservation is
//! logged and flushed before an ID under it leaves; replaying the record (on a standby, in crash
//! recovery, in point-in-time recovery) raises that server's durable floor, so the floor
//! travels with the data to every server that has the rows.

use std::ffi::CStr;

use pgrx::prelude::*;

use crate::errors;
use crate::gucs;
use crate::shared_memory;

const RMGR_NAME: &CStr = c"snowflake_id";
/// The record's info bits (the high four bits of xl_info are the resource manager's).
const XLOG_SNOWFLAKE_RESERVE: u8 = 0x10;

/// The resource manager id the server runs with (`snowflake.wal_rmgr_id`, fixed at start).
fn rmgr_id() -> u8 {
    gucs::WAL_RMGR_ID.get().clamp(
        pg_sys::RM_MIN_CUSTOM_ID as i32,
        pg_sys::RM_MAX_CUSTOM_ID as i32,
    ) as u8
}

/// Registers the resource manager; called from `_PG_init` while shared_preload_libraries is
/// processed (the only time PostgreSQL allows it). A clash with another extension's id stops the
/// server with PostgreSQL's own message naming both; `snowflake.wal_rmgr_id` moves ours.
pub fn register() {
    let mut rmgr = pg_sys::RmgrData {
        rm_name: RMGR_NAME.as_ptr(),
        rm_redo: Some(redo),
        rm_desc: Some(describe),
        rm_identify: Some(identify),
        ..Default::default()
    };
    // SAFETY: called in the postmaster during shared_preload_libraries; PostgreSQL copies the
    // struct into its table, and the name it points to is a static string. (A raw pointer:
    // PostgreSQL 16 on takes `const RmgrData *`, earlier majors `RmgrData *`.)
    unsafe { pg_sys::RegisterCustomRmgr(rmgr_id(), &raw mut rmgr) };
}

/// Logs a reservation up to `until_unix_us` and waits until the record is flushed, so no ID
/// under it can leave before the WAL holds it.
pub fn log_reservation(until_unix_us: i64) {
    let mut payload = until_unix_us.to_le_bytes();

    // SAFETY: a record with 8 bytes of main data that live until XLogInsert returns (it copies
    // them); called in a normal backend outside recovery (attachment_for refuses during recovery),
    // where inserting WAL is allowed. An ERROR inside unwinds through pgrx's guard.
    unsafe {
        pg_sys::XLogBeginInsert();
        // `as _`: the length is `int` up to PostgreSQL 15 and `uint32` from 16 on; 8 fits both.
        pg_sys::XLogRegisterData(payload.as_mut_ptr().cast(), payload.len() as _);
        let lsn = pg_sys::XLogInsert(rmgr_id(), XLOG_SNOWFLAKE_RESERVE);
        pg_sys::XLogFlush(lsn);
    }
}

/// The reserved time a record carries, if it is ours and well-formed.
///
/// SAFETY: `record` is the record being replayed or described, as PostgreSQL passes it.
unsafe fn reserved_until(record: *mut pg_sys::XLogReaderState) -> Option<i64> {
    // SAFETY: PostgreSQL hands a decoded record whose main data pointer and length agree.
    let decoded = unsafe { (*record).record.as_ref()? };
    if decoded.header.xl_info & !(pg_sys::XLR_INFO_MASK as u8) != XLOG_SNOWFLAKE_RESERVE
        || decoded.main_data_len as usize != std::mem::size_of::<i64>()
    {
        return None;
    }
    // SAFETY: main_data holds main_data_len (= 8) readable bytes, maybe unaligned.
    let bytes = unsafe { std::ptr::read_unaligned(decoded.main_data.cast::<[u8; 8]>()) };
    Some(i64::from_le_bytes(bytes))
}

#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    // SAFETY: PostgreSQL calls redo with the record being replayed.
    match unsafe { reserved_until(record) } {
        Some(until) => shared_memory::state().raise_durable_floor(until),
        None => errors::internal(format!(
            "snowflake_id: unknown WAL record in resource manager {}",
            rmgr_id()
        ))
        .raise(),
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn describe(
    buf: pg_sys::StringInfo,
    record: *mut pg_sys::XLogReaderState,
) {
    // SAFETY: PostgreSQL calls rm_desc with a valid buffer and record.
    if let Some(until) = unsafe { reserved_until(record) } {
        let text = std::ffi::CString::new(format!("reserved until {until} µs since 1970"))
            .unwrap_or_default();
        // SAFETY: appends a NUL-terminated string to PostgreSQL's buffer.
        unsafe { pg_sys::appendStringInfoString(buf, text.as_ptr()) };
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
    if info & !(pg_sys::XLR_INFO_MASK as u8) == XLOG_SNOWFLAKE_RESERVE {
        c"RESERVE".as_ptr()
    } else {
        std::ptr::null()
    }
}
