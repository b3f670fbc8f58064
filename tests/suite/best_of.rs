//! Best of N (`agent.attempts`), end to end against the fake GitHub, real
//! sandboxes and a scripted model that answers each attempt by its own
//! script: the attempts whose tests pass go to the judge with their
//! diffs, one PR is delivered from the chosen sandbox and says how many
//! were tried and passed and why; each attempt spends within its share of
//! the task's cap, and the task within the cap. A repository's own
//! `.forgehand.yaml` may lower the operator's number of attempts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::github_world::{World, REPO};
use forgehand_test_support::scripted_model::attempts::{answer_attempts, judgements, requests_of_attempt};
use forgehand_test_support::scripted_model::{edit_and_commit, replace, run, text, Reply};
use std::time::Duration;

/// The repository's test passes once the greeting greets the world.
const FILES: [(&str, &str); 3] = [
    ("greet.py", "print('Hello')\n"),
    ("README.md", "# app\n"),
    (".forgehand.yaml", "test: grep -q 'Hello, world' greet.py\n"),
];

const JUDGE: &str =
    r#"{"choice": 2, "reason": "Attempt 2 makes the smallest change that passes the tests."}"#;

/// An attempt that edits the greeting to `greeting`, runs `then` (after
/// its commit), and answers.
fn attempt(greeting: &str, then: &[&str]) -> Vec<Reply> {
    let mut script = vec![
        replace("Hello", greeting),
        run("git add -A && git commit -qm 'Change the greeting'"),
    ];
    script.extend(then.iter().map(|command| run(command)));
    script.push(text(&format!("Changed the greeting to {greeting}.")));
    script
}

