//! Plans waiting for a writer's approval (`triggers.plan_approval`): the
//! plan as posted, where it was posted, until when it waits, and what a
//! writer answered. A task waits with no sandbox and no run; its next run
//! reads this to go on from the approved plan, or plan again.

use super::{now, Journal, JournalError};
use rusqlite::{params, OptionalExtension};
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
    pub(super) fn create_plan_waits(db: &rusqlite::Connection) -> rusqlite::Result<()> {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS plan_waits (
                task_key TEXT PRIMARY KEY,
                record TEXT NOT NULL,
                updated_at INTEGER NOT NULL
            );",
        )
    }

    /// Records (or replaces) task `key`'s plan wait.
    pub fn save_plan_wait(&self, key: &str, wait: &PlanWait) -> Result<(), JournalError> {
        let record = serde_json::to_string(wait).unwrap_or_default();
        self.with(|db| {
            db.execute(
                "INSERT OR REPLACE INTO plan_waits (task_key, record, updated_at) VALUES (?1, ?2, ?3)",
                params![key, record, now()],
            )
            .map(drop)
        })
    }

    /// Task `key`'s run ends waiting for a writer's answer to its plan:
    /// the wait recorded (`None`: as it is) and the run's attempt given
    /// back, in one transaction.
    pub fn wait_for_approval(&self, key: &str, wait: Option<&PlanWait>) -> Result<(), JournalError> {
        let record = wait.map(|w| serde_json::to_string(w).unwrap_or_default());
        self.with(|db| {
            let tx = db.unchecked_transaction()?;
            if let Some(record) = record {
                tx.execute(
                    "INSERT OR REPLACE INTO plan_waits (task_key, record, updated_at) VALUES (?1, ?2, ?3)",
                    params![key, record, now()],
                )?;
            }
            Journal::give_back_attempt_in(&tx, key)?;
            tx.commit()
        })
    }

    /// Task `key`'s plan wait, if its plan waits (or was answered).
    pub fn plan_wait(&self, key: &str) -> Result<Option<PlanWait>, JournalError> {
        let record: Option<String> = self.with(|db| {
            db.query_row(
                "SELECT record FROM plan_waits WHERE task_key = ?1",
                params![key],
                |r| r.get(0),
            )
            .optional()
        })?;
        Ok(record.and_then(|r| serde_json::from_str(&r).ok()))
    }

    /// The plans nobody has answered yet, by task key.
    pub fn unanswered_plan_waits(&self) -> Result<Vec<(String, PlanWait)>, JournalError> {
        let rows: Vec<(String, String)> = self.with(|db| {
            let mut stmt = db.prepare("SELECT task_key, record FROM plan_waits ORDER BY updated_at")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })?;
        Ok(rows
            .into_iter()
            .filter_map(|(key, record)| Some((key, serde_json::from_str::<PlanWait>(&record).ok()?)))
            .filter(|(_, wait)| wait.answer.is_none())
            .collect())
    }

    pub(super) fn forget_plan_wait(db: &rusqlite::Connection, key: &str) -> rusqlite::Result<()> {
        db.execute("DELETE FROM plan_waits WHERE task_key = ?1", params![key])
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Phase;

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
            journal.unanswered_plan_waits().unwrap(),
            vec![(key.to_owned(), wait.clone())]
        );
        wait.answer = Some(PlanAnswer::Approved {
            by: "maya".into(),
            checklist: vec!["Edit".into()],
        });
        journal.save_plan_wait(key, &wait).unwrap();
        assert!(journal.unanswered_plan_waits().unwrap().is_empty());
        assert_eq!(journal.plan_wait(key).unwrap(), Some(wait));
        journal.finish(key, Phase::Done, "delivered").unwrap();
        assert_eq!(journal.plan_wait(key).unwrap(), None);
    }
}
