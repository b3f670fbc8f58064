//! The sage plan debate against model servers in all three wire formats
//! (o3 over OpenAI's, Gemini's and Anthropic's APIs): consensus in round 2,
//! all rounds, a judge answering garbage, a debater timing out, Chain of
//! Recursive Thoughts with one model, identical call prefixes with cached
//! tokens priced, and a restart that repeats no finished call.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::debate_model;
use forgehand_test_support::scripted_model;

use debate_model::{texts, Behaviour, DebateModel};
use forgehand::config::{Config, ModelConfig, ProviderKind, Secrets};
use forgehand::journal::{Journal, PlanCalls};
use forgehand::llm::router::{self, Router};
use forgehand::planning::debate::{CallRecord, Checkpoints, DebateSettings, Method, PlanOutcome, Planner};
use forgehand::planning::prompts::Context;
use scripted_model::Format;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const REQUEST: &str = "Add a --verbose flag to the CLI parser in src/cli.rs.";
const PACKED: &str = "<documents>\n<document index=\"1\">\n<source>src/cli.rs</source>\n<document_content>\nfn parse() {}\n</document_content>\n</document>\n</documents>";

struct Models {
    o3: DebateModel,
    gemini: DebateModel,
    claude: DebateModel,
}

const AGREE: &str = r#"{"consensusScore": 0.95, "consensusReached": true, "reasoning": "the plans agree"}"#;
const DIFFER: &str = r#"{"consensusScore": 0.5, "consensusReached": false, "reasoning": "the plans differ"}"#;

impl Models {
    async fn start(o3: Behaviour, gemini: Behaviour, claude: Behaviour) -> Models {
        Models {
            o3: DebateModel::start(Format::OpenAi, "o3", o3).await,
            gemini: DebateModel::start(Format::Gemini, "gemini-2.5-pro", gemini).await,
            claude: DebateModel::start(Format::Anthropic, "claude-sonnet-4", claude).await,
        }
    }

    /// A router over the three, with the keys `keys` names.
    fn router(&self, keys: &[&str]) -> Router {
        let mut config = Config::defaults();
        // Another OpenAI base URL would make o3 usable without a key (an
        // OpenAI-compatible server): point there only when the key is given.
        if keys.contains(&"OPENAI_API_KEY") {
            config.llm.openai_base_url = self.o3.base_url();
        }
        config.llm.gemini_base_url = self.gemini.base_url();
        config.llm.anthropic_base_url = self.claude.base_url();
        config.llm.retry.max_retries = 0;
        config.llm.models = vec![
            model(ProviderKind::OpenAi, "o3", 200_000),
            model(ProviderKind::Gemini, "gemini-2.5-pro", 1_000_000),
            model(ProviderKind::Anthropic, "claude-sonnet-4", 200_000),
        ];
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        let secrets = Secrets::from_lookup(&|v| keys.iter().any(|k| k == v).then(|| "test-key".to_owned()));
        router::from_config(&config.llm, &secrets).unwrap()
    }
}

fn model(provider: ProviderKind, name: &str, max: u64) -> ModelConfig {
    ModelConfig {
        provider,
        model: name.into(),
        max_input_tokens: Some(max),
        reasoning_effort: None,
        light: false,
        overrides: Default::default(),
    }
}

const ALL_KEYS: [&str; 3] = ["OPENAI_API_KEY", "GEMINI_API_KEY", "ANTHROPIC_API_KEY"];

fn settings() -> DebateSettings {
    let mut s = DebateSettings::from_config(&Config::defaults().planning, 4096);
    s.call_timeout = Duration::from_secs(20);
    s
}

async fn debate(router: &Router, settings: &DebateSettings, checkpoints: &dyn Checkpoints) -> PlanOutcome {
    let prices = Config::defaults().llm.prices;
    let planner = Planner {
        model: router,
        settings,
        prices: &prices,
        checkpoints,
        observer: None,
    };
    let context = Context::new(
        forgehand::prompts::Prompts::embedded(),
        PACKED,
        forgehand::llm::tokens::count_text(PACKED),
    );
    planner.plan(&context, REQUEST).await.unwrap()
}

