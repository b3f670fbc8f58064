//! What each phase of a task hands on, saved when the phase ends and read
//! back when the task starts again: one table, one row per task and phase,
//! the record as JSON. The phases' record types say which phase they are
//! ([`PhaseRecord::PHASE`]); a record is replaced when its phase ends
//! again (the agent's, at every step), and all of a task's go with it when
//! it ends.
//!
//! Records hold data only (commits, names, digests, the conversation, the
//! plan): the live handles (the sandbox, the work tree, the model's tools)
//! are made again from them, never re-attached. A sandbox that outlived
//! its daemon ran unobserved meanwhile.

use super::{now, Journal, JournalError};
use rusqlite::{params, OptionalExtension};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A phase's output as the journal keeps it.
pub trait PhaseRecord: Serialize + DeserializeOwned {
    /// The phase's name in the table.
    const PHASE: &'static str;
}

impl Journal {
    pub(super) fn create_phase_records(db: &rusqlite::Connection) -> rusqlite::Result<()> {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS phase_records (
                task_key TEXT NOT NULL,
                phase TEXT NOT NULL,
                record TEXT NOT NULL,
                saved_at INTEGER NOT NULL,
                PRIMARY KEY (task_key, phase)
            );",
        )
    }

    /// Saves task `key`'s `record` in place of its phase's last one, when
    /// it weighs at most `max_bytes`; its weight (over the limit: nothing
    /// is written, the one before stays).
    pub fn save_record<R: PhaseRecord>(
        &self,
        key: &str,
        record: &R,
        max_bytes: usize,
    ) -> Result<usize, JournalError> {
        // Records are strings, numbers and JSON values: they always serialise.
        let text = serde_json::to_string(record).unwrap_or_default();
        if text.len() > max_bytes {
            return Ok(text.len());
        }
        self.with(|db| {
            db.execute(
                "INSERT OR REPLACE INTO phase_records (task_key, phase, record, saved_at) VALUES (?1, ?2, ?3, ?4)",
                params![key, R::PHASE, text, now()],
            )
            .map(drop)
        })?;
        Ok(text.len())
    }

    /// Task `key`'s last record of phase `R`, if it has one (one that
    /// cannot be read, written by another version, is none: the phase is
    /// done again).
    pub fn record<R: PhaseRecord>(&self, key: &str) -> Result<Option<R>, JournalError> {
        let text: Option<String> = self.with(|db| {
            db.query_row(
                "SELECT record FROM phase_records WHERE task_key = ?1 AND phase = ?2",
                params![key, R::PHASE],
                |r| r.get(0),
            )
            .optional()
        })?;
        Ok(text.and_then(|text| match serde_json::from_str(&text) {
            Ok(record) => Some(record),
            Err(e) => {
                tracing::warn!(
                    task = key,
                    phase = R::PHASE,
                    "the phase's record cannot be read ({e}); the phase is done again"
                );
                None
            }
        }))
    }

    /// Forgets task `key`'s record of phase `R`.
    pub fn forget_record<R: PhaseRecord>(&self, key: &str) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "DELETE FROM phase_records WHERE task_key = ?1 AND phase = ?2",
                params![key, R::PHASE],
            )
            .map(drop)
        })
    }

    /// The tasks that have a record of phase `R`.
    pub fn record_keys<R: PhaseRecord>(&self) -> Result<Vec<String>, JournalError> {
        self.with(|db| {
            let mut query = db.prepare("SELECT task_key FROM phase_records WHERE phase = ?1")?;
            let keys = query.query_map(params![R::PHASE], |r| r.get(0))?;
            keys.collect()
        })
    }

    /// Forgets all of task `key`'s records (it ended).
    pub(super) fn forget_records_in(db: &rusqlite::Connection, key: &str) -> rusqlite::Result<()> {
        db.execute("DELETE FROM phase_records WHERE task_key = ?1", params![key])
            .map(drop)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::journal::{Phase, Transition};
    use serde::Deserialize;

    /// A phase's record, for tests.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    pub(crate) struct Probe {
        pub n: u32,
    }
    impl PhaseRecord for Probe {
        const PHASE: &'static str = "probe";
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Other {
        text: String,
    }
    impl PhaseRecord for Other {
        const PHASE: &'static str = "other";
    }

    #[test]
    fn each_phase_keeps_its_last_record_until_the_task_ends() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let key = "github:acme/app:issue:3";
        journal.begin(key).unwrap();
        assert_eq!(journal.record::<Probe>(key).unwrap(), None);
        journal.save_record(key, &Probe { n: 1 }, 1 << 10).unwrap();
        journal
            .save_record(key, &Other { text: "x".into() }, 1 << 10)
            .unwrap();
        journal.save_record(key, &Probe { n: 2 }, 1 << 10).unwrap();
        assert_eq!(journal.record::<Probe>(key).unwrap(), Some(Probe { n: 2 }));
        assert_eq!(journal.record_keys::<Probe>().unwrap(), vec![key.to_owned()]);
        // Over the limit: the one before stays.
        let heavy = Other {
            text: "y".repeat(100),
        };
        assert!(journal.save_record(key, &heavy, 50).unwrap() > 50);
        assert_eq!(
            journal.record::<Other>(key).unwrap(),
            Some(Other { text: "x".into() })
        );
        journal.forget_record::<Other>(key).unwrap();
        assert_eq!(journal.record::<Other>(key).unwrap(), None);
        assert_eq!(journal.record::<Probe>(key).unwrap(), Some(Probe { n: 2 }));
        journal
            .transition(key, Transition::ended(Phase::Done, "delivered"))
            .unwrap();
        assert_eq!(journal.record::<Probe>(key).unwrap(), None);
        // A record left by a version that did not forget them at the end
        // is not read back by the next task of the key.
        journal.save_record(key, &Probe { n: 9 }, 1 << 10).unwrap();
        journal.begin(key).unwrap();
        assert_eq!(journal.record::<Probe>(key).unwrap(), None);
        // A task started again (not ended) keeps them.
        journal.save_record(key, &Probe { n: 10 }, 1 << 10).unwrap();
        journal.begin(key).unwrap();
        assert_eq!(journal.record::<Probe>(key).unwrap(), Some(Probe { n: 10 }));
    }
}
