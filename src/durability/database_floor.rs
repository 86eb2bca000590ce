//! The floor carried in each database (docs/design.md §5.3): the extension's own sequence
//! relation `snowflake_floor`, which holds a time (µs since 1970) that no tick of an ID issued
//! in this database ends after. PostgreSQL carries it everywhere the rows go: its updates are
//! WAL-logged (standbys, crash recovery, PITR), `pg_upgrade` copies it, and `pg_dump` dumps it as
//! a `setval` (it is a configuration sequence of the extension). The extension never reads user
//! tables to find a floor (`stored_ids.rs` only reports what one holds): no role's code runs
//! and no role's values count, and only relations that are members of the extension and owned
//! by a superuser are taken for it.
//!
//! The steps (read, raise, re-read, flush) are the core's `protocol`, and the decisions in them
//! (when to read, raise and flush the relation, and what a value read teaches) its
//! `floor::FloorView`; this file locates, reads, writes and flushes. Before the
//! first ID of each tick a backend looks at the floor relation's page, so a change somebody else
//! made (a restore into this live database) is read before its next tick. Writes take an
//! LWLock, so the relation only rises through them, and leave the relation's last two values in
//! shared memory: a backend that reads a value written a moment ago relies on the write before
//! it, whose WAL is flushed by then, and knows it was this server's.

use pgrx::prelude::*;
use snowflake_id_core::floor::{FloorView, LoggedValue, PageLsn, Provenance};
use snowflake_id_core::protocol::{self, Cover, FloorRelation, TickRefused, TickStep};
use snowflake_id_core::renewal::RenewalPolicy;

use crate::durability::floor_relations::{this_cluster, trusted_owner, FloorRelations};
use crate::durability::reservation::{renewal_policy, ClusterReservation};
use crate::errors;
use crate::pg::system_clock;
use crate::shmem::SharedState;
use crate::state::catalog::{self, CatalogTable};
use crate::state::extension::Extension;
use crate::state::extension_directory;

pub(crate) const RELATION_NAME: &std::ffi::CStr = c"snowflake_floor";
/// The relation that says which cluster wrote the floor, and on which timeline.
pub(crate) const WRITER_RELATION_NAME: &std::ffi::CStr = c"snowflake_floor_writer";

/// Whether a role that can log in and is not a superuser may write `relation` now, itself or
/// through a role it is a member of: a grant, the database's ownership (`pg_database_owner`,
/// which restores its dumps), `pg_write_all_data`. Asked only when a value from elsewhere lies
/// beyond the trusted lead (rarely): PostgreSQL's own privilege functions, no role's code.
fn writable_by_a_non_superuser(relation: pg_sys::Oid) -> bool {
    Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_roles writer, pg_catalog.pg_roles login \
          WHERE login.rolcanlogin AND NOT login.rolsuper \
            AND pg_catalog.has_sequence_privilege(writer.oid, $1, 'UPDATE') \
            AND pg_catalog.pg_has_role(login.oid, writer.oid, 'MEMBER'))",
        &[relation.into()],
    )
    .ok()
    .flatten()
    .unwrap_or(true)
}

/// This backend's view of its database's floor relation.
pub struct DatabaseFloor {
    /// The catalog table the relation was looked up for (a new one means a new extension).
    catalog: Option<CatalogTable>,
    /// The relations, or None where the extension predates them (0.4.0 and earlier, not yet
    /// updated): looked up again before each tick until the update creates them.
    relations: Option<FloorRelations>,
    /// Whether the writer relation names this cluster and timeline, as this backend last read or
    /// wrote it; None when its last read of the floor did not read it (see `read`).
    ours: Option<bool>,
    /// What this backend knows of the relation.
    view: FloorView,
}

impl DatabaseFloor {
    pub const fn new() -> Self {
        DatabaseFloor {
            catalog: None,
            relations: None,
            ours: None,
            view: FloorView::NEW,
        }
    }

    /// Follows the extension whose catalog table is `catalog`: looks up its relations the first
    /// time, forgetting what was known of another one's (the extension was dropped and created
    /// again).
    pub fn follow(&mut self, catalog: &CatalogTable) {
        if self.catalog.map(|known| known.oid()) == Some(catalog.oid()) {
            return;
        }
        *self = DatabaseFloor {
            catalog: Some(*catalog),
            relations: relations_of(catalog),
            ..DatabaseFloor::new()
        };
    }

    /// The relations, looked up again while the extension predates them (a session that
    /// started before `ALTER EXTENSION … UPDATE` finds them at its next tick).
    fn located(&mut self) -> Option<FloorRelations> {
        if let (None, Some(catalog)) = (self.relations, self.catalog) {
            self.relations = relations_of(&catalog);
        }
        self.relations
    }

