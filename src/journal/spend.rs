//! What the models cost, per UTC day, repository and model: the ledger the
//! budgets are checked against (it outlives restarts, so a cap is a cap
//! for the whole day or month, however often the daemon starts), and what
//! `/metrics` and the status page show.

use super::{Journal, JournalError};
use rusqlite::params;

/// Whose spend is summed: one repository's, or everyone's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose<'a> {
    Repository(&'a str),
    Everyone,
}

impl Journal {
    /// Adds `usd` spent on `day` (`YYYY-MM-DD`, UTC) for `repo` on `model`.
    pub fn record_spend(&self, day: &str, repo: &str, model: &str, usd: f64) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "INSERT INTO spend (day, repo, model, usd) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (day, repo, model) DO UPDATE SET usd = usd + excluded.usd",
                params![day, repo, model, usd],
            )
            .map(drop)
        })
    }

    /// What `whose` spent on the days from `first` to `last` (inclusive).
    pub fn spent(&self, whose: Whose<'_>, first: &str, last: &str) -> Result<f64, JournalError> {
        self.with(|db| match whose {
            Whose::Repository(repo) => db.query_row(
                "SELECT COALESCE(SUM(usd), 0) FROM spend WHERE repo = ?1 AND day >= ?2 AND day <= ?3",
                params![repo, first, last],
                |r| r.get(0),
            ),
            Whose::Everyone => db.query_row(
                "SELECT COALESCE(SUM(usd), 0) FROM spend WHERE day >= ?1 AND day <= ?2",
                params![first, last],
                |r| r.get(0),
            ),
        })
    }

    /// Spend on the days from `first` to `last`, by (repository, model).
    pub fn spend_by_repository(
        &self,
        first: &str,
        last: &str,
    ) -> Result<Vec<(String, String, f64)>, JournalError> {
        self.with(|db| {
            let mut stmt = db.prepare(
                "SELECT repo, model, SUM(usd) FROM spend WHERE day >= ?1 AND day <= ?2
                 GROUP BY repo, model ORDER BY repo, model",
            )?;
            let rows = stmt.query_map(params![first, last], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            rows.collect()
        })
    }

    /// Forgets the days before `first` (the ledger keeps about a year).
    pub fn prune_spend(&self, first: &str) -> Result<usize, JournalError> {
        self.with(|db| db.execute("DELETE FROM spend WHERE day < ?1", params![first]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spend_adds_up_per_repository_and_period() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        journal
            .record_spend("2026-11-25", "acme/app", "gpt-5.6", 0.5)
            .unwrap();
        journal
            .record_spend("2026-11-26", "acme/app", "gpt-5.6", 0.25)
            .unwrap();
        journal
            .record_spend("2026-11-26", "acme/app", "gpt-5.6", 0.25)
            .unwrap();
        journal
            .record_spend("2026-11-26", "acme/api", "claude-opus-5-5", 1.0)
            .unwrap();
        let today = |whose| journal.spent(whose, "2026-11-26", "2026-11-26").unwrap();
        assert_eq!(today(Whose::Repository("acme/app")), 0.5);
        assert_eq!(today(Whose::Everyone), 1.5);
        assert_eq!(
            journal
                .spent(Whose::Everyone, "2026-11-01", "2026-11-30")
                .unwrap(),
            2.0
        );
        assert_eq!(
            journal.spend_by_repository("2026-11-26", "2026-11-26").unwrap(),
            vec![
                ("acme/api".to_owned(), "claude-opus-5-5".to_owned(), 1.0),
                ("acme/app".to_owned(), "gpt-5.6".to_owned(), 0.5)
            ]
        );
        assert_eq!(journal.prune_spend("2026-11-26").unwrap(), 1);
        assert_eq!(
            journal
                .spent(Whose::Everyone, "2026-11-01", "2026-11-30")
                .unwrap(),
            1.5
        );
    }
}
