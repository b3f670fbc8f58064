//! CI results fed back, end to end against the fake GitHub's Actions: a
//! task waiting on its checks holds no slot and no sandbox; a failing
//! check's log goes to the model in a new sandbox on the pushed branch,
//! going on from the conversation, its fix is pushed and the checks go
//! green; a check that passes on re-run is
//! reported flaky, not fixed; checks that never start are said plainly
//! after `delivery.ci_wait`. A failing log that prints credentials (a
//! GitHub token, a GitLab token, an AWS key) has them masked before the
//! model reads it, on both forges: none reaches the model's request, the
//! transcript or a comment, and the comment says what was masked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::fake_github::{Commit, JobEnd};
use forgehand_test_support::github_world::{World, REPO, TOKEN};
use forgehand_test_support::scripted_model::{call, text, Reply};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const FILES: [(&str, &str); 3] = [
    ("greet.py", "print('Hello')\n"),
    ("test_greet.py", "def test_greets_the_world(): ...\n"),
    (
        ".github/workflows/ci.yml",
        "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n",
    ),
];

fn edit(old: &str, new: &str, message: &str, summary: &str) -> Vec<(Reply, Option<Duration>)> {
    vec![
        (
            call(
                "text_editor_str_replace",
                json!({"path": "/workspace/project/greet.py", "old_str": old, "new_str": new}),
            ),
            None,
        ),
        (
            call(
                "command_executor_execute_command",
                json!({"command": format!("git add -A && git commit -qm '{message}'")}),
            ),
            None,
        ),
        (text(summary), None),
    ]
}

async fn world(turns: Vec<(Reply, Option<Duration>)>, ci_wait: &str) -> World {
    World::with_repository(
        turns,
        &FILES,
        &format!("delivery:\n  ci_poll: \"1s\"\n  ci_wait: \"{ci_wait}\"\n"),
    )
    .await
}

/// Credentials a careless job prints, none of them forgehand's own: they
/// are found by their format alone. (Assembled from parts so that no
/// scanner takes this file for a leak.)
const LEAKED: [(&str, &str); 4] = [
    (
        "github-pat",
        concat!("gh", "p_", "R3gistryT0kenPrintedByAJobStep0123ab"),
    ),
    ("gitlab-pat", concat!("gl", "pat-", "J0bTraceLeaksThisT0ken")),
    ("aws-access-token", concat!("AK", "IA", "Z2XQ3W4E5R6T7Y2U")),
    (
        "aws-secret-access-key",
        concat!("wJalrXUtnFEMI/K7MDENG/", "bPxRfiCYzXq8Lm3nB7"),
    ),
];

/// The `test` job: passes when greet.py greets the world in lower case.
fn greeting_test(commit: &Commit<'_>) -> Vec<(String, JobEnd)> {
    let greet = commit.file("greet.py").unwrap_or_default();
    let end = if greet.contains("Hello, world") {
        JobEnd::Pass
    } else {
        // The log leaks the daemon's token and others', as a careless CI
        // step might: they must reach the model masked.
        let [github, gitlab, key_id, secret_key] = LEAKED.map(|(_, value)| value);
        JobEnd::Fail(format!(
            "2026-11-26T10:00:00.0000000Z \u{1b}[36;1mpytest\u{1b}[0m\n\
             2026-11-26T10:00:01.0000000Z + curl -H 'Authorization: token {TOKEN}' ...\n\
             2026-11-26T10:00:01.1000000Z + echo REGISTRY_TOKEN={github}\n\
             2026-11-26T10:00:01.2000000Z + git push https://oauth2:{gitlab}@example.org/acme/app.git\n\
             2026-11-26T10:00:01.3000000Z AWS_ACCESS_KEY_ID={key_id} AWS_SECRET_ACCESS_KEY={secret_key}\n\
             2026-11-26T10:00:02.0000000Z FAILED test_greet.py::test_greets_the_world - AssertionError: expected 'Hello, world', got {:?}\n\
             2026-11-26T10:00:02.1000000Z ##[error]Process completed with exit code 1.\n",
            greet.trim()
        ))
    };
    vec![("lint".to_owned(), JobEnd::Pass), ("test".to_owned(), end)]
}

