//! Maintainers steer a running task with labels: `coding agent paused` holds
//! it before its next model turn (the task holds no sandbox meanwhile and
//! goes on from its last step), and removing `coding agent processing`
//! stops it without pushing anything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::fake_github;
use forgehand_test_support::git_http;
use forgehand_test_support::github_world;
use forgehand_test_support::scripted_model;

use daemon_rig::{containers_of, wait_until, DaemonProcess};
use fake_github::BOT;
use github_world::{World, DONE, REPO};
use scripted_model::edit_and_commit;
use std::time::Duration;

const PROCESSING: &str = "coding agent processing";

/// A daemon working on one issue, its first model turn under way (it takes 2 s).
async fn working_on_one_issue() -> (World, DaemonProcess, u64) {
    let mut turns = edit_and_commit(Duration::ZERO);
    turns[0].1 = Some(Duration::from_secs(2));
    let world = World::new(turns).await;
    let gh = &world.github;
    let issue = gh.open_issue(REPO, "maya", "Greet the world", "Say hello to the world.");
    gh.add_label(REPO, issue, "coding agent", "maya");
    let daemon = world.start();
    wait_until(
        "the first model request",
        Duration::from_secs(120),
        async || !world.model.requests().await.is_empty(),
        &world.log_path(),
    )
    .await;
    (world, daemon, issue)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_paused_label_holds_the_task_until_it_is_removed() {
    let (world, mut daemon, issue) = working_on_one_issue().await;
    let gh = &world.github;
    let log = world.log_path();
    gh.add_label(REPO, issue, "coding agent paused", "maya");
    wait_until(
        "the pause to be noticed",
        Duration::from_secs(30),
        async || {
            daemon
                .log_text()
                .contains("paused by the \"coding agent paused\" label")
        },
        &log,
    )
    .await;
    // Held: no further model turn while the label is on, and no sandbox.
    wait_until(
        "the paused task's sandbox to go",
        Duration::from_secs(30),
        async || containers_of(&world.instance).is_empty(),
        &log,
    )
    .await;
    wait_until(
        "the task to end paused",
        Duration::from_secs(30),
        async || daemon.log_text().contains("task ended: Paused"),
        &log,
    )
    .await;
    assert_eq!(world.model.requests().await.len(), 1);
    // The issue says so.
    let progress = gh
        .issue(REPO, issue)
        .comments
        .into_iter()
        .find(|c| c.1 == BOT)
        .unwrap()
        .2;
    assert!(
        progress.contains("**Status:** Paused before the next model turn"),
        "{progress}"
    );
    gh.remove_label(REPO, issue, "coding agent paused", "maya");

    wait_until(
        "the done label",
        Duration::from_secs(120),
        async || gh.issue(REPO, issue).labels.contains(&DONE.to_owned()),
        &log,
    )
    .await;
    assert_eq!(world.model.requests().await.len(), 3);
    assert_eq!(gh.pulls(REPO).len(), 1);
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_processing_label_stops_the_task_and_nothing_is_pushed() {
    let (world, mut daemon, issue) = working_on_one_issue().await;
    let gh = &world.github;
    let log = world.log_path();
    gh.remove_label(REPO, issue, PROCESSING, "maya");
    wait_until(
        "the stop to be reported",
        Duration::from_secs(60),
        async || {
            gh.issue(REPO, issue)
                .comments
                .iter()
                .any(|c| c.1 == BOT && c.2.contains("**Stopped.**"))
        },
        &log,
    )
    .await;
    assert_eq!(
        world.model.requests().await.len(),
        1,
        "no model turn after the stop"
    );
    assert!(gh.pulls(REPO).is_empty());
    assert!(
        git_http::log(&world.bare, "forgehand/issue-1").is_empty(),
        "nothing pushed"
    );
    let labels = gh.issue(REPO, issue).labels;
    assert!(
        !labels.iter().any(|l| l.starts_with("coding agent")),
        "{labels:?}"
    );
    wait_until(
        "the sandbox to go",
        Duration::from_secs(30),
        async || containers_of(&world.instance).is_empty(),
        &log,
    )
    .await;
    assert!(daemon.terminate().success());
}
