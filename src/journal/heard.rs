//! Which comments mentioning forgehand (or reviewing its change) were
//! heard, and where each repository's next listing of comments starts. A
//! comment is heard once, whatever it says later (an edit never runs it
//! again). A heard comment that starts a task stays pending until that
//! task begins, so a daemon stopped in between starts it when it is back;
//! a review's comments wait until the review has been quiet a while.

use super::{now, now_ms, Journal, JournalError};
use rusqlite::{params, OptionalExtension};

/// What became of a comment that mentions forgehand or reviews its change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// It starts a task on this item (its journal key).
    Starts(String),
    /// A review comment: it starts a task on this item once no other
    /// comment of the review came for `quiet`.
    Reviews {
        task: String,
        quiet: std::time::Duration,
    },
    /// It starts nothing (an outsider's, a closed item's).
    Ignored,
}

impl Journal {
    /// Records `comment` (a forge-wide id such as `acme/app:thread:12`) of
    /// `forge` as heard; `false` when it was heard before.
    pub fn hear_comment(&self, forge: &str, comment: &str, heard: &Heard) -> Result<bool, JournalError> {
        let (task, pending, not_before) = match heard {
            Heard::Starts(key) => (Some(key.as_str()), 1, 0),
            Heard::Reviews { task, quiet } => (
                Some(task.as_str()),
                1,
                now_ms().saturating_add(i64::try_from(quiet.as_millis()).unwrap_or(i64::MAX)),
            ),
            Heard::Ignored => (None, 0, 0),
        };
        self.with(|db| {
            let inserted = db.execute(
                "INSERT OR IGNORE INTO heard_comments (forge, comment, task_key, pending, heard_at, not_before_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![forge, comment, task, pending, now(), not_before],
            )?;
            Ok(inserted == 1)
        })
    }