#[tokio::test]
async fn a_failing_check_gets_a_fix_round_then_goes_green() {
    let mut turns = edit("Hello", "Hello, World", "Greet the world", "Greeted the world.");
    turns.extend(edit(
        "Hello, World",
        "Hello, world",
        "Lower-case world, as the test expects",
        "The test expects a lower-case world; fixed the case.",
    ));
    let world = world(turns, "60s").await;
    world.github.run_ci(Arc::new(greeting_test));
    let daemon = world.start();
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;
    world.assert_delivered_once(issue);
    let comment = world.progress_comment(issue);
    assert!(comment.contains("**CI**"), "{comment}\n{}", daemon.log_text());
    assert!(comment.contains("Green: 2 passed."), "{comment}");
    assert!(comment.contains("Fixed in 1 round(s)"), "{comment}");
    // The fix round saw the failing test's log, masked, without escape codes.
    let requests = world.model.requests().await;
    let fix = requests
        .iter()
        .map(|r| r.to_string())
        .find(|r| r.contains("checks of the pushed"))
        .expect("a CI fix request");
    assert!(
        fix.contains("test_greets_the_world"),
        "{}",
        daemon
            .log_text()
            .lines()
            .filter(|l| l.contains("log"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(fix.contains("### test ("), "{fix}");
    assert!(!fix.contains("### lint"), "only failed checks: {fix}");
    assert!(!fix.contains(TOKEN), "the token is masked in the log");
    assert!(!fix.contains("\\u001b"), "escape codes are removed");
    let issue_thread = world
        .github
        .issue(REPO, issue)
        .comments
        .into_iter()
        .map(|(_, _, body)| body);
    let pulls = world.github.pulls(REPO);
    let pull_threads = pulls.iter().flat_map(|p| {
        let thread = world.github.issue(REPO, p.number).comments;
        std::iter::once(p.body.clone()).chain(thread.into_iter().map(|(_, _, body)| body))
    });
    let comments: Vec<String> = issue_thread.chain(pull_threads).collect();
    assert_leaks_masked(&fix, &comments, &world.transcript(issue));
    // Two commits were pushed: the first (failing) and the fix.
    let jobs = world.github.jobs();
    let shas: std::collections::BTreeSet<_> = jobs.iter().map(|j| j.sha.clone()).collect();
    assert_eq!(shas.len(), 2, "{jobs:?}");
    // The re-run (to tell flaky from real) failed again before the fix.
    assert_eq!(world.github.reruns(), vec!["test".to_owned()]);
    // Each push was written again on the host to name who asked; the fix
    // round, made in a new sandbox on the pushed branch, was pushed on
    // top of the first push as it was rewritten.
    let head = forgehand_test_support::git_http::head_of(&world.bare, "forgehand/issue-1");
    let first = shas
        .iter()
        .find(|sha| **sha != head)
        .expect("the first push's commit");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&world.bare)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(&git(&["rev-parse", &format!("{head}^")]), first);
    for sha in [&head, first] {
        let message = git(&["log", "-1", "--format=%B", sha.as_str()]);
        // The fake GitHub gives maya the id 31676 and serves github.example.
        let trailer = "Co-authored-by: maya <31676+maya@users.noreply.github.example>";
        assert_eq!(message.matches(trailer).count(), 1, "{message}");
    }
}

/// A task waiting on its checks holds no slot and no sandbox: with the
/// default two slots and checks that run 40 s, all four labelled issues
/// get their pull request while the first two's checks still run, no
/// sandbox is up while the four wait, and each ends delivered once, green.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_waiting_on_their_checks_hold_no_slot_and_no_sandbox() {
    let world = world(
        edit("Hello", "Hello, world", "Greet the world", "Greeted the world."),
        "60s",
    )
    .await;
    world.github.run_ci(Arc::new(|_: &Commit<'_>| {
        vec![("test".to_owned(), JobEnd::PassAfter(Duration::from_secs(40)))]
    }));
    let daemon = world.start();
    let issues: Vec<u64> = (0..4)
        .map(|i| world.labelled_issue(&format!("Greet the world ({i})")))
        .collect();
    let log = world.log_path();
    daemon_rig::wait_until(
        "four pull requests",
        Duration::from_secs(120),
        async || world.github.pulls(REPO).len() == 4,
        &log,
    )
    .await;
    let jobs = world.github.jobs();
    assert!(
        jobs.iter().all(|j| j.completed.is_none()),
        "every pull request opened before any check ended: {jobs:?}"
    );
    daemon_rig::wait_until(
        "the four tasks waiting with no sandbox",
        Duration::from_secs(30),
        // (The four commits may be one: the same change, rewritten in the
        // same second, has the same id on each branch.)
        async || {
            daemon.log_text().matches("waiting on the checks").count() == 4
                && world.github.jobs().iter().all(|j| j.completed.is_none())
                && daemon_rig::containers_of(&world.instance).is_empty()
        },
        &log,
    )
    .await;
    for issue in issues {
        world.wait_for_end(issue).await;
        world.assert_delivered_once(issue);
        let comment = world.progress_comment(issue);
        assert!(
            comment.contains("Green: 1 passed."),
            "{comment}\n{}",
            daemon.log_text()
        );
    }
    assert!(daemon.log_text().contains("waiting on the checks"));
}

