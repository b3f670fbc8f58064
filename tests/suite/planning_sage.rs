//! sage-opinion and sage-review against model servers in their wire
//! formats: the packed size picks the model at each threshold, a missing
//! key and an unreachable OpenAI fall back to Gemini, content over every
//! limit is an error naming the count and the limits, and review blocks
//! that match once, twice and not at all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::debate_model;
use forgehand_test_support::scripted_model;

use debate_model::{Behaviour, DebateModel};
use forgehand::config::{Config, ModelConfig, ProviderKind, Secrets};
use forgehand::llm::router;
use forgehand::planning::pack::PackOptions;
use forgehand::planning::review::Fit;
use forgehand::planning::sage::{Sage, SageError};
use scripted_model::Format;
use std::path::Path;

/// Small limits stand for the specification's 200K and 1M, so the test
/// files stay small: o3 takes up to 2,000 tokens, Gemini up to 20,000.
const O3_LIMIT: u64 = 2_000;
const GEMINI_LIMIT: u64 = 20_000;

struct Setup {
    o3: DebateModel,
    gemini: DebateModel,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn new(review_answer: Option<&str>) -> Setup {
        let behaviour = Behaviour {
            review_answer: review_answer.map(str::to_owned),
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small.rs"), "fn a() {}\n").unwrap();
        // About 5,000 and 30,000 tokens.
        std::fs::write(
            dir.path().join("medium.txt"),
            "alpha beta gamma delta ".repeat(1_200),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("large.txt"),
            "alpha beta gamma delta ".repeat(7_500),
        )
        .unwrap();
        std::fs::write(dir.path().join("twice.rs"), "x();\nx();\n").unwrap();
        Setup {
            o3: DebateModel::start(Format::OpenAi, "o3", behaviour.clone()).await,
            gemini: DebateModel::start(Format::Gemini, "gemini-2.5-pro", behaviour).await,
            dir,
        }
    }

    fn router(&self, keys: &[&str], openai_url: Option<&str>) -> router::Router {
        let mut config = Config::defaults();
        if keys.contains(&"OPENAI_API_KEY") {
            config.llm.openai_base_url = openai_url
                .map(str::to_owned)
                .unwrap_or_else(|| self.o3.base_url());
        }
        config.llm.gemini_base_url = self.gemini.base_url();
        config.llm.retry.max_retries = 0;
        config.llm.models = vec![
            ModelConfig {
                provider: ProviderKind::OpenAi,
                model: "o3".into(),
                max_input_tokens: Some(O3_LIMIT),
                reasoning_effort: Some("high".into()),
                light: false,
                overrides: Default::default(),
            },
            ModelConfig {
                provider: ProviderKind::Gemini,
                model: "gemini-2.5-pro".into(),
                max_input_tokens: Some(GEMINI_LIMIT),
                reasoning_effort: None,
                light: false,
                overrides: Default::default(),
            },
        ];
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        let secrets = Secrets::from_lookup(&|v| keys.iter().any(|k| k == v).then(|| "k".to_owned()));
        router::from_config(&config.llm, &secrets).unwrap()
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }
}

async fn opinion(router: &router::Router, root: &Path, file: &str) -> Result<String, SageError> {
    let prices = Config::defaults().llm.prices;
    let sage = Sage {
        model: router,
        prices: &prices,
        max_output_tokens: 1000,
        pack: PackOptions::default(),
        prompts: forgehand::prompts::Prompts::embedded(),
    };
    let packed = sage.pack(root, &[file.to_owned()]).await?;
    sage.opinion(&packed, "Is this right?").await.map(|a| a.model)
}

#[tokio::test]
async fn the_packed_size_picks_the_model_at_each_threshold() {
    let s = Setup::new(None).await;
    let both = s.router(&["OPENAI_API_KEY", "GEMINI_API_KEY"], None);
    assert_eq!(opinion(&both, s.root(), "small.rs").await.unwrap(), "o3");
    assert_eq!(
        opinion(&both, s.root(), "medium.txt").await.unwrap(),
        "gemini-2.5-pro"
    );
    let err = opinion(&both, s.root(), "large.txt")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tokens do not fit any usable model")
            && err.contains(&format!("o3 takes up to 952 (a window of {O3_LIMIT}"))
            && err.contains(&format!(
                "gemini-2.5-pro takes up to 16521 (a window of {GEMINI_LIMIT}"
            )),
        "{err}"
    );
    let count: u64 = err.split_whitespace().next().unwrap().parse().unwrap();
    assert!(count > GEMINI_LIMIT, "the error names the count: {err}");
    // The opinion call names the request and carries the reasoning effort of o3.
    let (_, body) = &s.o3.calls()[0];
    assert_eq!(body["reasoning_effort"], "high");
}

