//! The task journal: one row per task in an embedded SQLite database (WAL,
//! so a killed daemon loses nothing that was written). Every step that has
//! an effect outside the daemon (comment posted, branch pushed, PR opened)
//! is recorded here as soon as it is done; a restarted daemon reads it to
//! resume or fail each unfinished task.

use crate::context_store::{ContextLog, Retired, StoredMessage};
use crate::planning::debate::{CallRecord, Checkpoints};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

mod automations;
mod check_waits;
mod checkpoints;
mod heard;
mod plan_waits;
mod records;
mod repo_facts;
mod schema;
mod spend;
mod transcripts;
mod transition;
mod waits;

pub use automations::{AutomationRun, RunOutcome};
pub use check_waits::{CheckWait, ChecksSeen};
pub use checkpoints::AgentCheckpoint;
pub use heard::Heard;
pub use plan_waits::{PlanAnswer, PlanWait};
#[cfg(test)]
pub(crate) use records::tests::Probe;
pub use records::PhaseRecord;
pub use repo_facts::RepoFact;
pub use spend::Whose;
pub use transcripts::RunRecord;
pub use transition::Transition;
pub use waits::{LaterWait, WaitFor, WaitKind, Waiting};

/// How far a task got. Ordered: a later phase implies the earlier ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Claimed,
    Working,
    Pushed,
    Delivered,
    Done,
    Failed,
    Stopped,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Claimed => "claimed",
            Phase::Working => "working",
            Phase::Pushed => "pushed",
            Phase::Delivered => "delivered",
            Phase::Done => "done",
            Phase::Failed => "failed",
            Phase::Stopped => "stopped",
        }
    }

    fn parse(text: &str) -> Phase {
        match text {
            "working" => Phase::Working,
            "pushed" => Phase::Pushed,
            "delivered" => Phase::Delivered,
            "done" => Phase::Done,
            "failed" => Phase::Failed,
            "stopped" => Phase::Stopped,
            _ => Phase::Claimed,
        }
    }

    pub fn is_final(self) -> bool {
        matches!(self, Phase::Done | Phase::Failed | Phase::Stopped)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// `ItemRef::key()`.
    pub key: String,
    pub phase: Phase,
    /// Times the task was started (a resume counts).
    pub attempts: u32,
    pub branch: Option<String>,
    pub comment_id: Option<u64>,
    pub container_id: Option<String>,
    pub change_url: Option<String>,
    pub outcome: Option<String>,
    /// Seconds since the Unix epoch of the last change.
    pub updated_at: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot create the state folder {path}: {source}; check daemon.state_dir and its permissions")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("task journal {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
}

pub struct Journal {
    path: PathBuf,
    db: Mutex<Connection>,
}

impl Journal {
    /// Opens (or creates) `<state_dir>/journal.sqlite3`.
    pub fn open(state_dir: &Path) -> Result<Journal, JournalError> {
        std::fs::create_dir_all(state_dir).map_err(|source| JournalError::StateDir {
            path: state_dir.to_owned(),
            source,
        })?;
        let path = state_dir.join("journal.sqlite3");
        let fail = |source| JournalError::Sqlite {
            path: path.clone(),
            source,
        };
        let db = schema::connect(&path).map_err(fail)?;
        schema::create_tables(&db).map_err(fail)?;
        Ok(Journal {
            path,
            db: Mutex::new(db),
        })
    }

    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, JournalError> {
        let db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        f(&db).map_err(|source| JournalError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    /// The `limit` tasks that ended last, newest first.
    pub fn ended(&self, limit: usize) -> Result<Vec<TaskRecord>, JournalError> {
        self.with(|db| {
            let mut stmt = db.prepare(&format!(
                "{SELECT_RECORD} WHERE phase IN ('done', 'failed', 'stopped') ORDER BY updated_at DESC LIMIT ?1"
            ))?;
            let rows = stmt.query_map(params![limit as i64], row_to_record)?;
            rows.collect()
        })
    }

    /// Bytes on disk: the database and its write-ahead log.
    pub fn size_bytes(&self) -> u64 {
        let wal = self.path.with_extension("sqlite3-wal");
        [&self.path, &wal]
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Tasks not yet done, failed or stopped.
    pub fn unfinished(&self) -> Result<Vec<TaskRecord>, JournalError> {
        self.with(|db| {
            let mut stmt = db.prepare(&format!(
                "{SELECT_RECORD} WHERE phase NOT IN ('done', 'failed', 'stopped') ORDER BY updated_at"
            ))?;
            let rows = stmt.query_map([], row_to_record)?;
            rows.collect()
        })
    }

    /// Starts (or resumes) the task: a finished earlier run of the same item
    /// is replaced by a fresh record; an unfinished one keeps its progress.
    /// Returns the record with `attempts` counted up.
    pub fn begin(&self, key: &str) -> Result<TaskRecord, JournalError> {
        self.with(|db| {
            let existing: Option<String> = db
                .query_row("SELECT phase FROM tasks WHERE key = ?1", params![key], |r| r.get(0))
                .optional()?;
            match existing.map(|p| Phase::parse(&p)) {
                Some(phase) if !phase.is_final() => {
                    db.execute(
                        "UPDATE tasks SET attempts = attempts + 1, updated_at = ?2 WHERE key = ?1",
                        params![key, now()],
                    )?;
                }
                _ => {
                    db.execute(
                        "INSERT OR REPLACE INTO tasks (key, phase, attempts, updated_at) VALUES (?1, 'claimed', 1, ?2)",
                        params![key, now()],
                    )?;
                    // A new task of the key: no record of an earlier one
                    // (one an older version left) is read back.
                    Journal::forget_records_in(db, key)?;
                    Journal::forget_waits_in(db, key)?;
                }
            }
            db.query_row(
                &format!("{SELECT_RECORD} WHERE key = ?1"),
                params![key],
                row_to_record,
            )
        })
    }

    pub fn set_comment(&self, key: &str, id: u64) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "UPDATE tasks SET comment_id = ?2, updated_at = ?3 WHERE key = ?1",
                params![key, id as i64, now()],
            )
            .map(drop)
        })
    }

    pub fn set_container(&self, key: &str, id: Option<&str>) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "UPDATE tasks SET container_id = ?2, updated_at = ?3 WHERE key = ?1",
                params![key, id, now()],
            )
            .map(drop)
        })
    }

    /// A finished planning call of the task, as saved by [`Journal::save_call`].
    /// Whether the task has saved planning calls: a debate it began.
    pub fn planning_begun(&self, task: &str) -> Result<bool, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT 1 FROM plan_calls WHERE task_key = ?1 LIMIT 1",
                params![task],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
        })
    }

    pub fn load_call(&self, task: &str, call: &str) -> Result<Option<String>, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT record FROM plan_calls WHERE task_key = ?1 AND call_key = ?2",
                params![task, call],
                |r| r.get(0),
            )
            .optional()
        })
    }

    pub fn save_call(&self, task: &str, call: &str, record: &str) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "INSERT OR REPLACE INTO plan_calls (task_key, call_key, record) VALUES (?1, ?2, ?3)",
                params![task, call, record],
            )
            .map(drop)
        })
    }

    /// Deletes the context stores nobody touched for `unused_for`; returns
    /// how many messages went.
    pub fn prune_contexts(&self, unused_for: std::time::Duration) -> Result<usize, JournalError> {
        let cutoff = now().saturating_sub(unused_for.as_secs() as i64);
        self.with(|db| {
            let pruned = db.execute(
                "DELETE FROM context_messages WHERE store IN (
                    SELECT store FROM context_messages GROUP BY store HAVING MAX(updated_at) < ?1)",
                params![cutoff],
            )?;
            db.execute(
                "DELETE FROM context_history WHERE retired_at < ?1
                    AND store NOT IN (SELECT DISTINCT store FROM context_messages)",
                params![cutoff],
            )?;
            Ok(pruned)
        })
    }

    /// The retired versions of `store`'s messages (edited or deleted on
    /// the thread), oldest first: the audit trail of what the model saw.
    pub fn context_history(&self, store: &str) -> Result<Vec<(Retired, StoredMessage)>, JournalError> {
        let rows: Vec<(String, String)> = self.with(|db| {
            let mut stmt = db.prepare(
                "SELECT why, record FROM context_history WHERE store = ?1 ORDER BY retired_at, rowid",
            )?;
            let rows = stmt.query_map(params![store], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })?;
        Ok(rows
            .into_iter()
            .filter_map(|(why, record)| {
                let why = match why.as_str() {
                    "edited" => Retired::Edited,
                    _ => Retired::Deleted,
                };
                serde_json::from_str(&record).ok().map(|m| (why, m))
            })
            .collect())
    }

    /// Moves `old` to the history and writes `new` in its place (or, for a
    /// deletion, nothing), in one transaction.
    fn retire_context(
        &self,
        store: &str,
        why: Retired,
        old: &StoredMessage,
        new: Option<&StoredMessage>,
    ) -> Result<(), JournalError> {
        let old_record = serde_json::to_string(old).unwrap_or_default();
        let new_record = new.map(|m| serde_json::to_string(m).unwrap_or_default());
        self.with(|db| {
            let tx = db.unchecked_transaction()?;
            tx.execute(
                "INSERT INTO context_history (store, seq, record, why, retired_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![store, old.seq as i64, old_record, why.as_str(), now()],
            )?;
            match new_record {
                Some(record) => tx.execute(
                    "INSERT OR REPLACE INTO context_messages (store, seq, record, updated_at) VALUES (?1, ?2, ?3, ?4)",
                    params![store, old.seq as i64, record, now()],
                )?,
                None => tx.execute(
                    "DELETE FROM context_messages WHERE store = ?1 AND seq = ?2",
                    params![store, old.seq as i64],
                )?,
            };
            tx.commit()
        })
    }

    fn context_rows(&self, store: &str) -> Result<Vec<(u64, String)>, JournalError> {
        self.with(|db| {
            let mut stmt =
                db.prepare("SELECT seq, record FROM context_messages WHERE store = ?1 ORDER BY seq")?;
            let rows = stmt.query_map(params![store], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))?;
            rows.collect()
        })
    }

    /// Numbers and inserts a new message in one statement under the
    /// journal's lock: the next `seq` of the store as it is now, or the
    /// number of the message from the same source stored already.
    fn append_context(&self, store: &str, message: &StoredMessage) -> Result<u64, JournalError> {
        self.with(|db| {
            let rows: Vec<(i64, String)> = {
                let mut stmt = db.prepare("SELECT seq, record FROM context_messages WHERE store = ?1")?;
                let rows = stmt.query_map(params![store], |r| Ok((r.get(0)?, r.get(1)?)))?;
                rows.collect::<rusqlite::Result<_>>()?
            };
            let same = rows.iter().find(|(_, record)| {
                serde_json::from_str::<StoredMessage>(record).is_ok_and(|m| m.source == message.source)
            });
            if let Some((seq, _)) = same {
                return Ok(*seq as u64);
            }
            let seq = rows.iter().map(|(seq, _)| *seq as u64).max().unwrap_or(0) + 1;
            let record = serde_json::to_string(&StoredMessage {
                seq,
                ..message.clone()
            })
            .unwrap_or_default();
            db.execute(
                "INSERT INTO context_messages (store, seq, record, updated_at) VALUES (?1, ?2, ?3, ?4)",
                params![store, seq as i64, record, now()],
            )?;
            Ok(seq)
        })
    }

    fn put_context(&self, store: &str, message: &StoredMessage) -> Result<(), JournalError> {
        let record = serde_json::to_string(message).unwrap_or_default();
        self.with(|db| {
            db.execute(
                "INSERT OR REPLACE INTO context_messages (store, seq, record, updated_at) VALUES (?1, ?2, ?3, ?4)",
                params![store, message.seq as i64, record, now()],
            )
            .map(drop)
        })
    }
}

