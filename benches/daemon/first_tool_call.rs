//! A task's first second as the README's rows name it, with `forgehand run`
//! polling the fake GitHub as configured (every second, no jitter), the
//! default configuration otherwise (planning on), a real git remote over
//! smart HTTP, the scripted model and the real Docker engine:
//!
//! - label -> claim: the issue labelled on the fake GitHub to the daemon's
//!   swap to `coding agent processing` (the poll's wait is in it);
//! - claim -> the agent's first request: the first request that offers
//!   tools (the thread's classification, sent beside the sandbox's start,
//!   offers none), and for comparison the first request of any kind;
//! - label -> the first tool call done in the sandbox: the model's first
//!   answer is a `view` of the work tree, and the clock stops when the
//!   request carrying its result arrives (the copy into the sandbox, which
//!   the tools wait for, is in it).
//!
//! On three repositories, one daemon each: a small one (one file), a real
//! one (CPython's standard library, `real_repo`) and the generated large
//! history (`generated_repo`). The first task of each daemon makes the
//! repository's mirror and is reported apart; the figures are the later
//! tasks'. `cargo bench --bench daemon -- first_tool_call [small|real|large]
//! [rounds]`.

use super::large_repo::{bench_repos, large_stage, served_copy, work_folder_gone};
use super::real_repo;
use super::{config_yaml, stop, Stage};
use forgehand_test_support::scripted_model::{call, text, Arrival, TurnModel};
use forgehand_test_support::stats;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// Later tasks per repository unless a count is given.
const ROUNDS: usize = 10;
/// A task still running after this long stops the run.
const TASK_LIMIT: Duration = Duration::from_secs(10 * 60);
const PLAN: &str = "1. Look at the project's files.\n2. Change nothing.";

/// When the first request after the first `since` that `which` picks arrived.
pub fn first_since(model: &TurnModel, since: usize, which: impl Fn(&Arrival) -> bool) -> Option<Instant> {
    model
        .arrivals()
        .into_iter()
        .skip(since)
        .find(|a| which(a))
        .map(|a| a.at)
}

/// One task's clocks.
struct Round {
    outcome: String,
    label_to_claim: Duration,
    claim_to_any_request: Duration,
    claim_to_agent: Duration,
    label_to_tool_done: Duration,
}

/// Labels an issue and follows its task to its end (work folder removed).
async fn one_round(stage: &Stage, model: &TurnModel, state: &Path) -> Round {
    let before = model.arrivals().len();
    let number = stage.labelled_issue();
    let labelled = Instant::now();
    let mut claimed = None;
    let outcome = loop {
        let issue = stage.github.issue("acme/app", number);
        if claimed.is_none() && issue.events.iter().any(|e| e.2 == "coding agent processing") {
            claimed = Some(Instant::now());
        }
        let ended = ["coding agent done", "coding agent failed"]
            .into_iter()
            .find(|l| issue.labels.iter().any(|have| have == l));
        if let Some(label) = ended {
            break label.trim_start_matches("coding agent ").to_owned();
        }
        assert!(
            labelled.elapsed() < TASK_LIMIT,
            "task still running after {TASK_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    work_folder_gone(state).await;
    let claimed = claimed.expect("the task was claimed");
    let since_claim = |which: &dyn Fn(&Arrival) -> bool| {
        first_since(model, before, which).map_or(Duration::ZERO, |at| at.saturating_duration_since(claimed))
    };
    let tool_done = first_since(model, before, |a| a.agent && a.carries_tool_result);
    Round {
        outcome,
        label_to_claim: claimed - labelled,
        claim_to_any_request: since_claim(&|_| true),
        claim_to_agent: since_claim(&|a| a.agent && a.offers_tools),
        label_to_tool_done: tool_done.map_or(Duration::ZERO, |at| at - labelled),
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// `rounds` later tasks after a first one on `stage`, with one daemon.
async fn on(what: &str, stage: Stage, rounds: usize) {
    let turns = vec![
        (
            call("text_editor_view", json!({"path": "/workspace/project"})),
            None,
        ),
        (text("Nothing to change."), None),
    ];
    let model = TurnModel::start_with_plan(turns, Some(PLAN.to_owned())).await;
    let config = stage.dir.path().join("config.yaml");
    let instance = format!("bench-first-call-{}", std::process::id());
    std::fs::write(
        &config,
        config_yaml(stage.dir.path(), &instance, &stage.github.api_url(), 1),
    )
    .unwrap();
    let state = stage.dir.path().join("state");
    let mut child = stage.daemon(&config, &model.base_url(), &[]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let first = one_round(&stage, &model, &state).await;
    println!(
        "{what}: first task ({}): label->claim {}, claim->agent's first request {}, label->first tool call done {}",
        first.outcome,
        seconds(first.label_to_claim),
        seconds(first.claim_to_agent),
        seconds(first.label_to_tool_done)
    );
    let mut later = Vec::new();
    for _ in 0..rounds {
        later.push(one_round(&stage, &model, &state).await);
    }
    stop(&mut child);
    let failed = later.iter().filter(|r| r.outcome != "done").count();
    println!("{what}: {} later tasks, {failed} not done", later.len());
    let column = |name: &str, pick: fn(&Round) -> Duration| {
        let mut samples: Vec<Duration> = later.iter().map(pick).collect();
        stats::report(&format!("{what}: {name}"), &mut samples);
    };
    column("label -> claim", |r| r.label_to_claim);
    column("claim -> first request, any kind", |r| r.claim_to_any_request);
    column("claim -> agent's first request", |r| r.claim_to_agent);
    column("label -> first tool call done", |r| r.label_to_tool_done);
}

/// The repositories named after `first_tool_call` (all three if none), and
/// the rounds (a number there).
pub async fn figures() {
    let args: Vec<String> = std::env::args()
        .skip_while(|a| a != "first_tool_call")
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let rounds = args.iter().find_map(|a| a.parse().ok()).unwrap_or(ROUNDS);
    let wanted =
        |name: &str| args.iter().all(|a| a.parse::<usize>().is_ok()) || args.iter().any(|a| a == name);
    println!("label -> first tool call, planning on (the default), {rounds} later tasks per repository");
    if wanted("small") {
        let stage = Stage::new(&[("greet.py", "print('Hello')\n")]).await;
        on("small (1 file)", stage, rounds).await;
    }
    if wanted("real") {
        let cached = tokio::task::spawn_blocking(|| real_repo::cached(&bench_repos()))
            .await
            .unwrap();
        println!("real repository: {}", real_repo::describe(&cached));
        on("real (CPython's Lib)", served_copy(&cached).await, rounds).await;
    }
    if wanted("large") {
        on("large (50,001 commits)", large_stage().await, rounds).await;
    }
}
