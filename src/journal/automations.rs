//! What each scheduled automation last did in each repository: the
//! schedule time it last fired, skipped or missed, so a restart neither
//! opens that run's issue again nor loses the next one. One row per
//! automation and repository, replaced at each decision.

use super::{Journal, JournalError};
use rusqlite::{params, OptionalExtension};

/// What an automation did at its last schedule time in one repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// First seen by this journal: times before this one are not runs of
    /// its (as a new Kubernetes CronJob does not run for times before it).
    Started,
    /// The issue was opened.
    Fired,
    /// Its previous issue was still open: none opened.
    Skipped,
    /// The time passed longer ago than the starting deadline.
    Missed,
    /// Another replica took this time.
    Elsewhere,
}

impl RunOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Started => "started",
            RunOutcome::Fired => "fired",
            RunOutcome::Skipped => "skipped",
            RunOutcome::Missed => "missed",
            RunOutcome::Elsewhere => "elsewhere",
        }
    }

    fn parse(text: &str) -> Option<RunOutcome> {
        [
            RunOutcome::Started,
            RunOutcome::Fired,
            RunOutcome::Skipped,
            RunOutcome::Missed,
            RunOutcome::Elsewhere,
        ]
        .into_iter()
        .find(|o| o.as_str() == text)
    }
}

/// The last decision of an automation in one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutomationRun {
    pub automation: String,
    /// The repository's key: `github:owner/name`.
    pub repository: String,
    /// The schedule time decided on (seconds since the Unix epoch, UTC).
    pub slot: i64,
    pub outcome: RunOutcome,
    /// The issue opened, or the open one that made it skip.
    pub issue: Option<u64>,
    /// When it was decided (seconds since the Unix epoch, the daemon's clock).
    pub at: i64,
}

impl Journal {
    pub(super) fn create_automation_runs(db: &rusqlite::Connection) -> rusqlite::Result<()> {
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS automation_runs (
                automation TEXT NOT NULL,
                repository TEXT NOT NULL,
                slot INTEGER NOT NULL,
                outcome TEXT NOT NULL,
                issue INTEGER,
                at INTEGER NOT NULL,
                PRIMARY KEY (automation, repository)
            );",
        )
    }

    /// The last decision of `automation` in `repository`, if any.
    pub fn automation_run(
        &self,
        automation: &str,
        repository: &str,
    ) -> Result<Option<AutomationRun>, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT automation, repository, slot, outcome, issue, at FROM automation_runs
                 WHERE automation = ?1 AND repository = ?2",
                params![automation, repository],
                row_to_run,
            )
            .optional()
        })
        .map(Option::flatten)
    }

    /// Every automation's last decision in every repository.
    pub fn automation_runs(&self) -> Result<Vec<AutomationRun>, JournalError> {
        self.with(|db| {
            let mut stmt = db.prepare(
                "SELECT automation, repository, slot, outcome, issue, at FROM automation_runs
                 ORDER BY automation, repository",
            )?;
            let rows = stmt.query_map([], row_to_run)?;
            rows.filter_map(|r| r.transpose()).collect()
        })
    }

    /// Records a decision, unless one of a later schedule time is there
    /// already (a decision never moves an automation back in time).
    pub fn record_automation_run(&self, run: &AutomationRun) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "INSERT INTO automation_runs (automation, repository, slot, outcome, issue, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (automation, repository) DO UPDATE SET
                    slot = excluded.slot, outcome = excluded.outcome,
                    issue = excluded.issue, at = excluded.at
                 WHERE excluded.slot >= automation_runs.slot",
                params![
                    run.automation,
                    run.repository,
                    run.slot,
                    run.outcome.as_str(),
                    run.issue.map(|n| n as i64),
                    run.at
                ],
            )
            .map(|_| ())
        })
    }
}

/// A row, or `None` when its outcome is not one this daemon knows.
fn row_to_run(row: &rusqlite::Row<'_>) -> rusqlite::Result<Option<AutomationRun>> {
    let outcome: String = row.get(3)?;
    let issue: Option<i64> = row.get(4)?;
    Ok(RunOutcome::parse(&outcome).map(|outcome| AutomationRun {
        automation: row.get(0).unwrap_or_default(),
        repository: row.get(1).unwrap_or_default(),
        slot: row.get(2).unwrap_or_default(),
        outcome,
        issue: issue.map(|n| n as u64),
        at: row.get(5).unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(slot: i64, outcome: RunOutcome) -> AutomationRun {
        AutomationRun {
            automation: "weekly-deps".into(),
            repository: "github:acme/app".into(),
            slot,
            outcome,
            issue: Some(3),
            at: slot + 5,
        }
    }

    #[test]
    fn the_last_decision_survives_a_reopen_and_never_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        {
            let journal = Journal::open(dir.path()).unwrap();
            assert_eq!(
                journal.automation_run("weekly-deps", "github:acme/app").unwrap(),
                None
            );
            journal
                .record_automation_run(&run(600, RunOutcome::Fired))
                .unwrap();
        }
        let journal = Journal::open(dir.path()).unwrap();
        assert_eq!(
            journal.automation_run("weekly-deps", "github:acme/app").unwrap(),
            Some(run(600, RunOutcome::Fired))
        );
        // An older time does not replace it; a later one does.
        journal
            .record_automation_run(&run(540, RunOutcome::Missed))
            .unwrap();
        assert_eq!(
            journal.automation_runs().unwrap(),
            vec![run(600, RunOutcome::Fired)]
        );
        journal
            .record_automation_run(&run(660, RunOutcome::Skipped))
            .unwrap();
        assert_eq!(
            journal.automation_runs().unwrap(),
            vec![run(660, RunOutcome::Skipped)]
        );
    }
}
