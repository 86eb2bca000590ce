//! An exhaustive model check of the extension directory's trust rule (docs/design.md §6, "A new
//! connection's first ID"): `snowflake_id_core::directory_trust::DirectoryTrust`, the type the
//! extension keeps in shared memory, run by stateright through every history of up to
//! [`MAX_DEPTH`] events of a server with one database, one sequence, the directory's entry for
//! it, two connections and one transaction at a time that changes the sequence (drops it, or
//! drops it and creates it again with another layout).
//!
//! Events, in any order: a connection opens, takes an ID (processing the invalidations sent
//! since its last one, as PostgreSQL does at its next transaction), leaves what its lookup found
//! in the directory (a separate step: other events land between a lookup and its write), or
//! closes; the changing transaction begins, commits (its pre-commit callback, the moment its
//! commit is visible, its commit callback and the invalidation it sends, each a step of its
//! own), or is prepared and later committed or rolled back in another session, or aborts; a
//! restart, a crash restart or a promotion (shared memory starts empty, prepared transactions
//! are kept, sessions are gone; alike for the directory); another database takes the entry's
//! place. At most [`MAX_CHANGES`] changes and [`MAX_RESTARTS`] restarts per history.
//!
//! Properties, in every state reached: a connection's first lookup of the sequence uses the
//! layout (or the absence) of a catalog at least as new as every change visible when the
//! connection opened or whose invalidation it processed; and so does its re-check after an
//! invalidation. Seeded bugs it catches, with their histories printed: the directory's first rule
//! (229c10d, never released: writers followed only from their prepare, in shared memory only,
//! and bumped after their commit is visible), the re-check answered from that directory, the
//! prepared transactions of a new shared memory left unfollowed, and a logical apply into the
//! catalog table (which no hook sees) let in. The re-check that reads the catalog table is
//! right even under the first rule.

use snowflake_id_core::directory_trust::{DirectoryTrust, Server, Writer};
use stateright::{Model, Property};

mod model_checking;
use model_checking::{assert_broken, assert_kept, explore};

/// Events per history.
const MAX_DEPTH: usize = 18;
/// Changes of the sequence per history.
const MAX_CHANGES: u8 = 3;
/// Restarts (clean, after a crash, or a promotion) per history.
const MAX_RESTARTS: u8 = 2;
const CONNECTIONS: usize = 2;
const DATABASE: u32 = 1;
/// Writers the model's directory follows at once (the extension's has more).
const SLOTS: usize = 2;

const FIRST_LOOKUP: &str = "a first lookup follows every commit visible to it";
const RECHECK: &str = "a re-check after an invalidation follows the committed catalog";

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Bug {
    None,
    /// The directory's first rule (229c10d): a writer is followed only from its prepare, shared memory's followers are
    /// all there is (nothing is followed after a restart), and a plain commit bumps the
    /// generation in its commit callback, after the commit is visible.
    FollowedFromPrepareOnly,
    /// The same rule, and a connection's re-check after an invalidation answered from the
    /// directory, as that directory's was.
    RecheckFromDirectory,
    /// The rule, but the prepared transactions a new shared memory finds are not followed:
    /// what the first directory did after a restart, a crash or a promotion.
    PreparedUnfollowedAfterRestart,
    /// A logical apply worker writes the catalog table (a publication of it let in): no hook
    /// sees it.
    ApplyLetIn,
}

