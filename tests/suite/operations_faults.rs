//! Faults survived, end to end with the real daemon and real Docker: a
//! forge failing 30 % of its calls (some after doing the work) with
//! secondary-rate-limit bursts, and model providers in 429/529/503 storms
//! with malformed tool calls. Every task ends once, nothing is doubled.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::fake_github;
use forgehand_test_support::github_world;
use forgehand_test_support::scripted_model;

use daemon_rig::{containers_of, wait_until};
use fake_github::BOT;
use github_world::{World, DONE, REPO};
use scripted_model::{call, edit_and_commit, Reply};
use serde_json::json;
use std::time::Duration;

const PROCESSING: &str = "coding agent processing";
const FAILED: &str = "coding agent failed";

fn open_issues(world: &World, count: usize) -> Vec<u64> {
    (0..count)
        .map(|i| world.labelled_issue(&format!("Greet the world ({i})")))
        .collect()
}

async fn wait_for_all(world: &World, issues: &[u64], limit: Duration) {
    wait_until(
        "every task to end",
        limit,
        async || {
            // Ended: the ending label is on and the processing one is off.
            issues.iter().all(|&n| {
                let labels = world.github.issue(REPO, n).labels;
                labels.iter().any(|l| l == DONE || l == FAILED) && !labels.iter().any(|l| l == PROCESSING)
            })
        },
        &world.log_path(),
    )
    .await;
}

/// Exactly one progress comment, one draft PR, one claim and one ending
/// for `issue`, and it was delivered.
fn assert_delivered_once(world: &World, issue: u64, log: &str) {
    let gh = &world.github;
    let item = gh.issue(REPO, issue);
    assert_eq!(
        item.labels,
        vec![DONE.to_owned()],
        "issue #{issue}: {:?}\n{log}",
        item.comments
    );
    let bot: Vec<_> = item.comments.iter().filter(|c| c.1 == BOT).collect();
    assert_eq!(bot.len(), 1, "issue #{issue}: one progress comment, got {bot:?}");
    let head = format!("forgehand/issue-{issue}");
    let pulls = gh.pulls(REPO).into_iter().filter(|p| p.head == head).count();
    assert_eq!(pulls, 1, "issue #{issue}: one pull request");
    let events = gh.label_events(REPO, issue);
    let count = |event: &str, label: &str| events.iter().filter(|(e, l)| e == event && l == label).count();
    assert_eq!(
        count("labeled", PROCESSING),
        1,
        "issue #{issue}: claimed once: {events:?}"
    );
    assert_eq!(
        count("labeled", DONE),
        1,
        "issue #{issue}: ended once: {events:?}"
    );
    assert_eq!(
        count("labeled", FAILED),
        0,
        "issue #{issue}: never failed: {events:?}"
    );
    assert!(
        bot[0].2.contains("/pull/"),
        "issue #{issue}: the comment links the PR: {}",
        bot[0].2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forge_failing_thirty_percent_of_calls_doubles_nothing() {
    // The client waits 1 s for an answer; a "timed out" one comes after 3 s.
    let world = World::with_settings(
        edit_and_commit(Duration::from_millis(100)),
        "  max_concurrent_tasks: 2",
        "  api_timeout: \"1s\"",
    )
    .await;
    let issues = open_issues(&world, 4);
    world.github.start_chaos(11, 0.3, Duration::from_secs(3));
    let mut daemon = world.start();
    wait_for_all(&world, &issues, Duration::from_secs(600)).await;
    let faults = world.github.stop_chaos();
    let log = daemon.log_text();
    for &issue in &issues {
        assert_delivered_once(&world, issue, &log);
    }
    // The faults really happened, of every kind.
    assert!(faults.refused > 0, "{faults:?}");
    assert!(faults.lost_answers > 0, "{faults:?}");
    assert!(faults.timeouts > 0, "{faults:?}");
    assert!(faults.secondary_limits > 0, "{faults:?}");
    assert!(daemon.terminate().success());
    assert!(
        containers_of(&world.instance).is_empty(),
        "no container left behind"
    );
}

/// A malformed tool call (its arguments are not JSON), then the usual work.
fn malformed_then_work() -> Vec<(Reply, Option<Duration>)> {
    let mut turns = vec![(
        Reply::ToolCalls(vec![(
            "text_editor_view".into(),
            "{\"path\": \"/workspace/project/greet.py\"".into(),
        )]),
        None,
    )];
    turns.push((
        call(
            "text_editor_view",
            json!({"path": "/workspace/project/nothing/here.py"}),
        ),
        None,
    ));
    turns.extend(edit_and_commit(Duration::from_millis(100)));
    turns
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_storms_are_waited_out_or_end_in_a_clean_failure() {
    let world = World::with_settings(malformed_then_work(), "  max_concurrent_tasks: 2", "").await;
    // Retries as shipped would wait minutes; the same policy, faster.
    let config = std::fs::read_to_string(&world.config)
        .unwrap()
        .replace("    max_retries: 1\n", "    max_retries: 9\n");
    std::fs::write(&world.config, config).unwrap();

    // 1. A storm of 429 (with Retry-After), 529 and 503 on 9 requests in a
    //    row: waited out, and the tasks finish.
    world.model.storm(9).await;
    let issues = open_issues(&world, 2);
    let mut daemon = world.start();
    wait_for_all(&world, &issues, Duration::from_secs(300)).await;
    let log = daemon.log_text();
    for &issue in &issues {
        assert_delivered_once(&world, issue, &log);
    }
    let statuses = world.model.storm_statuses().await;
    for status in [429, 529, 503] {
        assert!(statuses.contains(&status), "the storm had {statuses:?}");
    }
    // The malformed call was answered with an error the model can act on.
    let requests = world.model.requests().await;
    assert!(
        requests.iter().any(|r| r.to_string().contains("not valid JSON")),
        "the model heard about its malformed call"
    );

    // 2. A storm that does not end: the task fails cleanly, with a comment
    //    saying why, and the daemon goes on.
    world.model.storm(u32::MAX).await;
    let stormed = open_issues(&world, 1)[0];
    wait_for_all(&world, &[stormed], Duration::from_secs(300)).await;
    let item = world.github.issue(REPO, stormed);
    assert_eq!(item.labels, vec![FAILED.to_owned()]);
    let bot: Vec<_> = item.comments.iter().filter(|c| c.1 == BOT).collect();
    assert_eq!(bot.len(), 1, "{bot:?}");
    assert!(
        bot[0].2.contains("model"),
        "the comment says the model failed: {}",
        bot[0].2
    );
    world.model.storm(0).await;
    let after = open_issues(&world, 1)[0];
    wait_for_all(&world, &[after], Duration::from_secs(300)).await;
    assert_delivered_once(&world, after, &daemon.log_text());
    assert!(daemon.terminate().success(), "the daemon never crashed");
}
