//! A daemon killed at each named transition of a task's run
//! (`FORGEHAND_TEST_KILL_AT`, see `src/kill_point.rs`) and started again:
//! the task ends delivered once, with one branch, one pull request, one
//! progress comment and its commit pushed once; among replicas sharing
//! `cluster.checkpoint_dir`, the other replica takes the task over and
//! ends it so. The wait on checks is killed in `ci_feedback`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::cluster_replicas::{replica_with, CLUSTER};
use forgehand_test_support::daemon_rig::{remove_containers_of, DaemonProcess};
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
    assert_delivered_once(&world, issue, &daemon.log_text());
    assert!(daemon.terminate().success());
}

/// The same among two replicas sharing their records: the first dies at
/// `point`, the second takes the task over once the Lease runs out.
async fn killed_at_and_taken_over(point: &str) {
    let kube = forgehand_test_support::fake_kube::FakeKube::start().await;
    let shared = tempfile::tempdir().unwrap();
    let cluster = format!("{CLUSTER}  checkpoint_dir: \"{}\"\n", shared.path().display());
    let world = World::with_repository(
        edit_and_commit(Duration::ZERO),
        &[("greet.py", "print('Hello')\n"), ("README.md", "# app\n")],
        &cluster,
    )
    .await;
    let kube_config = forgehand_test_support::kubeconfig::write_kubeconfig(world.dir.path(), &kube.url());
    let issue = world.labelled_issue("Greet the world");
    let kill = [("FORGEHAND_TEST_KILL_AT", point.to_owned())];
    let mut first = replica_with(&world, &kube_config, 1, &kill);
    let status = tokio::task::block_in_place(|| first.wait(Duration::from_secs(180)));
    assert!(!status.success(), "the first replica died at {point}: {status:?}");
    let mut second = replica_with(&world, &kube_config, 2, &[]);
    world.wait_for_end(issue).await;
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    assert!(
        log.contains(&format!("dying at the kill point {point:?}")),
        "{log}"
    );
    assert!(
        log.contains("took over a claim whose holder went silent"),
        "{log}"
    );
    assert_delivered_once(&world, issue, &log);
    assert!(second.terminate().success());
    // The dead replica's sandbox is its own (another daemon never reaps it).
    remove_containers_of(&format!("{}-1", world.instance));
}

/// One branch, one pull request, one progress comment, the commit pushed once.
fn assert_delivered_once(world: &World, issue: u64, log: &str) {
    world.assert_delivered_once(issue);
    let commits = git_http::log(&world.bare, "forgehand/issue-1");
    assert_eq!(
        commits.iter().filter(|s| *s == "Greet the whole world").count(),
        1,
        "the commit pushed once: {commits:?}\n{log}"
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_checkpoint_is_taken_over_and_the_task_delivered_once() {
    killed_at_and_taken_over(forgehand::kill_point::CHECKPOINT_TAKEN_OUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_after_the_push_before_its_record_is_taken_over_and_the_task_delivered_once() {
    killed_at_and_taken_over(forgehand::kill_point::PUSHED).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_after_the_pull_request_opened_is_taken_over_and_the_task_delivered_once() {
    killed_at_and_taken_over(forgehand::kill_point::CHANGE_OPENED).await;
}