/// A daemon killed while its task waits on checks, started again: the
/// wait is in the journal, the task goes on from it and ends delivered
/// once, green, with no second pull request or push.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_waiting_on_checks_loses_nothing_and_doubles_nothing() {
    let world = world(
        edit("Hello", "Hello, world", "Greet the world", "Greeted the world."),
        "60s",
    )
    .await;
    world.github.run_ci(Arc::new(|_: &Commit<'_>| {
        vec![("test".to_owned(), JobEnd::PassAfter(Duration::from_secs(8)))]
    }));
    let mut daemon = world.start();
    let issue = world.labelled_issue("Greet the world");
    let log = world.log_path();
    daemon_rig::wait_until(
        "the task waiting on its checks",
        Duration::from_secs(120),
        async || daemon.log_text().contains("waiting on the checks"),
        &log,
    )
    .await;
    daemon.kill9();
    let pushed = forgehand_test_support::git_http::head_of(&world.bare, "forgehand/issue-1");
    let daemon = world.start();
    world.wait_for_end(issue).await;
    world.assert_delivered_once(issue);
    let comment = world.progress_comment(issue);
    assert!(
        comment.contains("Green: 1 passed."),
        "{comment}\n{}",
        daemon.log_text()
    );
    assert_eq!(
        forgehand_test_support::git_http::head_of(&world.bare, "forgehand/issue-1"),
        pushed,
        "nothing pushed again"
    );
    assert_eq!(
        world.model.requests().await.len(),
        3,
        "no model call after the kill"
    );
}

#[tokio::test]
async fn a_check_that_passes_on_re_run_is_flaky_not_fixed() {
    let world = world(
        edit("Hello", "Hello, world", "Greet the world", "Greeted the world."),
        "60s",
    )
    .await;
    world.github.run_ci(Arc::new(|_: &Commit<'_>| {
        vec![
            ("test".to_owned(), JobEnd::Pass),
            (
                "e2e".to_owned(),
                JobEnd::Flaky("timeout waiting for the browser\n".into()),
            ),
        ]
    }));
    let daemon = world.start();
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;
    world.assert_delivered_once(issue);
    let comment = world.progress_comment(issue);
    assert!(
        comment.contains("Flaky (failed, then passed when re-run; not a fix): e2e."),
        "{comment}\n{}",
        daemon.log_text()
    );
    assert!(!comment.contains("Fixed in"), "{comment}");
    assert_eq!(world.github.reruns(), vec!["e2e".to_owned()]);
    let requests = world.model.requests().await;
    assert!(!requests
        .iter()
        .any(|r| r.to_string().contains("checks of the pushed")));
}

#[tokio::test]
async fn checks_that_never_start_are_said_plainly_after_ci_wait() {
    let world = world(
        edit("Hello", "Hello, world", "Greet the world", "Greeted the world."),
        "3s",
    )
    .await;
    world.github.run_ci(Arc::new(|_: &Commit<'_>| {
        vec![("test".to_owned(), JobEnd::NeverStarts)]
    }));
    let daemon = world.start();
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;
    world.assert_delivered_once(issue);
    let comment = world.progress_comment(issue);
    assert!(
        comment.contains("No check started within 3s (delivery.ci_wait): 1 queued (test)."),
        "{comment}\n{}",
        daemon.log_text()
    );
    assert!(comment.contains("may wait for a maintainer's approval"));
    assert!(world.github.pulls(REPO).len() == 1);
}

