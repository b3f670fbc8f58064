//! A task that plans first, end to end: the real daemon, a fake GitHub, a
//! real git remote, real Docker. The packed checkout goes to the planner,
//! the plan reaches the agent's prompt and the progress comment as a
//! checklist, and the agent's `update_plan` calls tick it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::fake_github;
use forgehand_test_support::github_world;
use forgehand_test_support::scripted_model;

use fake_github::BOT;
use github_world::{World, REPO};
use scripted_model::{call, text, SAGE_SYSTEM};
use serde_json::json;

const PLAN: &str = "# Implementation Plan (Model A)\n\nChange the greeting in greet.py.\n\n## Checklist\n- [ ] Change the greeting\n- [ ] Commit the change\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_reaches_the_agent_and_its_checklist_is_ticked_on_the_comment() {
    let steps = |first: &str, second: &str| {
        json!({"plan": [
            {"step": "Change the greeting", "status": first},
            {"step": "Commit the change", "status": second}
        ]})
    };
    let turns = vec![
        (call("update_plan", steps("in_progress", "pending")), None),
        (
            call(
                "text_editor_str_replace",
                json!({"path": "/workspace/project/greet.py", "old_str": "Hello", "new_str": "Hello, world"}),
            ),
            None,
        ),
        (
            call(
                "command_executor_execute_command",
                json!({"command": "git add -A && git commit -qm 'Greet the whole world'"}),
            ),
            None,
        ),
        (call("update_plan", steps("completed", "completed")), None),
        (text("Changed the greeting, as planned."), None),
    ];
    let world = World::with_planning(turns, PLAN).await;
    let gh = &world.github;
    let (issue, mut daemon) = world.deliver_greeting(&[]).await;

    // The planner got the packed checkout and the request.
    let all = world.model.all_requests().await;
    let planning: Vec<_> = all
        .iter()
        .filter(|r| {
            r["messages"][0]["content"]
                .as_str()
                .unwrap()
                .starts_with(SAGE_SYSTEM)
        })
        .collect();
    assert_eq!(planning.len(), 1, "single mode asks once");
    let system = planning[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("<source>greet.py</source>") && system.contains("print('Hello')"),
        "{system}"
    );
    let user = planning[0]["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("hello to the world") && user.contains("Implementation Plan (Model A)"));
    // The agent's working rules are the agent's: no "commit, do not push" for planners.
    assert!(user.contains("# Task: issue"), "{user}");
    assert!(
        !user.contains("Do not push") && !user.contains("## Where you work"),
        "{user}"
    );

    // The agent got the plan and the tool to keep it current.
    let agent = world.model.requests().await;
    assert_eq!(agent.len(), 5);
    let first = agent[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        first.contains("## The plan") && first.contains("- [ ] Commit the change"),
        "{first}"
    );
    assert!(
        first.contains("## Where you work") && first.contains("Do not push"),
        "{first}"
    );
    // Told truly how the plan was made (single mode: one model, no review).
    assert!(
        first.contains("read the code and wrote this plan; no other model reviewed it"),
        "{first}"
    );
    assert!(!first.contains("agreed on this plan"), "{first}");
    assert!(agent[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["function"]["name"] == "update_plan"));
    assert!(agent[1]
        .to_string()
        .contains("Plan updated: 0 of 2 steps completed."));

    // One progress comment: the phases, then the plan, all ticked.
    let comments: Vec<_> = gh
        .issue(REPO, issue)
        .comments
        .into_iter()
        .filter(|c| c.1 == BOT)
        .collect();
    assert_eq!(comments.len(), 1);
    let progress = &comments[0].2;
    assert!(progress.contains("- [x] Plan the change"), "{progress}");
    assert!(progress.contains("**Plan** (2 of 2 done)"), "{progress}");
    assert!(
        progress.contains("- [x] Change the greeting\n- [x] Commit the change"),
        "{progress}"
    );
    assert!(
        progress.contains("Packed the whole checkout for planning: 2 files"),
        "{progress}"
    );
    assert!(progress.contains("Planned: one plan by"), "{progress}");
    // The plan itself, collapsed, on the comment and in the PR's body.
    assert!(
        progress.contains("<details><summary>The plan: one plan by"),
        "{progress}"
    );
    assert!(progress.contains("# Implementation Plan (Model A)"), "{progress}");
    let pulls = gh.pulls(REPO);
    assert_eq!(pulls.len(), 1);
    assert!(
        pulls[0].body.contains("<details><summary>The plan: one plan by")
            && pulls[0].body.contains("# Implementation Plan (Model A)"),
        "{}",
        pulls[0].body
    );
    daemon.terminate();
}
