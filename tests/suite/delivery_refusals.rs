//! What real forges answer that a task must get through, end to end on the
//! fake GitHub with the real daemon, a real git remote and real Docker: a
//! repository that refuses draft pull requests, a remote that refuses
//! workflow files from a token without the `workflow` scope, forgehand's
//! own protected paths, and files the repository's tests leave behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::containers_of;
use forgehand_test_support::fake_github::BOT;
use forgehand_test_support::git_http;
use forgehand_test_support::github_world::{World, DONE, REPO};
use forgehand_test_support::scripted_model::{call, edit_and_commit, text, Reply};
use serde_json::json;
use std::time::Duration;

const FILES: [(&str, &str); 2] = [("greet.py", "print('Hello')\n"), ("README.md", "# app\n")];

/// The model fixes the greeting and adds a CI workflow, in one commit.
fn greeting_and_workflow() -> Vec<(Reply, Option<Duration>)> {
    vec![
        (
            call(
                "command_executor_execute_command",
                json!({"command": "mkdir -p .github/workflows && printf 'on: push\\njobs: {}\\n' > .github/workflows/ci.yml && sed -i 's/Hello/Hello, world/' greet.py && git add -A && git commit -qm 'Greet the world, with CI'"}),
            ),
            None,
        ),
        (text("Changed the greeting and added a CI workflow."), None),
    ]
}

fn progress(world: &World, issue: u64) -> String {
    let comments = world.github.issue(REPO, issue).comments;
    comments
        .iter()
        .find(|c| c.1 == BOT)
        .map(|c| c.2.clone())
        .unwrap_or_default()
}

fn assert_done(world: &World, issue: u64) {
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{}",
        progress(world, issue)
    );
}