#[tokio::test]
async fn three_models_reach_consensus_in_round_two_and_stop() {
    let o3 = Behaviour {
        consensus: vec![AGREE.into()],
        ..Default::default()
    };
    let models = Models::start(o3, Behaviour::default(), Behaviour::default()).await;
    let router = models.router(&ALL_KEYS);
    let outcome = debate(&router, &settings(), &forgehand::planning::debate::NoCheckpoints).await;

    // o3 debates (A) and judges; the others debate (B, C).
    assert_eq!(
        models.o3.phases(),
        ["plan", "critique", "revise", "consensus", "judge"]
    );
    assert_eq!(models.gemini.phases(), ["plan", "critique", "revise"]);
    assert_eq!(models.claude.phases(), ["plan", "critique", "revise"]);
    assert_eq!(outcome.rounds.len(), 2);
    assert_eq!(outcome.rounds[0].plans.len(), 3);
    assert_eq!(outcome.rounds[0].critiques.len(), 3);
    let consensus = outcome.rounds[1].consensus.as_ref().unwrap();
    assert_eq!(consensus.score, 0.95);
    assert!(outcome.final_plan.starts_with("# Final Implementation Plan"));
    assert_eq!(outcome.confidence, Some(0.8));
    assert_eq!(
        outcome.checklist(),
        ["Add the flag parser", "Test the parser", "Document the flag"]
    );
    assert!(outcome.notes.is_empty(), "{:?}", outcome.notes);
    assert_eq!((outcome.calls, outcome.replayed), (11, 0));
    assert!(
        outcome.method.contains("o3 (A)") && outcome.method.contains("judged by o3"),
        "{}",
        outcome.method
    );

    // Each plan was critiqued by both other models, and each revision got
    // the sections about its own plan.
    let gemini_revise = &models.gemini.calls()[2].1;
    let (_, user) = texts(Format::Gemini, gemini_revise);
    assert!(
        user.contains("### From MODEL A") && user.contains("### From MODEL C"),
        "{user}"
    );
    assert!(
        user.contains("says plan B needs tests.") && user.contains("### Weaknesses"),
        "the whole section about its own plan, sub-headings and all: {user}"
    );
    assert!(
        !user.contains("plan A needs tests") && !user.contains("plan C needs tests"),
        "nothing about the other plans: {user}"
    );

    // Usage per phase, cached tokens read from all three formats and priced.
    let phases: Vec<&str> = outcome.phases.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(
        phases,
        [
            "round 1: plans",
            "round 1: critiques",
            "round 2: revisions",
            "round 2: consensus",
            "judgement"
        ]
    );
    for model in ["o3", "gemini-2.5-pro", "claude-sonnet-4"] {
        let usage = outcome.usage.per_model()[model];
        assert!(usage.cached_input_tokens > 0, "{model}: {usage:?}");
        assert!(usage.cached_input_tokens < usage.input_tokens);
    }
    let report = outcome.report();
    assert!(
        report.contains("consensus 0.95") && report.contains("cached"),
        "{report}"
    );
}