/// The finished planning calls of one task, as the debate's checkpoints.
pub struct PlanCalls<'a> {
    pub journal: &'a Journal,
    pub task: &'a str,
}

impl Checkpoints for PlanCalls<'_> {
    fn load(&self, key: &str) -> Option<CallRecord> {
        match self.journal.load_call(self.task, key) {
            Ok(Some(text)) => serde_json::from_str(&text).ok(),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(task = self.task, "cannot read a saved planning call: {e}");
                None
            }
        }
    }

    fn save(&self, key: &str, record: &CallRecord) {
        let saved = serde_json::to_string(record)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                self.journal
                    .save_call(self.task, key, &text)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = saved {
            tracing::warn!(
                task = self.task,
                "cannot save a planning call (a restart would repeat it): {e}"
            );
        }
    }
}

/// The context stores live in the journal: a message is written as soon as
/// it is classified, so a restart loses none. A write that fails is logged
/// (the run goes on with the store in memory).
impl ContextLog for Journal {
    fn load(&self, store: &str) -> Vec<StoredMessage> {
        match self.context_rows(store) {
            Ok(rows) => rows
                .into_iter()
                .filter_map(|(seq, text)| match serde_json::from_str(&text) {
                    Ok(message) => Some(message),
                    Err(e) => {
                        tracing::warn!(
                            store,
                            seq,
                            "a stored context message cannot be read, leaving it out: {e}"
                        );
                        None
                    }
                })
                .collect(),
            Err(e) => {
                tracing::warn!(store, "cannot read the context store: {e}");
                Vec::new()
            }
        }
    }

