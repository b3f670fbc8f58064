//! What forgehand learned of a repository from the forge's answers, kept
//! across tasks and restarts: a repository whose pull requests cannot be
//! drafts, a token the forge refuses workflow files from. The next task
//! there acts on it instead of being refused again.

use super::{Journal, JournalError};
use rusqlite::{params, OptionalExtension};

/// A fact about a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoFact {
    /// The forge refused a draft: changes there open ready, marked as work
    /// in progress.
    NoDrafts,
    /// The forge refused workflow files from forgehand's token; the value
    /// names the permission that would allow them.
    WorkflowsRefused,
}

impl RepoFact {
    fn as_str(self) -> &'static str {
        match self {
            RepoFact::NoDrafts => "no_drafts",
            RepoFact::WorkflowsRefused => "workflows_refused",
        }
    }
}

impl Journal {
    /// The value of `fact` for `forge`'s `repo`, when it was learned.
    pub fn repo_fact(&self, forge: &str, repo: &str, fact: RepoFact) -> Result<Option<String>, JournalError> {
        self.with(|db| {
            db.query_row(
                "SELECT value FROM repo_facts WHERE forge = ?1 AND repo = ?2 AND fact = ?3",
                params![forge, repo, fact.as_str()],
                |r| r.get(0),
            )
            .optional()
        })
    }

    pub fn learn_repo_fact(
        &self,
        forge: &str,
        repo: &str,
        fact: RepoFact,
        value: &str,
    ) -> Result<(), JournalError> {
        self.with(|db| {
            db.execute(
                "INSERT INTO repo_facts (forge, repo, fact, value) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (forge, repo, fact) DO UPDATE SET value = excluded.value",
                params![forge, repo, fact.as_str(), value],
            )
            .map(drop)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fact_is_kept_per_repository_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        journal
            .learn_repo_fact("github", "acme/app", RepoFact::NoDrafts, "yes")
            .unwrap();
        drop(journal);
        let journal = Journal::open(dir.path()).unwrap();
        let fact = |repo| journal.repo_fact("github", repo, RepoFact::NoDrafts).unwrap();
        assert_eq!(fact("acme/app").as_deref(), Some("yes"));
        assert_eq!(fact("acme/other"), None);
    }
}
