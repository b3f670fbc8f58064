//! SIGHUP reloads the config without dropping running tasks: a task in
//! the middle of its run finishes with the config it started with, new
//! work follows the new config (here a new trigger label), and a bad new
//! config is refused with the usual error while the old one stays.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::github_world;
use forgehand_test_support::scripted_model;

use github_world::{World, DONE, REPO};
use scripted_model::edit_and_commit;
use std::time::Duration;

fn hangup(daemon: &daemon_rig::DaemonProcess) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &daemon.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_config_and_keeps_running_tasks() {
    // The model thinks for a while on one turn: the reload lands mid-task.
    let world = World::new(edit_and_commit(Duration::from_secs(6))).await;
    let gh = &world.github;
    let first = gh.open_issue(
        REPO,
        "maya",
        "Greet the world",
        "The greeting should say hello to the world.",
    );
    gh.add_label(REPO, first, "coding agent", "maya");
    let mut daemon = world.start();
    daemon_rig::wait_until(
        "the first task's claim",
        Duration::from_secs(60),
        async || {
            gh.issue(REPO, first)
                .labels
                .iter()
                .any(|l| l == "coding agent processing")
        },
        &world.log_path(),
    )
    .await;

    // A bad config first: refused, named, and the daemon goes on.
    let good = std::fs::read_to_string(&world.config).unwrap();
    std::fs::write(&world.config, format!("{good}\nlabels:\n  trigger: \"\"\n")).unwrap();
    hangup(&daemon);
    daemon_rig::wait_until(
        "the refusal in the log",
        Duration::from_secs(30),
        async || daemon.log_text().contains("config reload refused"),
        &world.log_path(),
    )
    .await;
    let log = daemon.log_text();
    let refusal = log.lines().find(|l| l.contains("config reload refused")).unwrap();
    assert!(refusal.contains("labels.trigger"), "{refusal}");

    // Then a new trigger label.
    std::fs::write(
        &world.config,
        format!("{good}\nlabels:\n  trigger: \"forgehand please\"\n"),
    )
    .unwrap();
    hangup(&daemon);
    daemon_rig::wait_until(
        "the reload in the log",
        Duration::from_secs(30),
        async || daemon.log_text().contains("config reloaded"),
        &world.log_path(),
    )
    .await;

    // The running task was not dropped.
    world.wait_for_end(first).await;
    assert!(
        gh.issue(REPO, first).labels.contains(&DONE.to_owned()),
        "{}",
        daemon.log_text()
    );

    // New work follows the new config.
    let second = gh.open_issue(REPO, "maya", "Say goodbye", "Add a goodbye line.");
    gh.add_label(REPO, second, "forgehand please", "maya");
    daemon_rig::wait_until(
        "the second task's claim under the new trigger",
        Duration::from_secs(60),
        async || {
            let labels = gh.issue(REPO, second).labels;
            !labels.iter().any(|l| l == "forgehand please")
                && labels.iter().any(|l| l == "coding agent processing" || l == DONE)
        },
        &world.log_path(),
    )
    .await;
    assert!(daemon.terminate().success());
    assert!(!daemon.log_text().contains("panicked"));
}
