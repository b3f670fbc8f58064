//! GitLab's webhook deliveries, end to end against the fake GitLab and the
//! real daemon: every hook forgehand reads, in the shapes GitLab documents
//! (the older Job Hook without a `project` object too), is answered 2xx; a
//! project named in another case, or by its id alone, is polled (or rung)
//! under its configured path, its id asked of GitLab once; an authentic
//! delivery that cannot be read is answered 2xx (GitLab switches off a
//! webhook that keeps failing) and counted; an oversized one is refused,
//! logged and counted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::{self, DaemonProcess};
use forgehand_test_support::gitlab_world::{GitLabWorld, PROJECT};
use forgehand_test_support::mcp_client;
use forgehand_test_support::scripted_model::text;
use serde_json::{json, Value};
use std::time::Duration;

const SECRET: &str = "gitlab-webhook-token-that-must-never-leak-07";
/// The fake GitLab's id of its first project (`PROJECT`).
const PROJECT_ID: u64 = 10;
/// How `PROJECT` is spelled in requests (the gitlab crate encodes the path).
const ENCODED: &str = "acme%2Fplatform%2Fapp";

/// A daemon polling an hour apart, taking GitLab's deliveries, past its first poll.
async fn start() -> (GitLabWorld, String, DaemonProcess) {
    let address = mcp_client::free_address();
    let world = GitLabWorld::with_daemon_settings(
        vec![(text("Nothing to change."), None)],
        &[("README.md", "# app\n")],
        &format!("  poll_interval: \"1h\"\n  webhooks: true\n  http:\n    listen: \"{address}\""),
        "",
    )
    .await;
    let daemon = world.start_with(&[("FORGEHAND_GITLAB_WEBHOOK_SECRET", SECRET.to_owned())]);
    mcp_client::wait_for_port(&address).await;
    daemon_rig::wait_until(
        "the first poll",
        Duration::from_secs(60),
        async || daemon.log_text().contains("forgehand started"),
        &world.log,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    (world, address, daemon)
}

/// The `project` object of GitLab's documented payloads, for `path`.
fn project_object(path: &str) -> Value {
    json!({
        "id": PROJECT_ID,
        "name": "App",
        "description": "",
        "web_url": format!("http://gitlab.example/{path}"),
        "avatar_url": null,
        "git_ssh_url": format!("git@gitlab.example:{path}.git"),
        "git_http_url": format!("http://gitlab.example/{path}.git"),
        "namespace": "Platform",
        "visibility_level": 0,
        "path_with_namespace": path,
        "default_branch": "main",
        "ci_config_path": null,
        "homepage": format!("http://gitlab.example/{path}"),
        "url": format!("git@gitlab.example:{path}.git"),
        "ssh_url": format!("git@gitlab.example:{path}.git"),
        "http_url": format!("http://gitlab.example/{path}.git")
    })
}

fn user() -> Value {
    json!({"id": 2, "name": "Maya", "username": "maya", "avatar_url": null, "email": "maya@gitlab.example"})
}

/// The Job Hook of GitLab versions before the `project` object: the
/// project only by `project_id` and its display name.
fn older_job_hook(project_id: u64) -> Value {
    json!({
        "object_kind": "build",
        "ref": "forgehand/issue-1",
        "tag": false,
        "before_sha": "0000000000000000000000000000000000000000",
        "sha": "95d49d1efbd941908580e79d65e4b5ecaf4a8305",
        "build_id": 3580121225u64,
        "build_name": "test",
        "build_stage": "test",
        "build_status": "failed",
        "build_created_at": "2026-01-10 13:50:02 UTC",
        "build_started_at": "2026-01-10 13:50:05 UTC",
        "build_finished_at": "2026-01-10 13:50:54 UTC",
        "build_duration": 49.5,
        "build_allow_failure": false,
        "build_failure_reason": "script_failure",
        "pipeline_id": 743121198,
        "project_id": project_id,
        "project_name": "Acme / Platform / App",
        "user": user(),
        "commit": {"id": 743121198, "sha": "95d49d1efbd941908580e79d65e4b5ecaf4a8305", "message": "Greet", "status": "running"},
        "repository": {"name": "App", "homepage": "http://gitlab.example/acme/platform/app", "git_http_url": "http://gitlab.example/acme/platform/app.git", "visibility_level": 0},
        "environment": null
    })
}

/// Every hook forgehand reads, as GitLab documents it, naming `path`.
fn documented(path: &str) -> Vec<(&'static str, Value)> {
    let issue = json!({"id": 301, "iid": 1, "title": "Greet the world", "state": "opened", "action": "open", "labels": []});
    let mr = json!({"id": 99, "iid": 1, "title": "Greet", "state": "opened", "action": "open", "source_branch": "forgehand/issue-1", "target_branch": "main"});
    let note = |noteable: &str| json!({"id": 1244, "note": "@forgehand-bot please", "noteable_type": noteable, "author_id": 2, "system": false});
    let mut job = older_job_hook(PROJECT_ID);
    job["project"] = project_object(path);
    vec![
        (
            "Issue Hook",
            json!({"object_kind": "issue", "event_type": "issue", "user": user(), "project": project_object(path), "object_attributes": issue, "labels": [], "changes": {}}),
        ),
        (
            "Confidential Issue Hook",
            json!({"object_kind": "issue", "event_type": "confidential_issue", "user": user(), "project": project_object(path), "object_attributes": issue, "labels": [], "changes": {}}),
        ),
        (
            "Merge Request Hook",
            json!({"object_kind": "merge_request", "event_type": "merge_request", "user": user(), "project": project_object(path), "object_attributes": mr, "labels": [], "changes": {}}),
        ),
        (
            "Note Hook",
            json!({"object_kind": "note", "event_type": "note", "user": user(), "project_id": PROJECT_ID, "project": project_object(path), "object_attributes": note("Issue"), "issue": issue}),
        ),
        (
            "Confidential Note Hook",
            json!({"object_kind": "note", "event_type": "confidential_note", "user": user(), "project_id": PROJECT_ID, "project": project_object(path), "object_attributes": note("MergeRequest"), "merge_request": mr}),
        ),
        (
            "Pipeline Hook",
            json!({"object_kind": "pipeline", "object_attributes": {"id": 31, "ref": "forgehand/issue-1", "sha": "95d49d1efbd941908580e79d65e4b5ecaf4a8305", "status": "failed"}, "merge_request": null, "user": user(), "project": project_object(path), "commit": {"id": "95d49d1efbd941908580e79d65e4b5ecaf4a8305"}, "builds": []}),
        ),
        ("Job Hook", job),
    ]
}

/// A delivery as GitLab sends it; the answer's status and text.
async fn post(address: &str, event: &str, body: Vec<u8>) -> Result<(u16, String), reqwest::Error> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let answer = reqwest::Client::new()
        .post(format!("http://{address}/webhooks/gitlab"))
        .header("content-type", "application/json")
        .header("user-agent", "GitLab/17.0.0")
        .header("x-gitlab-event", event)
        .header("x-gitlab-event-uuid", format!("13792a34-cac6-4fda-95a8-{n:012x}"))
        .header("x-gitlab-instance", "http://gitlab.example")
        .header("x-gitlab-token", SECRET)
        .body(body)
        .send()
        .await?;
    let status = answer.status().as_u16();
    Ok((status, answer.text().await.unwrap_or_default()))
}