    /// The relations (see [`Self::located`]) as the protocol sees them, with what this backend
    /// knows of them.
    fn in_database<'a>(
        &'a mut self,
        shared: &'a SharedState,
    ) -> Option<(&'a mut FloorView, InDatabase<'a>)> {
        self.located()?;
        let relations = self.relations.as_mut()?;
        let relation = InDatabase {
            relations,
            ours: &mut self.ours,
            shared,
        };
        Some((&mut self.view, relation))
    }

    /// Before a generator's first ID: reads the relation, raising the durable floor (and the
    /// cluster clock) when another cluster, or this one on another timeline, wrote it
    /// (`pg_upgrade`, a restored dump, a promotion), or when
    /// this server started without its reservation file (`protocol::learn`).
    pub fn learn(&mut self, shared: &SharedState) {
        if let Some((view, mut relation)) = self.in_database(shared) {
            protocol::learn(view, &mut relation).unwrap_or_else(|refused| refused.raise());
        }
    }

    /// Before the first ID of a tick ending at `end_unix_us` leaves:
    /// `protocol::first_id_of_tick` with the renewal `policy`, the cluster's reservation and
    /// this database's floor relation (where it has one), handed down to the protocol once.
    /// Raises what the protocol refuses: a reservation that cannot be written, a floor beyond
    /// the trusted lead (55000).
    pub fn first_id_of_tick(
        &mut self,
        end_unix_us: i64,
        shared: &SharedState,
        policy: &RenewalPolicy,
    ) -> TickStep {
        if self.relations.is_none() {
            // SAFETY: processes pending invalidation messages, as any lock acquisition does, so
            // that relations an update made since this transaction started are seen.
            unsafe { pg_sys::AcceptInvalidationMessages() };
        }
        let mut located = self.in_database(shared);
        let floor = located
            .as_mut()
            .map(|(view, relation)| (&mut **view, relation));
        let outcome =
            protocol::first_id_of_tick(&mut ClusterReservation(shared), policy, end_unix_us, floor);
        match outcome {
            Ok((step, covered)) => {
                if covered == Cover::Gone {
                    // Dropped under us (DROP EXTENSION): the catalog's invalidation follows.
                    self.relations = None;
                }
                step
            }
            Err(TickRefused::Reservation(failure)) => failure.raise(shared),
            Err(TickRefused::Floor(refused)) => refused.raise(),
        }
    }

    /// `snowflake_raise_floor`: `protocol::raise_floor` (the server's sessions, the relation,
    /// the cluster's WAL); 55000 where the database has no floor relation.
    pub fn raise(&mut self, catalog: &CatalogTable, until_unix_us: i64, shared: &SharedState) {
        let missing = || errors::floor_relation_missing(&catalog.extension_schema()).raise();
        let Some((view, mut relation)) = self.in_database(shared) else {
            missing()
        };
        let mut reservation = ClusterReservation(shared);
        let raised = protocol::raise_floor(&mut reservation, view, &mut relation, until_unix_us)
            .unwrap_or_else(|refused| refused.raise());
        if raised == Cover::Gone {
            missing();
        }
    }

    /// `snowflake_accept_floor`: the relation's value now, whoever wrote it.
    pub fn value_now(&mut self, catalog: &CatalogTable) -> i64 {
        let relations = self
            .located()
            .unwrap_or_else(|| errors::floor_relation_missing(&catalog.extension_schema()).raise());
        FloorRelations {
            owner: trusted_owner(relations.floor),
            ..relations
        }
        .current()
        .value
    }
}

/// One database's floor relations as the protocol (`snowflake_id_core::protocol`) sees them.
struct InDatabase<'a> {
    relations: &'a mut FloorRelations,
    /// Whether the writer relation names this cluster and timeline, as this backend last read or
    /// wrote it; None when its last read of the floor did not read it (see `read`).
    ours: &'a mut Option<bool>,
    shared: &'a SharedState,
}

