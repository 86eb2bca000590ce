//! Privileges (docs/design.md §6, "Privileges"): who may call the functions that change what a
//! database or the whole server issues, decided by who calls when they run, not by an ACL that
//! a routine grant (`GRANT … ON ALL FUNCTIONS IN SCHEMA`) or a default privilege widens; and the
//! one way the extension runs anything as another role, as PostgreSQL's maintenance commands do.

use pgrx::prelude::*;

use crate::errors;

/// Whom a privileged function serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// Superusers only: the call moves the IDs of every database of the server, or it is what
    /// the Citus coordinator runs on a worker.
    Superuser,
    /// Roles with the privileges of the database's owner (`pg_database_owner`), superusers
    /// included: the call moves this database's floor within the bound.
    DatabaseOwner,
    /// Roles with `CREATE` on the database, as for schemas (its owner has it, and whoever it
    /// or a superuser granted it to), superusers included: the call creates or drops one of
    /// this database's sequences, which no other object depends on.
    DatabaseCreator,
}

impl Caller {
    /// The roles it names, as a reader of an error message knows them.
    pub fn described(self) -> &'static str {
        match self {
            Caller::Superuser => "a superuser",
            Caller::DatabaseOwner => {
                "the database's owner (or a role with its privileges) or a superuser"
            }
            Caller::DatabaseCreator => {
                "a role with CREATE on the database (its owner has it) or a superuser"
            }
        }
    }

    /// What a user can do to let a role call it (a hint that needs no page to follow).
    pub fn how_to_allow(self) -> &'static str {
        match self {
            Caller::Superuser => "No grant changes this: run it as a superuser.",
            Caller::DatabaseOwner => {
                "No grant on the function changes this: run it as the database's owner, or as a \
                 superuser."
            }
            Caller::DatabaseCreator => {
                "The database's owner or a superuser lets a role call it with GRANT CREATE ON \
                 DATABASE <database> TO <role>; no grant on the function changes this."
            }
        }
    }
}

/// Raises 42501, naming `function` and who may call it, unless the current role is `caller`.
pub fn require(caller: Caller, function: &str) {
    // SAFETY: a plain read of this backend's current role.
    let role = unsafe { pg_sys::GetUserId() };
    let allowed = match caller {
        // SAFETY: a syscache lookup of a role, inside a transaction.
        Caller::Superuser => unsafe { pg_sys::superuser_arg(role) },
        // SAFETY: role memberships (syscache), inside a transaction.
        Caller::DatabaseOwner => unsafe {
            pg_sys::has_privs_of_role(role, pg_sys::Oid::from(pg_sys::ROLE_PG_DATABASE_OWNER))
        },
        // SAFETY: inside a transaction.
        Caller::DatabaseCreator => unsafe { may_create_in_this_database(role) },
    };
    if !allowed {
        errors::caller_not_allowed(function, caller.described(), caller.how_to_allow()).raise();
    }
}

/// Whether `role` has `CREATE` on this database (ownership, a grant, superuser), as
/// `CREATE SCHEMA` asks.
///
/// # Safety
/// Inside a transaction (an ACL check reads the syscache).
unsafe fn may_create_in_this_database(role: pg_sys::Oid) -> bool {
    let create = pg_sys::ACL_CREATE as pg_sys::AclMode;
    // SAFETY: a backend-local value set when the backend connected to its database.
    let database = unsafe { pg_sys::MyDatabaseId };
    // SAFETY: an ACL check inside a transaction (see the contract).
    #[cfg(feature = "pg15")]
    let result = unsafe { pg_sys::pg_database_aclcheck(database, role, create) };
    // SAFETY: an ACL check inside a transaction (see the contract).
    #[cfg(not(feature = "pg15"))]
    let result =
        unsafe { pg_sys::object_aclcheck(pg_sys::DatabaseRelationId, database, role, create) };
    result == pg_sys::AclResult::ACLCHECK_OK
}

/// Runs `f` as `owner` exactly as PostgreSQL runs a table owner's code in VACUUM, ANALYZE and
/// index builds (CVE-2020-25695, CVE-2022-1552): a security-restricted operation, in a GUC nest
/// level of its own that is rolled back afterwards (so no `set_config` inside outlives it), with
/// the restricted `search_path` from PostgreSQL 17 on; the caller's role, security context and
/// settings come back also when `f` raises an ERROR.
pub fn as_owner<T>(owner: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let (mut role, mut context) = (pg_sys::InvalidOid, 0);
    // The role and context are set the way VACUUM does; they and the GUC nest level opened
    // here are restored below, on success and on error.
    // SAFETY: reads this backend's current role and security context into the locals.
    unsafe { pg_sys::GetUserIdAndSecContext(&mut role, &mut context) };
    // SAFETY: a role that exists (the owner of a relation), in a restricted context.
    unsafe {
        pg_sys::SetUserIdAndSecContext(
            owner,
            context
                | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32
                | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        )
    };
    // SAFETY: opens a GUC nest level inside a transaction, closed below.
    let nest_level = unsafe { pg_sys::NewGUCNestLevel() };
    #[cfg(any(feature = "pg17", feature = "pg18"))]
    {
        // SAFETY: sets search_path inside that nest level, which rolls it back.
        unsafe { pg_sys::RestrictSearchPath() };
    }
    PgTryBuilder::new(std::panic::AssertUnwindSafe(f))
        .finally(|| {
            // SAFETY: rolls back every setting changed since the nest level opened above.
            unsafe { pg_sys::AtEOXact_GUC(false, nest_level) };
            // SAFETY: restores exactly the role and context read above.
            unsafe { pg_sys::SetUserIdAndSecContext(role, context) };
        })
        .execute()
}