    fn save(&self, store: &str, message: &StoredMessage) {
        if let Err(e) = self.put_context(store, message) {
            tracing::warn!(store, "cannot journal a context message: {e}");
        }
    }

    fn revise(&self, store: &str, old: &StoredMessage, new: &StoredMessage) {
        if let Err(e) = self.retire_context(store, Retired::Edited, old, Some(new)) {
            tracing::warn!(store, "cannot journal an edited context message: {e}");
        }
    }

    fn delete(&self, store: &str, old: &StoredMessage) {
        if let Err(e) = self.retire_context(store, Retired::Deleted, old, None) {
            tracing::warn!(store, "cannot journal a deleted context message: {e}");
        }
    }

    fn append(&self, store: &str, message: &StoredMessage) -> u64 {
        match self.append_context(store, message) {
            Ok(seq) => seq,
            Err(e) => {
                // Kept in memory for this run; the next run classifies it again.
                tracing::warn!(store, "cannot journal a context message: {e}");
                message.seq
            }
        }
    }
}

/// `forgehand tasks`: the journal's tasks in flight and the last ones
/// that ended, as plain text for a terminal.
pub fn render_tasks(unfinished: &[TaskRecord], ended: &[TaskRecord]) -> String {
    let name = |r: &TaskRecord| {
        crate::forge::ItemRef::parse_key(&r.key)
            .map(|i| i.to_string())
            .unwrap_or_else(|| r.key.clone())
    };
    let when = |r: &TaskRecord| {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(r.updated_at.max(0) as u64);
        humantime::format_rfc3339_seconds(at).to_string()
    };
    let mut out = format!("In flight ({}):\n", unfinished.len());
    if unfinished.is_empty() {
        out.push_str("  none\n");
    }
    for r in unfinished {
        out.push_str(&format!(
            "  {:<40} {:<10} attempt {}  since {}{}\n",
            name(r),
            r.phase.as_str(),
            r.attempts,
            when(r),
            r.branch
                .as_deref()
                .map(|b| format!("  branch {b}"))
                .unwrap_or_default()
        ));
    }
    out.push_str(&format!("\nEnded (last {}):\n", ended.len()));
    if ended.is_empty() {
        out.push_str("  none\n");
    }
    for r in ended {
        let outcome: String = r.outcome.as_deref().unwrap_or("").chars().take(100).collect();
        out.push_str(&format!(
            "  {:<40} {:<8} {}  {}{}\n",
            name(r),
            r.phase.as_str(),
            when(r),
            r.change_url.as_deref().unwrap_or("-"),
            if outcome.is_empty() {
                String::new()
            } else {
                format!("  {outcome}")
            }
        ));
    }
    out
}

