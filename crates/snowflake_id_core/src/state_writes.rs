//! Which writes of the extension's state a transaction still holds (docs/design.md §6, "A new
//! connection's first ID"): the directory's rule follows a transaction that wrote the state
//! ([`crate::directory_trust`]), and a write counts only while it can still commit. A write
//! made in a subtransaction that rolled back (an exception block, `ROLLBACK TO SAVEPOINT`, a
//! write the catalog's guard refused) can never be seen by anyone, so it moves nothing: a role
//! that tries a write it has no right to, in any way it can plan one, leaves the directory's
//! generation where it was.
//!
//! PostgreSQL numbers a transaction's levels from 1 (the top level); a subtransaction's commit
//! hands its writes to its parent, its rollback discards those of its level and below it. The
//! writes that survive all lie on the chain of open levels, so the shallowest level holding one
//! says everything: the transaction holds a write exactly when it has one.

/// The writes of the extension's state that one transaction still holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateWrites {
    /// The shallowest open level holding a write (None: none holds one).
    shallowest: Option<u32>,
}

impl StateWrites {
    /// No writes: a transaction's start.
    pub const fn none() -> StateWrites {
        StateWrites { shallowest: None }
    }

    /// A write at `level` (PostgreSQL's transaction nest level, 1 for the top level).
    pub fn wrote(&mut self, level: u32) {
        self.shallowest = Some(self.shallowest.map_or(level, |held| held.min(level)));
    }

    /// The subtransaction at `level` committed: its writes are its parent's now.
    pub fn subtransaction_committed(&mut self, level: u32) {
        if self.shallowest == Some(level) {
            self.shallowest = Some(level.saturating_sub(1).max(1));
        }
    }

    /// The subtransaction at `level` rolled back: its writes, and those of the levels below it,
    /// are gone.
    pub fn subtransaction_aborted(&mut self, level: u32) {
        if self.shallowest.is_some_and(|held| held >= level) {
            self.shallowest = None;
        }
    }

    /// Whether the transaction holds a write that its commit would make visible.
    pub fn any(self) -> bool {
        self.shallowest.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a transaction does at its innermost open level.
    #[derive(Clone, Copy, Debug)]
    enum Step {
        Write,
        Begin,
        Commit,
        Abort,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            Just(Step::Write),
            Just(Step::Begin),
            Just(Step::Commit),
            Just(Step::Abort)
        ]
    }

    proptest! {
        /// Against the plain account: a flag per open level, a commit ORing the level's flag
        /// into its parent's, a rollback dropping it.
        #[test]
        fn a_write_counts_exactly_while_it_can_commit(steps in prop::collection::vec(step(), 0..40)) {
            let mut levels = vec![false];
            let mut writes = StateWrites::none();
            for step in steps {
                let level = levels.len() as u32;
                match step {
                    Step::Write => {
                        *levels.last_mut().unwrap() = true;
                        writes.wrote(level);
                    }
                    Step::Begin => levels.push(false),
                    Step::Commit if level > 1 => {
                        let wrote = levels.pop().unwrap();
                        *levels.last_mut().unwrap() |= wrote;
                        writes.subtransaction_committed(level);
                    }
                    Step::Abort if level > 1 => {
                        levels.pop();
                        writes.subtransaction_aborted(level);
                    }
                    Step::Commit | Step::Abort => {}
                }
                prop_assert_eq!(writes.any(), levels.iter().any(|&wrote| wrote));
            }
        }
    }

    #[test]
    fn a_refused_write_in_an_exception_block_leaves_nothing() {
        let mut writes = StateWrites::none();
        writes.wrote(2);
        writes.subtransaction_aborted(2);
        assert!(!writes.any());
        writes.wrote(1);
        writes.wrote(3);
        writes.subtransaction_aborted(2);
        assert!(writes.any(), "the top level's write stays");
    }
}
