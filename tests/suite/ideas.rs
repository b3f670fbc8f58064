//! Idea options (seed 001) against a model that answers like one: both
//! stages, fenced and broken JSON repaired, retries exhausted, the minimum
//! interval between calls on tokio's paused clock, bounded parallelism,
//! sampling that never pads, every parameter range, the error codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use forgehand::ideas::{ErrorCode, Generator, IdeaRequest, Pacer, ATTEMPTS};
use forgehand::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Message, ModelInfo, TokenUsage};
use forgehand::prompts::Prompts;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::time::Instant;

type Answer = Box<dyn Fn(&str, usize) -> Result<String, LlmError> + Send + Sync>;

/// Answers each prompt with `answer(prompt, call number)`, recording when
/// each call started and how many ran at once.
struct Fake {
    answer: Answer,
    delay: Duration,
    calls: Mutex<Vec<(Instant, String)>>,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

impl Fake {
    fn new(answer: impl Fn(&str, usize) -> Result<String, LlmError> + Send + Sync + 'static) -> Fake {
        Fake {
            answer: Box::new(answer),
            delay: Duration::ZERO,
            calls: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
        }
    }

    fn prompts(&self) -> Vec<String> {
        self.calls.lock().unwrap().iter().map(|c| c.1.clone()).collect()
    }
}

#[async_trait]
impl ChatModel for Fake {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let prompt = match &request.messages[0] {
            Message::User(text) => text.clone(),
            _ => String::new(),
        };
        let n = {
            let mut calls = self.calls.lock().unwrap();
            calls.push((Instant::now(), prompt.clone()));
            calls.len()
        };
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        (self.answer)(&prompt, n).map(|text| ChatResponse {
            text,
            tool_calls: vec![],
            usage: TokenUsage::default(),
            model: "gemini-2.5-pro".into(),
            ..Default::default()
        })
    }

    fn models(&self) -> Vec<ModelInfo> {
        vec![ModelInfo {
            name: "gemini-2.5-pro".into(),
            max_input_tokens: 1_000_000,
        }]
    }
}

static PROMPTS: LazyLock<Arc<Prompts>> = LazyLock::new(Prompts::embedded);

fn is_categories(prompt: &str) -> bool {
    prompt.contains("categories that let a \"")
}

fn is_repair(prompt: &str) -> bool {
    prompt.starts_with("The answer below was meant to be JSON")
}

/// The category named in an options prompt.
fn category_of(prompt: &str) -> String {
    let marker = "choices for the category \"";
    let start = prompt.find(marker).unwrap() + marker.len();
    prompt[start..].split('"').next().unwrap().to_owned()
}

fn categories(names: &[&str]) -> String {
    let list: Vec<_> = names
        .iter()
        .map(|n| serde_json::json!({"name": n, "description": format!("{n}の観点"), "example_choices": ["a", "b", "c"]}))
        .collect();
    serde_json::to_string_pretty(&list).unwrap()
}

fn options(n: usize, prefix: &str) -> String {
    let list: Vec<String> = (1..=n).map(|i| format!("{prefix} {i}")).collect();
    serde_json::to_string(&list).unwrap()
}

fn generator<'a>(model: &'a Fake, pacer: &'a Pacer) -> Generator<'a> {
    Generator {
        model,
        model_name: None,
        pacer,
        max_output_tokens: 4096,
        usage: None,
        prompts: &PROMPTS.ideas,
    }
}

fn request() -> IdeaRequest {
    IdeaRequest {
        target_categories: 10,
        target_options_per_category: 12,
        domain_context: Some("A board game for two players, under 30 minutes.".into()),
        ..IdeaRequest::new("ゲームデザイナー", "オリジナルボードゲーム")
    }
}