/// The columns `row_to_record` reads, in its order.
const SELECT_RECORD: &str =
    "SELECT key, phase, attempts, branch, comment_id, container_id, change_url, outcome, updated_at FROM tasks";

fn row_to_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRecord> {
    Ok(TaskRecord {
        key: row.get(0)?,
        phase: Phase::parse(&row.get::<_, String>(1)?),
        attempts: row.get(2)?,
        branch: row.get(3)?,
        comment_id: row.get::<_, Option<i64>>(4)?.map(|v| v as u64),
        container_id: row.get(5)?,
        change_url: row.get(6)?,
        outcome: row.get(7)?,
        updated_at: row.get(8)?,
    })
}

/// Seconds since the Unix epoch, as the journal records times.
pub fn now_secs() -> i64 {
    now()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(super) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopening_and_resume_counts_attempts() {
        let dir = tempfile::tempdir().unwrap();
        {
            let journal = Journal::open(dir.path()).unwrap();
            let first = journal.begin("github:a/b:issue:1").unwrap();
            assert_eq!((first.phase, first.attempts), (Phase::Claimed, 1));
            journal.set_comment("github:a/b:issue:1", 42).unwrap();
            let branch = Transition::Claimed {
                branch: "forgehand/issue-1",
            };
            journal.transition("github:a/b:issue:1", branch).unwrap();
            journal
                .transition("github:a/b:issue:1", Transition::Pushed)
                .unwrap();
        }
        let journal = Journal::open(dir.path()).unwrap();
        let unfinished = journal.unfinished().unwrap();
        assert_eq!(unfinished.len(), 1);
        let resumed = journal.begin("github:a/b:issue:1").unwrap();
        assert_eq!(resumed.attempts, 2);
        assert_eq!(resumed.phase, Phase::Pushed);
        assert_eq!(resumed.comment_id, Some(42));
        journal
            .save_call("github:a/b:issue:1", "f/r1/plan/A", "{}")
            .unwrap();
        assert_eq!(
            journal
                .load_call("github:a/b:issue:1", "f/r1/plan/A")
                .unwrap()
                .as_deref(),
            Some("{}")
        );
        journal
            .transition(
                "github:a/b:issue:1",
                Transition::ended(Phase::Done, "draft PR opened"),
            )
            .unwrap();
        assert!(journal.unfinished().unwrap().is_empty());
        assert_eq!(
            journal.load_call("github:a/b:issue:1", "f/r1/plan/A").unwrap(),
            None
        );
        // A new trigger of a finished item starts over.
        let again = journal.begin("github:a/b:issue:1").unwrap();
        assert_eq!(
            (again.phase, again.attempts, again.comment_id),
            (Phase::Claimed, 1, None)
        );
    }
}
