//! Every wait of a task that holds nothing but its row, in one table: on
//! its pushed commit's checks, on a writer's answer to its plan, on its
//! paused label to go, or until a time (an outage's growing wait, a money
//! cap's period, a claim the replicas could not settle). A wait is open while it goes on; once its answer
//! came (the checks ended, a writer answered) it is closed but kept until
//! the task's next run goes on from it. The daemon's one watcher reads the
//! open waits together; the status page lists them.

use super::{now, now_ms, CheckWait, Journal, JournalError, PlanWait};
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

/// What a task waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitKind {
    /// Its pushed commit's checks to end ([`CheckWait`]).
    Checks,
    /// A writer's answer to its plan ([`PlanWait`]).
    Approval,
    /// Its paused label to be removed.
    Paused,
    /// A time ([`LaterWait`]): the daemon's requeue.
    Later,
}

impl WaitKind {
    pub const ALL: [WaitKind; 4] = [
        WaitKind::Checks,
        WaitKind::Approval,
        WaitKind::Paused,
        WaitKind::Later,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WaitKind::Checks => "checks",
            WaitKind::Approval => "approval",
            WaitKind::Paused => "paused",
            WaitKind::Later => "later",
        }
    }

    fn parse(text: &str) -> Option<WaitKind> {
        WaitKind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// An open wait as the watcher reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitFor {
    /// The checks' conversation is left out (read with [`Journal::check_wait`]).
    Checks(CheckWait),
    Approval(PlanWait),
    Paused,
    Later(LaterWait),
}

/// A task started again at a time, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaterWait {
    /// Why it waits, as the daemon names it (`outage`, `claim`, `budget`).
    pub why: String,
    /// What it waits for, in words.
    pub on: String,
    /// Milliseconds since the Unix epoch when it starts again.
    pub due_ms: i64,
}

impl LaterWait {
    /// How long from now until it is due.
    pub fn remaining(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.due_ms.saturating_sub(now_ms()).max(0) as u64)
    }
}

impl WaitFor {
    pub fn kind(&self) -> WaitKind {
        match self {
            WaitFor::Checks(_) => WaitKind::Checks,
            WaitFor::Approval(_) => WaitKind::Approval,
            WaitFor::Paused => WaitKind::Paused,
            WaitFor::Later(_) => WaitKind::Later,
        }
    }

    /// What it waits on, in words.
    fn in_words(&self) -> String {
        match self {
            WaitFor::Checks(wait) => {
                let short: String = wait.sha.chars().take(8).collect();
                let round = match wait.round {
                    0 => String::new(),
                    n => format!(", after fix round {n}"),
                };
                let now = match wait.shown.as_str() {
                    "" => String::new(),
                    shown => format!(": {shown}"),
                };
                format!("the checks of {short}{round}{now}")
            }
            WaitFor::Approval(_) => "a writer's approval of its plan".to_owned(),
            WaitFor::Paused => "its paused label to be removed".to_owned(),
            WaitFor::Later(wait) => format!("{}; started again in {} s", wait.on, wait.remaining().as_secs()),
        }
    }
}

/// One task waiting, and on what (the status page, `forgehand tasks`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Waiting {
    pub key: String,
    /// What it waits on, in words.
    pub on: String,
    /// Seconds since the Unix epoch when it began to wait.
    pub since: i64,
}

/// The tables each kind of wait had before they were one.
const EARLIER_TABLES: [(&str, WaitKind, &str); 3] = [
    ("check_waits", WaitKind::Checks, "record, updated_at"),
    ("plan_waits", WaitKind::Approval, "record, updated_at"),
    ("paused_tasks", WaitKind::Paused, "'', since"),
];

