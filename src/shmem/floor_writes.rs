//! The latest writes of each database's floor relation by this server (docs/design.md §5.3), in
//! shared memory: one slot per relation, found by probing from a hash, under their own LWLock.

use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use pgrx::prelude::*;
use snowflake_id_core::floor::LoggedValue;

use crate::durability::floor_relations::FloorRelations;
use crate::pg::lwlocks::with_lwlock;
use crate::pg::this_backend::this_database;

/// How many floor relations' latest writes are kept: one slot per database, found by probing
/// from a hash of the database and relation. When every slot a key may use holds another
/// relation, the one written longest ago is forgotten: its next write by this server then reads
/// as a change from elsewhere, which moves the cluster clock up to that value (at most
/// `reserve_ahead` ahead), once.
pub const FLOOR_WRITE_SLOTS: usize = 1024;

/// The latest writes of the databases' floor relations made by this server (design §5.3):
/// `lock` serialises them, so the relation only rises, and a backend that reads a value written
/// a moment ago, whose WAL is not flushed yet, finds the write before it, which usually is.
#[repr(C, align(64))]
pub struct FloorWrites {
    /// Held exclusively around a write and its slot's update, shared to read a slot.
    pub lock: AtomicPtr<pg_sys::LWLock>,
    pub slots: [FloorWriteSlot; FLOOR_WRITE_SLOTS],
}

/// One floor relation's two latest writes by this server; read and written under
/// `FloorWrites::lock`. A value of i64::MIN means no write.
#[repr(C)]
pub struct FloorWriteSlot {
    pub database: AtomicU32,
    pub relation: AtomicU32,
    pub newest_value: AtomicI64,
    /// The end of the WAL record of the newest write.
    pub newest_lsn: AtomicU64,
    pub previous_value: AtomicI64,
    pub previous_lsn: AtomicU64,
}

impl FloorWriteSlot {
    pub fn empty() -> FloorWriteSlot {
        FloorWriteSlot {
            database: AtomicU32::new(0),
            relation: AtomicU32::new(0),
            newest_value: AtomicI64::new(i64::MIN),
            newest_lsn: AtomicU64::new(0),
            previous_value: AtomicI64::new(i64::MIN),
            previous_lsn: AtomicU64::new(0),
        }
    }
}

impl FloorWrites {
    /// The value before `newest` of this database's floor relation, when `newest` is the latest
    /// write this server made there (and so is this server's). Under the lock, shared or
    /// exclusive.
    pub fn before(&self, relations: &FloorRelations, newest: LoggedValue) -> Option<LoggedValue> {
        let slot = self.slot_of(relations)?;
        let known = slot.newest_value.load(Ordering::Relaxed) == newest.value
            && slot.newest_lsn.load(Ordering::Relaxed) == newest.lsn;
        known.then(|| LoggedValue {
            value: slot.previous_value.load(Ordering::Relaxed),
            lsn: slot.previous_lsn.load(Ordering::Relaxed),
        })
    }

    /// Runs `f` holding the lock shared: no write of a floor relation by this server meanwhile.
    pub fn shared<T>(&self, f: impl FnOnce() -> T) -> T {
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_SHARED, f)
    }

    /// Notes, under the exclusive lock, that the relation went from `before` to `newest`.
    pub fn remember(&self, relations: &FloorRelations, before: LoggedValue, newest: LoggedValue) {
        let slot = self
            .slot_of(relations)
            .unwrap_or_else(|| self.slot_to_take(relations));
        slot.database
            .store(this_database().to_u32(), Ordering::Relaxed);
        slot.relation
            .store(relations.floor.to_u32(), Ordering::Relaxed);
        slot.newest_value.store(newest.value, Ordering::Relaxed);
        slot.newest_lsn.store(newest.lsn, Ordering::Relaxed);
        slot.previous_value.store(before.value, Ordering::Relaxed);
        slot.previous_lsn.store(before.lsn, Ordering::Relaxed);
    }

    /// Runs `f` holding the lock exclusively: one write of any floor relation at a time.
    pub fn exclusive<T>(&self, f: impl FnOnce() -> T) -> T {
        with_lwlock(&self.lock, pg_sys::LWLockMode::LW_EXCLUSIVE, f)
    }

    /// The slots this database's relation may use: a few from its hash on.
    fn candidates(&self, relations: &FloorRelations) -> impl Iterator<Item = &FloorWriteSlot> {
        // A multiplicative hash: database and relation OIDs are small and close together.
        let key = (u64::from(this_database().to_u32()) << 32 | u64::from(relations.floor.to_u32()))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> 40;
        (0..FLOOR_PROBES).map(move |probe| &self.slots[(key as usize + probe) % FLOOR_WRITE_SLOTS])
    }

    /// The slot holding this relation's writes, if any.
    fn slot_of(&self, relations: &FloorRelations) -> Option<&FloorWriteSlot> {
        self.candidates(relations).find(|slot| {
            slot.database.load(Ordering::Relaxed) == this_database().to_u32()
                && slot.relation.load(Ordering::Relaxed) == relations.floor.to_u32()
        })
    }

    /// A slot for a relation that has none: an empty one, else the one written longest ago.
    fn slot_to_take(&self, relations: &FloorRelations) -> &FloorWriteSlot {
        self.candidates(relations)
            .min_by_key(|slot| match slot.database.load(Ordering::Relaxed) {
                0 => 0,
                _ => slot.newest_lsn.load(Ordering::Relaxed).max(1),
            })
            .unwrap_or(&self.slots[0])
    }
}

/// How many slots, from its hash on, a relation's writes may take.
const FLOOR_PROBES: usize = 8;
