//! A daemon killed at each named transition of a task's run
//! (`FORGEHAND_TEST_KILL_AT`, see `src/kill_point.rs`) and started again:
//! the task ends delivered once, with one branch, one pull request, one
//! progress comment and its commit pushed once. The wait on checks is
//! killed in `ci_feedback`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::DaemonProcess;
use forgehand_test_support::git_http;
use forgehand_test_support::github_world::World;
use forgehand_test_support::scripted_model::edit_and_commit;
use std::time::Duration;

/// Runs the usual greeting task with the daemon dying at `point`, then
/// again to its end; checks nothing was lost or doubled.
async fn killed_at(point: &str) {
    let world = World::new(edit_and_commit(Duration::ZERO)).await;
    let issue = world.labelled_issue("Greet the world");
    let mut env = world.env();
    env.push(("FORGEHAND_TEST_KILL_AT", point.to_owned()));
    let mut dying = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    let status = tokio::task::block_in_place(|| dying.wait(Duration::from_secs(180)));
    assert!(!status.success(), "the daemon died at {point}: {status:?}");
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    assert!(
        log.contains(&format!("dying at the kill point {point:?}")),
        "{log}"
    );
    let mut daemon = world.start();
    world.wait_for_end(issue).await;
    world.assert_delivered_once(issue);
    let commits = git_http::log(&world.bare, "forgehand/issue-1");
    assert_eq!(
        commits.iter().filter(|s| *s == "Greet the whole world").count(),
        1,
        "the commit pushed once: {commits:?}\n{}",
        daemon.log_text()
    );
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_tools_ran_before_the_checkpoint() {
    killed_at(forgehand::kill_point::TOOLS_RAN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_checkpoint_after_its_files_left_the_sandbox() {
    killed_at(forgehand::kill_point::CHECKPOINT_TAKEN_OUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_push_before_its_record() {
    killed_at(forgehand::kill_point::PUSHED).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_pull_request_opened_before_its_record() {
    killed_at(forgehand::kill_point::CHANGE_OPENED).await;
}