#[tokio::test]
async fn missing_keys_and_an_unreachable_openai_fall_back() {
    let s = Setup::new(None).await;
    // No OpenAI key: Gemini takes everything up to its limit.
    let gemini_only = s.router(&["GEMINI_API_KEY"], None);
    assert_eq!(
        opinion(&gemini_only, s.root(), "small.rs").await.unwrap(),
        "gemini-2.5-pro"
    );
    // No Gemini key: o3 takes only what fits it.
    let openai_only = s.router(&["OPENAI_API_KEY"], None);
    assert_eq!(opinion(&openai_only, s.root(), "small.rs").await.unwrap(), "o3");
    let err = opinion(&openai_only, s.root(), "medium.txt")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("(a window of {O3_LIMIT}")) && !err.contains("gemini"),
        "{err}"
    );
    // OpenAI unreachable (nothing listens there): Gemini answers instead.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let unreachable = s.router(&["OPENAI_API_KEY", "GEMINI_API_KEY"], Some(&dead));
    assert_eq!(
        opinion(&unreachable, s.root(), "small.rs").await.unwrap(),
        "gemini-2.5-pro"
    );
    // No key at all: the error names the variables to set.
    let none = s.router(&[], None);
    let err = opinion(&none, s.root(), "small.rs")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("OPENAI_API_KEY") && err.contains("GEMINI_API_KEY"),
        "{err}"
    );
}

#[tokio::test]
async fn review_blocks_are_checked_against_the_files() {
    let answer = "Three edits and a new file.\n\n\
small.rs\n<<<<<<< SEARCH\nfn a() {}\n=======\nfn a() { b() }\n>>>>>>> REPLACE\n\n\
twice.rs\n<<<<<<< SEARCH\nx();\n=======\ny();\n>>>>>>> REPLACE\n\n\
small.rs\n<<<<<<< SEARCH\nfn missing() {}\nsecond line\n=======\nfn found() {}\n>>>>>>> REPLACE\n\n\
docs/new.md\n<<<<<<< SEARCH\n=======\n# New\n>>>>>>> REPLACE\n";
    let s = Setup::new(Some(answer)).await;
    let router = s.router(&["OPENAI_API_KEY", "GEMINI_API_KEY"], None);
    let prices = Config::defaults().llm.prices;
    let sage = Sage {
        model: &router,
        prices: &prices,
        max_output_tokens: 1000,
        pack: PackOptions::default(),
        prompts: forgehand::prompts::Prompts::embedded(),
    };
    let packed = sage
        .pack(s.root(), &["small.rs".into(), "twice.rs".into()])
        .await
        .unwrap();
    let review = sage.review(s.root(), &packed, "Make a call b()").await.unwrap();
    let fits: Vec<&Fit> = review.blocks.iter().map(|b| &b.fit).collect();
    assert_eq!(
        fits,
        [
            &Fit::Once,
            &Fit::Ambiguous { count: 2 },
            &Fit::NotFound,
            &Fit::NewFile
        ]
    );
    assert_eq!(review.problems.len(), 2, "{:?}", review.problems);
    assert!(
        review.problems[0].starts_with("twice.rs (block at line")
            && review.problems[0].contains("occurs 2 times")
            && review.problems[0].contains("x();"),
        "{}",
        review.problems[0]
    );
    assert!(
        review.problems[1].starts_with("small.rs")
            && review.problems[1].contains("occurs nowhere")
            && review.problems[1].contains("fn missing() {}\\nsecond line"),
        "{}",
        review.problems[1]
    );
    let (_, body) = &s.o3.calls()[0];
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains("<<<<<<< SEARCH") && user.contains("Make a call b()"));
}
