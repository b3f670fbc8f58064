//! Webhook deliveries as doorbells, end to end against the fake GitHub
//! delivering signed webhooks: a label or a mention starts at once when
//! polls are an hour apart; a bad signature is refused with a log line and
//! a counter; a missed delivery is caught by the next poll; a delivery
//! repeated, and seen by a poll too, does nothing twice.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::{self, DaemonProcess};
use forgehand_test_support::fake_github::BOT;
use forgehand_test_support::github_world::{World, REPO};
use forgehand_test_support::mcp_client;
use forgehand_test_support::scripted_model::{edit_and_commit, text};
use forgehand_test_support::webhook_sender::{github_signature, WebhookSender};
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
    let hooks = world
        .github
        .send_webhooks_to(&format!("http://{address}/webhooks/github"), SECRET);
    (daemon, hooks)
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
    let signed = post(github_signature(SECRET, body.as_bytes())).await.unwrap();
    assert_eq!(signed.status(), 202);
    tokio::time::sleep(Duration::from_secs(2)).await;
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
    // A few more polls and deliveries (of forgehand's own comments and labels).
    tokio::time::sleep(Duration::from_secs(5)).await;
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
