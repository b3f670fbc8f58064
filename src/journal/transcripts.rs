//! The transcript of every run: one row per run of a task (a follow-up is
//! a run of its own) and its entries in order, as JSON. Kept for
//! `daemon.transcript_retention` after the run ends.

use super::{now, Journal, JournalError};
use rusqlite::{params, OptionalExtension};

/// One run, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub id: i64,
    pub task_key: String,
    /// Seconds since the Unix epoch.
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub outcome: Option<String>,
}

impl Journal {
    /// A new run of the task `key`; its id.
    pub fn begin_run(&self, key: &str) -> Result<i64, JournalError> {
        self.with(|db| {
            db.execute(
                "INSERT INTO runs (task_key, started_at) VALUES (?1, ?2)",
                params![key, now()],
            )?;
            Ok(db.last_insert_rowid())
        })
    }

    pub fn end_run(&self, id: i64, outcome: &str) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "UPDATE runs SET ended_at = ?2, outcome = ?3 WHERE id = ?1",
                params![id, now(), outcome],
            )
            .map(drop)
        })
    }

    /// Appends entry `seq` (JSON) of run `id`, written at `at_ms`.
    pub fn append_entry(&self, id: i64, seq: u64, at_ms: i64, entry: &str) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "INSERT OR REPLACE INTO transcript (run, seq, at_ms, entry) VALUES (?1, ?2, ?3, ?4)",
                params![id, seq as i64, at_ms, entry],
            )
            .map(drop)
        })
    }

    pub fn run_record(&self, id: i64) -> Result<Option<RunRecord>, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT id, task_key, started_at, ended_at, outcome FROM runs WHERE id = ?1",
                params![id],
                run_row,
            )
            .optional()
        })
    }

    /// The newest `limit` runs, newest first.
    pub fn runs(&self, limit: usize) -> Result<Vec<RunRecord>, JournalError> {
        self.with(|db| {
            let mut stmt = db.prepare(
                "SELECT id, task_key, started_at, ended_at, outcome FROM runs ORDER BY id DESC LIMIT ?1",
            )?;
            let rows = stmt.query_map(params![limit as i64], run_row)?;
            rows.collect()
        })
    }

    /// The newest run of the task `key`, if it has one.
    pub fn last_run_of(&self, key: &str) -> Result<Option<i64>, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT MAX(id) FROM runs WHERE task_key = ?1",
                params![key],
                |r| r.get(0),
            )
        })
    }

    /// Run `id`'s entries in order: (written at, in ms since the epoch; JSON).
    pub fn entries(&self, id: i64) -> Result<Vec<(i64, String)>, JournalError> {
        self.with(|db| {
            let mut stmt = db.prepare("SELECT at_ms, entry FROM transcript WHERE run = ?1 ORDER BY seq")?;
            let rows = stmt.query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
    }

    /// Run `id`'s entries from `from` on: (seq, JSON), in order.
    pub fn entries_from(&self, id: i64, from: u64) -> Result<Vec<(u64, String)>, JournalError> {
        self.with(|db| {
            let mut stmt =
                db.prepare("SELECT seq, entry FROM transcript WHERE run = ?1 AND seq >= ?2 ORDER BY seq")?;
            let rows = stmt.query_map(params![id, from as i64], |r| {
                Ok((r.get::<_, i64>(0)? as u64, r.get(1)?))
            })?;
            rows.collect()
        })
    }

    /// Forgets the runs that ended before `before` (seconds since the
    /// epoch) and their entries; how many runs went.
    pub fn prune_runs(&self, before: i64) -> Result<usize, JournalError> {
        self.with(|db| {
            db.execute(
                "DELETE FROM transcript WHERE run IN (SELECT id FROM runs WHERE ended_at IS NOT NULL AND ended_at < ?1)",
                params![before],
            )?;
            db.execute(
                "DELETE FROM runs WHERE ended_at IS NOT NULL AND ended_at < ?1",
                params![before],
            )
        })
    }
}

fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    Ok(RunRecord {
        id: r.get(0)?,
        task_key: r.get(1)?,
        started_at: r.get(2)?,
        ended_at: r.get(3)?,
        outcome: r.get(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_entries_come_back_in_order_and_old_runs_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let run = journal.begin_run("github:acme/app:issue:4").unwrap();
        journal.append_entry(run, 1, 20, r#"{"b":1}"#).unwrap();
        journal.append_entry(run, 0, 10, r#"{"a":1}"#).unwrap();
        assert_eq!(
            journal.entries(run).unwrap(),
            vec![(10, r#"{"a":1}"#.to_owned()), (20, r#"{"b":1}"#.to_owned())]
        );
        let open = journal.begin_run("github:acme/app:issue:5").unwrap();
        journal.end_run(run, "delivered").unwrap();
        assert_eq!(
            journal.run_record(run).unwrap().unwrap().outcome.as_deref(),
            Some("delivered")
        );
        assert_eq!(journal.runs(10).unwrap().len(), 2);
        // An ended run older than the cut goes with its entries; a running one stays.
        assert_eq!(journal.prune_runs(now() + 1).unwrap(), 1);
        assert!(journal.entries(run).unwrap().is_empty());
        assert_eq!(journal.runs(10).unwrap()[0].id, open);
    }
}
