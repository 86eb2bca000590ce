//! When the extension directory may be used (docs/design.md §6, "A new connection's first ID"):
//! the rule a backend follows before it trusts a database's entry in the server's shared-memory
//! directory of extensions, or leaves there what it looked up in the catalogs. The glue keeps
//! one [`DirectoryTrust`] in shared memory and the entries beside it; the model check
//! (tests/directory_model.rs) runs this same type through restarts, crashes, promotions,
//! two-phase commits and logical apply.
//!
//! The rule:
//! - Every entry carries the generation its lookups began at, and is trusted only while the
//!   generation is still that one ([`DirectoryTrust::open_for`] returns it).
//! - A transaction that wrote the extension's state is *followed* from before its commit can be
//!   visible until it is no longer in progress: from `XACT_EVENT_PRE_COMMIT`, or
//!   `XACT_EVENT_PRE_PREPARE` for one that is prepared (it then commits in another session, or
//!   after a restart, where no callback of its own runs). While one of a database is followed
//!   and in progress, nothing of that database is trusted or left ([`Off::WriterPending`]); the
//!   first backend that finds it ended bumps the generation before it forgets it, so nobody
//!   finds it forgotten without the bump.
//! - Shared memory starts empty (a start, a crash restart, a standby's start before its
//!   promotion), but prepared transactions survive it, and what they wrote is unknown: before
//!   the first use, every prepared transaction the server lists is followed, whatever its
//!   database ([`Off::PreparedUnknown`] until then).
//! - Nothing is used during recovery (a standby replays what its hooks never see), nor by a
//!   transaction that wrote the state itself (it must not find what it dropped).
//! - When more writers are to be followed than there are slots, nothing is used any more
//!   until shared memory starts again ([`Off::Overflowed`]).
//!
//! Writes that no hook of the server sees (a logical apply worker's) are kept out: a
//! publication that would publish a state relation is refused (docs/reference.md).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A transaction that wrote (or may have written) a database's extension state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Writer {
    pub database: u32,
    pub xid: u32,
}

impl Writer {
    fn packed(self) -> u64 {
        // A slot holding 0 is free: the database is moved up by one, as no database has the
        // OID u32::MAX.
        u64::from(self.database.wrapping_add(1)) << 32 | u64::from(self.xid)
    }

    fn unpacked(value: u64) -> Option<Writer> {
        (value != 0).then(|| Writer {
            database: ((value >> 32) as u32).wrapping_sub(1),
            xid: value as u32,
        })
    }
}

/// Why a database's entry is neither trusted nor filled now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Off {
    /// The server is in recovery: a standby replays changes that none of its hooks sees.
    Recovery,
    /// This transaction wrote the extension's state: what the directory holds is not what it
    /// sees.
    OwnWrite,
    /// Shared memory is new and the server's prepared transactions were not followed yet.
    PreparedUnknown,
    /// A transaction that wrote the database's state is committing or prepared.
    WriterPending,
    /// More writers were to be followed at once than there are slots.
    Overflowed,
}

impl Off {
    /// The reason as `snowflake_directory()` names it.
    pub fn name(self) -> &'static str {
        match self {
            Off::Recovery => "recovery",
            Off::OwnWrite => "own write",
            Off::PreparedUnknown => "prepared transactions not read yet",
            Off::WriterPending => "writer pending",
            Off::Overflowed => "too many writers",
        }
    }
}

/// What the rule asks of the server around it.
pub trait Server {
    /// Whether the server is in recovery.
    fn in_recovery(&self) -> bool;
    /// Whether transaction `xid` is still in progress (a prepared one is, until it ends).
    fn in_progress(&self, xid: u32) -> bool;
    /// Every prepared transaction of the server now, of any database; None when they could not
    /// be read (then the directory stays unused).
    fn prepared_transactions(&self) -> Option<Vec<Writer>>;
}

/// The directory's shared trust state: the generation, the followed writers, and whether the
/// server's prepared transactions are among them since shared memory started.
pub struct DirectoryTrust<const SLOTS: usize> {
    generation: AtomicU64,
    writers: [AtomicU64; SLOTS],
    /// How many slots were taken, an upper bound of the writers followed: 0 spares the scan.
    taken: AtomicU32,
    prepared_followed: AtomicBool,
    overflowed: AtomicBool,
}

impl<const SLOTS: usize> Default for DirectoryTrust<SLOTS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SLOTS: usize> DirectoryTrust<SLOTS> {
    /// The state of a new shared memory: generation 0, nobody followed, the prepared
    /// transactions not read.
    pub fn new() -> Self {
        DirectoryTrust {
            generation: AtomicU64::new(0),
            writers: std::array::from_fn(|_| AtomicU64::new(0)),
            taken: AtomicU32::new(0),
            prepared_followed: AtomicBool::new(false),
            overflowed: AtomicBool::new(false),
        }
    }

