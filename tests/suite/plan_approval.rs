//! Plan approval (`triggers.plan_approval`), end to end: the real daemon, a
//! fake GitHub, a real git remote, real Docker. A run that must have its
//! plan approved posts the plan and waits with no sandbox and no model
//! call; an outsider's 👍 or `go` answers nothing; a writer's 👍 (after
//! editing the checklist) starts the change from the approved plan, with
//! no new debate, and it is delivered; a writer's change request plans
//! again with the request in the planners' prompt; a plan nobody answers
//! ends the task with a comment when its time is up.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::{self, containers_of};
use forgehand_test_support::fake_github::BOT;
use forgehand_test_support::github_world::{World, DONE, REPO};
use forgehand_test_support::scripted_model::{edit_and_commit, SAGE_SYSTEM};
use serde_json::Value;
use std::time::Duration;

const PLAN: &str = "# Implementation Plan (Model A)\n\nChange the greeting in greet.py.\n\n## Checklist\n- [ ] Change the greeting\n- [ ] Commit the change\n";
const WAITING: &str = "Waiting for approval of the plan";
const PROCESSING: &str = "coding agent processing";

fn planning_calls(requests: &[Value]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| {
            r["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with(SAGE_SYSTEM))
        })
        .map(|r| {
            r["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// The id of forgehand's progress comment on `number`.
fn progress_id(world: &World, number: u64) -> u64 {
    world
        .github
        .issue(REPO, number)
        .comments
        .iter()
        .find(|c| c.1 == BOT)
        .map(|c| c.0)
        .unwrap()
}

async fn wait_for_plan(world: &World, number: u64, times: usize) {
    daemon_rig::wait_until(
        "the plan posted for approval",
        Duration::from_secs(120),
        async || {
            let requests = world.model.all_requests().await;
            world.progress_comment(number).contains(WAITING) && planning_calls(&requests).len() >= times
        },
        &world.log_path(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_waits_with_nothing_running_until_a_writer_approves_it() {
    let yaml = "triggers:\n  plan_approval: label\n  plan_approval_label: \"approve plan\"\n";
    let world = World::with_planning_yaml(edit_and_commit(Duration::ZERO), PLAN, yaml).await;
    let gh = &world.github;
    let issue = gh.open_issue(
        REPO,
        "maya",
        "Greet the world",
        "The greeting should say hello to the world.",
    );
    gh.add_label(REPO, issue, "approve plan", "maya");
    gh.add_label(REPO, issue, "coding agent", "maya");
    let mut daemon = world.start();
    wait_for_plan(&world, issue, 1).await;

    // The plan is on the comment with how to answer; nothing runs.
    let progress = world.progress_comment(issue);
    assert!(
        progress.contains("- [ ] Change the greeting\n- [ ] Commit the change"),
        "{progress}"
    );
    assert!(progress.contains(&format!("`@{BOT} go`")), "{progress}");
    let asked = world.model.all_requests().await.len();
    assert!(world.model.requests().await.is_empty(), "no agent turn");
    // Outsiders answer nothing: otto's 👍 and `go` (a mention) are ignored.
    let comment = progress_id(&world, issue);
    let from = gh.requests().len();
    gh.react(comment, "otto", "+1");
    gh.comment(REPO, issue, "otto", &format!("@{BOT} go"));
    // Proof the daemon looked at both since: the plan's reactions read twice.
    let reactions = format!("GET /repos/acme/app/issues/comments/{comment}/reactions?");
    daemon_rig::wait_until(
        "two looks at the plan's reactions",
        Duration::from_secs(60),
        async || {
            gh.requests()[from..]
                .iter()
                .filter(|r| r.starts_with(&reactions))
                .count()
                >= 2
        },
        &world.log_path(),
    )
    .await;
    assert!(
        containers_of(&world.instance).is_empty(),
        "no sandbox while waiting"
    );
    assert!(
        !daemon.log_text().contains("sandbox started"),
        "{}",
        daemon.log_text()
    );
    assert_eq!(
        world.model.all_requests().await.len(),
        asked,
        "no model call while waiting"
    );
    assert!(world.progress_comment(issue).contains(WAITING));
    assert!(gh.pulls(REPO).is_empty());
    assert!(gh.issue(REPO, issue).labels.iter().any(|l| l == PROCESSING));
    // `forgehand tasks` lists the wait from the journal, with what it waits on.
    let tasks = std::process::Command::new(env!("CARGO_BIN_EXE_forgehand"))
        .arg("--config")
        .arg(&world.config)
        .arg("tasks")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&tasks.stdout);
    assert!(
        text.contains("Waiting (1):") && text.contains("on a writer's approval of its plan"),
        "{text}"
    );

    // Maya edits the checklist, then approves with a 👍.
    let edited = world.progress_comment(issue).replace(
        "- [ ] Commit the change",
        "- [ ] Commit the change as \"Greet the world\"",
    );
    gh.edit_comment(REPO, comment, &edited);
    gh.react(comment, "maya", "+1");
    world.wait_for_done(issue, Duration::from_secs(180)).await;
    // The approval label is the maintainers' own: it stays.
    assert_eq!(
        gh.issue(REPO, issue).labels,
        vec!["approve plan".to_owned(), DONE.to_owned()]
    );
    assert_eq!(gh.pulls(REPO).len(), 1, "{}", daemon.log_text());

    // The change followed the approved plan, edits and all; no new debate.
    let all = world.model.all_requests().await;
    assert_eq!(planning_calls(&all).len(), 1, "planned once");
    let agent = world.model.requests().await;
    let first = agent[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        first.contains("## The plan") && first.contains("Commit the change as \"Greet the world\""),
        "{first}"
    );
    assert!(
        first.contains("A maintainer (@maya) approved this plan."),
        "{first}"
    );
    let progress = world.progress_comment(issue);
    assert!(
        progress.contains("following the approved plan; no new debate"),
        "{progress}"
    );
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_request_plans_again_and_an_unanswered_plan_times_out() {
    let yaml = "triggers:\n  plan_approval: always\n  plan_approval_timeout: \"8s\"\n";
    let world = World::with_planning_yaml(edit_and_commit(Duration::ZERO), PLAN, yaml).await;
    let gh = &world.github;
    let issue = world.labelled_issue("Greet the world");
    let mut daemon = world.start();
    wait_for_plan(&world, issue, 1).await;

    // Maya asks for a change: the planners see it, and the new plan waits.
    gh.comment(
        REPO,
        issue,
        "maya",
        &format!("@{BOT} keep the old greeting as a comment above the new one"),
    );
    wait_for_plan(&world, issue, 2).await;
    let all = world.model.all_requests().await;
    let calls = planning_calls(&all);
    assert!(!calls[0].contains("keep the old greeting"), "{}", calls[0]);
    assert!(
        calls[1].contains("<requested_changes>")
            && calls[1].contains("keep the old greeting as a comment above the new one")
            && calls[1].contains("<earlier_plan>"),
        "{}",
        calls[1]
    );
    assert!(world.model.requests().await.is_empty(), "no agent turn");

    // Nobody answers the new plan: the task ends with a comment.
    daemon_rig::wait_until(
        "the timeout's comment",
        Duration::from_secs(60),
        async || {
            gh.issue(REPO, issue)
                .comments
                .iter()
                .any(|c| c.1 == BOT && c.2.contains("waited 8s for approval"))
        },
        &world.log_path(),
    )
    .await;
    daemon_rig::wait_until(
        "the processing label off",
        Duration::from_secs(30),
        async || !gh.issue(REPO, issue).labels.iter().any(|l| l == PROCESSING),
        &world.log_path(),
    )
    .await;
    assert!(gh.pulls(REPO).is_empty());
    assert!(world.model.requests().await.is_empty(), "no agent turn");
    assert!(containers_of(&world.instance).is_empty());
    assert!(!daemon.log_text().contains("sandbox started"));
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_gitlab_a_writers_thumbsup_approves_and_an_outsiders_does_not() {
    use forgehand_test_support::gitlab_world::{GitLabWorld, DONE as GL_DONE, PROJECT};
    use forgehand_test_support::scripted_model::TurnModel;
    let files = [("greet.py", "print('Hello')\n")];
    // Off by default, on for this project alone.
    let yaml = "planning:\n  mode: \"single\"\ntriggers:\n  plan_approval_repositories: {\"acme/platform/app\": always}\n";
    let mut world = GitLabWorld::new(edit_and_commit(Duration::ZERO), &files, yaml).await;
    world.model = TurnModel::start_with_plan(edit_and_commit(Duration::ZERO), Some(PLAN.to_owned())).await;
    world.gitlab.add_member(PROJECT, "otto", 10);
    let gl = &world.gitlab;
    let issue = gl.open_issue(PROJECT, "maya", "Greet the world", "Say hello to the world.");
    gl.add_label(PROJECT, issue, "coding agent", "maya");
    let mut daemon = world.start();
    let progress = || {
        gl.issue(PROJECT, issue).notes.into_iter().find(|n| {
            n.author == forgehand_test_support::fake_gitlab::BOT && n.body.contains("forgehand:task")
        })
    };
    daemon_rig::wait_until(
        "the plan posted for approval",
        Duration::from_secs(120),
        async || progress().is_some_and(|n| n.body.contains(WAITING)),
        &world.log,
    )
    .await;
    let note = progress().unwrap().id;
    // A Guest's thumbsup answers nothing (once the daemon read the note's
    // awards twice since).
    let from = gl.requests().len();
    gl.award(note, "otto", "thumbsup");
    let awards = format!("/notes/{note}/award_emoji");
    daemon_rig::wait_until(
        "two looks at the plan's awards",
        Duration::from_secs(60),
        async || {
            gl.requests()[from..]
                .iter()
                .filter(|r| r.starts_with("GET ") && r.contains(&awards))
                .count()
                >= 2
        },
        &world.log,
    )
    .await;
    assert!(world.model.requests().await.is_empty(), "no agent turn");
    assert!(progress().unwrap().body.contains(WAITING));
    // A Developer's does: the change is made and delivered.
    gl.award(note, "maya", "thumbsup");
    daemon_rig::wait_until(
        "the done label",
        Duration::from_secs(180),
        async || gl.issue(PROJECT, issue).labels == vec![GL_DONE.to_owned()],
        &world.log,
    )
    .await;
    let all = world.model.all_requests().await;
    assert_eq!(planning_calls(&all).len(), 1, "planned once");
    assert!(!world.model.requests().await.is_empty());
    daemon.terminate();
}