#[tokio::test]
async fn a_debate_across_the_three_providers_current_models_passes_each_ones_rules() {
    let agree = || Behaviour {
        consensus: vec![AGREE.into()],
        ..Default::default()
    };
    let gpt = DebateModel::start(Format::Responses, "gpt-5.6", agree()).await;
    let claude = DebateModel::start(Format::Anthropic, "claude-opus-5-5", agree()).await;
    let gemini = DebateModel::start(Format::Gemini, "gemini-3.1-pro-preview", agree()).await;
    let mut config = Config::defaults();
    config.llm.openai_base_url = gpt.base_url();
    config.llm.anthropic_base_url = claude.base_url();
    config.llm.gemini_base_url = gemini.base_url();
    config.llm.retry.max_retries = 0;
    let current = |provider, name: &str, api| ModelConfig {
        provider,
        model: name.into(),
        max_input_tokens: None,
        reasoning_effort: Some("high".into()),
        light: false,
        overrides: forgehand::config::ModelOverrides {
            api: Some(api),
            ..Default::default()
        },
    };
    config.llm.models = vec![
        current(ProviderKind::OpenAi, "gpt-5.6", forgehand::config::Api::Responses),
        current(
            ProviderKind::Anthropic,
            "claude-opus-5-5",
            forgehand::config::Api::Messages,
        ),
        current(
            ProviderKind::Gemini,
            "gemini-3.1-pro-preview",
            forgehand::config::Api::GenerateContent,
        ),
    ];
    let router = router::from_config(
        &config.llm,
        &Secrets::from_lookup(&|_| Some("test-key".to_owned())),
    )
    .unwrap();
    let outcome = debate(&router, &settings(), &forgehand::planning::debate::NoCheckpoints).await;
    for (name, server) in [
        ("gpt-5.6", &gpt),
        ("claude-opus-5-5", &claude),
        ("gemini-3.1-pro-preview", &gemini),
    ] {
        assert!(server.refused().is_empty(), "{name}: {:?}", server.refused());
        assert!(server.calls().len() >= 2, "{name} planned and critiqued");
        assert!(outcome.usage.per_model()[name].input_tokens > 0, "{name}");
    }
    let (_, body) = &gpt.calls()[0];
    assert_eq!(
        (body["store"].clone(), body["reasoning"]["effort"].clone()),
        (json!(false), json!("high"))
    );
    let (_, body) = &claude.calls()[0];
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    let (_, body) = &gemini.calls()[0];
    assert_eq!(
        body["generationConfig"]["thinkingConfig"]["thinkingLevel"],
        "high"
    );
    assert!(
        outcome.report().contains("consensus 0.95"),
        "{}",
        outcome.report()
    );
}

#[tokio::test]
async fn every_call_starts_with_the_same_bytes_up_to_the_end_of_the_context() {
    let models = Models::start(
        Behaviour {
            consensus: vec![DIFFER.into()],
            ..Default::default()
        },
        Behaviour::default(),
        Behaviour::default(),
    )
    .await;
    let router = models.router(&ALL_KEYS);
    debate(&router, &settings(), &forgehand::planning::debate::NoCheckpoints).await;
    let mut systems = std::collections::HashSet::new();
    let mut prefixes = std::collections::HashSet::new();
    let mut calls = 0;
    for (format, server) in [
        (Format::OpenAi, &models.o3),
        (Format::Gemini, &models.gemini),
        (Format::Anthropic, &models.claude),
    ] {
        for (_, body) in server.calls() {
            let (system, user) = texts(format, &body);
            assert!(system.ends_with(PACKED), "the context closes the system text");
            systems.insert(system);
            prefixes.insert(user.split("## Your task").next().unwrap().to_owned());
            calls += 1;
        }
    }
    assert_eq!(calls, 3 + 3 + 3 + 1 + 3 + 3 + 1 + 1, "all three rounds ran");
    assert_eq!(systems.len(), 1, "one system text for every call");
    assert_eq!(
        prefixes.len(),
        1,
        "the request opens every user message the same way"
    );
    // Anthropic gets a cache breakpoint at the end of the context block.
    let claude = &models.claude.calls()[0].1;
    assert_eq!(claude["system"][0]["cache_control"]["type"], "ephemeral");
}

#[tokio::test]
async fn without_consensus_all_rounds_run_and_the_judge_decides() {
    let models = Models::start(
        Behaviour {
            consensus: vec![DIFFER.into()],
            ..Default::default()
        },
        Behaviour::default(),
        Behaviour::default(),
    )
    .await;
    let router = models.router(&ALL_KEYS);
    let outcome = debate(&router, &settings(), &forgehand::planning::debate::NoCheckpoints).await;
    assert_eq!(
        models.o3.phases(),
        [
            "plan",
            "critique",
            "revise",
            "consensus",
            "critique",
            "revise",
            "consensus",
            "judge"
        ]
    );
    assert_eq!(
        models.claude.phases(),
        ["plan", "critique", "revise", "critique", "revise"]
    );
    assert_eq!(outcome.rounds.len(), 3);
    assert!(
        outcome.rounds[2].critiques.is_empty(),
        "no critique after the last round"
    );
    assert!(outcome.final_plan.starts_with("# Final Implementation Plan"));
}

