//! What PostgreSQL set for this backend when it connected.

use pgrx::prelude::*;

/// This backend's database.
pub fn this_database() -> pg_sys::Oid {
    // SAFETY: a backend-local value set when the backend connected to its database.
    unsafe { pg_sys::MyDatabaseId }
}