/// The file `path` on `branch` of the world's remote, if it is there.
fn pushed_file(world: &World, branch: &str, path: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(&world.bare)
        .args(["show", &format!("{branch}:{path}")])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn wait_for_no_sandbox(world: &World) {
    daemon_rig::wait_until(
        "every attempt's sandbox removed",
        Duration::from_secs(60),
        async || daemon_rig::containers_of(&world.instance).is_empty(),
        &world.log_path(),
    )
    .await;
}

#[tokio::test]
async fn best_of_three_judges_the_two_that_pass_and_delivers_one_pr_that_says_so() {
    let world = World::with_repository(
        vec![(text("unused"), None)],
        &FILES,
        "agent:\n  attempts: 3\n  test_fix_rounds: 0\n",
    )
    .await;
    let scripts = vec![
        attempt("Hello there", &[]),
        attempt("Hello, world", &[]),
        attempt(
            "Hello, world",
            &["printf 'A note on greetings\\n' > GREETINGS.md && git add -A && git commit -qm 'Add a note'"],
        ),
    ];
    answer_attempts(&world.model, scripts, JUDGE, None).await;
    let daemon = world.start();
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;
    let log = daemon.log_text();

    // Edit, commit, answer; the third also adds a note.
    for (n, calls) in [(1, 3), (2, 3), (3, 4)] {
        assert_eq!(
            requests_of_attempt(&world.model, n).await.len(),
            calls,
            "attempt {n}: {log}"
        );
    }
    let asked = judgements(&world.model).await;
    assert_eq!(asked.len(), 1, "{log}");
    let judgement = asked[0].to_string();
    assert!(
        judgement.contains("## Attempt 2") && judgement.contains("## Attempt 3"),
        "{judgement}"
    );
    assert!(judgement.contains("+print('Hello, world')"), "{judgement}");
    assert!(
        judgement.contains("+A note on greetings"),
        "attempt 3's larger diff: {judgement}"
    );
    assert!(
        !judgement.contains("Hello there"),
        "the failing attempt is not judged: {judgement}"
    );
    assert!(judgement.contains("Greet the world"), "the request: {judgement}");

    let pulls = world.github.pulls(REPO);
    assert_eq!(pulls.len(), 1, "{log}");
    let body = &pulls[0].body;
    assert!(body.contains("**3 tried, 2 passed** (attempt 2, 3)"), "{body}");
    assert!(body.contains("Attempt 2 is delivered"), "{body}");
    assert!(
        body.contains("Attempt 2 makes the smallest change that passes the tests."),
        "{body}"
    );
    assert!(
        body.contains("failed: `grep -q 'Hello, world' greet.py` exited with code 1"),
        "{body}"
    );
    let branch = &pulls[0].head;
    assert_eq!(
        pushed_file(&world, branch, "greet.py").as_deref(),
        Some("print('Hello, world')\n")
    );
    assert_eq!(
        pushed_file(&world, branch, "GREETINGS.md"),
        None,
        "attempt 3 was not chosen"
    );

    let transcript = world.transcript(issue);
    for n in 1..=3 {
        assert!(transcript.contains(&format!("(attempt {n})")), "{transcript}");
    }
    assert!(transcript.contains("judging the attempts"), "{transcript}");
    wait_for_no_sandbox(&world).await;
}

/// gpt-4o-mini at $6 a million output tokens; every answer reports 40,000
/// input and 1,000 output tokens: $0.012 a call. A turn's least output
/// room (1,024 tokens) is worth about $0.0061.
const DEAR_OUTPUT: &str = "llm:\n  retry:\n    max_retries: 0\n  models:\n    - provider: \"openai\"\n      model: \"gpt-4o-mini\"\n      max_input_tokens: 100000\n  prices:\n    \"gpt-4o-mini\": {input: 0.15, output: 6.0}\n";
const CALL_USD: f64 = 0.012;
const CAP_USD: f64 = 0.123;

#[tokio::test]
async fn each_attempt_spends_within_its_share_and_the_task_within_its_cap() {
    // The classification ($0.012) leaves $0.111: $0.037 an attempt, which
    // pays for three calls each and not a fourth.
    let world = World::with_repository(
        vec![(text("unused"), None)],
        &FILES,
        &format!(
            "agent:\n  attempts: 3\n  test_fix_rounds: 0\nbudget:\n  task_usd: {CAP_USD}\n{DEAR_OUTPUT}"
        ),
    )
    .await;
    world.model.bill(40_000, 1_000);
    let scripts = vec![
        attempt("Hello there", &[]),
        attempt("Hello, world", &[]),
        attempt("Hello, world", &["ls", "ls", "ls"]),
    ];
    answer_attempts(&world.model, scripts, JUDGE, Some((40_000, 1_000))).await;
    let daemon = world.start();
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;
    let log = daemon.log_text();

    assert_eq!(
        requests_of_attempt(&world.model, 3).await.len(),
        3,
        "stopped at its share: {log}"
    );
    let all = world.model.all_requests().await.len();
    let spent = all as f64 * CALL_USD;
    assert!(spent <= CAP_USD, "{all} calls, ${spent:.4}: {log}");
    assert!(
        judgements(&world.model).await.is_empty(),
        "one attempt passed: no judge"
    );

    let pulls = world.github.pulls(REPO);
    assert_eq!(pulls.len(), 1, "{log}");
    let body = &pulls[0].body;
    assert!(body.contains("**3 tried, 1 passed** (attempt 2)"), "{body}");
    assert!(body.contains("the only attempt whose tests passed"), "{body}");
    assert!(body.contains("the attempt's share of budget.task_usd"), "{body}");
    wait_for_no_sandbox(&world).await;
}

#[tokio::test]
async fn a_repositorys_own_file_lowers_the_operators_attempts_to_one() {
    let files = [
        FILES[0],
        FILES[1],
        (
            ".forgehand.yaml",
            "attempts: 1\ntest: grep -q 'Hello, world' greet.py\n",
        ),
    ];
    let world = World::with_repository(
        edit_and_commit(Duration::ZERO),
        &files,
        "agent:\n  attempts: 3\n  test_fix_rounds: 0\n",
    )
    .await;
    // Were best of three run, its attempts would be answered here.
    let scripts = vec![attempt("Hello, world", &[]); 3];
    answer_attempts(&world.model, scripts, JUDGE, None).await;
    let daemon = world.start();
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;
    let log = daemon.log_text();

    for n in 1..=3 {
        assert!(
            requests_of_attempt(&world.model, n).await.is_empty(),
            "attempt {n} ran: {log}"
        );
    }
    assert!(judgements(&world.model).await.is_empty(), "{log}");
    let pulls = world.github.pulls(REPO);
    assert_eq!(pulls.len(), 1, "{log}");
    assert!(!pulls[0].body.contains("Best of"), "{}", pulls[0].body);
    assert_eq!(
        pushed_file(&world, &pulls[0].head, "greet.py").as_deref(),
        Some("print('Hello, world')\n")
    );
    assert!(!world.transcript(issue).contains("(attempt "));
}
