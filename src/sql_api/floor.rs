//! `snowflake_raise_floor` and `snowflake_accept_floor` (docs/design.md §5.3): an operator's
//! steps of the floor.

use pgrx::prelude::*;

use crate::errors;
use crate::ids::backend;
use crate::pg::privileges::{self, Caller};
use crate::pg::timestamps::{self, unix_us};

/// `snowflake_raise_floor(until timestamptz) → timestamptz`: no ID issued from now on is at or
/// below `until`, in any session of this server, on a server that gets its WAL, or in a copy of
/// this database (docs/design.md §5.3). The step that carries another cluster's IDs over where
/// neither its WAL nor this database's floor relation came along (a logical-replication move,
/// rows copied from elsewhere). For the database's owner and superusers (`privileges`): the
/// bound keeps any one call within a minute of the wall clock. Returns the server's durable
/// floor.
#[pg_extern(sql = false)]
fn snowflake_raise_floor(until: TimestampWithTimeZone) -> Option<TimestampWithTimeZone> {
    privileges::require(Caller::DatabaseOwner, "snowflake_raise_floor");
    match pg_sys::TimestampTz::from(until) {
        i64::MAX => errors::floor_not_finite("infinity").raise(),
        i64::MIN => errors::floor_not_finite("-infinity").raise(),
        _ => timestamps::timestamptz(backend::raise_floor(unix_us(until))),
    }
}

/// `snowflake_accept_floor() → timestamptz`: takes the value of this database's floor relation,
/// which the extension did not write and which lies further ahead of the wall clock than it
/// trusts such a value (a dump restored from a cluster whose clock is ahead), into the server's
/// durable floor, so that IDs continue above it (docs/design.md §5.3). Superusers only
/// (`privileges`): it moves the IDs of every database, without a bound. Returns the server's
/// durable floor.
#[pg_extern(sql = false)]
fn snowflake_accept_floor() -> Option<TimestampWithTimeZone> {
    privileges::require(Caller::Superuser, "snowflake_accept_floor");
    timestamps::timestamptz(backend::accept_floor())
}