impl Journal {
    pub(super) fn create_waits(db: &rusqlite::Connection) -> rusqlite::Result<()> {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS waits (
                task_key TEXT NOT NULL,
                kind TEXT NOT NULL,
                record TEXT NOT NULL,
                -- 1 while the wait goes on; 0 once its answer came.
                open INTEGER NOT NULL,
                since INTEGER NOT NULL,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (task_key, kind)
            );",
        )?;
        adopt_earlier_waits(db)
    }

    /// Writes task `key`'s wait of `kind` (its begin time kept when it
    /// waited already).
    pub(super) fn put_wait(
        db: &rusqlite::Connection,
        key: &str,
        kind: WaitKind,
        record: &str,
        open: bool,
    ) -> rusqlite::Result<()> {
        db.execute(
            "INSERT INTO waits (task_key, kind, record, open, since, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)
             ON CONFLICT (task_key, kind) DO UPDATE SET record = excluded.record, open = excluded.open,
                 updated_at = excluded.updated_at",
            params![key, kind.as_str(), record, open, now()],
        )
        .map(drop)
    }

    /// Task `key`'s wait of `kind` as written, open or not.
    pub(super) fn wait_record(&self, key: &str, kind: WaitKind) -> Result<Option<String>, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT record FROM waits WHERE task_key = ?1 AND kind = ?2",
                params![key, kind.as_str()],
                |r| r.get(0),
            )
            .optional()
        })
    }

    /// The open waits of the given kinds, oldest first, by task key.
    pub fn open_waits(&self, kinds: &[WaitKind]) -> Result<Vec<(String, WaitFor)>, JournalError> {
        let rows: Vec<(String, String, String)> = self.with(|db| {
            let mut stmt = db.prepare(
                "SELECT task_key, kind, record FROM waits WHERE open = 1 ORDER BY since, task_key",
            )?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect()
        })?;
        Ok(rows
            .into_iter()
            .filter_map(|(key, kind, record)| {
                let wait = match WaitKind::parse(&kind)? {
                    WaitKind::Checks => WaitFor::Checks(serde_json::from_str(&record).ok()?),
                    WaitKind::Approval => WaitFor::Approval(serde_json::from_str(&record).ok()?),
                    WaitKind::Paused => WaitFor::Paused,
                    WaitKind::Later => WaitFor::Later(serde_json::from_str(&record).ok()?),
                };
                kinds.contains(&wait.kind()).then_some((key, wait))
            })
            .collect())
    }

    /// Every task waiting, oldest first, with what it waits on.
    pub fn waiting(&self) -> Result<Vec<Waiting>, JournalError> {
        let since: std::collections::HashMap<String, i64> = self.with(|db| {
            let mut stmt = db.prepare("SELECT task_key || ' ' || kind, since FROM waits WHERE open = 1")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })?;
        let mut waiting: Vec<Waiting> = self
            .open_waits(&WaitKind::ALL)?
            .into_iter()
            .map(|(key, wait)| Waiting {
                since: since
                    .get(&format!("{key} {}", wait.kind().as_str()))
                    .copied()
                    .unwrap_or_default(),
                on: wait.in_words(),
                key,
            })
            .collect();
        waiting.sort_by_key(|w| w.since);
        Ok(waiting)
    }

    /// Whether task `key` waits for a change outside while holding nothing
    /// (its checks, an answer, its label), or that wait just ended and its
    /// run has not gone on from it yet. A wait for a time is not counted:
    /// among replicas, a task requeued so keeps its Lease.
    pub fn holds_a_wait(&self, key: &str) -> Result<bool, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT EXISTS(SELECT 1 FROM waits WHERE task_key = ?1 AND kind != 'later')",
                params![key],
                |r| r.get(0),
            )
        })
    }

    /// Task `key`'s run starts, whatever started it: it is no longer
    /// suspended by its label nor waits for a time.
    pub fn runs_again(&self, key: &str) -> Result<(), JournalError> {
        self.with(|db| {
            Journal::forget_wait_in(db, key, WaitKind::Paused)?;
            Journal::forget_wait_in(db, key, WaitKind::Later)
        })
    }

    /// Task `key` starts again at a time (its begin time kept when it
    /// waited so already).
    pub fn wait_until(&self, key: &str, wait: &LaterWait) -> Result<(), JournalError> {
        let record = serde_json::to_string(wait).unwrap_or_default();
        self.with(|db| Journal::put_wait(db, key, WaitKind::Later, &record, true))
    }

    /// Task `key` no longer waits for a time.
    pub fn forget_later(&self, key: &str) -> Result<(), JournalError> {
        self.with(|db| Journal::forget_wait_in(db, key, WaitKind::Later))
    }

    pub(super) fn forget_wait_in(
        db: &rusqlite::Connection,
        key: &str,
        kind: WaitKind,
    ) -> rusqlite::Result<()> {
        db.execute(
            "DELETE FROM waits WHERE task_key = ?1 AND kind = ?2",
            params![key, kind.as_str()],
        )
        .map(drop)
    }

    /// Every wait of task `key`, and the conversation its checks' wait kept.
    pub(super) fn forget_waits_in(db: &rusqlite::Connection, key: &str) -> rusqlite::Result<()> {
        db.execute("DELETE FROM waits WHERE task_key = ?1", params![key])?;
        db.execute(
            "DELETE FROM check_wait_conversations WHERE task_key = ?1",
            params![key],
        )
        .map(drop)
    }
}

