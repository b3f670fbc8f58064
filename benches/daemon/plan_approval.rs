//! Plan approval: from a writer's 👍 on a waiting plan to the first edit
//! in the sandbox, on the scripted model. Each round plans an issue (the
//! run ends waiting, with no sandbox), then maya approves it and the next
//! run is timed from the approval to the agent's second request, the one
//! carrying the result of its first edit. The daemon notices an approval
//! at its next poll; add up to `daemon.poll_interval` to these figures
//! (a comment mentioning forgehand is heard at once with webhooks).

use super::{config_yaml, Stage, TOKEN};
use forgehand::config::{Config, Secrets};
use forgehand::daemon::setup;
use forgehand::forge::{ForgeKind, ItemKind, ItemRef};
use forgehand::task::TaskEnd;
use forgehand_test_support::scripted_model::{replace, text, TurnModel};
use forgehand_test_support::stats;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const PLAN: &str =
    "# Implementation Plan (Model A)\n\nChange the greeting.\n\n## Checklist\n- [ ] Change the greeting\n";

pub async fn approval_to_first_edit(rounds: usize) {
    forgehand_test_support::ensure_images().await;
    let stage = Stage::new(&[("greet.py", "print('Hello')\n")]).await;
    let (dir, github) = (&stage.dir, &stage.github);
    let turns = vec![
        (replace("Hello", "Hello, world"), None),
        (text("Changed the greeting."), None),
    ];
    let model = TurnModel::start_with_plan(turns, Some(PLAN.to_owned())).await;
    let base = model.base_url();
    let lookup = move |var: &str| match var {
        "OPENAI_BASE_URL" => Some(base.clone()),
        _ => None,
    };
    let yaml = config_yaml(
        dir.path(),
        &format!("bench-approval-{}", std::process::id()),
        &github.api_url(),
        1,
    ) + "planning:\n  mode: \"single\"\ntriggers:\n  plan_approval: always\n";
    let config = Config::from_yaml(&yaml, Path::new("bench.yaml"), dir.path(), &lookup).unwrap();
    let secrets = Secrets::from_lookup(&|v| match v {
        "GITHUB_TOKEN" => Some(TOKEN.to_owned()),
        "OPENAI_API_KEY" => Some("sk-bench".to_owned()),
        _ => None,
    });
    let assembly = setup::assemble(config, secrets, Some(&[ForgeKind::GitHub]))
        .await
        .unwrap();
    let forge = assembly.forges[0].clone();
    let mut samples = Vec::new();
    for round in 0..=rounds {
        let number = stage.labelled_issue();
        let item = ItemRef {
            forge: ForgeKind::GitHub,
            repo: "acme/app".into(),
            kind: ItemKind::Issue,
            number,
        };
        let waiting = forgehand::task::run(
            &assembly.env,
            forge.clone(),
            item.clone(),
            CancellationToken::new(),
        )
        .await;
        assert_eq!(waiting, TaskEnd::AwaitingApproval);
        let comment = github
            .issue("acme/app", number)
            .comments
            .iter()
            .find(|c| c.1 == forgehand_test_support::fake_github::BOT)
            .map(|c| c.0)
            .unwrap();
        let before = model.requests().await.len();
        github.react(comment, "maya", "+1");
        let started = Instant::now();
        let (env, forge) = (assembly.env.clone(), forge.clone());
        let task =
            tokio::spawn(
                async move { forgehand::task::run(&env, forge, item, CancellationToken::new()).await },
            );
        while model.requests().await.len() < before + 2 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let elapsed = started.elapsed();
        let end = task.await.unwrap();
        assert!(
            matches!(end, TaskEnd::Delivered { .. } | TaskEnd::NoChanges),
            "{end:?}"
        );
        if round > 0 {
            // Round 0 warms the git server and the image cache.
            samples.push(elapsed);
        }
    }
    stats::report("plan approval -> first edit (in the run)", &mut samples);
}