#[tokio::test]
async fn on_gitlab_a_failing_jobs_trace_gets_a_fix_round_then_the_pipeline_is_green() {
    use forgehand_test_support::gitlab_world::{GitLabWorld, GL_TOKEN, PROJECT};

    let files = [
        ("greet.py", "print('Hello')\n"),
        (".gitlab-ci.yml", "test:\n  script: pytest\n"),
    ];
    let mut turns = edit("Hello", "Hello, World", "Greet the world", "Greeted the world.");
    turns.extend(edit(
        "Hello, World",
        "Hello, world",
        "Lower-case world",
        "Fixed the case.",
    ));
    let world = GitLabWorld::new(
        turns,
        &files,
        "delivery:\n  ci_poll: \"1s\"\n  ci_wait: \"60s\"\n",
    )
    .await;
    world
        .gitlab
        .run_ci(PROJECT, world.bare.clone(), Arc::new(greeting_test));
    let daemon = world.start();
    let issue = world.deliver("Greet the world", "Say hello to the world.").await;
    let (gitlab, model) = (&world.gitlab, &world.model);
    let note = gitlab
        .issue(PROJECT, issue)
        .notes
        .into_iter()
        .find(|n| n.body.contains("forgehand:task"))
        .unwrap();
    assert!(
        note.body.contains("Green: 2 passed."),
        "{}\n{}",
        note.body,
        daemon.log_text()
    );
    assert!(note.body.contains("Fixed in 1 round(s)"), "{}", note.body);
    let (jobs, retries) = gitlab.jobs();
    assert_eq!(retries, vec!["test".to_owned()], "{jobs:?}");
    let fix = model
        .requests()
        .await
        .iter()
        .map(|r| r.to_string())
        .find(|r| r.contains("checks of the pushed"))
        .expect("a CI fix request");
    assert!(fix.contains("test_greets_the_world"), "{fix}");
    assert!(!fix.contains(GL_TOKEN));
    let mut comments: Vec<String> = gitlab
        .issue(PROJECT, issue)
        .notes
        .into_iter()
        .map(|n| n.body)
        .collect();
    for change in gitlab.merge_requests(PROJECT) {
        comments.push(change.description);
        comments.extend(change.notes.into_iter().map(|n| n.body));
    }
    let transcript = forgehand_transcript(&world.config, &format!("gitlab:{PROJECT}:issue:{issue}"));
    assert_leaks_masked(&fix, &comments, &transcript);
}

/// The leaked credentials reached neither the model's fix request, nor a
/// comment, nor the transcript; the request shows each one's mask, and
/// the progress comment names the rules that masked them.
fn assert_leaks_masked(fix: &str, comments: &[String], transcript: &str) {
    for (rule, value) in LEAKED {
        assert!(!fix.contains(value), "{rule} reached the model: {fix}");
        assert!(
            fix.contains(&format!("[masked: {rule}]")),
            "{rule} not masked: {fix}"
        );
        for comment in comments {
            assert!(!comment.contains(value), "{rule} reached a comment: {comment}");
        }
        assert!(
            !transcript.contains(value),
            "{rule} reached the transcript: {transcript}"
        );
    }
    let said = "The log of check `test` holds what looks like credentials (";
    let note = comments
        .iter()
        .flat_map(|c| c.lines())
        .find(|l| l.contains(said))
        .unwrap_or_else(|| panic!("the comment says what was masked: {comments:?}"));
    for (rule, _) in LEAKED {
        assert!(note.contains(rule), "{rule} not named: {note}");
    }
}

/// The newest run's transcript of the task `key`, as `forgehand tasks
/// show` prints it from the journal of the daemon configured by `config`.
fn forgehand_transcript(config: &std::path::Path, key: &str) -> String {
    let forgehand = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_forgehand"))
            .arg("--config")
            .arg(config)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let listing = forgehand(&["tasks"]);
    let id = listing
        .lines()
        .filter(|l| l.contains(key))
        .find_map(|l| l.split_whitespace().next().filter(|w| w.parse::<u64>().is_ok()))
        .unwrap_or_else(|| panic!("no run of {key}:\n{listing}"))
        .to_owned();
    forgehand(&["tasks", "show", &id])
}
