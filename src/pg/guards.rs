//! Guards over what a function takes from PostgreSQL and must give back: an opened relation,
//! an active snapshot. Each is given back when its guard is dropped, on every path out of the
//! function: a return, an early return, and a PostgreSQL error, which reaches Rust as a panic
//! that unwinds through the guard (pgrx's FFI boundary) before the transaction aborts.

use pgrx::pg_sys;

/// A relation this backend opened, closed when the guard is dropped.
pub struct OpenRelation {
    relation: pg_sys::Relation,
    /// The lock mode released at the close: the one it was opened with, or `NoLock` to keep
    /// the lock to the end of the transaction.
    released_at_close: pg_sys::LOCKMODE,
}

/// Whether closing a relation releases the lock it was opened with.
#[derive(Clone, Copy)]
pub enum Lock {
    /// Kept to the end of the transaction, as PostgreSQL keeps the locks of what a command read.
    KeptToTransactionEnd,
    /// Released when the relation is closed.
    ReleasedAtClose,
}

impl Lock {
    /// What `relation_close` releases for a relation opened in `mode`.
    fn released_at_close(self, mode: pg_sys::LOCKMODE) -> pg_sys::LOCKMODE {
        match self {
            Lock::KeptToTransactionEnd => pg_sys::NoLock as pg_sys::LOCKMODE,
            Lock::ReleasedAtClose => mode,
        }
    }
}

impl OpenRelation {
    /// The relation `oid`, locked in `mode`; None when it no longer exists
    /// (`try_relation_open`).
    pub fn try_open(oid: pg_sys::Oid, mode: pg_sys::LOCKMODE, lock: Lock) -> Option<Self> {
        // SAFETY: opening a relation by OID inside a transaction; PostgreSQL returns NULL
        // rather than raising when it is gone.
        let relation = unsafe { pg_sys::try_relation_open(oid, mode) };
        (!relation.is_null()).then(|| OpenRelation {
            relation,
            released_at_close: lock.released_at_close(mode),
        })
    }

    /// The table `oid`, locked in `mode` (`table_open`: an error when it is gone or is not a
    /// table).
    pub fn table(oid: pg_sys::Oid, mode: pg_sys::LOCKMODE, lock: Lock) -> Self {
        // SAFETY: opening a table by OID inside a transaction; PostgreSQL raises an error
        // rather than return an unusable relation.
        let relation = unsafe { pg_sys::table_open(oid, mode) };
        OpenRelation {
            relation,
            released_at_close: lock.released_at_close(mode),
        }
    }

    /// The relation `oid`, locked in `mode` (`relation_open`: an error when it is gone).
    pub fn open(oid: pg_sys::Oid, mode: pg_sys::LOCKMODE, lock: Lock) -> Self {
        // SAFETY: opening a relation by OID inside a transaction; PostgreSQL raises an error
        // rather than return an unusable relation.
        let relation = unsafe { pg_sys::relation_open(oid, mode) };
        OpenRelation {
            relation,
            released_at_close: lock.released_at_close(mode),
        }
    }

    /// The relcache entry, valid while the guard lives.
    pub fn as_ptr(&self) -> pg_sys::Relation {
        self.relation
    }

    /// Its `pg_class` row, copied out of the relcache entry: a rebuild of the entry (at the
    /// next invalidation) may replace the row the entry points to.
    pub fn class(&self) -> pg_sys::FormData_pg_class {
        // SAFETY: the relation is open, so its relcache entry is valid.
        let row = unsafe { (*self.relation).rd_rel };
        // SAFETY: an open relation's entry always holds its pg_class row.
        unsafe { *row }
    }
}

impl Drop for OpenRelation {
    fn drop(&mut self) {
        // SAFETY: the relation was opened by this guard and is closed once, here; closing it
        // while an error unwinds is what the transaction's abort would otherwise do.
        unsafe { pg_sys::relation_close(self.relation, self.released_at_close) };
    }
}

/// A snapshot of now pushed as the active snapshot, popped when the guard is dropped.
pub struct ActiveSnapshot(());

impl ActiveSnapshot {
    /// The transaction snapshot taken now (`GetTransactionSnapshot`), pushed on the stack of
    /// active snapshots.
    pub fn of_now() -> Self {
        // SAFETY: inside a transaction, where PostgreSQL takes (or reuses) its snapshot.
        let snapshot = unsafe { pg_sys::GetTransactionSnapshot() };
        // SAFETY: a valid snapshot, copied onto the active stack, which the guard pops.
        unsafe { pg_sys::PushActiveSnapshot(snapshot) };
        ActiveSnapshot(())
    }

    /// The snapshot, valid while the guard lives.
    pub fn get(&self) -> pg_sys::Snapshot {
        // SAFETY: the guard's push is on the stack, so there is an active snapshot.
        unsafe { pg_sys::GetActiveSnapshot() }
    }
}

impl Drop for ActiveSnapshot {
    fn drop(&mut self) {
        // SAFETY: pops the snapshot this guard pushed; nothing pushed since is left on the
        // stack when it is dropped (guards drop in the reverse order of their making).
        unsafe { pg_sys::PopActiveSnapshot() };
    }
}
