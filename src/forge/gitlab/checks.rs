//! A commit's CI on GitLab: the jobs of its newest pipeline, their
//! traces, and retries.

use super::{project, GitLab, Rest};
use crate::forge::{Check, CheckId, CheckState, ForgeError};
use http::Method;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct Pipeline {
    id: u64,
}

#[derive(Deserialize)]
struct Job {
    id: u64,
    name: String,
    status: String,
    #[serde(default)]
    web_url: Option<String>,
    #[serde(default)]
    allow_failure: bool,
}

impl GitLab {
    /// The jobs of the newest pipeline of `sha` (a retried job shows once,
    /// as its newest try: GitLab lists only the latest by default).
    pub(super) async fn list_checks(&self, repo: &str, sha: &str) -> Result<Vec<Check>, ForgeError> {
        let pipelines: Vec<Pipeline> = self
            .one(
                Rest::get(format!("{}/pipelines", project(repo)))
                    .with("sha", sha)
                    .with("order_by", "id")
                    .with("sort", "desc")
                    .with("per_page", "1"),
                "list the commit's pipelines",
            )
            .await?;
        let Some(pipeline) = pipelines.first() else {
            return Ok(Vec::new());
        };
        let jobs: Vec<Job> = self
            .all(
                Rest::get(format!("{}/pipelines/{}/jobs", project(repo), pipeline.id)),
                "list the pipeline's jobs",
            )
            .await?;
        Ok(jobs
            .into_iter()
            .map(|job| Check {
                id: CheckId::Job(job.id),
                state: job_state(&job.status, job.allow_failure),
                name: job.name,
                url: job.web_url.unwrap_or_default(),
            })
            .collect())
    }

    /// A job's trace (`GET /projects/:id/jobs/:job_id/trace`, plain text).
    pub(super) async fn read_job_trace(
        &self,
        repo: &str,
        check: &Check,
    ) -> Result<Option<String>, ForgeError> {
        let CheckId::Job(id) = check.id else {
            return Ok(None);
        };
        let bytes = self
            .raw(
                Rest::get(format!("{}/jobs/{id}/trace", project(repo))),
                "read the job's trace",
            )
            .await?;
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Retries a job (`POST /projects/:id/jobs/:job_id/retry`).
    pub(super) async fn retry_job(&self, repo: &str, check: &Check) -> Result<bool, ForgeError> {
        let CheckId::Job(id) = check.id else {
            return Ok(false);
        };
        let retried: Result<serde_json::Value, ForgeError> = self
            .one(
                Rest::send(
                    Method::POST,
                    format!("{}/jobs/{id}/retry", project(repo)),
                    json!({}),
                ),
                "retry the job",
            )
            .await;
        match retried {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.status(), 403 | 404 | 422) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// A job's `status` in common terms; a failed job allowed to fail fails nothing.
fn job_state(status: &str, allow_failure: bool) -> CheckState {
    match status {
        "success" => CheckState::Passed,
        "failed" if allow_failure => CheckState::Neutral,
        "failed" => CheckState::Failed,
        "canceled" | "canceling" => CheckState::Cancelled,
        "skipped" => CheckState::Neutral,
        "manual" => CheckState::Blocked,
        "running" => CheckState::Running,
        // created, pending, preparing, waiting_for_resource, scheduled
        _ => CheckState::Queued,
    }
}