/// Moves the waits an earlier version kept in a table per kind into the
/// one table (once: the earlier tables go).
fn adopt_earlier_waits(db: &rusqlite::Connection) -> rusqlite::Result<()> {
    for (table, kind, columns) in EARLIER_TABLES {
        let present: bool = db.query_row(
            "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            params![table],
            |r| r.get(0),
        )?;
        if !present {
            continue;
        }
        let rows: Vec<(String, String, i64)> = {
            let mut stmt = db.prepare(&format!("SELECT task_key, {columns} FROM {table}"))?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let tx = db.unchecked_transaction()?;
        for (key, record, since) in rows {
            let open = match kind {
                WaitKind::Checks => {
                    serde_json::from_str::<CheckWait>(&record).is_ok_and(|w| w.seen.is_none())
                }
                WaitKind::Approval => {
                    serde_json::from_str::<PlanWait>(&record).is_ok_and(|w| w.answer.is_none())
                }
                WaitKind::Paused | WaitKind::Later => true,
            };
            tx.execute(
                "INSERT OR IGNORE INTO waits (task_key, kind, record, open, since, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
                params![key, kind.as_str(), record, open, since],
            )?;
        }
        tx.execute_batch(&format!("DROP TABLE {table};"))?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Phase, Transition};

    #[test]
    fn each_kind_of_wait_is_listed_with_what_it_waits_on() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let (checks, paused) = ("github:acme/app:issue:1", "github:acme/app:issue:2");
        journal.begin(checks).unwrap();
        journal.begin(paused).unwrap();
        let mut wait = CheckWait::on("0123456789abcdef".into(), 1, String::new(), vec![]);
        wait.shown = "1 running (test)".into();
        journal.save_check_wait(checks, &wait).unwrap();
        journal.transition(paused, Transition::Paused).unwrap();
        let listed: Vec<(String, String)> = journal
            .waiting()
            .unwrap()
            .into_iter()
            .map(|w| (w.key, w.on))
            .collect();
        assert!(listed.contains(&(
            checks.to_owned(),
            "the checks of 01234567, after fix round 1: 1 running (test)".to_owned()
        )));
        assert!(listed.contains(&(paused.to_owned(), "its paused label to be removed".to_owned())));
        assert!(journal.holds_a_wait(checks).unwrap() && journal.holds_a_wait(paused).unwrap());
        assert!(!journal.holds_a_wait("github:acme/app:issue:3").unwrap());
        let watched: Vec<WaitKind> = journal
            .open_waits(&[WaitKind::Paused, WaitKind::Approval])
            .unwrap()
            .iter()
            .map(|(_, w)| w.kind())
            .collect();
        assert_eq!(watched, vec![WaitKind::Paused], "only the kinds asked for");
    }

    #[test]
    fn a_pause_gives_back_the_attempt_and_goes_when_the_task_runs_or_ends() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let key = "github:acme/app:issue:3";
        journal.begin(key).unwrap();
        journal.transition(key, Transition::Paused).unwrap();
        let paused = || journal.open_waits(&[WaitKind::Paused]).unwrap();
        assert_eq!(paused(), vec![(key.to_owned(), WaitFor::Paused)]);
        // Started again: the attempt given back is counted once more.
        assert_eq!(journal.begin(key).unwrap().attempts, 1);
        journal.runs_again(key).unwrap();
        assert!(paused().is_empty());
        journal.transition(key, Transition::Paused).unwrap();
        journal
            .transition(key, Transition::ended(Phase::Done, "delivered"))
            .unwrap();
        assert!(paused().is_empty() && !journal.holds_a_wait(key).unwrap());
    }

    #[test]
    fn a_wait_until_a_time_keeps_its_begin_and_goes_when_the_task_runs() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let key = "github:acme/app:issue:5";
        let mut later = LaterWait {
            why: "budget".into(),
            on: "a money cap's period to turn".into(),
            due_ms: now_ms() + 85_000,
        };
        journal.wait_until(key, &later).unwrap();
        let first = journal.waiting().unwrap();
        assert_eq!(first.len(), 1);
        assert!(
            first[0]
                .on
                .starts_with("a money cap's period to turn; started again in 8"),
            "{}",
            first[0].on
        );
        later.due_ms += 60_000;
        journal.wait_until(key, &later).unwrap();
        assert_eq!(journal.waiting().unwrap()[0].since, first[0].since);
        assert_eq!(
            journal.open_waits(&[WaitKind::Later]).unwrap(),
            vec![(key.to_owned(), WaitFor::Later(later))]
        );
        assert!(
            !journal.holds_a_wait(key).unwrap(),
            "a time is not a change outside"
        );
        journal.runs_again(key).unwrap();
        assert!(journal.waiting().unwrap().is_empty());
    }

    #[test]
    fn the_waits_an_earlier_version_kept_apart_are_adopted_into_the_one_table() {
        let dir = tempfile::tempdir().unwrap();
        let wait = CheckWait::on("abc".into(), 0, "Fixed it.".into(), vec![]);
        {
            let db = rusqlite::Connection::open(dir.path().join("journal.sqlite3")).unwrap();
            db.execute_batch(
                "CREATE TABLE check_waits (task_key TEXT PRIMARY KEY, record TEXT NOT NULL, updated_at INTEGER NOT NULL);
                 CREATE TABLE plan_waits (task_key TEXT PRIMARY KEY, record TEXT NOT NULL, updated_at INTEGER NOT NULL);
                 CREATE TABLE paused_tasks (task_key TEXT PRIMARY KEY, since INTEGER NOT NULL);
                 INSERT INTO paused_tasks VALUES ('github:acme/app:issue:2', 5);",
            )
            .unwrap();
            db.execute(
                "INSERT INTO check_waits VALUES ('github:acme/app:issue:1', ?1, 7)",
                params![serde_json::to_string(&wait).unwrap()],
            )
            .unwrap();
        }
        let journal = Journal::open(dir.path()).unwrap();
        assert_eq!(
            journal.open_waits(&WaitKind::ALL).unwrap(),
            vec![
                ("github:acme/app:issue:2".to_owned(), WaitFor::Paused),
                ("github:acme/app:issue:1".to_owned(), WaitFor::Checks(wait)),
            ]
        );
        drop(journal);
        // Opened again: nothing is adopted twice, the earlier tables are gone.
        let journal = Journal::open(dir.path()).unwrap();
        assert_eq!(journal.open_waits(&WaitKind::ALL).unwrap().len(), 2);
    }
}