#[tokio::test]
async fn a_judge_answering_garbage_is_noted_and_the_debate_goes_on() {
    let models = Models::start(
        Behaviour {
            consensus: vec!["They look quite alike to me!".into()],
            judge_answer: Some("I cannot decide.".into()),
            ..Default::default()
        },
        Behaviour::default(),
        Behaviour::default(),
    )
    .await;
    let router = models.router(&ALL_KEYS);
    let outcome = debate(&router, &settings(), &forgehand::planning::debate::NoCheckpoints).await;
    assert_eq!(outcome.rounds.len(), 3, "garbage is no consensus");
    assert!(outcome.rounds.iter().all(|r| r.consensus.is_none()));
    assert_eq!(
        outcome
            .notes
            .iter()
            .filter(|n| n.contains("not the JSON asked for"))
            .count(),
        2,
        "{:?}",
        outcome.notes
    );
    // The judge's free text has no heading: it stands as the final plan.
    assert_eq!(outcome.final_plan, "I cannot decide.");
    assert_eq!(outcome.confidence, None);
}

#[tokio::test]
async fn a_debater_that_times_out_leaves_the_debate() {
    let models = Models::start(
        Behaviour {
            consensus: vec![AGREE.into()],
            ..Default::default()
        },
        Behaviour::default(),
        Behaviour {
            delay: Some(Duration::from_secs(5)),
            ..Default::default()
        },
    )
    .await;
    let router = models.router(&ALL_KEYS);
    let mut settings = settings();
    settings.call_timeout = Duration::from_millis(700);
    let outcome = debate(&router, &settings, &forgehand::planning::debate::NoCheckpoints).await;
    assert_eq!(outcome.rounds[0].plans.len(), 2);
    assert!(
        outcome.notes.iter().any(|n| n.contains("claude-sonnet-4 (C) left the debate") && n.contains("did not answer within")),
        "{:?}",
        outcome.notes
    );
    assert_eq!(models.claude.phases(), ["plan"], "no more calls once it left");
    assert!(outcome.final_plan.starts_with("# Final Implementation Plan"));
}

#[tokio::test]
async fn a_failing_debater_leaves_and_one_left_stands_alone() {
    let models = Models::start(
        Behaviour::default(),
        Behaviour {
            refuse_plans: true,
            ..Default::default()
        },
        Behaviour::default(),
    )
    .await;
    // Only o3 and Gemini are usable; Gemini refuses to plan.
    let router = models.router(&["OPENAI_API_KEY", "GEMINI_API_KEY"]);
    let outcome = debate(&router, &settings(), &forgehand::planning::debate::NoCheckpoints).await;
    assert!(outcome.final_plan.contains("By o3"), "{}", outcome.final_plan);
    assert!(
        outcome
            .notes
            .iter()
            .any(|n| n.contains("gemini-2.5-pro (B) left the debate")),
        "{:?}",
        outcome.notes
    );
    assert!(
        outcome.notes.iter().any(|n| n.contains("only one plan is left")),
        "{:?}",
        outcome.notes
    );
    assert_eq!(models.o3.phases(), ["plan"]);
}

#[tokio::test]
async fn one_model_debates_itself_by_chain_of_recursive_thoughts() {
    let models = Models::start(Behaviour::default(), Behaviour::default(), Behaviour::default()).await;
    let router = models.router(&["ANTHROPIC_API_KEY"]);
    let outcome = debate(&router, &settings(), &forgehand::planning::debate::NoCheckpoints).await;
    // Three initial plans, then one per round after the first: 3 + 2.
    assert_eq!(models.claude.phases(), ["self"; 5]);
    assert!(models.o3.phases().is_empty() && models.gemini.phases().is_empty());
    assert!(
        outcome.final_plan.starts_with("# Implementation Plan 5"),
        "{}",
        outcome.final_plan
    );
    assert!(outcome
        .method
        .starts_with("Chain of Recursive Thoughts by claude-sonnet-4"));
    let calls = models.claude.calls();
    let (_, first) = texts(Format::Anthropic, &calls[0].1);
    let (_, last) = texts(Format::Anthropic, &calls[4].1);
    assert!(
        first.contains(REQUEST),
        "the request is in the first self-debate call too"
    );
    assert!(!first.contains("--- PLAN 1 ---"));
    assert!(
        last.contains("--- PLAN 4 ---") && last.contains("FINAL"),
        "{last}"
    );
    for (_, body) in &calls {
        let (system, _) = texts(Format::Anthropic, body);
        assert!(system.ends_with(PACKED), "every call carries the context");
    }
}

