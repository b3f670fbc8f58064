//! The tasks that wait holding nothing, read together for the status page
//! and `forgehand tasks`: on their checks, on a plan's approval, or on
//! their paused label.

use super::{CheckWait, Journal, JournalError};
use serde::Serialize;

/// One task waiting, and on what.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Waiting {
    pub key: String,
    /// What it waits on, in words.
    pub on: String,
    /// Seconds since the Unix epoch when it began to wait.
    pub since: i64,
}

impl Journal {
    /// Whether task `key` waits while holding nothing (on its checks, a
    /// plan's approval or its paused label), or its wait just ended.
    pub fn holds_a_wait(&self, key: &str) -> Result<bool, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT EXISTS(SELECT 1 FROM check_waits WHERE task_key = ?1)
                     OR EXISTS(SELECT 1 FROM plan_waits WHERE task_key = ?1)
                     OR EXISTS(SELECT 1 FROM paused_tasks WHERE task_key = ?1)",
                rusqlite::params![key],
                |r| r.get(0),
            )
        })
    }

    /// Every task waiting, oldest first.
    pub fn waiting(&self) -> Result<Vec<Waiting>, JournalError> {
        let rows: Vec<(String, String, i64)> = self.with(|db| {
            let mut stmt = db.prepare(
                "SELECT task_key, 'checks', record, updated_at FROM check_waits
                 UNION ALL SELECT task_key, 'plan', record, updated_at FROM plan_waits
                 UNION ALL SELECT task_key, 'paused', '', since FROM paused_tasks",
            )?;
            let rows = stmt.query_map([], |r| {
                let kind: String = r.get(1)?;
                let record: String = r.get(2)?;
                Ok((r.get(0)?, format!("{kind}\n{record}"), r.get(3)?))
            })?;
            rows.collect()
        })?;
        let mut waiting: Vec<Waiting> = rows
            .into_iter()
            .filter_map(|(key, record, since)| {
                let (kind, record) = record.split_once('\n')?;
                let on = on_what(kind, record)?;
                Some(Waiting { key, on, since })
            })
            .collect();
        waiting.sort_by_key(|w| w.since);
        Ok(waiting)
    }
}

/// What a wait's row says it waits on; `None` for a wait already over.
fn on_what(kind: &str, record: &str) -> Option<String> {
    match kind {
        "checks" => {
            let wait: CheckWait = serde_json::from_str(record).ok()?;
            let short: String = wait.sha.chars().take(8).collect();
            let round = match wait.round {
                0 => String::new(),
                n => format!(", after fix round {n}"),
            };
            let now = match wait.shown.as_str() {
                "" => String::new(),
                shown => format!(": {shown}"),
            };
            wait.seen
                .is_none()
                .then(|| format!("the checks of {short}{round}{now}"))
        }
        "plan" => {
            let wait: super::PlanWait = serde_json::from_str(record).ok()?;
            wait.answer
                .is_none()
                .then(|| "a writer's approval of its plan".to_owned())
        }
        _ => Some("its paused label to be removed".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        journal.pause(paused).unwrap();
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
    }
}