impl FloorRelation for InDatabase<'_> {
    type Error = errors::Error;

    /// The floor relation's page LSN (see [`FloorRelations::floor_page_lsn`]).
    fn page(&mut self) -> Option<PageLsn> {
        self.relations.floor_page_lsn()
    }

    /// The value and whether this server's newest write set it, under the floor writes' lock
    /// (shared; writes hold it exclusively around their setval and slot), so that a write
    /// finishing in between is not taken for somebody else's. The writer relation is read only
    /// when it is not: what it says counts for nothing about a value this server set
    /// (`FloorView::read`), and a new connection's first ID then builds no relcache entry for
    /// it; a raise reads it if it must (`raise`).
    fn read(&mut self) -> (LoggedValue, Provenance) {
        // The owner may have changed since the lookup (REASSIGN OWNED, ALTER ROLE), which the
        // extension directory may have made in another session: checked at every read.
        self.relations.owner = trusted_owner(self.relations.floor);
        let relations = *self.relations;
        // The relation locks first, so that nothing waits for one while holding the LWLock.
        relations.lock_relations();
        let recent = &self.shared.floor_writes;
        let (current, set_by_this_server) = recent.shared(|| {
            let current = relations.current();
            (current, recent.before(&relations, current))
        });
        *self.ours = set_by_this_server
            .is_none()
            .then(|| relations.writer_names_this_cluster());
        let from = Provenance {
            set_by_this_server,
            // When unread, what it would say is ignored (this server set the value).
            writer_is_this_cluster: self.ours.unwrap_or(true),
            started_without_reservation: self.shared.reservation.started_without_file(),
        };
        (current, from)
    }

    fn reserved_until(&self) -> i64 {
        self.shared.reservation.until()
    }

    /// A value the extension did not write (a restore, pg_upgrade), where a role that is not a
    /// superuser may write the relation (the database's owner, a member of pg_write_all_data, a
    /// grant), moves the server's IDs at most the trusted lead ahead of the wall clock, which no
    /// write moves; beyond it the sessions of this database that read it issue no ID until a
    /// superuser accepts it or sets it back. Where only superusers can write it, it is theirs.
    fn learned(&mut self, floor: i64) -> Result<(), errors::Error> {
        let (wall, _) = system_clock::wall_and_monotonic_us();
        let policy = renewal_policy();
        if floor > self.shared.reservation.durable_floor()
            && policy.beyond_trusted_lead(floor, wall)
            && writable_by_a_non_superuser(self.relations.floor)
        {
            let name = catalog::relation_name(self.relations.floor);
            return Err(errors::floor_beyond_trust(
                &name,
                floor,
                wall,
                policy.trusted_lead(),
            ));
        }
        ClusterReservation(self.shared).raise_floor(floor);
        Ok(())
    }

    /// Raises the relation with `setval` when its page is still at `read_at`. Writes are
    /// serialised, so the relation only rises through them. (A `setval` that is not the
    /// extension's, landing between the check and the write, a few microseconds, is written
    /// over: design §5.3.)
    fn raise(&mut self, value: i64, read_at: PageLsn) -> Option<LoggedValue> {
        let relations = *self.relations;
        relations.lock_relations();
        // Read before the LWLock, as `read` would have: its relcache entry may be built now.
        let ours = *self
            .ours
            .get_or_insert_with(|| relations.writer_names_this_cluster());
        let recent = &self.shared.floor_writes;
        recent.exclusive(|| {
            let current = relations.current();
            if relations.floor_page_lsn() != Some(read_at) || current.value >= value {
                return None;
            }
            if !ours {
                // The writer first: a value that is not ours stays covered by the floor it
                // raised.
                relations.set(relations.writer, this_cluster());
                *self.ours = Some(true);
            }
            relations.set(relations.floor, value);
            let written = LoggedValue {
                value,
                lsn: last_record_end(),
            };
            recent.remember(&relations, current, written);
            Some(written)
        })
    }

    fn flushed(&self) -> u64 {
        // SAFETY: reads the flushed WAL position from shared memory; no timeline is asked for.
        unsafe { pg_sys::GetFlushRecPtr(std::ptr::null_mut()) }
    }

    fn flush(&mut self, lsn: u64) {
        // SAFETY: flushing WAL up to a position already inserted, outside a critical section.
        unsafe { pg_sys::XLogFlush(lsn) };
    }
}

/// The end of this backend's last WAL record (what `setval` just inserted): the LSN it left on
/// the sequence's page.
fn last_record_end() -> pg_sys::XLogRecPtr {
    // SAFETY: a plain read of this backend's own WAL position.
    unsafe { pg_sys::XactLastRecEnd }
}

/// The floor and writer relations of the extension whose catalog table is `catalog`: from the
/// extension directory, else looked up (`locate`).
fn relations_of(catalog: &CatalogTable) -> Option<FloorRelations> {
    extension_directory::floor_relations(catalog, || locate(catalog.oid()))
}

/// The floor and writer relations next to the catalog table, and their owner: sequences that
/// are members of the catalog table's extension. A relation of that name that is not (one a
/// role created in a database whose extension predates the floor) is not the floor; a member
/// owned by a role that is not a superuser (moved by `REASSIGN OWNED`) is refused (55000), since
/// its owner could set any floor for the whole server.
fn locate(catalog: pg_sys::Oid) -> Option<FloorRelations> {
    let extension = Extension::installed()?;
    // The catalog table this backend read is still the extension's (not one of an extension
    // dropped and created again since).
    if !extension.registers(catalog) {
        return None;
    }
    let sequence = pg_sys::RELKIND_SEQUENCE;
    let floor = extension.member(RELATION_NAME, sequence)?;
    let writer = extension.member(WRITER_RELATION_NAME, sequence)?;
    trusted_owner(writer);
    Some(FloorRelations {
        floor,
        writer,
        owner: trusted_owner(floor),
    })
}