#[tokio::test]
async fn single_mode_asks_the_model_the_size_chooses_once() {
    let models = Models::start(Behaviour::default(), Behaviour::default(), Behaviour::default()).await;
    let router = models.router(&ALL_KEYS);
    let mut settings = settings();
    settings.method = Method::Single;
    let outcome = debate(&router, &settings, &forgehand::planning::debate::NoCheckpoints).await;
    assert_eq!(models.o3.phases(), ["plan"]);
    assert!(models.gemini.phases().is_empty());
    assert_eq!(outcome.method, "one plan by o3");
}

/// Checkpoints in the journal that "kill" the debate after `limit` saves.
struct KillAfter<'a> {
    inner: PlanCalls<'a>,
    saves: AtomicUsize,
    limit: usize,
    kill: CancellationToken,
}

impl Checkpoints for KillAfter<'_> {
    fn load(&self, key: &str) -> Option<CallRecord> {
        self.inner.load(key)
    }
    fn save(&self, key: &str, record: &CallRecord) {
        self.inner.save(key, record);
        if self.saves.fetch_add(1, Ordering::SeqCst) + 1 >= self.limit {
            self.kill.cancel();
        }
    }
}

#[tokio::test]
async fn a_restart_mid_debate_repeats_no_finished_call() {
    let state = tempfile::tempdir().unwrap();
    let task = "github:acme/app:issue:7";
    let agree = Behaviour {
        consensus: vec![AGREE.into()],
        ..Default::default()
    };
    // First life: killed once round 1 (3 plans, 3 critiques) is saved.
    {
        let journal = Journal::open(state.path()).unwrap();
        journal.begin(task).unwrap();
        let models = Models::start(agree.clone(), Behaviour::default(), Behaviour::default()).await;
        let router = models.router(&ALL_KEYS);
        let kill = CancellationToken::new();
        let checkpoints = KillAfter {
            inner: PlanCalls {
                journal: &journal,
                task,
            },
            saves: AtomicUsize::new(0),
            limit: 6,
            kill: kill.clone(),
        };
        let settings = settings();
        tokio::select! {
            _ = debate(&router, &settings, &checkpoints) => panic!("the debate should have been killed"),
            _ = kill.cancelled() => {}
        }
        // The kill lands at the debate's next await: a revision request may
        // already be on its way, unanswered and unsaved (so repeated later).
        let phases = models.o3.phases();
        assert_eq!(phases[..2], ["plan", "critique"], "{phases:?}");
        assert!(phases.len() == 2 || phases[2] == "revise", "{phases:?}");
    }
    // Second life: a new process, new servers; round 1 is replayed from the journal.
    let journal = Journal::open(state.path()).unwrap();
    let models = Models::start(agree, Behaviour::default(), Behaviour::default()).await;
    let router = models.router(&ALL_KEYS);
    let checkpoints = PlanCalls {
        journal: &journal,
        task,
    };
    let outcome = debate(&router, &settings(), &checkpoints).await;
    assert_eq!(models.o3.phases(), ["revise", "consensus", "judge"]);
    assert_eq!(models.gemini.phases(), ["revise"]);
    assert_eq!(models.claude.phases(), ["revise"]);
    assert_eq!((outcome.replayed, outcome.calls), (6, 5));
    assert_eq!(
        outcome.rounds[0].critiques.len(),
        3,
        "the replayed critiques reached the revisions"
    );
    // Replayed calls still count in the debate's usage.
    let first_phase = &outcome.phases[0];
    assert_eq!(first_phase.phase, "round 1: plans");
    assert!(first_phase.usage.input_tokens > 0);
}

