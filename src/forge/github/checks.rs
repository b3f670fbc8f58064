//! A commit's CI on GitHub: its check runs (GitHub Actions jobs and other
//! Apps' checks) and its commit statuses; Actions jobs' logs and re-runs.

use super::GitHub;
use crate::forge::retry::Repeat;
use crate::forge::{Check, CheckId, CheckState, ForgeError};
use http::Method;
use serde::Deserialize;
use serde_json::json;

/// The App whose check runs are Actions jobs (the run's id is the job's).
const ACTIONS: &str = "github-actions";

#[derive(Deserialize)]
struct CheckRuns {
    #[serde(default)]
    check_runs: Vec<CheckRun>,
}

#[derive(Deserialize)]
struct CheckRun {
    id: u64,
    name: String,
    status: String,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    app: Option<App>,
    #[serde(default)]
    output: Option<Output>,
}

#[derive(Deserialize)]
struct App {
    #[serde(default)]
    slug: Option<String>,
}

#[derive(Deserialize)]
struct Output {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct CombinedStatus {
    #[serde(default)]
    statuses: Vec<Status>,
}

#[derive(Deserialize)]
struct Status {
    context: String,
    state: String,
    #[serde(default)]
    target_url: Option<String>,
}

impl GitHub {
    pub(super) async fn list_checks(&self, repo: &str, sha: &str) -> Result<Vec<Check>, ForgeError> {
        let base = Self::repo_path(repo)?;
        let runs: CheckRuns = self
            .get(
                &format!("{base}/commits/{sha}/check-runs?per_page=100"),
                "list the commit's check runs",
            )
            .await?;
        let combined: CombinedStatus = self
            .get(
                &format!("{base}/commits/{sha}/status?per_page=100"),
                "read the commit's statuses",
            )
            .await?;
        let mut checks: Vec<Check> = runs.check_runs.into_iter().map(run_check).collect();
        checks.extend(combined.statuses.into_iter().map(|s| Check {
            state: status_state(&s.state),
            id: CheckId::Status(s.context.clone()),
            name: s.context,
            url: s.target_url.unwrap_or_default(),
        }));
        Ok(checks)
    }

    /// An Actions job's log (GitHub answers with a redirect to the text);
    /// another App's check run: its output.
    pub(super) async fn read_check_log(
        &self,
        repo: &str,
        check: &Check,
    ) -> Result<Option<String>, ForgeError> {
        let base = Self::repo_path(repo)?;
        match &check.id {
            CheckId::Job(id) => {
                let answer = self
                    .send(
                        Method::GET,
                        &format!("{base}/actions/jobs/{id}/logs"),
                        None,
                        "read the job's log",
                        Repeat::Safe,
                    )
                    .await?;
                Ok(Some(answer.body))
            }
            CheckId::Run(id) => {
                let run: CheckRun = self
                    .get(&format!("{base}/check-runs/{id}"), "read the check run")
                    .await?;
                let output = run.output.map(|o| {
                    [o.title, o.summary, o.text]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join("\n\n")
                });
                Ok(output.filter(|o| !o.trim().is_empty()))
            }
            CheckId::Status(_) => Ok(None),
        }
    }

    /// Re-runs an Actions job (`POST .../actions/jobs/{id}/rerun`).
    pub(super) async fn rerun_job(&self, repo: &str, check: &Check) -> Result<bool, ForgeError> {
        let CheckId::Job(id) = check.id else {
            return Ok(false);
        };
        let base = Self::repo_path(repo)?;
        let path = format!("{base}/actions/jobs/{id}/rerun");
        match self
            .send(
                Method::POST,
                &path,
                Some(&json!({})),
                "re-run the job",
                Repeat::Once,
            )
            .await
        {
            Ok(_) => Ok(true),
            // A job that cannot be re-run (too old, its workflow gone).
            Err(e) if matches!(e.status(), 403 | 404 | 422) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn run_check(run: CheckRun) -> Check {
    let actions = run.app.as_ref().and_then(|a| a.slug.as_deref()) == Some(ACTIONS);
    Check {
        id: if actions {
            CheckId::Job(run.id)
        } else {
            CheckId::Run(run.id)
        },
        state: run_state(&run.status, run.conclusion.as_deref()),
        name: run.name,
        url: run.html_url.unwrap_or_default(),
    }
}

/// A check run's `status` and `conclusion` in common terms.
fn run_state(status: &str, conclusion: Option<&str>) -> CheckState {
    match (status, conclusion) {
        ("completed", Some("success")) => CheckState::Passed,
        ("completed", Some("failure" | "timed_out" | "startup_failure")) => CheckState::Failed,
        ("completed", Some("cancelled" | "stale")) => CheckState::Cancelled,
        ("completed", Some("action_required")) => CheckState::Blocked,
        ("completed", _) => CheckState::Neutral,
        ("in_progress", _) => CheckState::Running,
        ("waiting", _) => CheckState::Blocked,
        _ => CheckState::Queued,
    }
}

fn status_state(state: &str) -> CheckState {
    match state {
        "success" => CheckState::Passed,
        "failure" | "error" => CheckState::Failed,
        _ => CheckState::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_runs_and_statuses_read_as_common_states() {
        assert_eq!(run_state("completed", Some("success")), CheckState::Passed);
        assert_eq!(run_state("completed", Some("timed_out")), CheckState::Failed);
        assert_eq!(run_state("completed", Some("skipped")), CheckState::Neutral);
        assert_eq!(
            run_state("completed", Some("action_required")),
            CheckState::Blocked
        );
        assert_eq!(run_state("waiting", None), CheckState::Blocked);
        assert_eq!(run_state("queued", None), CheckState::Queued);
        assert_eq!(status_state("error"), CheckState::Failed);
        assert_eq!(status_state("pending"), CheckState::Running);
    }
}
