//! Budgets in money, end to end against the fake GitHub and a scripted
//! model whose answers report real-sized usage: a task whose next call
//! would pass its cap is stopped before it and its draft says why; a
//! repository whose daily cap is spent holds its next item back, with a
//! comment saying when it will run and no model call.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::github_world::{World, REPO};
use forgehand_test_support::scripted_model::edit_and_commit;
use std::time::Duration;

const FILES: [(&str, &str); 2] = [("greet.py", "print('Hello')\n"), ("README.md", "# app\n")];

/// Every answer reports 40,000 input and 1,000 output tokens of
/// gpt-4o-mini ($0.15 / $0.60 a million): $0.0066 a call.
const PROMPT: u64 = 40_000;
const COMPLETION: u64 = 1_000;

/// The same model at $6 a million output tokens: $0.012 a call, and an
/// output room of 1,024 tokens (the least an ordinary turn is sent with)
/// costs about $0.0061, a wrap-up's 512 tokens about $0.0031.
const DEAR_OUTPUT: &str = "llm:\n  retry:\n    max_retries: 0\n  models:\n    - provider: \"openai\"\n      model: \"gpt-4o-mini\"\n      max_input_tokens: 100000\n  prices:\n    \"gpt-4o-mini\": {input: 0.15, output: 6.0}\n";

#[tokio::test]
async fn a_task_uses_its_cap_until_the_next_call_would_pass_it_and_its_draft_says_so() {
    // The classification and two turns ($0.036) fit under $0.0406, each
    // turn with the output room the money left pays for; then $0.0046 is
    // left: not enough for a turn's 1,024 tokens, enough for the wrap-up's
    // 512.
    let world = World::with_repository(
        edit_and_commit(Duration::ZERO),
        &FILES,
        &format!("budget:\n  task_usd: 0.0406\n{DEAR_OUTPUT}"),
    )
    .await;
    world.model.bill(PROMPT, COMPLETION);
    let daemon = world.start();
    let issue = world.labelled_issue("Greet the world");
    world.wait_for_end(issue).await;

    let requests = world.model.requests().await;
    assert_eq!(requests.len(), 3, "{}", daemon.log_text());
    // The first turn's 16,384 tokens would have cost $0.098: it went with
    // what the $0.0286 left pays for, instead of not at all.
    let first_room = requests[0]["max_completion_tokens"]
        .as_u64()
        .or_else(|| requests[0]["max_tokens"].as_u64())
        .unwrap();
    assert!(
        (4_000..5_000).contains(&first_room),
        "{first_room}: {}",
        requests[0]
    );
    let last = &requests[2];
    assert!(last.get("tools").is_none(), "{last}");
    assert!(
        last.to_string().contains("pays for no further full turn"),
        "{last}"
    );
    let pulls = world.github.pulls(REPO);
    assert_eq!(pulls.len(), 1, "what was committed is delivered");
    assert!(pulls[0].draft);
    let body = &pulls[0].body;
    assert!(
        body.contains("stopped at the budget: budget.task_usd: the next call's worst case"),
        "{body}"
    );
    assert!(
        body.contains("would pass the cap ($0.04, $0.0360 used)"),
        "{body}"
    );
    assert!(!body.contains("is spent"), "{body}");
    assert!(
        body.contains("Changed the greeting"),
        "the model's own summary: {body}"
    );
}

#[tokio::test]
async fn a_spent_daily_cap_holds_the_next_item_back_with_a_comment_and_no_model_call() {
    let world = World::with_repository(
        edit_and_commit(Duration::ZERO),
        &FILES,
        "budget:\n  repository_daily_usd: 0.01\n",
    )
    .await;
    world.model.bill(PROMPT, COMPLETION);
    let daemon = world.start();
    let first = world.labelled_issue("Greet the world");
    world.wait_for_end(first).await;
    let calls = world.model.all_requests().await.len();

    let second = world.labelled_issue("Greet the moon");
    daemon_rig::wait_until(
        "the comment saying when the task runs",
        Duration::from_secs(60),
        async || world.bot_comment_count(second) > 0,
        &world.log_path(),
    )
    .await;
    let comment = world.github.issue(REPO, second).comments[0].2.clone();
    assert!(comment.contains("forgehand will start this at"), "{comment}");
    assert!(comment.contains("00:00 UTC"), "{comment}");
    assert!(
        comment.contains("budget.repository_daily_usd ($0.01) is spent"),
        "{comment}"
    );
    // Two polls later: still waiting, labelled, told once, nothing asked.
    world.two_polls_since(world.github.requests().len()).await;
    assert_eq!(
        world.model.all_requests().await.len(),
        calls,
        "{}",
        daemon.log_text()
    );
    assert_eq!(
        world.github.issue(REPO, second).labels,
        vec!["coding agent".to_owned()]
    );
    assert_eq!(world.bot_comment_count(second), 1);
    let log = daemon.log_text();
    assert!(
        log.contains("s for the budget: budget.repository_daily_usd"),
        "{log}"
    );
}
