//! Tasks suspended by the paused label: the run ended at a step's
//! checkpoint and holds no slot and no sandbox; the daemon's watcher starts
//! the task again when the label is removed. A run that starts clears its
//! task's row, whatever started it.

use super::{now, Journal, JournalError};
use rusqlite::params;

impl Journal {
    pub(super) fn create_paused(db: &rusqlite::Connection) -> rusqlite::Result<()> {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS paused_tasks (
                task_key TEXT PRIMARY KEY,
                since INTEGER NOT NULL
            );",
        )
    }

    /// Task `key` is suspended by its label; its run's attempt is given back
    /// (it was not interrupted).
    pub fn pause(&self, key: &str) -> Result<(), JournalError> {
        self.with(|db| {
            let tx = db.unchecked_transaction()?;
            tx.execute(
                "INSERT OR REPLACE INTO paused_tasks (task_key, since) VALUES (?1, ?2)",
                params![key, now()],
            )?;
            Journal::give_back_attempt_in(&tx, key)?;
            tx.commit()
        })
    }

    /// The tasks suspended by their label, oldest first.
    pub fn paused_tasks(&self) -> Result<Vec<String>, JournalError> {
        self.with(|db| {
            let mut stmt = db.prepare("SELECT task_key FROM paused_tasks ORDER BY since")?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect()
        })
    }

    /// Task `key` is no longer suspended (its run starts).
    pub fn unpause(&self, key: &str) -> Result<(), JournalError> {
        self.with(|db| Journal::forget_pause(db, key))
    }

    pub(super) fn forget_pause(db: &rusqlite::Connection, key: &str) -> rusqlite::Result<()> {
        db.execute("DELETE FROM paused_tasks WHERE task_key = ?1", params![key])
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Phase;

    #[test]
    fn a_pause_gives_back_the_attempt_and_goes_when_the_task_runs_or_ends() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let key = "github:acme/app:issue:3";
        journal.begin(key).unwrap();
        journal.pause(key).unwrap();
        assert_eq!(journal.paused_tasks().unwrap(), vec![key.to_owned()]);
        // Started again: the attempt given back is counted once more.
        assert_eq!(journal.begin(key).unwrap().attempts, 1);
        journal.unpause(key).unwrap();
        assert!(journal.paused_tasks().unwrap().is_empty());
        journal.pause(key).unwrap();
        journal.finish(key, Phase::Done, "delivered").unwrap();
        assert!(journal.paused_tasks().unwrap().is_empty());
    }
}
