//! Whole tasks on each provider's current model shape, with a daemon, a real
//! sandbox and a real git remote: GPT-5.x through the Responses API, Claude
//! thinking, Gemini 3 signing its thoughts. Each model server refuses what
//! its provider refuses, so a turn sent back without its reasoning state, an
//! empty turn or a duplicate id fails the task. Each task has three tool
//! turns and more, a test-fix round and a rebase round; another falls back
//! from Claude to Gemini in the middle of its run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::git_http;
use forgehand_test_support::github_world;
use forgehand_test_support::scripted_model;

use daemon_rig::wait_until;
use github_world::{World, DONE, MODEL_KEY, REPO, TOKEN};
use scripted_model::{replace, run, text, Format, Reply, GREET, TEST};
use serde_json::json;
use std::time::Duration;

const SETTINGS: &str = "image: python\ntest: python3 -m unittest -q\n";

/// Three tool turns and an answer the tests refuse, a fix round, then a
/// rebase after the branch moved.
fn work() -> Vec<(Reply, Option<Duration>)> {
    vec![
        // Slow, so that the branch can move on the remote meanwhile.
        (run("cat greet.py"), Some(Duration::from_secs(3))),
        (replace("'Hello'", "'Hello, World!'"), None),
        (run("git commit -qam 'Greet the world'"), None),
        (text("Changed the greeting."), None),
        (replace("World!", "world"), None),
        (run("git commit -qam 'Lower-case world, as the test wants'"), None),
        (text("Fixed the case; the tests pass."), None),
        (
            run("git rebase origin/forgehand/issue-1 && git log --format=%s"),
            None,
        ),
        (text("Rebased onto the new commits of the branch."), None),
    ]
}

