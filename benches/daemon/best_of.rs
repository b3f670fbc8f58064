//! Best of N against one attempt: the same issue worked with
//! `agent.attempts: 1` and `3` on the scripted model (each attempt edits,
//! commits and answers; the repository's test command runs after each;
//! a judge compares the three that pass), three attempts side by side
//! (`daemon.max_concurrent_tasks: 3`). Measured: the task's wall time from
//! start to end, and the model calls billed (every answer reports the same
//! usage, so their ratio is the cost multiple).

use super::{config_yaml, Stage};
use forgehand::config::{Config, Secrets};
use forgehand::daemon::setup;
use forgehand::forge::{ForgeKind, ItemKind, ItemRef};
use forgehand_test_support::scripted_model::attempts::answer_attempts;
use forgehand_test_support::scripted_model::{replace, run, text, TurnModel};
use forgehand_test_support::stats;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const FILES: [(&str, &str); 2] = [
    ("greet.py", "print('Hello')\n"),
    (".forgehand.yaml", "test: grep -q 'Hello, world' greet.py\n"),
];

const JUDGE: &str = r#"{"choice": 1, "reason": "The three are alike; the first is kept."}"#;

/// Wall times of `rounds` tasks with `attempts`, and the model calls of one.
async fn tasks_with(attempts: u32, rounds: usize) -> (Vec<Duration>, usize) {
    let stage = Stage::new(&FILES).await;
    let (dir, github) = (&stage.dir, &stage.github);
    let script = vec![
        replace("Hello", "Hello, world"),
        run("git add -A && git commit -qm 'Greet the world'"),
        text("Changed the greeting."),
    ];
    // One attempt is answered by turn; several by attempt, and the judge.
    let model = TurnModel::start(script.iter().map(|r| (r.clone(), None)).collect()).await;
    if attempts > 1 {
        answer_attempts(&model, vec![script; attempts as usize], JUDGE, None).await;
    }
    let base = model.base_url();
    let lookup = move |var: &str| match var {
        "OPENAI_BASE_URL" => Some(base.clone()),
        _ => None,
    };
    let yaml =
        config_yaml(
            dir.path(),
            &format!("bench-best-of-{attempts}-{}", std::process::id()),
            &github.api_url(),
            3,
        ) + &format!("agent:\n  attempts: {attempts}\n  test_fix_rounds: 0\nplanning:\n  mode: \"off\"\n");
    let config = Config::from_yaml(&yaml, Path::new("bench.yaml"), dir.path(), &lookup).unwrap();
    let secrets = Secrets::from_lookup(&|v| match v {
        "GITHUB_TOKEN" => Some(super::TOKEN.to_owned()),
        "OPENAI_API_KEY" => Some("sk-bench".to_owned()),
        _ => None,
    });
    let assembly = setup::assemble(config, secrets, Some(&[ForgeKind::GitHub]))
        .await
        .unwrap();
    let forge = assembly.forges[0].clone();
    let (mut samples, mut calls) = (Vec::new(), 0);
    for round in 0..=rounds {
        let number = stage.labelled_issue();
        let item = ItemRef {
            forge: ForgeKind::GitHub,
            repo: "acme/app".into(),
            kind: ItemKind::Issue,
            number,
        };
        let before = model.all_requests().await.len();
        let started = Instant::now();
        let end = forgehand::task::run(&assembly.env, forge.clone(), item, CancellationToken::new()).await;
        let took = started.elapsed();
        assert_eq!(end.outcome(), "delivered", "{end:?}");
        calls = model.all_requests().await.len() - before;
        if round > 0 {
            // Round 0 warms the git server and the image cache.
            samples.push(took);
        }
    }
    (samples, calls)
}

/// Prints the figures for one attempt and for best of 3.
pub async fn best_of_three() {
    const ROUNDS: usize = 5;
    let (mut one, one_calls) = tasks_with(1, ROUNDS).await;
    let (mut three, three_calls) = tasks_with(3, ROUNDS).await;
    let median = |samples: &mut Vec<Duration>| {
        samples.sort();
        samples[samples.len() / 2]
    };
    let (m1, m3) = (median(&mut one), median(&mut three));
    stats::report("task wall time, 1 attempt (scripted model)", &mut one);
    stats::report(
        "task wall time, best of 3 side by side (scripted model)",
        &mut three,
    );
    println!(
        "best of 3: +{:.0} ms wall time over one attempt (median {:.0} ms vs {:.0} ms); {three_calls} model calls vs {one_calls}: cost x{:.2} (each answer billed alike; the judge's call included)",
        (m3.as_secs_f64() - m1.as_secs_f64()) * 1e3,
        m3.as_secs_f64() * 1e3,
        m1.as_secs_f64() * 1e3,
        three_calls as f64 / one_calls.max(1) as f64
    );
}