    /// The generation at which `database`'s entries may be trusted, and lookups begun now may
    /// be left, or why none may. `own_write`: this transaction wrote the extension's state.
    /// Writers found ended are forgotten here, each after a bump.
    pub fn open_for(
        &self,
        database: u32,
        own_write: bool,
        server: &impl Server,
    ) -> Result<u64, Off> {
        if server.in_recovery() {
            return Err(Off::Recovery);
        }
        if own_write {
            return Err(Off::OwnWrite);
        }
        if !self.prepared_followed.load(Ordering::Acquire) {
            self.follow_prepared(server)?;
        }
        if self.overflowed.load(Ordering::Acquire) {
            return Err(Off::Overflowed);
        }
        if self.taken.load(Ordering::Acquire) != 0 && self.settle(database, server) {
            return Err(Off::WriterPending);
        }
        Ok(self.generation.load(Ordering::Acquire))
    }

    /// Whether `generation` is still the directory's (an entry of it may be written).
    pub fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }

    /// Follows `writer` from now until it is no longer in progress: called before its commit
    /// or prepare can be visible. A writer without a transaction id wrote nothing.
    pub fn follow(&self, writer: Writer) {
        if writer.xid == 0 {
            return;
        }
        let packed = writer.packed();
        self.taken.fetch_add(1, Ordering::AcqRel);
        let followed = self.writers.iter().any(|slot| {
            slot.compare_exchange(0, packed, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        if !followed {
            self.overflowed.store(true, Ordering::Release);
        }
    }

    /// `writer`'s commit is visible (its own backend's commit callback): bumps the generation,
    /// then forgets it.
    pub fn committed(&self, writer: Writer) {
        self.bump();
        self.forget(writer);
    }

    /// `writer` rolled back before its commit was visible: nothing it wrote was ever seen.
    pub fn aborted(&self, writer: Writer) {
        self.forget(writer);
    }

    /// Makes every entry filled so far untrusted.
    pub fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    fn forget(&self, writer: Writer) {
        if writer.xid == 0 {
            return;
        }
        let packed = writer.packed();
        if let Some(slot) = self
            .writers
            .iter()
            .find(|slot| slot.load(Ordering::Acquire) == packed)
        {
            self.release(slot, packed);
        }
    }

    /// Frees a slot that held `packed` (when nobody freed it first).
    fn release(&self, slot: &AtomicU64, packed: u64) {
        if slot
            .compare_exchange(packed, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.taken.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Follows every prepared transaction the server lists (those that are followed already
    /// once), then notes they are.
    fn follow_prepared(&self, server: &impl Server) -> Result<(), Off> {
        let prepared = server.prepared_transactions().ok_or(Off::PreparedUnknown)?;
        for writer in prepared {
            let packed = writer.packed();
            let known = self
                .writers
                .iter()
                .any(|slot| slot.load(Ordering::Acquire) == packed);
            if !known {
                self.follow(writer);
            }
        }
        self.prepared_followed.store(true, Ordering::Release);
        Ok(())
    }

    /// Forgets `database`'s writers that ended, each after a bump; whether one is still in
    /// progress.
    fn settle(&self, database: u32, server: &impl Server) -> bool {
        let mut pending = false;
        for slot in &self.writers {
            let packed = slot.load(Ordering::Acquire);
            let Some(writer) = Writer::unpacked(packed) else {
                continue;
            };
            if writer.database != database {
                continue;
            }
            if server.in_progress(writer.xid) {
                pending = true;
            } else {
                // The bump first: a backend that finds the slot free finds the bump too.
                self.bump();
                self.release(slot, packed);
            }
        }
        pending
    }
}

impl<const SLOTS: usize> Clone for DirectoryTrust<SLOTS> {
    fn clone(&self) -> Self {
        let (generation, writers, taken, prepared_followed, overflowed) = self.values();
        DirectoryTrust {
            generation: AtomicU64::new(generation),
            writers: writers.map(AtomicU64::new),
            taken: AtomicU32::new(taken),
            prepared_followed: AtomicBool::new(prepared_followed),
            overflowed: AtomicBool::new(overflowed),
        }
    }
}

impl<const SLOTS: usize> DirectoryTrust<SLOTS> {
    /// Everything it holds, as plain values (the model check compares and hashes states so).
    fn values(&self) -> (u64, [u64; SLOTS], u32, bool, bool) {
        (
            self.generation.load(Ordering::Acquire),
            std::array::from_fn(|index| self.writers[index].load(Ordering::Acquire)),
            self.taken.load(Ordering::Acquire),
            self.prepared_followed.load(Ordering::Acquire),
            self.overflowed.load(Ordering::Acquire),
        )
    }
}

impl<const SLOTS: usize> PartialEq for DirectoryTrust<SLOTS> {
    fn eq(&self, other: &Self) -> bool {
        self.values() == other.values()
    }
}

impl<const SLOTS: usize> Eq for DirectoryTrust<SLOTS> {}

impl<const SLOTS: usize> std::hash::Hash for DirectoryTrust<SLOTS> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.values().hash(state);
    }
}

impl<const SLOTS: usize> std::fmt::Debug for DirectoryTrust<SLOTS> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (generation, writers, _, prepared_followed, overflowed) = self.values();
        formatter
            .debug_struct("DirectoryTrust")
            .field("generation", &generation)
            .field(
                "writers",
                &writers
                    .iter()
                    .filter_map(|&packed| Writer::unpacked(packed))
                    .collect::<Vec<_>>(),
            )
            .field("prepared_followed", &prepared_followed)
            .field("overflowed", &overflowed)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A server whose in-progress and prepared transactions the test sets.
    #[derive(Default)]
    struct TestServer {
        recovery: bool,
        running: RefCell<Vec<u32>>,
        prepared: Vec<Writer>,
        unreadable: bool,
    }

    impl Server for TestServer {
        fn in_recovery(&self) -> bool {
            self.recovery
        }
        fn in_progress(&self, xid: u32) -> bool {
            self.running.borrow().contains(&xid)
        }
        fn prepared_transactions(&self) -> Option<Vec<Writer>> {
            (!self.unreadable).then(|| self.prepared.clone())
        }
    }

    const DB: u32 = 5;

    /// How many writers `trust` follows now.
    fn followed<const SLOTS: usize>(trust: &DirectoryTrust<SLOTS>) -> usize {
        trust.values().1.iter().filter(|&&slot| slot != 0).count()
    }

    #[test]
    fn a_committing_writer_closes_its_database_and_its_end_bumps() {
        let trust = DirectoryTrust::<4>::new();
        let server = TestServer::default();
        let before = trust.open_for(DB, false, &server).unwrap();
        let writer = Writer {
            database: DB,
            xid: 700,
        };
        server.running.borrow_mut().push(700);
        trust.follow(writer);
        assert_eq!(trust.open_for(DB, false, &server), Err(Off::WriterPending));
        // Another database is not held up.
        assert_eq!(trust.open_for(DB + 1, false, &server), Ok(before));
        // Visible now, its callback not run yet: the first look bumps.
        server.running.borrow_mut().clear();
        let after = trust.open_for(DB, false, &server).unwrap();
        assert!(after > before);
        assert!(!trust.is_current(before));
        assert_eq!(followed(&trust), 0);
        // Its own callback, late: one more bump, nothing else.
        trust.committed(writer);
        assert!(trust.open_for(DB, false, &server).unwrap() > after);
    }

    #[test]
    fn prepared_transactions_found_at_start_are_followed_whatever_they_wrote() {
        let trust = DirectoryTrust::<4>::new();
        let prepared = Writer {
            database: DB,
            xid: 42,
        };
        let mut server = TestServer {
            unreadable: true,
            ..TestServer::default()
        };
        assert_eq!(
            trust.open_for(DB, false, &server),
            Err(Off::PreparedUnknown)
        );
        server.unreadable = false;
        server.prepared = vec![prepared];
        server.running.borrow_mut().push(42);
        assert_eq!(trust.open_for(DB, false, &server), Err(Off::WriterPending));
        server.running.borrow_mut().clear();
        assert_eq!(trust.open_for(DB, false, &server), Ok(1));
    }

    #[test]
    fn recovery_own_writes_and_overflow_keep_it_off() {
        let trust = DirectoryTrust::<1>::new();
        let server = TestServer {
            recovery: true,
            ..TestServer::default()
        };
        assert_eq!(trust.open_for(DB, false, &server), Err(Off::Recovery));
        let server = TestServer::default();
        assert_eq!(trust.open_for(DB, true, &server), Err(Off::OwnWrite));
        server.running.borrow_mut().extend([1, 2]);
        trust.follow(Writer {
            database: DB,
            xid: 1,
        });
        trust.follow(Writer {
            database: DB + 1,
            xid: 2,
        });
        assert_eq!(trust.open_for(DB + 2, false, &server), Err(Off::Overflowed));
    }

    #[test]
    fn an_aborted_writer_is_forgotten_without_a_bump_and_no_xid_is_never_followed() {
        let trust = DirectoryTrust::<2>::new();
        let server = TestServer::default();
        let writer = Writer {
            database: DB,
            xid: 9,
        };
        server.running.borrow_mut().push(9);
        trust.follow(writer);
        trust.aborted(writer);
        assert_eq!(trust.open_for(DB, false, &server), Ok(0));
        trust.follow(Writer {
            database: DB,
            xid: 0,
        });
        assert_eq!(followed(&trust), 0);
    }

    #[test]
    fn writers_pack_and_unpack() {
        for writer in [
            Writer {
                database: 0,
                xid: 0,
            },
            Writer {
                database: u32::MAX - 1,
                xid: u32::MAX,
            },
        ] {
            assert_eq!(Writer::unpacked(writer.packed()), Some(writer));
        }
        assert_eq!(Writer::unpacked(0), None);
    }
}