#[tokio::test]
async fn a_debate_that_runs_out_of_time_still_goes_to_the_judge() {
    let slow = || Behaviour {
        delay: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    let models = Models::start(slow(), slow(), slow()).await;
    let router = models.router(&ALL_KEYS);
    let mut settings = settings();
    // 6 s in all, of which 1.5 s are the judge's: the debate stops early.
    settings.time_limit = Duration::from_secs(6);
    settings.call_timeout = Duration::from_secs(4);
    let outcome = debate(&router, &settings, &forgehand::planning::debate::NoCheckpoints).await;
    assert!(
        outcome
            .notes
            .iter()
            .any(|n| n.contains("the debate ran out of its time") && n.contains("goes to judgement")),
        "{:?}",
        outcome.notes
    );
    assert_eq!(models.o3.phases().last().map(String::as_str), Some("judge"));
    assert!(
        outcome.final_plan.starts_with("# Final Implementation Plan"),
        "{}",
        outcome.final_plan
    );
    assert!(
        outcome.made.contains("the judge, o3, chose or merged"),
        "{}",
        outcome.made
    );
}

#[tokio::test]
async fn an_unreachable_debater_is_tried_again_then_another_model_answers_for_it() {
    let models = Models::start(
        Behaviour {
            consensus: vec![AGREE.into()],
            ..Default::default()
        },
        Behaviour::default(),
        Behaviour::default(),
    )
    .await;
    let mut config = Config::defaults();
    config.llm.openai_base_url = models.o3.base_url();
    config.llm.gemini_base_url = models.gemini.base_url();
    // Nothing listens there: every connection is refused.
    config.llm.anthropic_base_url = "http://127.0.0.1:9".into();
    config.llm.retry.max_retries = 0;
    config.llm.models = vec![
        model(ProviderKind::OpenAi, "o3", 200_000),
        model(ProviderKind::Gemini, "gemini-2.5-pro", 1_000_000),
        model(ProviderKind::Anthropic, "claude-sonnet-4", 200_000),
    ];
    let secrets = Secrets::from_lookup(&|_| Some("test-key".to_owned()));
    let router = router::from_config(&config.llm, &secrets).unwrap();
    let outcome = debate(&router, &settings(), &forgehand::planning::debate::NoCheckpoints).await;
    assert_eq!(
        outcome.rounds[0].plans.len(),
        3,
        "no debater left: {:?}",
        outcome.notes
    );
    assert!(
        outcome
            .notes
            .iter()
            .any(|n| n.starts_with("claude-sonnet-4 could not answer") && n.contains("answered in its place")),
        "{:?}",
        outcome.notes
    );
    assert!(outcome.final_plan.starts_with("# Final Implementation Plan"));
}

#[tokio::test]
async fn a_debater_refused_for_the_size_of_the_request_hands_its_call_to_a_model_that_fits() {
    let models = Models::start(
        Behaviour {
            consensus: vec![AGREE.into()],
            ..Default::default()
        },
        // Gemini refuses to plan in its own words: the input is over its window.
        Behaviour {
            plans_too_long: true,
            ..Default::default()
        },
        Behaviour::default(),
    )
    .await;
    let router = models.router(&ALL_KEYS);
    let outcome = debate(&router, &settings(), &forgehand::planning::debate::NoCheckpoints).await;
    assert_eq!(
        outcome.rounds[0].plans.len(),
        3,
        "no debater left: {:?}",
        outcome.notes
    );
    assert!(
        outcome
            .notes
            .iter()
            .any(|n| n.starts_with("gemini-2.5-pro could not answer")
                && n.contains("context window")
                && n.contains("answered in its place")),
        "{:?}",
        outcome.notes
    );
    assert!(
        !outcome
            .notes
            .iter()
            .any(|n| n.contains("gemini-2.5-pro (B) left the debate")),
        "{:?}",
        outcome.notes
    );
}
