//! The fake GitLab's CI as GitLab shows it (see [`crate::fake_ci`]): a
//! commit's pipeline, its jobs, their traces, and retries.

use super::State;
use crate::fake_ci::{jobs_of, FakeJob};
use crate::fake_http::{paged, query, stamp, tick, Reply};
use serde_json::{json, Value};
use wiremock::Request;

/// GitLab's status of a job now.
fn job_status(job: &FakeJob) -> &'static str {
    match job.status() {
        ("completed", Some("success")) => "success",
        ("completed", _) => "failed",
        ("in_progress", _) => "running",
        _ => "pending",
    }
}

fn job_json(path: &str, pipeline: u64, job: &FakeJob) -> Value {
    json!({
        "id": job.id,
        "name": job.name,
        "stage": "test",
        "status": job_status(job),
        "allow_failure": false,
        "created_at": stamp(tick(0)),
        "web_url": format!("https://gitlab.example/{path}/-/jobs/{}", job.id),
        "pipeline": {"id": pipeline, "sha": job.sha, "status": "running"},
    })
}

/// The pipeline of a commit: one per commit with jobs, its id derived
/// from the first job's.
fn pipeline_id(jobs: &[&mut FakeJob]) -> Option<u64> {
    jobs.iter().map(|j| j.id + 100_000).min()
}

/// The answer when `segs` is one of these routes.
pub(super) fn route(s: &mut State, req: &Request, segs: &[&str]) -> Option<Reply> {
    Some(match (req.method.as_str(), segs) {
        ("GET", ["projects", path, "pipelines"]) => {
            let sha = query(req).get("sha").cloned().unwrap_or_default();
            let project = s.projects.get(*path)?;
            let (project_id, bare) = (project.id, project.bare.clone());
            let jobs = jobs_of(&mut s.jobs, &mut s.next_id, s.ci.as_ref(), bare.as_deref(), &sha);
            let Some(id) = pipeline_id(&jobs) else {
                return Some(paged(req, Vec::new()));
            };
            let status = if jobs.iter().all(|j| job_status(j) == "success") {
                "success"
            } else if jobs.iter().any(|j| job_status(j) == "failed") {
                "failed"
            } else {
                "running"
            };
            paged(
                req,
                vec![json!({
                    "id": id,
                    "iid": id - 100_000,
                    "project_id": project_id,
                    "sha": sha,
                    "ref": "forgehand/issue",
                    "status": status,
                    "source": "push",
                    "created_at": stamp(tick(0)),
                    "updated_at": stamp(tick(0)),
                    "web_url": format!("https://gitlab.example/{path}/-/pipelines/{id}"),
                })],
            )
        }
        ("GET", ["projects", path, "pipelines", id, "jobs"]) => {
            let id: u64 = id.parse().ok()?;
            let sha = s.jobs.iter().find(|j| j.id + 100_000 == id)?.sha.clone();
            let list: Vec<Value> = s
                .jobs
                .iter_mut()
                .filter(|j| j.sha == sha)
                .map(|job| {
                    job.advance();
                    job_json(path, id, job)
                })
                .collect();
            paged(req, list)
        }
        ("GET", ["projects", _, "jobs", id, "trace"]) => {
            let id: u64 = id.parse().ok()?;
            let job = s.jobs.iter().find(|j| j.id == id)?;
            Reply {
                status: 200,
                body: job.log().into_bytes(),
                headers: vec![("content-type".into(), "text/plain".into())],
                delay: None,
            }
        }
        ("POST", ["projects", path, "jobs", id, "retry"]) => {
            let id: u64 = id.parse().ok()?;
            let job = s.jobs.iter_mut().find(|j| j.id == id)?;
            job.rerun();
            let answer = job_json(path, id + 100_000, job);
            s.retries.push(job.name.clone());
            Reply::json(201, answer)
        }
        _ => return None,
    })
}
