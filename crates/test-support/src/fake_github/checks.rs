//! The fake GitHub's CI as GitHub Actions shows it (see [`crate::fake_ci`]):
//! check runs and the combined status of a commit, job logs through a
//! redirect as on GitHub, re-runs, and `check_run` webhooks when a job
//! completes.

use super::{State, BOT};
use crate::fake_ci::{jobs_of, FakeJob};
use crate::fake_http::{github_stamp, Reply};
use serde_json::{json, Value};
use wiremock::Request;

fn run_json(base: &str, repo: &str, job: &FakeJob) -> Value {
    let (status, conclusion) = job.status();
    json!({
        "id": job.id,
        "head_sha": job.sha,
        "name": job.name,
        "status": status,
        "conclusion": conclusion,
        "html_url": format!("https://github.example/{repo}/actions/runs/1/job/{}", job.id),
        "details_url": format!("https://github.example/{repo}/actions/runs/1/job/{}", job.id),
        "url": format!("{base}/repos/{repo}/check-runs/{}", job.id),
        "started_at": github_stamp(0),
        "app": {"slug": "github-actions", "name": "GitHub Actions"},
        "output": {"title": null, "summary": null, "text": null},
    })
}

/// The answer when `segs` is one of these routes.
pub(super) fn route(s: &mut State, req: &Request, base: &str, segs: &[&str]) -> Option<Reply> {
    let method = req.method.as_str();
    Some(match (method, segs) {
        ("GET", ["repos", o, r, "commits", sha, "check-runs"]) => {
            let repo = format!("{o}/{r}");
            let mut completed = Vec::new();
            let runs: Vec<Value> = jobs_of(
                &mut s.jobs,
                &mut s.next_id,
                s.ci.as_ref(),
                s.repos.get(&repo).and_then(|r| r.bare.clone()).as_deref(),
                sha,
            )
            .into_iter()
            .map(|job| {
                if job.advance() {
                    completed.push(job.clone());
                }
                run_json(base, &repo, job)
            })
            .collect();
            for job in completed {
                let check_run = run_json(base, &repo, &job);
                super::webhooks::emit(
                    s,
                    "check_run",
                    Some("completed"),
                    &repo,
                    BOT,
                    json!({"check_run": check_run}),
                );
            }
            Reply::json(200, json!({"total_count": runs.len(), "check_runs": runs}))
        }
        ("GET", ["repos", o, r, "commits", sha, "status"]) => Reply::json(
            200,
            json!({
                "state": "pending",
                "sha": sha,
                "total_count": 0,
                "statuses": [],
                "commit_url": format!("{base}/repos/{o}/{r}/commits/{sha}"),
                "url": format!("{base}/repos/{o}/{r}/commits/{sha}/status"),
            }),
        ),
        ("GET", ["repos", _, _, "actions", "jobs", id, "logs"]) => {
            let id: u64 = id.parse().unwrap_or(0);
            if !s.jobs.iter().any(|j| j.id == id) {
                return Some(Reply::json(404, json!({"message": "Not Found"})));
            }
            // GitHub answers with a short-lived link to the log's text.
            let host = req
                .headers
                .get("host")
                .and_then(|h| h.to_str().ok())
                .unwrap_or("localhost");
            let mut reply = Reply::json(302, Value::Null);
            reply.body = Vec::new();
            reply
                .headers
                .push(("location".into(), format!("http://{host}/_job-logs/{id}")));
            reply
        }
        ("GET", ["_job-logs", id]) => {
            let id: u64 = id.parse().unwrap_or(0);
            let job = s.jobs.iter().find(|j| j.id == id)?;
            Reply {
                status: 200,
                body: job.log().into_bytes(),
                headers: vec![("content-type".into(), "text/plain".into())],
                delay: None,
            }
        }
        ("POST", ["repos", _, _, "actions", "jobs", id, "rerun"]) => {
            let id: u64 = id.parse().unwrap_or(0);
            let job = s.jobs.iter_mut().find(|j| j.id == id)?;
            job.rerun();
            s.reruns.push(job.name.clone());
            Reply::json(201, json!({}))
        }
        _ => return None,
    })
}