    /// Whether `comment` of `forge` was heard.
    pub fn heard(&self, forge: &str, comment: &str) -> Result<bool, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT 1 FROM heard_comments WHERE forge = ?1 AND comment = ?2",
                params![forge, comment],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
        })
    }

    /// The tasks heard comments asked for that have not begun yet and
    /// may start now (a review's quiet period is over).
    pub fn pending_mentions(&self) -> Result<Vec<String>, JournalError> {
        self.with(|db| {
            let mut stmt = db.prepare(
                "SELECT task_key FROM heard_comments WHERE pending = 1 AND task_key IS NOT NULL
                 GROUP BY task_key HAVING MAX(not_before_ms) <= ?1 ORDER BY MIN(heard_at)",
            )?;
            let rows = stmt.query_map(params![now_ms()], |r| r.get::<_, String>(0))?;
            rows.collect()
        })
    }

    /// How long until the next heard task that waits for a quiet period
    /// may start; `None` when none waits (those due already are in
    /// [`pending_mentions`](Self::pending_mentions)).
    pub fn next_pending_in(&self) -> Result<Option<std::time::Duration>, JournalError> {
        let now = now_ms();
        let due: Option<i64> = self.with(|db| {
            db.query_row(
                "SELECT MIN(due) FROM (SELECT MAX(not_before_ms) AS due FROM heard_comments
                 WHERE pending = 1 AND task_key IS NOT NULL GROUP BY task_key) WHERE due > ?1",
                params![now],
                |r| r.get(0),
            )
        })?;
        Ok(due.map(|due| std::time::Duration::from_millis(u64::try_from(due - now).unwrap_or(0))))
    }

    /// The task `key` began: the mentions that asked for it are answered.
    pub fn mentions_answered(&self, key: &str) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "UPDATE heard_comments SET pending = 0 WHERE task_key = ?1",
                params![key],
            )
            .map(drop)
        })
    }

    /// The comments (forge-wide ids) heard for task `key` since its run
    /// began, not yet answered: what the running agent is told next.
    pub fn pending_comments(&self, key: &str) -> Result<Vec<String>, JournalError> {
        self.with(|db| {
            let mut stmt = db.prepare(
                "SELECT comment FROM heard_comments WHERE pending = 1 AND task_key = ?1 ORDER BY heard_at, comment",
            )?;
            let rows = stmt.query_map(params![key], |r| r.get::<_, String>(0))?;
            rows.collect()
        })
    }

    /// `comment` of `forge` reached the running agent: no later run starts for it.
    pub fn comment_answered(&self, forge: &str, comment: &str) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "UPDATE heard_comments SET pending = 0 WHERE forge = ?1 AND comment = ?2",
                params![forge, comment],
            )
            .map(drop)
        })
    }

    /// Whether task `key` is in the journal and not ended (its run is in
    /// flight, or waits to go on).
    pub fn task_unfinished(&self, key: &str) -> Result<bool, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT 1 FROM tasks WHERE key = ?1 AND phase NOT IN ('done', 'failed', 'stopped')",
                params![key],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
        })
    }

    /// Where `forge`'s listing of `repo`'s comments starts next.
    pub fn comment_cursor(&self, forge: &str, repo: &str) -> Result<Option<String>, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT since FROM comment_cursors WHERE forge = ?1 AND repo = ?2",
                params![forge, repo],
                |r| r.get(0),
            )
            .optional()
        })
    }

    pub fn set_comment_cursor(&self, forge: &str, repo: &str, since: &str) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "INSERT INTO comment_cursors (forge, repo, since) VALUES (?1, ?2, ?3)
                 ON CONFLICT (forge, repo) DO UPDATE SET since = excluded.since",
                params![forge, repo, since],
            )
            .map(drop)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comment_is_heard_once_and_its_task_is_pending_until_it_begins() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let key = "github:acme/app:issue:4";
        assert!(journal
            .hear_comment("github", "acme/app:thread:9", &Heard::Starts(key.into()))
            .unwrap());
        assert!(!journal
            .hear_comment("github", "acme/app:thread:9", &Heard::Ignored)
            .unwrap());
        assert!(journal
            .hear_comment("github", "acme/app:thread:10", &Heard::Ignored)
            .unwrap());
        assert!(journal.heard("github", "acme/app:thread:10").unwrap());
        assert!(!journal.heard("gitlab", "acme/app:thread:10").unwrap());
        assert_eq!(journal.pending_mentions().unwrap(), vec![key.to_owned()]);
        journal.mentions_answered(key).unwrap();
        assert!(journal.pending_mentions().unwrap().is_empty());
        assert_eq!(journal.next_pending_in().unwrap(), None);
        // A review waits for its quiet period; a later comment extends it.
        let pr = "github:acme/app:change:5";
        let quiet = |secs| Heard::Reviews {
            task: pr.into(),
            quiet: std::time::Duration::from_secs(secs),
        };
        journal
            .hear_comment("github", "acme/app:line:1", &quiet(0))
            .unwrap();
        assert_eq!(journal.pending_mentions().unwrap(), vec![pr.to_owned()]);
        journal
            .hear_comment("github", "acme/app:line:2", &quiet(60))
            .unwrap();
        assert!(journal.pending_mentions().unwrap().is_empty());
        let wait = journal.next_pending_in().unwrap().unwrap();
        assert!(wait > std::time::Duration::from_secs(50) && wait <= std::time::Duration::from_secs(60));
        assert_eq!(journal.comment_cursor("github", "acme/app").unwrap(), None);
        journal
            .set_comment_cursor("github", "acme/app", "2026-01-01T00:00:00Z")
            .unwrap();
        journal
            .set_comment_cursor("github", "acme/app", "2026-01-02T00:00:00Z")
            .unwrap();
        assert_eq!(
            journal.comment_cursor("github", "acme/app").unwrap().as_deref(),
            Some("2026-01-02T00:00:00Z")
        );
    }
}