#[tokio::test]
async fn both_stages_run_with_the_seeds_prompts_and_fenced_json() {
    let model = Fake::new(|prompt, _| {
        Ok(if is_categories(prompt) {
            format!(
                "```json\n{}\n```",
                categories(&["ゲームメカニクス", "曜日", "テーマ"])
            )
        } else if category_of(prompt) == "曜日" {
            // A category whose nature gives fewer options.
            options(7, "曜日")
        } else {
            format!("```\n{}\n```", options(12, &category_of(prompt)))
        })
    });
    let pacer = Pacer::new(Duration::ZERO, 1);
    let output = generator(&model, &pacer).generate(&request()).await.unwrap();
    assert_eq!(output.categories.len(), 3);
    assert_eq!(output.categories[1].name, "曜日");
    assert_eq!(output.categories[1].options.len(), 7);
    assert_eq!(output.metadata.total_categories, 3);
    assert_eq!(output.metadata.total_options, 12 + 7 + 12);
    assert_eq!(output.metadata.model_calls, 4);
    let prompts = model.prompts();
    assert!(prompts[0].contains(
        "Devise about 10 categories that let a \"ゲームデザイナー\" think about \"オリジナルボードゲーム\" from many angles."
    ));
    assert!(prompts[0].contains("A board game for two players"));
    assert!(prompts[0].contains("in the language of the additional context"));
    let options_prompt = prompts
        .iter()
        .find(|p| p.contains("choices for the category \"テーマ\""))
        .unwrap();
    assert!(options_prompt.contains("Generate about 12 choices"));
    assert!(options_prompt.contains(r#"Example choices (for reference): ["a","b","c"]"#));
    assert!(options_prompt.contains("==== original user request (start) ====\nA board game"));
}

#[tokio::test]
async fn broken_json_is_repaired_by_the_model() {
    let model = Fake::new(|prompt, n| {
        Ok(if is_repair(prompt) {
            assert!(
                prompt.contains("[{\"name\": \"A\""),
                "the repair request carries the answer"
            );
            categories(&["A", "B"])
        } else if is_categories(prompt) && n == 1 {
            "Here you go: [{\"name\": \"A\", \"description\": \"x\",".into()
        } else {
            options(10, "o")
        })
    });
    let pacer = Pacer::new(Duration::ZERO, 1);
    let output = generator(&model, &pacer).generate(&request()).await.unwrap();
    assert_eq!(output.categories.len(), 2);
    assert_eq!(output.metadata.model_calls, 1 + 1 + 2);
}

#[tokio::test]
async fn answers_that_never_parse_end_in_generation_failed_after_three_attempts() {
    let model = Fake::new(|_, _| Ok("I cannot answer in JSON today.".into()));
    let pacer = Pacer::new(Duration::ZERO, 1);
    let err = generator(&model, &pacer).generate(&request()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::GenerationFailed, "{err}");
    assert_eq!(err.details.unwrap()["cause"], "JSON_PARSE_ERROR");
    // Each attempt: the call and one repair request.
    assert_eq!(model.prompts().len(), ATTEMPTS as usize * 2);
}

#[tokio::test]
async fn model_errors_map_to_the_seeds_codes() {
    let overloaded = || LlmError::Overloaded {
        provider: "gemini".into(),
        status: 429,
        message: "quota".into(),
        retry_after: None,
    };
    let pacer = Pacer::new(Duration::ZERO, 1);
    let model = Fake::new(move |_, _| Err(overloaded()));
    let err = generator(&model, &pacer).generate(&request()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::ApiRateLimit);
    assert_eq!(model.prompts().len(), ATTEMPTS as usize);

    let model = Fake::new(|_, _| {
        Err(LlmError::Server {
            provider: "gemini".into(),
            status: 500,
            message: "internal".into(),
        })
    });
    let err = generator(&model, &pacer).generate(&request()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::ApiServiceError);

    let model = Fake::new(|_, _| {
        Err(LlmError::Rejected {
            provider: "gemini".into(),
            status: 403,
            message: "API key not valid".into(),
        })
    });
    let err = generator(&model, &pacer).generate(&request()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidApiKey);
    assert!(err.message.contains("GEMINI_API_KEY"), "{}", err.message);
    assert_eq!(model.prompts().len(), 1, "a bad key is not retried");

    let model = Fake::new(|_, _| {
        Err(LlmError::NoModel {
            detail: "no key is set".into(),
        })
    });
    let err = generator(&model, &pacer).generate(&request()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidApiKey);
}

#[tokio::test(start_paused = true)]
async fn calls_are_spaced_by_the_minimum_interval() {
    let model = Fake::new(|prompt, _| {
        Ok(if is_categories(prompt) {
            categories(&["A", "B", "C", "D"])
        } else {
            options(10, "o")
        })
    });
    let pacer = Pacer::new(Duration::from_secs(5), 1);
    let started = Instant::now();
    generator(&model, &pacer).generate(&request()).await.unwrap();
    let times: Vec<Instant> = model.calls.lock().unwrap().iter().map(|c| c.0).collect();
    assert_eq!(times.len(), 5);
    assert_eq!(times[0], started, "the first call does not wait");
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_secs(5),
            "{:?}",
            pair[1] - pair[0]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_key_with_higher_limits_runs_calls_in_parallel_within_the_bound() {
    let mut model = Fake::new(|prompt, _| {
        Ok(if is_categories(prompt) {
            categories(&["A", "B", "C", "D", "E", "F"])
        } else {
            options(10, "o")
        })
    });
    model.delay = Duration::from_secs(10);
    let pacer = Pacer::new(Duration::from_secs(1), 3);
    let started = Instant::now();
    generator(&model, &pacer).generate(&request()).await.unwrap();
    assert_eq!(model.most_in_flight.load(Ordering::SeqCst), 3);
    let times: Vec<Instant> = model.calls.lock().unwrap().iter().map(|c| c.0).collect();
    for pair in times.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_secs(1));
    }
    // One category call, then six option calls three at a time: far less
    // than seven calls one after another.
    assert!(started.elapsed() < Duration::from_secs(7 * 10));
}

#[tokio::test]
async fn sampling_never_pads_and_never_exceeds_the_maximum() {
    let model = Fake::new(|prompt, _| {
        Ok(if is_categories(prompt) {
            categories(&["many", "few"])
        } else if category_of(prompt) == "few" {
            options(3, "few")
        } else {
            options(40, "many")
        })
    });
    let pacer = Pacer::new(Duration::ZERO, 1);
    let mut req = request();
    req.randomize_selection = true;
    req.random_sample_size = 5;
    for _ in 0..5 {
        let output = generator(&model, &pacer).generate(&req).await.unwrap();
        let many = &output.categories[0].options;
        assert_eq!(many.len(), 5);
        let distinct: std::collections::HashSet<_> = many.iter().collect();
        assert_eq!(distinct.len(), 5);
        assert!(many.iter().all(|o| o.starts_with("many ")));
        assert_eq!(output.categories[1].options.len(), 3, "never padded");
        assert_eq!(output.metadata.total_options, 8);
    }
    // Without randomize_selection every option comes back.
    let output = generator(&model, &pacer).generate(&request()).await.unwrap();
    assert_eq!(output.categories[0].options.len(), 40);
}

#[tokio::test]
async fn every_parameter_is_checked_against_its_range_before_any_call() {
    let model = Fake::new(|_, _| Ok("[]".into()));
    let pacer = Pacer::new(Duration::ZERO, 1);
    type Set = fn(&mut IdeaRequest, u32);
    let cases: [(&str, Set, u32, u32); 3] = [
        ("target_categories", |r, v| r.target_categories = v, 10, 30),
        (
            "target_options_per_category",
            |r, v| r.target_options_per_category = v,
            10,
            200,
        ),
        ("random_sample_size", |r, v| r.random_sample_size = v, 5, 200),
    ];
    for (name, set, min, max) in cases {
        for ok in [min, max] {
            let mut r = request();
            set(&mut r, ok);
            assert!(r.validate().is_ok(), "{name} = {ok}");
        }
        for bad in [min - 1, max + 1] {
            let mut r = request();
            set(&mut r, bad);
            let err = generator(&model, &pacer).generate(&r).await.unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidParameters);
            assert!(
                err.message
                    .contains(&format!("{name} is {bad}; use {min} to {max}")),
                "{}",
                err.message
            );
        }
    }
    let mut r = request();
    r.expert_role = "  ".into();
    let err = r.validate().unwrap_err();
    assert!(err.message.contains("expert_role must not be empty"));
    assert!(model.prompts().is_empty(), "no call for a bad request");

    // The defaults are the seed's.
    let parsed: IdeaRequest = serde_json::from_str(r#"{"expert_role": "r", "target_subject": "s"}"#).unwrap();
    assert_eq!(
        (
            parsed.target_categories,
            parsed.target_options_per_category,
            parsed.randomize_selection,
            parsed.random_sample_size
        ),
        (20, 20, false, 10)
    );
    assert!(serde_json::from_str::<IdeaRequest>(
        r#"{"expert_role": "r", "target_subject": "s", "colour": 1}"#
    )
    .is_err());
}