fn open_task(world: &World) -> u64 {
    let gh = &world.github;
    let issue = gh.open_issue(
        REPO,
        "maya",
        "Greet the world",
        "Say hello to the world, and add CI.",
    );
    gh.add_label(REPO, issue, "coding agent", "maya");
    issue
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_without_drafts_gets_a_ready_pull_request_marked_as_work_in_progress() {
    let mut turns = edit_and_commit(Duration::ZERO);
    turns.extend(edit_and_commit(Duration::ZERO));
    let world = World::new(turns).await;
    world.github.refuse_drafts(REPO);
    let issue = open_task(&world);
    let mut daemon = world.start();
    world.wait_for_end(issue).await;

    assert_done(&world, issue);
    let pulls = world.github.pulls(REPO);
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let pr = &pulls[0];
    assert!(!pr.draft);
    assert!(pr.title.starts_with("[WIP] "), "{}", pr.title);
    assert!(pr.body.contains("Work in progress by forgehand"), "{}", pr.body);
    assert!(pr.body.contains(&format!("Closes #{issue}")), "{}", pr.body);
    let labels = world.github.issue(REPO, pr.number).labels;
    assert!(
        labels.contains(&"forgehand: work in progress".to_owned()),
        "{labels:?}"
    );
    let said = progress(&world, issue);
    assert!(said.contains("does not support draft pull requests"), "{said}");

    // The next task there remembers: no draft is asked for again.
    let next = open_task(&world);
    world.wait_for_end(next).await;
    assert_done(&world, next);
    let opened: Vec<String> = world
        .github
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("POST /repos/acme/app/pulls"))
        .collect();
    assert_eq!(
        opened.len(),
        3,
        "one refused draft, then two ready pull requests: {opened:?}"
    );
    let pulls = world.github.pulls(REPO);
    assert!(
        pulls.iter().all(|p| !p.draft && p.title.starts_with("[WIP] ")),
        "{pulls:?}"
    );
    assert!(daemon.terminate().success());
    assert!(containers_of(&world.instance).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_files_the_forge_refuses_are_left_out_and_the_rest_is_delivered() {
    let yaml = "delivery:\n  allow_protected_paths: true\n";
    let mut turns = greeting_and_workflow();
    turns.extend(greeting_and_workflow());
    let world = World::with_repository(turns, &FILES, yaml).await;
    git_http::refuse_workflow_files(&world.bare);
    let issue = open_task(&world);
    let mut daemon = world.start();
    world.wait_for_end(issue).await;

    assert_done(&world, issue);
    // Refused once, never sent again.
    let refused = git_http::refused_pushes(&world.bare);
    assert_eq!(
        refused,
        vec!["refs/heads/forgehand/issue-1 .github/workflows/ci.yml".to_owned()]
    );
    let files = git_http::files_of(&world.bare, "forgehand/issue-1");
    assert!(!files.iter().any(|f| f.starts_with(".github/")), "{files:?}");
    let pr = &world.github.pulls(REPO)[0];
    assert!(pr.draft);
    for said in [&pr.body, &progress(&world, issue)] {
        assert!(said.contains("`.github/workflows/ci.yml`"), "{said}");
        assert!(said.contains("the `workflow` scope"), "{said}");
    }
    assert!(
        pr.body.contains("<details>") && pr.body.contains("```diff"),
        "{}",
        pr.body
    );
    assert!(pr.body.contains("+on: push"), "{}", pr.body);
    // The model's asks were only the work: no rebase was asked for.
    assert_eq!(world.model.requests().await.len(), 2);

    // The next task in the repository leaves them out before it pushes:
    // the refused push is never sent again.
    let next = open_task(&world);
    world.wait_for_end(next).await;
    assert_done(&world, next);
    assert_eq!(git_http::refused_pushes(&world.bare).len(), 1);
    let pulls = world.github.pulls(REPO);
    let second = pulls.iter().find(|p| p.number != pr.number).unwrap();
    assert!(second.body.contains("the `workflow` scope"), "{}", second.body);
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_touching_protected_paths_delivers_the_rest_with_their_diff() {
    let world = World::with_repository(greeting_and_workflow(), &FILES, "").await;
    let issue = open_task(&world);
    let mut daemon = world.start();
    world.wait_for_end(issue).await;

    assert_done(&world, issue);
    let files = git_http::files_of(&world.bare, "forgehand/issue-1");
    assert!(!files.iter().any(|f| f.starts_with(".github/")), "{files:?}");
    assert_eq!(
        git_http::log(&world.bare, "forgehand/issue-1"),
        vec!["Greet the world, with CI".to_owned(), "initial".to_owned()]
    );
    let pr = &world.github.pulls(REPO)[0];
    for said in [&pr.body, &progress(&world, issue)] {
        assert!(said.contains("`.github/workflows/ci.yml`"), "{said}");
        assert!(said.contains("delivery.protected_paths"), "{said}");
    }
    assert!(
        pr.body.contains("```diff") && pr.body.contains("+on: push"),
        "{}",
        pr.body
    );
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_test_command_writes_never_reaches_the_branch() {
    let files = [
        ("greet.py", "print('Hello')\n"),
        (
            ".forgehand.yaml",
            "test: grep -q 'Hello, world' greet.py && mkdir -p tests/__pycache__ && echo bytecode > tests/__pycache__/test_readme.cpython-311.pyc && echo data > .coverage\n",
        ),
    ];
    // The model edits and does not commit: forgehand commits for it.
    let turns = vec![
        (
            call(
                "text_editor_str_replace",
                json!({"path": "/workspace/project/greet.py", "old_str": "Hello", "new_str": "Hello, world"}),
            ),
            None,
        ),
        (text("Changed the greeting."), None),
    ];
    let world = World::with_repository(turns, &files, "").await;
    let issue = open_task(&world);
    let mut daemon = world.start();
    world.wait_for_end(issue).await;

    assert_done(&world, issue);
    let pushed = git_http::files_of(&world.bare, "forgehand/issue-1");
    assert_eq!(pushed, vec![".forgehand.yaml".to_owned(), "greet.py".to_owned()]);
    let pr = &world.github.pulls(REPO)[0];
    assert!(pr.body.contains("passed in the sandbox"), "{}", pr.body);
    assert!(
        pr.body
            .contains("forgehand committed what the model left uncommitted, on its behalf: greet.py"),
        "{}",
        pr.body
    );
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_refused_workflow_files_only_fails_once_naming_the_scope() {
    let turns = vec![
        (
            call(
                "command_executor_execute_command",
                json!({"command": "mkdir -p .github/workflows && printf 'on: push\\n' > .github/workflows/ci.yml && git add -A && git commit -qm 'Add CI'"}),
            ),
            None,
        ),
        (text("Added a CI workflow."), None),
    ];
    let yaml = "delivery:\n  allow_protected_paths: true\n";
    let world = World::with_repository(turns, &FILES, yaml).await;
    git_http::refuse_workflow_files(&world.bare);
    let issue = open_task(&world);
    let mut daemon = world.start();
    world.wait_for_end(issue).await;

    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec!["coding agent failed".to_owned()]
    );
    assert_eq!(git_http::refused_pushes(&world.bare).len(), 1);
    let said = progress(&world, issue);
    assert!(
        said.contains("the forge refuses the change's only files (.github/workflows/ci.yml) without the `workflow` scope"),
        "{said}"
    );
    assert!(world.github.pulls(REPO).is_empty());
    assert!(daemon.terminate().success());
}
