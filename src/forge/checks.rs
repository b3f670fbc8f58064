//! A commit's CI as forgehand reads it on either forge: GitHub's check
//! runs and commit statuses, GitLab's pipelines and their jobs, each one
//! [`Check`] with a state in common terms.

/// One check on a commit.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Check {
    pub id: CheckId,
    /// What the forge shows: the job or check run's name, a status's context.
    pub name: String,
    pub state: CheckState,
    /// Where a person reads it.
    pub url: String,
}

/// What a check is on its forge, which says what can be done with it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CheckId {
    /// A job with a log that can be run again: a GitHub Actions job (its
    /// check run id is the job's id) or a GitLab job.
    Job(u64),
    /// A check run of another GitHub App: its output is its log; it
    /// cannot be re-run from here.
    Run(u64),
    /// A commit status (a context): a state and a link, nothing more.
    Status(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CheckState {
    /// Created or queued, not started.
    Queued,
    Running,
    Passed,
    Failed,
    /// Ended without passing or failing: skipped, neutral, a GitLab job
    /// allowed to fail.
    Neutral,
    Cancelled,
    /// Waits for a person: a workflow run that needs approval, a manual job.
    Blocked,
}

impl CheckState {
    pub fn ended(self) -> bool {
        !matches!(self, CheckState::Queued | CheckState::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CheckState::Queued => "queued",
            CheckState::Running => "running",
            CheckState::Passed => "passed",
            CheckState::Failed => "failed",
            CheckState::Neutral => "neutral",
            CheckState::Cancelled => "cancelled",
            CheckState::Blocked => "waiting for a person",
        }
    }
}

/// The checks of one commit taken together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CiState {
    /// No check reported (yet).
    Nothing,
    /// Some have not ended.
    Running,
    /// All ended; none failed; some wait for a person.
    Blocked,
    /// All ended and at least one failed.
    Failed,
    /// All ended; none failed, none waits.
    Passed,
}

pub fn ci_state(checks: &[Check]) -> CiState {
    if checks.is_empty() {
        return CiState::Nothing;
    }
    if checks.iter().any(|c| !c.state.ended()) {
        return CiState::Running;
    }
    if checks.iter().any(|c| c.state == CheckState::Failed) {
        return CiState::Failed;
    }
    if checks.iter().any(|c| c.state == CheckState::Blocked) {
        return CiState::Blocked;
    }
    CiState::Passed
}

/// `3 passed, 1 failed (lint), 2 running`: the checks in one line.
pub fn ci_line(checks: &[Check]) -> String {
    let order = [
        CheckState::Failed,
        CheckState::Running,
        CheckState::Queued,
        CheckState::Blocked,
        CheckState::Cancelled,
        CheckState::Neutral,
        CheckState::Passed,
    ];
    let mut parts = Vec::new();
    for state in order {
        let named: Vec<&str> = checks
            .iter()
            .filter(|c| c.state == state)
            .map(|c| c.name.as_str())
            .collect();
        if named.is_empty() {
            continue;
        }
        let count = named.len();
        // Names only where they say what needs attention.
        if matches!(state, CheckState::Passed | CheckState::Neutral) {
            parts.push(format!("{count} {}", state.as_str()));
        } else {
            let mut shown: Vec<&str> = named.into_iter().take(5).collect();
            if count > shown.len() {
                shown.push("…");
            }
            parts.push(format!("{count} {} ({})", state.as_str(), shown.join(", ")));
        }
    }
    if parts.is_empty() {
        "no checks".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, state: CheckState) -> Check {
        Check {
            id: CheckId::Status(name.into()),
            name: name.into(),
            state,
            url: String::new(),
        }
    }

    #[test]
    fn the_checks_of_a_commit_add_up_to_one_state_and_one_line() {
        assert_eq!(ci_state(&[]), CiState::Nothing);
        let mut checks = vec![
            check("build", CheckState::Passed),
            check("lint", CheckState::Failed),
            check("e2e", CheckState::Running),
        ];
        assert_eq!(ci_state(&checks), CiState::Running);
        assert_eq!(ci_line(&checks), "1 failed (lint), 1 running (e2e), 1 passed");
        checks[2].state = CheckState::Passed;
        assert_eq!(ci_state(&checks), CiState::Failed);
        checks[1].state = CheckState::Blocked;
        assert_eq!(ci_state(&checks), CiState::Blocked);
        checks[1].state = CheckState::Neutral;
        assert_eq!(ci_state(&checks), CiState::Passed);
        assert_eq!(ci_line(&checks), "1 neutral, 2 passed");
    }
}
