//! Tasks waiting on their pushed commit's checks: the commit, the fix
//! round it came from, what was re-run, the conversation to go on from,
//! and, once the checks ended (or the wait gave up), what they said. A
//! waiting task holds no slot, no sandbox and no run: the daemon's watcher
//! reads the checks and starts the task again when they end. The
//! conversation is kept in a table of its own, read only when the task
//! goes on: the watcher's looks read the small rows alone.

use super::{now_ms, Journal, JournalError, WaitKind};
use crate::forge::Check;
use crate::llm::Message;
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

/// The checks a task waits on, and where it stands with them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckWait {
    /// The pushed commit whose checks are followed.
    pub sha: String,
    /// Fix rounds made so far (0: the first push's checks).
    pub round: u32,
    /// Whether the failed checks were re-run once already (a task re-runs
    /// them once, to tell a flaky failure from a real one).
    pub rerun_done: bool,
    /// The checks re-run for this wait: those that pass now are flaky.
    pub rerun: Vec<String>,
    /// Checks that failed, then passed when re-run.
    pub flaky: Vec<String>,
    /// Milliseconds since the Unix epoch when this wait began (for
    /// `delivery.ci_wait` and `ci_timeout`).
    pub since_ms: i64,
    /// The summary of the change, for the comment's outcome.
    pub summary: String,
    /// The agent's conversation so far: a fix round goes on from it. Kept
    /// apart from the wait's row ([`Journal::check_wait`] reads it back;
    /// the watcher's [`Journal::open_waits`] leaves it empty).
    /// Never written into the row; a row an earlier version wrote may
    /// still carry it.
    #[serde(default, skip_serializing)]
    pub conversation: Vec<Message>,
    /// The last line shown for the checks (the comment says when it changes).
    #[serde(default)]
    pub shown: String,
    /// What the checks said once the wait ended; `None` while it goes on.
    pub seen: Option<ChecksSeen>,
}

/// How a wait for a commit's checks ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ChecksSeen {
    /// Every check ended (passed, failed, or waits for a person).
    Ended(Vec<Check>),
    /// Nothing started within `delivery.ci_wait`.
    NeverStarted(Vec<Check>),
    /// Started but not ended within `delivery.ci_timeout`.
    StillRunning(Vec<Check>),
}

impl CheckWait {
    /// A new wait on `sha`'s checks, from now.
    pub fn on(sha: String, round: u32, summary: String, conversation: Vec<Message>) -> Self {
        CheckWait {
            sha,
            round,
            rerun_done: false,
            rerun: Vec::new(),
            flaky: Vec::new(),
            since_ms: now_ms(),
            summary,
            conversation,
            shown: String::new(),
            seen: None,
        }
    }

    /// How long this wait has gone on.
    pub fn waited(&self) -> std::time::Duration {
        std::time::Duration::from_millis(now_ms().saturating_sub(self.since_ms).max(0) as u64)
    }

    /// The same wait begun again now (after a re-run, or on a new commit).
    pub fn restarted(mut self) -> Self {
        self.since_ms = now_ms();
        self.seen = None;
        self.shown.clear();
        self
    }
}

impl Journal {
    pub(super) fn create_check_wait_conversations(db: &rusqlite::Connection) -> rusqlite::Result<()> {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS check_wait_conversations (
                task_key TEXT PRIMARY KEY,
                record TEXT NOT NULL
            );",
        )
    }

    /// Writes `wait`'s row and, when it carries one, its conversation
    /// apart (a wait read without it keeps the one kept before).
    pub(super) fn write_check_wait(
        db: &rusqlite::Connection,
        key: &str,
        wait: &CheckWait,
    ) -> rusqlite::Result<()> {
        if !wait.conversation.is_empty() {
            let conversation = serde_json::to_string(&wait.conversation).unwrap_or_default();
            db.execute(
                "INSERT OR REPLACE INTO check_wait_conversations (task_key, record) VALUES (?1, ?2)",
                params![key, conversation],
            )?;
        }
        let record = serde_json::to_string(wait).unwrap_or_default();
        Journal::put_wait(db, key, WaitKind::Checks, &record, wait.seen.is_none())
    }

    /// Records (or replaces) task `key`'s wait on its checks.
    pub fn save_check_wait(&self, key: &str, wait: &CheckWait) -> Result<(), JournalError> {
        self.with(|db| {
            let tx = db.unchecked_transaction()?;
            Journal::write_check_wait(&tx, key, wait)?;
            tx.commit()
        })
    }

    /// Task `key`'s wait on its checks, if it waits (or its wait ended and
    /// the task has not gone on from it yet).
    pub fn check_wait(&self, key: &str) -> Result<Option<CheckWait>, JournalError> {
        let Some(mut wait) = self
            .wait_record(key, WaitKind::Checks)?
            .and_then(|r| serde_json::from_str::<CheckWait>(&r).ok())
        else {
            return Ok(None);
        };
        // A row an earlier version wrote carries its conversation itself.
        if wait.conversation.is_empty() {
            let conversation: Option<String> = self.with(|db| {
                db.query_row(
                    "SELECT record FROM check_wait_conversations WHERE task_key = ?1",
                    params![key],
                    |r| r.get(0),
                )
                .optional()
            })?;
            wait.conversation = conversation
                .and_then(|c| serde_json::from_str(&c).ok())
                .unwrap_or_default();
        }
        Ok(Some(wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Phase, Transition};

    #[test]
    fn a_wait_is_open_until_its_checks_are_seen_and_goes_with_the_task() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let key = "github:acme/app:issue:3";
        journal.begin(key).unwrap();
        let mut wait = CheckWait::on(
            "abc".into(),
            0,
            "Fixed it.".into(),
            vec![Message::User("hi".into())],
        );
        // The run that ends waiting gives its attempt back in the same write.
        assert_eq!(journal.begin(key).unwrap().attempts, 2);
        journal
            .transition(key, Transition::AwaitingChecks(&wait))
            .unwrap();
        assert_eq!(
            journal.begin(key).unwrap().attempts,
            2,
            "given back, then counted again"
        );
        // The watcher reads the small row; the task gets its conversation back.
        let watched = CheckWait {
            conversation: Vec::new(),
            ..wait.clone()
        };
        assert_eq!(
            journal.open_waits(&[WaitKind::Checks]).unwrap(),
            vec![(key.to_owned(), crate::journal::WaitFor::Checks(watched.clone()))]
        );
        journal.save_check_wait(key, &watched).unwrap();
        assert_eq!(
            journal.check_wait(key).unwrap(),
            Some(wait.clone()),
            "kept apart, not lost"
        );
        wait.seen = Some(ChecksSeen::Ended(vec![]));
        journal.save_check_wait(key, &wait).unwrap();
        assert!(journal.open_waits(&[WaitKind::Checks]).unwrap().is_empty());
        assert_eq!(journal.check_wait(key).unwrap(), Some(wait.clone()));
        let again = wait.restarted();
        assert!(again.seen.is_none());
        journal.save_check_wait(key, &again).unwrap();
        assert_eq!(journal.open_waits(&[WaitKind::Checks]).unwrap().len(), 1);
        journal
            .transition(key, Transition::ended(Phase::Done, "delivered"))
            .unwrap();
        assert_eq!(journal.check_wait(key).unwrap(), None);
    }
}