async fn post_json(address: &str, event: &str, payload: &Value) -> (u16, String) {
    post(address, event, payload.to_string().into_bytes())
        .await
        .unwrap()
}

/// The polls of the project's issues, as requested.
fn polls(world: &GitLabWorld) -> Vec<String> {
    world
        .gitlab
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /api/v4/projects/") && r.contains("/issues?"))
        .collect()
}

async fn metrics(address: &str) -> String {
    reqwest::get(format!("http://{address}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_project_named_in_another_case_or_by_id_alone_is_polled_or_rung_as_configured() {
    let (world, address, daemon) = start().await;
    let before = polls(&world).len();
    let mut issue_hook = documented("Acme/Platform/App").remove(0).1;
    issue_hook["object_attributes"]["iid"] = json!(1);
    assert_eq!(post_json(&address, "Issue Hook", &issue_hook).await.0, 202);
    daemon_rig::wait_until(
        "the delivery's poll",
        Duration::from_secs(30),
        async || polls(&world).len() > before,
        &world.log,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = polls(&world);
    assert_eq!(after.len(), before + 1, "one poll for the delivery: {after:?}");
    assert!(
        after[before].contains(&format!("/projects/{ENCODED}/issues?")),
        "{after:?}"
    );
    let requests = world.gitlab.requests();
    assert!(
        !requests.iter().any(|r| r.contains("Acme")),
        "the project is always spelled as configured: {requests:?}"
    );

    // The older Job Hook: its project looked up by id once, then known.
    for _ in 0..2 {
        let (status, said) = post_json(&address, "Job Hook", &older_job_hook(PROJECT_ID)).await;
        assert_eq!(status, 202, "{said}");
    }
    let (status, _) = post_json(&address, "Job Hook", &older_job_hook(999)).await;
    assert_eq!(status, 202);
    daemon_rig::wait_until(
        "the unknown project ignored",
        Duration::from_secs(30),
        async || {
            daemon
                .log_text()
                .lines()
                .any(|l| l.contains("does not watch") && l.contains("project 999 (Acme / Platform / App)"))
        },
        &world.log,
    )
    .await;
    let requests = world.gitlab.requests();
    let asked = |line: &str| {
        requests
            .iter()
            .filter(|r| r.trim_end_matches('?') == line)
            .count()
    };
    assert_eq!(
        asked(&format!("GET /api/v4/projects/{PROJECT_ID}")),
        1,
        "{requests:?}"
    );
    assert_eq!(asked("GET /api/v4/projects/999"), 1, "{requests:?}");
    assert!(!daemon.log_text().contains(SECRET));
}

#[tokio::test]
async fn every_documented_hook_is_answered_2xx_and_an_oversized_one_is_counted() {
    let (world, address, daemon) = start().await;
    for (event, payload) in documented(PROJECT) {
        let (status, said) = post_json(&address, event, &payload).await;
        assert_eq!(status, 202, "{event}: {said}");
    }
    let (status, _) = post_json(&address, "Job Hook", &older_job_hook(PROJECT_ID)).await;
    assert_eq!(status, 202);
    // Authentic but naming no project: ignored, never a failure.
    let mut nameless = older_job_hook(PROJECT_ID);
    nameless.as_object_mut().unwrap().remove("project_id");
    let (status, said) = post_json(&address, "Job Hook", &nameless).await;
    assert_eq!(status, 200, "{said}");
    assert!(said.contains("names no project"), "{said}");
    let (status, _) = post(&address, "Note Hook", b"{not json".to_vec()).await.unwrap();
    assert_eq!(status, 200);
    // A hook forgehand does not read.
    assert_eq!(
        post_json(&address, "Push Hook", &json!({"object_kind": "push"}))
            .await
            .0,
        204
    );
    // Over the 25 MiB a delivery may have: refused before it is read (the
    // answer may come before the body is sent, so the sender may see the
    // connection close instead).
    let huge = format!(
        "{{\"object_kind\":\"note\",\"padding\":\"{}\"}}",
        "x".repeat(26 << 20)
    );
    match post(&address, "Note Hook", huge.into_bytes()).await {
        Ok((status, _)) => assert_eq!(status, 413),
        Err(e) => eprintln!("the oversized delivery's answer was not read: {e}"),
    }
    let metrics = metrics(&address).await;
    for line in [
        r#"forgehand_webhook_deliveries_total{forge="gitlab",outcome="accepted"} 8"#,
        r#"forgehand_webhook_deliveries_total{forge="gitlab",outcome="malformed"} 2"#,
        r#"forgehand_webhook_deliveries_total{forge="gitlab",outcome="ignored"} 1"#,
        r#"forgehand_webhook_deliveries_total{forge="gitlab",outcome="too_large"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    let log = daemon.log_text();
    assert!(log.contains("refused a webhook delivery over 25 MiB"), "{log}");
    assert!(log.contains("cannot be read, ignored"), "{log}");
    assert!(!log.contains(SECRET));
    assert!(world.model.all_requests().await.is_empty());
}