/// The sequence's layout in a catalog: None when it does not exist, else the change that
/// created it (0: the initial one).
type Layout = Option<u8>;

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Change {
    Idle,
    /// Wrote its rows; not committing yet.
    Writing {
        xid: u32,
        to: Layout,
    },
    /// Past its pre-commit callback; its commit not visible yet.
    Committing {
        xid: u32,
        to: Layout,
    },
    /// Its commit is visible; its commit callback and invalidation not run yet.
    Visible {
        xid: u32,
    },
    /// Prepared: committed or rolled back later, in another session or after a restart.
    Prepared {
        xid: u32,
        to: Layout,
    },
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Connection {
    Closed,
    Open {
        /// The newest change this connection must see: visible when it opened, or whose
        /// invalidation it processed.
        bound: u8,
        /// The newest change whose invalidation it processed.
        invalidated: u8,
        /// Its cached layout, and whether it was verified since the last invalidation.
        cache: Option<(Layout, bool)>,
        /// What its lookup found, with the generation it began at, to be left in the
        /// directory.
        leaving: Option<(u64, Layout)>,
    },
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct State {
    trust: DirectoryTrust<SLOTS>,
    /// The directory's entry for the database: its generation and the sequence's layout.
    entry: Option<(u64, Layout)>,
    /// The committed catalog after each visible change, from the initial one.
    history: Vec<Layout>,
    /// The newest change whose invalidation was sent.
    invalidation_sent: u8,
    change: Change,
    changes: u8,
    next_xid: u32,
    restarts: u8,
    connections: [Connection; CONNECTIONS],
    fault: Option<&'static str>,
}

impl State {
    fn catalog(&self) -> Layout {
        *self.history.last().expect("the initial catalog")
    }

    fn newest_change(&self) -> u8 {
        (self.history.len() - 1) as u8
    }

    fn commit_visible(&mut self, to: Layout) {
        self.history.push(to);
    }
}

/// The server around the directory, as the model's state has it.
struct ModelServer<'a> {
    state: &'a State,
    bug: Bug,
}

impl Server for ModelServer<'_> {
    fn in_recovery(&self) -> bool {
        false
    }

    fn in_progress(&self, xid: u32) -> bool {
        match self.state.change {
            Change::Writing { xid: x, .. }
            | Change::Committing { xid: x, .. }
            | Change::Prepared { xid: x, .. } => x == xid,
            Change::Idle | Change::Visible { .. } => false,
        }
    }

    fn prepared_transactions(&self) -> Option<Vec<Writer>> {
        let old_rule = matches!(
            self.bug,
            Bug::FollowedFromPrepareOnly
                | Bug::RecheckFromDirectory
                | Bug::PreparedUnfollowedAfterRestart
        );
        Some(match self.state.change {
            Change::Prepared { xid, .. } if !old_rule => vec![Writer {
                database: DATABASE,
                xid,
            }],
            _ => vec![],
        })
    }
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Action {
    Open(usize),
    TakeId(usize),
    Leave(usize),
    Close(usize),
    /// Begins a change: the sequence dropped (None) or dropped and created again.
    Begin(Layout),
    PreCommit,
    CommitVisible,
    CommitCallback,
    Prepare,
    CommitPrepared,
    RollbackPrepared,
    Abort,
    /// A clean restart, a crash restart or a promotion.
    Restart,
    /// Another database takes the entry's place.
    Evict,
    /// A logical apply worker's change of the catalog table.
    Apply(Layout),
}

struct DirectoryModel {
    bug: Bug,
    checks: Option<&'static str>,
}

impl DirectoryModel {
    fn old_rule(&self) -> bool {
        matches!(
            self.bug,
            Bug::FollowedFromPrepareOnly | Bug::RecheckFromDirectory
        )
    }

    /// A lookup through the directory: the layout the connection uses, and what it leaves.
    fn through_directory(&self, state: &State) -> (Layout, Option<(u64, Layout)>) {
        let server = ModelServer {
            state,
            bug: self.bug,
        };
        match state.trust.open_for(DATABASE, false, &server) {
            Ok(generation) => match state.entry {
                Some((held, layout)) if held == generation => (layout, None),
                // The generation is read before the catalog snapshot is taken.
                _ => (state.catalog(), Some((generation, state.catalog()))),
            },
            Err(_) => (state.catalog(), None),
        }
    }

    fn writer(xid: u32) -> Writer {
        Writer {
            database: DATABASE,
            xid,
        }
    }
}

impl Model for DirectoryModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            trust: DirectoryTrust::new(),
            entry: None,
            history: vec![Some(0)],
            invalidation_sent: 0,
            change: Change::Idle,
            changes: 0,
            next_xid: 1,
            restarts: 0,
            connections: [Connection::Closed; CONNECTIONS],
            fault: None,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.fault.is_some() {
            return;
        }
        for (index, connection) in state.connections.iter().enumerate() {
            match connection {
                Connection::Closed => actions.push(Action::Open(index)),
                Connection::Open { leaving, .. } => {
                    actions.push(Action::TakeId(index));
                    if leaving.is_some() {
                        actions.push(Action::Leave(index));
                    }
                    actions.push(Action::Close(index));
                }
            }
        }
        let next = Some(state.changes + 1);
        match state.change {
            Change::Idle if state.changes < MAX_CHANGES => {
                actions.push(Action::Begin(None));
                actions.push(Action::Begin(next));
                if self.bug == Bug::ApplyLetIn {
                    actions.push(Action::Apply(next));
                }
            }
            Change::Idle => {}
            Change::Writing { .. } => {
                actions.extend([Action::PreCommit, Action::Prepare, Action::Abort]);
            }
            Change::Committing { .. } => actions.extend([Action::CommitVisible, Action::Abort]),
            Change::Visible { .. } => actions.push(Action::CommitCallback),
            Change::Prepared { .. } => {
                actions.extend([Action::CommitPrepared, Action::RollbackPrepared])
            }
        }
        if state.restarts < MAX_RESTARTS {
            actions.push(Action::Restart);
        }
        if state.entry.is_some() {
            actions.push(Action::Evict);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Open(index) => {
                state.connections[index] = Connection::Open {
                    bound: state.newest_change(),
                    invalidated: state.invalidation_sent,
                    cache: None,
                    leaving: None,
                };
            }
            Action::TakeId(index) => {
                let Connection::Open {
                    mut bound,
                    mut invalidated,
                    mut cache,
                    mut leaving,
                } = state.connections[index]
                else {
                    return None;
                };
                if state.invalidation_sent > invalidated {
                    invalidated = state.invalidation_sent;
                    bound = bound.max(invalidated);
                    cache = cache.map(|(layout, _)| (layout, false));
                }
                let (used, property) = match cache {
                    Some((layout, true)) => (layout, RECHECK),
                    Some((_, false)) if self.bug != Bug::RecheckFromDirectory => {
                        (state.catalog(), RECHECK)
                    }
                    Some((_, false)) => {
                        let (used, left) = self.through_directory(&state);
                        leaving = left.or(leaving);
                        (used, RECHECK)
                    }
                    None => {
                        let (used, left) = self.through_directory(&state);
                        leaving = left.or(leaving);
                        (used, FIRST_LOOKUP)
                    }
                };
                if !state.history[usize::from(bound)..].contains(&used) {
                    state.fault = Some(property);
                }
                state.connections[index] = Connection::Open {
                    bound,
                    invalidated,
                    cache: Some((used, true)),
                    leaving,
                };
            }
            Action::Leave(index) => {
                let Connection::Open {
                    leaving: ref mut leaving @ Some((generation, layout)),
                    ..
                } = state.connections[index]
                else {
                    return None;
                };
                *leaving = None;
                if state.trust.is_current(generation) {
                    state.entry = Some((generation, layout));
                }
            }
            Action::Close(index) => state.connections[index] = Connection::Closed,
            Action::Begin(to) => {
                state.change = Change::Writing {
                    xid: state.next_xid,
                    to,
                };
                state.next_xid += 1;
                state.changes += 1;
            }
            Action::PreCommit => {
                let Change::Writing { xid, to } = state.change else {
                    return None;
                };
                if !self.old_rule() {
                    state.trust.follow(Self::writer(xid));
                }
                state.change = Change::Committing { xid, to };
            }
            Action::CommitVisible => {
                let Change::Committing { xid, to } = state.change else {
                    return None;
                };
                state.commit_visible(to);
                state.change = Change::Visible { xid };
            }
            Action::CommitCallback => {
                let Change::Visible { xid } = state.change else {
                    return None;
                };
                if self.old_rule() {
                    state.trust.bump();
                } else {
                    state.trust.committed(Self::writer(xid));
                }
                // PostgreSQL sends the invalidations after the commit callbacks.
                state.invalidation_sent = state.newest_change();
                state.change = Change::Idle;
            }
            Action::Prepare => {
                let Change::Writing { xid, to } = state.change else {
                    return None;
                };
                state.trust.follow(Self::writer(xid));
                state.change = Change::Prepared { xid, to };
            }
            Action::CommitPrepared => {
                let Change::Prepared { to, .. } = state.change else {
                    return None;
                };
                state.commit_visible(to);
                state.invalidation_sent = state.newest_change();
                state.change = Change::Idle;
            }
            Action::RollbackPrepared => state.change = Change::Idle,
            Action::Abort => {
                let (Change::Writing { xid, .. } | Change::Committing { xid, .. }) = state.change
                else {
                    return None;
                };
                if !self.old_rule() {
                    state.trust.aborted(Self::writer(xid));
                }
                state.change = Change::Idle;
            }
            Action::Restart => {
                state.restarts += 1;
                state.trust = DirectoryTrust::new();
                state.entry = None;
                state.connections = [Connection::Closed; CONNECTIONS];
                // Prepared transactions survive; one in progress is gone; a visible commit is
                // durable (its callback never runs).
                if !matches!(state.change, Change::Prepared { .. }) {
                    state.change = Change::Idle;
                }
            }
            Action::Evict => state.entry = None,
            Action::Apply(to) => {
                state.changes += 1;
                state.commit_visible(to);
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let all = vec![
            Property::always(FIRST_LOOKUP, |_, state: &State| {
                state.fault != Some(FIRST_LOOKUP)
            }),
            Property::always(RECHECK, |_, state: &State| state.fault != Some(RECHECK)),
        ];
        all.into_iter()
            .filter(|property| self.checks.is_none_or(|name| property.name == name))
            .collect()
    }
}

/// Runs the checker over every state reachable in [`MAX_DEPTH`] events; returns the broken
/// properties with their counterexamples.
fn check(bug: Bug, checks: Option<&'static str>, threads: usize) -> Vec<(&'static str, String)> {
    explore(
        DirectoryModel { bug, checks },
        MAX_DEPTH,
        threads,
        &format!("{bug:?}"),
    )
}

/// Checks `bug` is caught by `property`, printing the counterexample (one thread: the same
/// path every run).
fn assert_caught(bug: Bug, property: &'static str) {
    let found = check(bug, Some(property), 1);
    assert_broken(&found, property, &format!("{bug:?}"));
}

#[test]
fn the_directory_follows_the_committed_catalog_in_every_reachable_state() {
    assert_kept(check(Bug::None, None, 2));
}

#[test]
fn a_recheck_that_reads_the_catalog_is_right_whatever_the_directory_holds() {
    assert_kept(check(Bug::FollowedFromPrepareOnly, Some(RECHECK), 2));
}

#[test]
fn the_directorys_first_rule_is_caught() {
    assert_caught(Bug::FollowedFromPrepareOnly, FIRST_LOOKUP);
}

#[test]
fn a_recheck_answered_from_the_first_directory_is_caught() {
    assert_caught(Bug::RecheckFromDirectory, RECHECK);
}

#[test]
fn prepared_transactions_unfollowed_after_a_restart_are_caught() {
    assert_caught(Bug::PreparedUnfollowedAfterRestart, FIRST_LOOKUP);
}

#[test]
fn a_logical_apply_into_the_catalog_table_is_caught() {
    assert_caught(Bug::ApplyLetIn, FIRST_LOOKUP);
}
