//! The daemon killed with SIGKILL at several points of one task and started
//! again: the task is resumed from its journal, and in the end there is
//! exactly one pull request, one progress comment, and no container left.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::fake_github;
use forgehand_test_support::git_http;
use forgehand_test_support::github_world;
use forgehand_test_support::scripted_model;

use daemon_rig::{containers_of, wait_until};
use fake_github::BOT;
use github_world::{World, DONE, REPO};
use scripted_model::edit_and_commit;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_claim_mid_run_and_mid_pull_request_the_task_ends_once() {
    let world = World::with_daemon_settings(
        edit_and_commit(Duration::from_millis(500)),
        "  max_task_attempts: 6",
    )
    .await;
    let gh = &world.github;
    let log = world.log_path();
    let issue = gh.open_issue(
        REPO,
        "maya",
        "Greet the world",
        "The greeting should say hello to the world.",
    );
    gh.add_label(REPO, issue, "coding agent", "maya");
    let bot_comments = || world.bot_comment_count(issue);

    // 1. Killed right after the claim posted the progress comment.
    let mut daemon = world.start();
    wait_until(
        "the progress comment",
        Duration::from_secs(60),
        async || bot_comments() == 1,
        &log,
    )
    .await;
    daemon.kill9();

    // 2. Killed while the model works, with the sandbox running.
    let before = world.model.requests().await.len();
    let mut daemon = world.start();
    wait_until(
        "a model request after the restart",
        Duration::from_secs(120),
        async || world.model.requests().await.len() > before,
        &log,
    )
    .await;
    daemon.kill9();
    assert_eq!(
        containers_of(&world.instance).len(),
        1,
        "the killed daemon left its sandbox behind"
    );

    // 3. Killed after the pull request was created but before the answer arrived.
    gh.set_pull_delay(Some(Duration::from_secs(60)));
    let mut daemon = world.start();
    wait_until(
        "the pull request to be requested",
        Duration::from_secs(180),
        async || {
            gh.requests()
                .iter()
                .any(|r| r.starts_with("POST /repos/acme/app/pulls"))
        },
        &log,
    )
    .await;
    daemon.kill9();
    gh.set_pull_delay(None);
    assert_eq!(
        gh.pulls(REPO).len(),
        1,
        "the forge holds the pull request the daemon never heard back about"
    );

    // 4. Started again, it finishes the task without doing anything twice.
    let mut daemon = world.start();
    world.wait_for_end(issue).await;
    let item = gh.issue(REPO, issue);
    assert_eq!(item.labels, vec![DONE.to_owned()], "{:?}", item.comments);
    assert_eq!(gh.pulls(REPO).len(), 1, "exactly one pull request");
    assert_eq!(bot_comments(), 1, "exactly one progress comment");
    let progress = item.comments.iter().find(|c| c.1 == BOT).unwrap();
    assert!(
        progress.2.contains("https://github.example/acme/app/pull/2"),
        "{}",
        progress.2
    );
    assert_eq!(
        git_http::log(&world.bare, "forgehand/issue-1"),
        vec!["Greet the whole world".to_owned(), "initial".to_owned()],
        "one commit, pushed once"
    );
    assert!(daemon.terminate().success());
    assert!(
        containers_of(&world.instance).is_empty(),
        "no container left behind"
    );
    let text = daemon.log_text();
    assert!(
        text.matches("resuming an unfinished task").count() >= 3,
        "every restart resumed the journalled task"
    );
    assert!(text.contains("removed sandboxes left by an earlier run"));
    assert!(text.contains("already pushed before a restart"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_three_times_during_eight_concurrent_tasks_each_ends_once() {
    let world = World::with_daemon_settings(
        edit_and_commit(Duration::from_secs(2)),
        "  max_concurrent_tasks: 8\n  max_task_attempts: 6",
    )
    .await;
    let gh = &world.github;
    let log = world.log_path();
    let issues: Vec<u64> = (0..8)
        .map(|i| world.labelled_issue(&format!("Greet the world ({i})")))
        .collect();
    let bot_comments = |n: u64| world.bot_comment_count(n);
    let commented = || issues.iter().filter(|&&n| bot_comments(n) > 0).count();

    // 1. Killed while the claims are being made.
    let mut daemon = world.start();
    wait_until(
        "a few claims",
        Duration::from_secs(120),
        async || commented() >= 3,
        &log,
    )
    .await;
    daemon.kill9();

    // 2. Killed while the models work in eight sandboxes.
    let before = world.model.requests().await.len();
    let mut daemon = world.start();
    wait_until(
        "model requests after the restart",
        Duration::from_secs(180),
        async || world.model.requests().await.len() >= before + 4,
        &log,
    )
    .await;
    daemon.kill9();

    // 3. Killed while pull requests are being opened.
    let mut daemon = world.start();
    wait_until(
        "a first pull request",
        Duration::from_secs(240),
        async || !gh.pulls(REPO).is_empty(),
        &log,
    )
    .await;
    daemon.kill9();

    // After the last restart, every task ends, each exactly once.
    let mut daemon = world.start();
    for &n in &issues {
        world.wait_for_end(n).await;
    }
    wait_until(
        "every processing label removed",
        Duration::from_secs(60),
        async || {
            issues
                .iter()
                .all(|&n| gh.issue(REPO, n).labels == vec![DONE.to_owned()])
        },
        &log,
    )
    .await;
    for &n in &issues {
        assert_eq!(bot_comments(n), 1, "issue #{n}: one progress comment");
        let head = format!("forgehand/issue-{n}");
        assert_eq!(
            gh.pulls(REPO).iter().filter(|p| p.head == head).count(),
            1,
            "issue #{n}: one pull request"
        );
        let events = gh.issue(REPO, n).events;
        let done = events.iter().filter(|e| e.0 == "labeled" && e.2 == DONE).count();
        assert_eq!(done, 1, "issue #{n}: ended once: {events:?}");
        // The change is on the branch. A kill between the push and its
        // journal entry makes the resumed run commit its change again on
        // top (pushes are at least once); the task still ends once.
        let commits = git_http::log(&world.bare, &head);
        assert!(
            commits.len() >= 2
                && commits[..commits.len() - 1]
                    .iter()
                    .all(|c| c == "Greet the whole world"),
            "issue #{n}: the model's commit(s) on the branch: {commits:?}"
        );
    }
    assert!(daemon.terminate().success());
    assert!(
        containers_of(&world.instance).is_empty(),
        "no container left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_the_same_state_folder_refuses_to_start() {
    let world = World::with_daemon_settings(edit_and_commit(Duration::from_millis(10)), "").await;
    let log = world.log_path();
    let first = world.start();
    wait_until(
        "the first daemon owns its state folder",
        Duration::from_secs(60),
        async || first.log_text().contains("state folder and sandboxes owned"),
        &log,
    )
    .await;
    let second_log = world.dir.path().join("second.log");
    let env = world.env();
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, v.clone())).collect();
    let mut second = daemon_rig::DaemonProcess::start(&world.config, &["run"], &env, &second_log);
    let status = second.wait(Duration::from_secs(60));
    let text = second.log_text();
    assert!(!status.success(), "{text}");
    assert!(
        text.contains("another forgehand daemon")
            && text.contains(&format!("pid {}", first.pid()))
            && text.contains("daemon.state_dir"),
        "{text}"
    );
    assert!(
        !first.log_text().contains("another forgehand daemon"),
        "the first daemon goes on"
    );
}
