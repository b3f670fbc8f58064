//! Webhook deliveries as doorbells, end to end against the fake GitHub
//! delivering signed webhooks: a label or a mention starts at once when
//! polls are an hour apart; a bad signature is refused with a log line and
//! a counter; a missed delivery is caught by the next poll; a delivery
//! repeated, and seen by a poll too, does nothing twice. Deliveries in the
//! shapes GitHub documents (checked against its API description), form
//! encoded, or naming the repository in another case, are answered 2xx
//! and poll the configured repository once, under its own key.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::{self, DaemonProcess};
use forgehand_test_support::fake_github::BOT;
use forgehand_test_support::github_world::{World, REPO};
use forgehand_test_support::mcp_client;
use forgehand_test_support::scripted_model::{edit_and_commit, text};
use forgehand_test_support::webhook_sender::{github_signature, WebhookSender};
use serde_json::{json, Value};
use std::time::Duration;

const SECRET: &str = "webhook-secret-that-must-never-leak-0003";

/// A world whose daemon takes webhooks on a free address and polls every `poll`.
async fn world(
    poll: &str,
    turns: Vec<(forgehand_test_support::scripted_model::Reply, Option<Duration>)>,
) -> (World, String) {
    let address = mcp_client::free_address();
    let world = World::with_daemon_settings(
        turns,
        &format!("  poll_interval: \"{poll}\"\n  webhooks: true\n  http:\n    listen: \"{address}\""),
    )
    .await;
    (world, address)
}

async fn start(world: &World, address: &str) -> (DaemonProcess, WebhookSender) {
    let daemon = start_daemon(world, address).await;
    let hooks = world
        .github
        .send_webhooks_to(&format!("http://{address}/webhooks/github"), SECRET);
    (daemon, hooks)
}