/// Runs the task on `models` and checks it was delivered once with every
/// round; returns the world for provider-specific checks.
async fn deliver(models: &[(Format, &str)], during: impl AsyncFnOnce(&World)) -> World {
    let world = World::on_models(
        models,
        work(),
        &[
            ("greet.py", GREET),
            ("test_greet.py", TEST),
            (".forgehand.yaml", SETTINGS),
            (".gitignore", "__pycache__/\n"),
        ],
    )
    .await;
    let issue = world.labelled_issue("Greet the world");
    let daemon = world.start();
    wait_until(
        "the first model request",
        Duration::from_secs(180),
        async || !world.model.requests().await.is_empty(),
        &world.log_path(),
    )
    .await;
    // The remote branch moves under the task: the push is refused once.
    git_http::push_commit(
        &world.bare,
        "forgehand/issue-1",
        "NOTES.md",
        "notes\n",
        "Someone else's notes",
    );
    during(&world).await;
    world.wait_for_end(issue).await;
    let log = daemon.log_text();
    for model in std::iter::once(&world.model).chain(&world.fallbacks) {
        assert!(
            model.refused().is_empty(),
            "{:?}: {:?}",
            model.format,
            model.refused()
        );
    }
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{log}"
    );
    assert_eq!(
        git_http::log(&world.bare, "forgehand/issue-1"),
        [
            "Lower-case world, as the test wants",
            "Greet the world",
            "Someone else's notes",
            "initial"
        ]
    );
    let pulls = world.github.pulls(REPO);
    assert_eq!(pulls.len(), 1);
    assert!(
        pulls[0].body.contains("after 1 fix round(s)"),
        "{}",
        pulls[0].body
    );
    let comment = world.progress_comment(issue);
    assert!(comment.contains("Push rejected"), "{comment}");
    for secret in [TOKEN, MODEL_KEY] {
        assert!(!comment.contains(secret) && !pulls[0].body.contains(secret) && !log.contains(secret));
    }
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpt_5_delivers_through_the_responses_api() {
    let world = deliver(&[(Format::Responses, "gpt-5.6")], async |_| {}).await;
    let requests = world.model.requests().await;
    let last = requests.last().unwrap();
    assert_eq!(
        (last["store"].clone(), last["reasoning"]["effort"].clone()),
        (json!(false), json!("high"))
    );
    // Every earlier answer's encrypted reasoning went back with its calls,
    // through the fix round and the rebase round.
    let reasoning = last["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .count();
    assert_eq!(reasoning, 8, "{last}");
    assert!(last
        .to_string()
        .contains("The repository's tests fail on your change"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_delivers_thinking_with_each_thinking_block_sent_back() {
    let world = deliver(&[(Format::Anthropic, "claude-opus-5-5")], async |_| {}).await;
    let requests = world.model.requests().await;
    let last = requests.last().unwrap();
    assert_eq!(last["thinking"], json!({"type": "adaptive"}));
    let assistant: Vec<&serde_json::Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert_eq!(assistant.len(), 8);
    assert!(
        assistant.iter().all(|m| m["content"][0]["type"] == "thinking"),
        "{last}"
    );
    // The agent loop is cached: the system text and the newest turn.
    assert_eq!(last["system"][0]["cache_control"], json!({"type": "ephemeral"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_3_delivers_with_its_thought_signatures_returned() {
    let world = deliver(&[(Format::Gemini, "gemini-3.1-pro-preview")], async |_| {}).await;
    let requests = world.model.requests().await;
    let last = requests.last().unwrap();
    let signed = last["contents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["role"] == "model"
                && c["parts"][0]["thoughtSignature"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("gsig-"))
        })
        .count();
    assert_eq!(signed, 8, "{last}");
    assert!(!last.to_string().contains("skip_thought_signature_validator"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_falls_back_from_claude_to_gemini_midway_delivers_once() {
    let world = deliver(
        &[
            (Format::Anthropic, "claude-opus-5-5"),
            (Format::Gemini, "gemini-3.1-pro-preview"),
        ],
        // Claude is overloaded from its second answer on.
        async |world| world.model.storm(u32::MAX).await,
    )
    .await;
    let claude = world.model.requests().await;
    let gemini = world.fallbacks[0].requests().await;
    assert!(!claude.is_empty() && !gemini.is_empty());
    // Claude's turn reached Gemini 3 without Claude's thinking, with the
    // placeholder Google documents for calls it did not sign.
    let first = gemini[0].to_string();
    assert!(
        first.contains("skip_thought_signature_validator") && !first.contains("sig-0"),
        "{first}"
    );
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    assert!(
        log.contains("claude-opus-5-5") && log.contains("falling back to the next model"),
        "{log}"
    );
}

/// A step whose calls were never run: the run stops at its token budget
/// right after the model asked for them.
fn stopped_mid_step() -> Vec<(Reply, Option<Duration>)> {
    vec![
        // Slow, so that the branch can move on the remote meanwhile.
        (
            run("sed -i \"s/'Hello'/'Hello, world'/\" greet.py && git commit -qam 'Greet the world'"),
            Some(Duration::from_secs(3)),
        ),
        (run("git status --short"), None),
        (
            run("git rebase origin/forgehand/issue-1 && git log --format=%s"),
            None,
        ),
        (text("Rebased onto the new commits of the branch."), None),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_before_its_calls_ran_is_resumed_with_every_call_answered() {
    // Claude's answers count about 220 tokens each: the second one passes 400.
    let world = World::on_models_with(
        &[(Format::Anthropic, "claude-opus-5-5")],
        stopped_mid_step(),
        &[("greet.py", GREET), (".forgehand.yaml", "image: python\n")],
        "agent:\n  token_budget: 400\n",
    )
    .await;
    let issue = world.labelled_issue("Greet the world");
    let _daemon = world.start();
    wait_until(
        "the first model request",
        Duration::from_secs(180),
        async || !world.model.requests().await.is_empty(),
        &world.log_path(),
    )
    .await;
    // The push is refused once: the rebase round goes on from the stopped run.
    git_http::push_commit(
        &world.bare,
        "forgehand/issue-1",
        "NOTES.md",
        "notes\n",
        "Someone else's notes",
    );
    world.wait_for_end(issue).await;
    assert!(world.model.refused().is_empty(), "{:?}", world.model.refused());
    assert_eq!(
        git_http::log(&world.bare, "forgehand/issue-1"),
        ["Greet the world", "Someone else's notes", "initial"]
    );
    let requests = world.model.requests().await;
    let rebase = requests
        .iter()
        .find(|r| r.to_string().contains("git status --short"))
        .and_then(|r| r["messages"].as_array())
        .unwrap();
    // The call the budget stopped is answered as not run, then comes the rebase.
    let answer = &rebase[4]["content"][0];
    assert_eq!(
        (answer["type"].as_str(), answer["is_error"].as_bool()),
        (Some("tool_result"), Some(true)),
        "{rebase:?}"
    );
    let said = answer["content"].as_str().unwrap();
    assert!(
        said.starts_with("Not run: the run stopped") && said.contains("agent.token_budget"),
        "{said}"
    );
}
