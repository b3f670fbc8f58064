//! Plans waiting for a writer's approval (`triggers.plan_approval`): the
//! plan as posted, where it was posted, until when it waits, and what a
//! writer answered. A task waits with no sandbox and no run; its next run
//! reads this to go on from the approved plan, or plan again.

use super::{now, Journal, JournalError, WaitKind};
use serde::{Deserialize, Serialize};

/// A plan posted for approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanWait {
    /// The comment that shows the plan and its checklist (the progress comment).
    pub comment_id: u64,
    /// The plan's text, as the debate gave it.
    pub plan: String,
    pub checklist: Vec<String>,
    /// How the plan was made, as the agent is told.
    pub made: String,
    /// Comments up to this id were written before the plan was posted;
    /// only later ones answer it.
    pub after_comment: u64,
    /// Who had given the comment a 👍 when this plan was posted (for an
    /// earlier plan): only new ones approve it.
    #[serde(default)]
    pub thumbs_before: Vec<String>,
    /// Seconds since the Unix epoch after which the wait ends the task.
    pub deadline: i64,
    /// What a writer answered, once one did.
    pub answer: Option<PlanAnswer>,
}

/// A writer's answer to a posted plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PlanAnswer {
    /// Approved, with the checklist as it stood on the comment then (a
    /// writer may have edited it).
    Approved { by: String, checklist: Vec<String> },
    /// Changes asked for in a comment: the plan is made again with it.
    Changes {
        by: String,
        comment_id: u64,
        text: String,
    },
    /// Nobody answered before the deadline.
    TimedOut,
}

impl PlanWait {
    pub fn timed_out(&self) -> bool {
        now() >= self.deadline
    }
}

impl Journal {
    /// Records (or replaces) task `key`'s plan wait.
    pub fn save_plan_wait(&self, key: &str, wait: &PlanWait) -> Result<(), JournalError> {
        self.with(|db| Journal::write_plan_wait(db, key, wait))
    }

    pub(super) fn write_plan_wait(
        db: &rusqlite::Connection,
        key: &str,
        wait: &PlanWait,
    ) -> rusqlite::Result<()> {
        let record = serde_json::to_string(wait).unwrap_or_default();
        Journal::put_wait(db, key, WaitKind::Approval, &record, wait.answer.is_none())
    }

    /// Task `key`'s plan wait, if its plan waits (or was answered).
    pub fn plan_wait(&self, key: &str) -> Result<Option<PlanWait>, JournalError> {
        Ok(self
            .wait_record(key, WaitKind::Approval)?
            .and_then(|r| serde_json::from_str(&r).ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Phase, Transition};

    #[test]
    fn a_wait_is_kept_until_answered_and_goes_with_the_task() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let key = "github:acme/app:issue:3";
        journal.begin(key).unwrap();
        let mut wait = PlanWait {
            comment_id: 7,
            plan: "# Plan".into(),
            checklist: vec!["Edit".into()],
            made: "one plan".into(),
            after_comment: 6,
            thumbs_before: vec![],
            deadline: now() + 60,
            answer: None,
        };
        journal.save_plan_wait(key, &wait).unwrap();
        assert!(!wait.timed_out());
        assert_eq!(
            journal.open_waits(&[WaitKind::Approval]).unwrap(),
            vec![(key.to_owned(), crate::journal::WaitFor::Approval(wait.clone()))]
        );
        wait.answer = Some(PlanAnswer::Approved {
            by: "maya".into(),
            checklist: vec!["Edit".into()],
        });
        journal.save_plan_wait(key, &wait).unwrap();
        assert!(journal.open_waits(&[WaitKind::Approval]).unwrap().is_empty());
        assert_eq!(journal.plan_wait(key).unwrap(), Some(wait));
        journal
            .transition(key, Transition::ended(Phase::Done, "delivered"))
            .unwrap();
        assert_eq!(journal.plan_wait(key).unwrap(), None);
    }
}