/// The daemon, past its first poll; the fake GitHub sends no webhooks.
async fn start_daemon(world: &World, address: &str) -> DaemonProcess {
    let mut env = world.env();
    env.push(("FORGEHAND_GITHUB_WEBHOOK_SECRET", SECRET.to_owned()));
    let daemon = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    mcp_client::wait_for_port(address).await;
    // The first poll has run (the loop polls at once, then an hour later).
    daemon_rig::wait_until(
        "the first poll",
        Duration::from_secs(60),
        async || daemon.log_text().contains("forgehand started"),
        &world.log_path(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    daemon
}

#[tokio::test]
async fn with_polls_an_hour_apart_a_label_and_a_mention_start_at_once() {
    let mut turns = edit_and_commit(Duration::ZERO);
    turns.push((text("Nothing else to change."), None));
    let (world, address) = world("1h", turns).await;
    let (daemon, hooks) = start(&world, &address).await;
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_done(issue, Duration::from_secs(120)).await;
    world.assert_delivered_once(issue);
    let mentioned = world
        .github
        .open_issue(REPO, "maya", "Check the README", "Is the README current?");
    world
        .github
        .comment(REPO, mentioned, "maya", &format!("@{BOT} please look at this"));
    world.wait_for_done(mentioned, Duration::from_secs(120)).await;
    let sent = hooks.sent();
    assert!(!sent.is_empty());
    assert!(
        sent.iter().all(|s| matches!(s.status, Some(202) | Some(204))),
        "{sent:?}\n{}",
        daemon.log_text()
    );
    assert!(!daemon.log_text().contains(SECRET));
}

#[tokio::test]
async fn a_delivery_with_a_bad_signature_is_refused_with_a_log_line_and_a_counter() {
    let (world, address) = world("1h", vec![(text("Nothing to change."), None)]).await;
    let (daemon, _hooks) = start(&world, &address).await;
    let issue = world
        .github
        .open_issue(REPO, "maya", "Greet the world", "The greeting should say hello.");
    let body = serde_json::json!({
        "action": "labeled",
        "issue": {"number": issue},
        "label": {"name": "coding agent"},
        "repository": {"full_name": REPO},
        "sender": {"login": "maya"},
    })
    .to_string();
    let http = reqwest::Client::new();
    let post = |signature: String| {
        http.post(format!("http://{address}/webhooks/github"))
            .header("content-type", "application/json")
            .header("x-github-event", "issues")
            .header("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
            .header("x-hub-signature-256", signature)
            .body(body.clone())
            .send()
    };
    let forged = post(github_signature("not-the-secret", body.as_bytes()))
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let unsigned = http
        .post(format!("http://{address}/webhooks/github"))
        .header("x-github-event", "issues")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 401);
    // GitLab is not configured here: no secret, so nothing is taken.
    let gitlab = http
        .post(format!("http://{address}/webhooks/gitlab"))
        .header("x-gitlab-event", "Note Hook")
        .header("x-gitlab-token", SECRET)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(gitlab.status(), 401);
    let metrics = reqwest::get(format!("http://{address}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"forgehand_webhook_deliveries_total{forge="github",outcome="refused"} 2"#),
        "{metrics}"
    );
    let log = daemon.log_text();
    assert!(log.contains("refused a webhook delivery"), "{log}");
    assert!(!log.contains(SECRET));
    // A correctly signed delivery of the same body is taken (and, being
    // only a doorbell, starts nothing: the issue has no label).
    let from = world.github.requests().len();
    let signed = post(github_signature(SECRET, body.as_bytes())).await.unwrap();
    assert_eq!(signed.status(), 202);
    // The poll it rang for (the next timed one is an hour away) has run.
    let poll = format!("GET /repos/{REPO}/issues?state=open&labels=");
    daemon_rig::wait_until(
        "the poll the delivery rang for",
        Duration::from_secs(60),
        async || {
            world.github.requests()[from..]
                .iter()
                .any(|r| r.starts_with(&poll))
        },
        &world.log_path(),
    )
    .await;
    assert!(world.model.all_requests().await.is_empty());
    assert!(world.github.issue(REPO, issue).labels.is_empty());
}

#[tokio::test]
async fn a_missed_delivery_is_caught_by_the_next_poll() {
    let (world, address) = world("4s", edit_and_commit(Duration::ZERO)).await;
    let (daemon, hooks) = start(&world, &address).await;
    hooks.lose_next(usize::MAX);
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_done(issue, Duration::from_secs(120)).await;
    world.assert_delivered_once(issue);
    assert!(
        hooks.sent().iter().all(|s| s.status.is_none()),
        "{:?}",
        hooks.sent()
    );
    assert!(daemon.log_text().contains("starting"));
}

#[tokio::test]
async fn a_delivery_sent_twice_and_seen_by_a_poll_does_nothing_twice() {
    let (world, address) = world("2s", edit_and_commit(Duration::ZERO)).await;
    let (daemon, hooks) = start(&world, &address).await;
    hooks.send_twice();
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_done(issue, Duration::from_secs(120)).await;
    // Two more polls, and the deliveries of forgehand's own comments and labels.
    world.two_polls_since(world.github.requests().len()).await;
    world.assert_delivered_once(issue);
    let log = daemon.log_text();
    assert_eq!(log.matches("starting (new)").count(), 1, "{log}");
    let sent = hooks.sent();
    assert!(
        sent.iter().any(|s| s.status == Some(200)),
        "a repeat is answered 200: {sent:?}"
    );
    assert_eq!(
        world
            .github
            .reactions()
            .iter()
            .filter(|r| r.on == format!("issue {issue}"))
            .count(),
        1
    );
}

/// The repository object of GitHub's webhook payloads, named `full_name`.
fn repository(full_name: &str) -> Value {
    let (owner, name) = full_name.split_once('/').unwrap();
    json!({
        "id": 1296269,
        "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5",
        "name": name,
        "full_name": full_name,
        "private": false,
        "owner": user(owner),
        "html_url": format!("https://github.example/{full_name}"),
        "default_branch": "main",
    })
}

fn user(login: &str) -> Value {
    json!({"login": login, "id": 583231, "node_id": "MDQ6VXNlcjU4MzIzMQ==", "type": "User", "site_admin": false})
}

fn issue(number: u64) -> Value {
    json!({
        "id": 1347, "node_id": "MDU6SXNzdWUxMzQ3", "number": number, "title": "Greet the world",
        "user": user("maya"), "labels": [{"id": 208045946, "name": "coding agent", "color": "f29513", "default": false}],
        "state": "open", "locked": false, "comments": 0, "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z", "author_association": "MEMBER", "body": "Hello",
    })
}

fn pull_request(number: u64) -> Value {
    json!({
        "id": 1, "node_id": "MDExOlB1bGxSZXF1ZXN0MQ==", "number": number, "state": "open", "locked": false,
        "title": "Greet", "user": user("maya"), "draft": true,
        "head": {"ref": "forgehand/issue-1", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
        "base": {"ref": "main", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
    })
}

/// One payload of every event forgehand reads, as GitHub documents it
/// (each checked against the webhook schemas of GitHub's API description):
/// (event, documented name, payload, the answer it gets).
fn documented_payloads(repo: &str) -> Vec<(&'static str, &'static str, Value, u16)> {
    let sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e";
    let mut out = vec![
        (
            "issues",
            "issues-labeled",
            json!({"action": "labeled", "issue": issue(1), "label": {"id": 208045946, "name": "coding agent", "color": "f29513", "default": false}}),
            202,
        ),
        (
            "issue_comment",
            "issue-comment-created",
            json!({"action": "created", "issue": issue(1), "comment": {"id": 1, "node_id": "MDEyOklzc3VlQ29tbWVudDE=", "body": "@forgehand-bot please", "user": user("maya"), "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "author_association": "MEMBER"}}),
            202,
        ),
        (
            "pull_request",
            "pull-request-labeled",
            json!({"action": "labeled", "number": 2, "pull_request": pull_request(2), "label": {"id": 208045946, "name": "coding agent", "color": "f29513", "default": false}}),
            202,
        ),
        (
            "pull_request_review",
            "pull-request-review-submitted",
            json!({"action": "submitted", "pull_request": pull_request(2), "review": {"id": 80, "node_id": "MDE3OlB1bGxSZXF1ZXN0UmV2aWV3ODA=", "user": user("maya"), "body": "Please rename it.", "state": "changes_requested", "commit_id": sha, "author_association": "MEMBER"}}),
            202,
        ),
        (
            "pull_request_review_comment",
            "pull-request-review-comment-created",
            json!({"action": "created", "pull_request": pull_request(2), "comment": {"id": 2, "node_id": "MDI0OlB1bGxSZXF1ZXN0UmV2aWV3Q29tbWVudDI=", "path": "greet.py", "line": 1, "body": "Say world.", "user": user("maya"), "commit_id": sha}}),
            202,
        ),
        (
            "pull_request_review_thread",
            "pull-request-review-thread-resolved",
            json!({"action": "resolved", "pull_request": pull_request(2), "thread": {"node_id": "PRRT_kwDOA", "comments": []}}),
            202,
        ),
        (
            "check_run",
            "check-run-completed",
            json!({"action": "completed", "check_run": {"id": 4, "name": "test", "head_sha": sha, "status": "completed", "conclusion": "failure"}}),
            202,
        ),
        (
            "check_suite",
            "check-suite-completed",
            json!({"action": "completed", "check_suite": {"id": 5, "head_branch": "forgehand/issue-1", "head_sha": sha, "status": "completed", "conclusion": "success"}}),
            202,
        ),
        (
            "workflow_run",
            "workflow-run-completed",
            json!({"action": "completed", "workflow": {"id": 6, "name": "CI", "path": ".github/workflows/ci.yml", "state": "active"}, "workflow_run": {"id": 7, "name": "CI", "head_sha": sha, "status": "completed", "conclusion": "success"}}),
            202,
        ),
        (
            "workflow_job",
            "workflow-job-completed",
            json!({"action": "completed", "workflow_job": {"id": 8, "run_id": 7, "name": "test", "head_sha": sha, "status": "completed", "conclusion": "success"}}),
            202,
        ),
        (
            "status",
            "status",
            json!({"id": 9, "sha": sha, "name": repo, "target_url": null, "context": "ci/test", "description": null, "state": "success", "commit": {"sha": sha}, "branches": [], "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}),
            202,
        ),
        (
            "ping",
            "ping",
            json!({"zen": "Keep it logically awesome.", "hook_id": 30, "hook": {"type": "Repository", "id": 30, "name": "web", "active": true, "events": ["issues"], "config": {"content_type": "form", "insecure_ssl": "0", "url": "https://forgehand.example/webhooks/github"}}}),
            204,
        ),
    ];
    for (_, name, payload, _) in &mut out {
        payload["repository"] = repository(repo);
        if *name != "pull-request-review-thread-resolved" {
            payload["sender"] = user("maya");
        }
        forgehand_test_support::github_api::api()
            .check_webhook(name, payload)
            .unwrap();
    }
    out
}

/// A new delivery id for each delivery (a GUID, as GitHub's).
fn delivery_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("72d3162e-cc78-11e3-81ab-{:012x}", n)
}

/// Posts `payload` as GitHub does: JSON, or form encoded in the field
/// `payload`; signed over the body as sent. The answer's status.
async fn post_github(address: &str, event: &str, payload: &Value, form: bool) -> u16 {
    let json = payload.to_string();
    let (content_type, body) = if form {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &json)
            .finish();
        ("application/x-www-form-urlencoded", body)
    } else {
        ("application/json", json)
    };
    reqwest::Client::new()
        .post(format!("http://{address}/webhooks/github"))
        .header("content-type", content_type)
        .header("user-agent", "GitHub-Hookshot/044aadd")
        .header("x-github-event", event)
        .header("x-github-delivery", delivery_id())
        .header("x-hub-signature-256", github_signature(SECRET, body.as_bytes()))
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The polls of the repository's labelled items forgehand made, spelled as it spelled them.
fn polls(world: &World) -> Vec<String> {
    world
        .github
        .requests()
        .into_iter()
        .filter(|r| r.contains("/issues?state=open&labels="))
        .collect()
}

#[tokio::test]
async fn a_form_encoded_delivery_in_another_case_polls_the_repository_once_under_its_key() {
    let mut turns = edit_and_commit(Duration::ZERO);
    turns.push((text("Nothing else to change."), None));
    let (world, address) = world("1h", turns).await;
    let daemon = start_daemon(&world, &address).await;
    let issue = world.labelled_issue("Greet the world");
    let before = polls(&world).len();
    let mut payload = documented_payloads("ACME/App").remove(0).2;
    payload["issue"] = self::issue(issue);
    assert_eq!(post_github(&address, "issues", &payload, true).await, 202);
    world.wait_for_done(issue, Duration::from_secs(120)).await;
    world.assert_delivered_once(issue);
    let polls = polls(&world);
    assert_eq!(polls.len(), before + 1, "one poll for the delivery: {polls:?}");
    assert!(
        polls[before].starts_with(&format!("GET /repos/{REPO}/issues?")),
        "{polls:?}"
    );
    let requests = world.github.requests();
    assert!(
        !requests.iter().any(|r| r.contains("ACME")),
        "every request spells the repository as configured: {requests:?}"
    );
    let keys: Vec<String> = world
        .forgehand(&["tasks"])
        .lines()
        .filter(|l| l.contains(&format!(":issue:{issue}")))
        .map(str::to_owned)
        .collect();
    assert!(
        !keys.is_empty()
            && keys
                .iter()
                .all(|l| l.contains(&format!("github:{REPO}:issue:{issue}"))),
        "{keys:?}"
    );
    assert!(!daemon.log_text().contains(SECRET));
}

#[tokio::test]
async fn every_documented_event_is_answered_2xx_json_or_form_encoded() {
    let (world, address) = world("1h", vec![(text("Nothing to change."), None)]).await;
    let daemon = start_daemon(&world, &address).await;
    for form in [false, true] {
        for (event, name, payload, status) in documented_payloads(REPO) {
            let answer = post_github(&address, event, &payload, form).await;
            assert_eq!(
                answer,
                status,
                "{name} (form encoded: {form})\n{}",
                daemon.log_text()
            );
        }
    }
    let metrics = reqwest::get(format!("http://{address}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        r#"forgehand_webhook_deliveries_total{forge="github",outcome="accepted"} 22"#,
        r#"forgehand_webhook_deliveries_total{forge="github",outcome="ignored"} 2"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    // Nothing was labelled: no model was asked anything.
    assert!(world.model.all_requests().await.is_empty());
    let log = daemon.log_text();
    assert!(!log.contains("cannot be read") && !log.contains(SECRET), "{log}");
}
