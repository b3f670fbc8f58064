//! The conversation after the first PR, against the fakes of the
//! end-to-end tests (fake GitHub delivering signed webhooks, a real git
//! remote over smart HTTP, the scripted model) and the real Docker engine:
//!
//! - a label and a mention to the `eyes` reaction, and to the first
//!   progress comment, with webhooks (polls an hour apart) and with
//!   polling alone (`poll_interval: 5s`, no jitter);
//! - a review follow-up's tokens against the first run's: every request
//!   the model received (classification, planning, the agent's turns),
//!   counted with the o200k tokenizer, for a repository of 60 of
//!   forgehand's own source files with planning on.
//!
//! Run: `cargo bench --bench conversation` (needs Docker and the images,
//! as `scripts/test` prepares them); `-- hearing` or `-- follow-up` runs
//! one part.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand_test_support::daemon_rig::{self, DaemonProcess};
use forgehand_test_support::fake_github::BOT;
use forgehand_test_support::github_world::{World, DONE, REPO};
use forgehand_test_support::mcp_client;
use forgehand_test_support::scripted_model::{edit_and_commit, text, Reply};
use forgehand_test_support::stats;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const SECRET: &str = "bench-webhook-secret-0000000000000001";
const ROUNDS: usize = 10;

async fn wait(what: &str, world: &World, check: impl AsyncFn() -> bool) {
    daemon_rig::wait_until(what, Duration::from_secs(120), check, &world.log_path()).await;
}

fn has_eyes(world: &World, on: &str) -> bool {
    world
        .github
        .reactions()
        .iter()
        .any(|r| r.on == on && r.content == "eyes" && r.user == BOT)
}

/// Label and mention to `eyes` and to the progress comment, `rounds` each.
async fn hearing(webhooks: bool, rounds: usize) {
    let address = mcp_client::free_address();
    let settings = match webhooks {
        true => format!("  poll_interval: \"1h\"\n  webhooks: true\n  http:\n    listen: \"{address}\""),
        false => "  poll_interval: \"5s\"".to_owned(),
    };
    let world = World::with_daemon_settings(vec![(text("Nothing to change."), None)], &settings).await;
    let mut env = world.env();
    env.push(("FORGEHAND_GITHUB_WEBHOOK_SECRET", SECRET.to_owned()));
    let daemon = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    wait("the daemon to start", &world, async || {
        daemon.log_text().contains("forgehand started")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _hooks = webhooks.then(|| {
        world
            .github
            .send_webhooks_to(&format!("http://{address}/webhooks/github"), SECRET)
    });
    let (mut label_eyes, mut label_comment, mut mention_eyes, mut mention_comment) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let issue = world
            .github
            .open_issue(REPO, "maya", "Greet the world", "Say hello to the world.");
        let started = Instant::now();
        world.github.add_label(REPO, issue, "coding agent", "maya");
        let (eyes, comment) = heard(&world, issue, &format!("issue {issue}"), started).await;
        label_eyes.push(eyes);
        label_comment.push(comment);

        let issue = world
            .github
            .open_issue(REPO, "maya", "Check the README", "Is the README current?");
        let started = Instant::now();
        world
            .github
            .comment(REPO, issue, "maya", &format!("@{BOT} please look at this"));
        let id = world.github.issue(REPO, issue).comments.last().unwrap().0;
        let (eyes, comment) = heard(&world, issue, &format!("comment {id}"), started).await;
        mention_eyes.push(eyes);
        mention_comment.push(comment);
    }
    let how = if webhooks { "webhooks" } else { "polling 5 s" };
    stats::report(&format!("label -> eyes ({how})"), &mut label_eyes);
    stats::report(&format!("label -> progress comment ({how})"), &mut label_comment);
    stats::report(&format!("mention -> eyes ({how})"), &mut mention_eyes);
    stats::report(
        &format!("mention -> progress comment ({how})"),
        &mut mention_comment,
    );
}

/// How long after `started` the `eyes` on `on` and forgehand's first
/// comment on `issue` showed; then waits for the task to end.
async fn heard(world: &World, issue: u64, on: &str, started: Instant) -> (Duration, Duration) {
    let (mut eyes, mut comment) = (None, None);
    while eyes.is_none() || comment.is_none() {
        if eyes.is_none() && has_eyes(world, on) {
            eyes = Some(started.elapsed());
        }
        if comment.is_none() && world.bot_comment_count(issue) > 0 {
            comment = Some(started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "nothing heard of {on}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    world.wait_for_done(issue, Duration::from_secs(120)).await;
    (eyes.unwrap(), comment.unwrap())
}

/// The o200k tokens of every request in `requests`.
fn tokens(requests: &[Value]) -> u64 {
    requests
        .iter()
        .map(|r| forgehand::llm::tokens::count_text(&r.to_string()))
        .sum()
}

/// 60 of forgehand's own source files, as a repository to work on.
fn source_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for dir in ["task", "forge", "daemon", "planning"] {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        entries.sort();
        for path in entries.into_iter().take(15) {
            let name = format!("src/{dir}/{}", path.file_name().unwrap().to_string_lossy());
            files.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    files.push(("greet.py".into(), "print('Hello')\n".into()));
    files.push(("README.md".into(), "# app\n".into()));
    files
}

async fn follow_up_tokens() {
    let mut turns: Vec<(Reply, Option<Duration>)> = edit_and_commit(Duration::ZERO);
    turns.pop();
    turns.push((
        text("Changed the greeting in greet.py.\n\n[T1] changed: named the world\n[T2] changed: calmer wording"),
        None,
    ));
    let files = source_files();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let plan = "## Plan\n1. Change the greeting in greet.py.\n";
    let world =
        World::with_planned_repository(turns, &refs, plan, "triggers:\n  review_quiet: \"1s\"\n").await;
    let _daemon = world.start();
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;
    let first = world.model.all_requests().await;
    let pull = world.github.pulls(REPO)[0].number;
    world
        .github
        .review_comment(REPO, pull, "maya", "README.md", 1, "Please say whom this is for.");
    world.github.review_comment(
        REPO,
        pull,
        "maya",
        "README.md",
        1,
        "Keep it calm: no exclamation mark.",
    );
    wait("the review to be answered", &world, async || {
        world
            .github
            .review_threads(REPO, pull)
            .iter()
            .all(|(_, resolved, _)| *resolved)
    })
    .await;
    wait("the follow-up to end", &world, async || {
        world.github.issue(REPO, pull).labels == vec![DONE.to_owned()]
    })
    .await;
    let all = world.model.all_requests().await;
    let (first_tokens, follow_tokens) = (tokens(&first), tokens(&all[first.len()..]));
    println!(
        "first run: {} requests, {first_tokens} tokens; review follow-up: {} requests, {follow_tokens} tokens: {:.1} %",
        first.len(),
        all.len() - first.len(),
        follow_tokens as f64 * 100.0 / first_tokens as f64
    );
}

#[tokio::main]
async fn main() {
    forgehand_test_support::ensure_images().await;
    let only = |part: &str| std::env::args().any(|a| a == part);
    let all = !only("hearing") && !only("follow-up");
    if all || only("hearing") {
        hearing(true, ROUNDS).await;
        hearing(false, ROUNDS).await;
    }
    if all || only("follow-up") {
        follow_up_tokens().await;
    }
}
