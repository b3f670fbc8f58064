//! Backoff and fallback, on paused tokio time: 1, 2, 4, 8, 16 s (capped at
//! 30 s), Retry-After honoured, then the next model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use forgehand::config::{Api, ProviderKind};
use forgehand::config::{Config, Secrets};
use forgehand::llm::retry::RetryPolicy;
use forgehand::llm::router::{self, Route, Router};
use forgehand::llm::{ChatRequest, ChatResponse, LlmError, Message, ModelSpec, Provider, TokenUsage};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A provider that fails with the queued errors, then answers.
struct Flaky {
    name: String,
    errors: Mutex<VecDeque<LlmError>>,
    attempts: Mutex<Vec<Instant>>,
}

impl Flaky {
    fn new(name: &str, errors: Vec<LlmError>) -> Arc<Flaky> {
        Arc::new(Flaky {
            name: name.into(),
            errors: Mutex::new(errors.into()),
            attempts: Mutex::new(Vec::new()),
        })
    }
    fn gaps(&self) -> Vec<u64> {
        let attempts = self.attempts.lock().unwrap();
        attempts.windows(2).map(|w| (w[1] - w[0]).as_secs()).collect()
    }
}

#[async_trait]
impl Provider for Flaky {
    fn name(&self) -> &str {
        &self.name
    }
    async fn chat(&self, _: &ModelSpec, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.attempts.lock().unwrap().push(Instant::now());
        if let Some(err) = self.errors.lock().unwrap().pop_front() {
            return Err(err);
        }
        Ok(ChatResponse {
            text: format!("answer from {}", request.model),
            tool_calls: vec![],
            usage: TokenUsage::default(),
            model: request.model.clone(),
            ..Default::default()
        })
    }
}

fn overloaded(retry_after: Option<u64>) -> LlmError {
    LlmError::Overloaded {
        provider: "fake".into(),
        status: 529,
        message: "overloaded_error: Overloaded".into(),
        retry_after: retry_after.map(Duration::from_secs),
    }
}

/// A route to a plain model with a window of `window` tokens and no
/// output room of its own to reserve.
fn route(model: &str, provider: Arc<Flaky>, window: u64) -> Route {
    Route {
        spec: ModelSpec::plain(model, ProviderKind::OpenAi, Api::ChatCompletions, window, 0),
        reasoning_effort: None,
        provider,
    }
}

/// o3 first, Gemini second, with the default retry policy.
fn two_routes(first: &Arc<Flaky>, second: &Arc<Flaky>) -> Router {
    Router::new(
        vec![
            route("o3", first.clone(), 200_000),
            route("gemini-2.5-pro", second.clone(), 1_000_000),
        ],
        RetryPolicy::default(),
        vec![],
    )
}

fn request() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "system".into(),
        messages: vec![Message::User("hello".into())],
        tools: vec![],
        max_output_tokens: 100,
        temperature: None,
        reasoning_effort: None,
        cache_system: false,
        json_output: false,
    }
}

#[tokio::test(start_paused = true)]
async fn overload_backs_off_1_2_4_8_16_seconds_then_falls_back() {
    let first = Flaky::new("first", (0..6).map(|_| overloaded(None)).collect());
    let second = Flaky::new("second", vec![]);
    let router = two_routes(&first, &second);
    let response = router.chat(&request()).await.unwrap();
    assert_eq!(first.gaps(), vec![1, 2, 4, 8, 16], "1 try + 5 retries");
    assert_eq!(response.text, "answer from gemini-2.5-pro");
    assert_eq!(second.attempts.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_wait_is_capped_at_30_seconds() {
    let first = Flaky::new("first", (0..7).map(|_| overloaded(None)).collect());
    let policy = RetryPolicy {
        max_retries: 7,
        ..RetryPolicy::default()
    };
    let router = Router::new(vec![route("o3", first.clone(), 200_000)], policy, vec![]);
    router.chat(&request()).await.unwrap();
    assert_eq!(first.gaps(), vec![1, 2, 4, 8, 16, 30, 30]);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured() {
    let first = Flaky::new(
        "first",
        vec![overloaded(Some(7)), overloaded(None), overloaded(Some(3))],
    );
    let router = Router::new(
        vec![route("o3", first.clone(), 200_000)],
        RetryPolicy::default(),
        vec![],
    );
    router.chat(&request()).await.unwrap();
    assert_eq!(first.gaps(), vec![7, 2, 3]);
}

#[tokio::test(start_paused = true)]
async fn a_rejected_request_neither_retries_nor_falls_back() {
    let rejected = LlmError::Rejected {
        provider: "fake".into(),
        status: 400,
        message: "bad tools".into(),
    };
    let first = Flaky::new("first", vec![rejected]);
    let second = Flaky::new("second", vec![]);
    let router = two_routes(&first, &second);
    let err = router.chat(&request()).await.unwrap_err();
    assert!(err.to_string().contains("bad tools"), "{err}");
    assert_eq!(first.attempts.lock().unwrap().len(), 1);
    assert!(second.attempts.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_network_error_falls_back_at_once() {
    let first = Flaky::new(
        "first",
        vec![LlmError::Network {
            provider: "openai".into(),
            detail: "connection refused".into(),
        }],
    );
    let second = Flaky::new("second", vec![]);
    let router = two_routes(&first, &second);
    let started = Instant::now();
    assert_eq!(
        router.chat(&request()).await.unwrap().text,
        "answer from gemini-2.5-pro"
    );
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "no backoff for an unreachable provider"
    );
}

#[tokio::test]
async fn models_are_chosen_by_size_and_a_too_large_request_names_the_limits() {
    let small = Flaky::new("openai", vec![]);
    let large = Flaky::new("gemini", vec![]);
    let router = Router::new(
        vec![
            route("o3", small.clone(), 50),
            route("gemini-2.5-pro", large.clone(), 5_000),
        ],
        RetryPolicy::default(),
        vec![],
    );
    assert_eq!(router.chat(&request()).await.unwrap().model, "o3");
    let mut big = request();
    big.messages = vec![Message::User("many words ".repeat(500))];
    assert_eq!(
        router.chat(&big).await.unwrap().model,
        "gemini-2.5-pro",
        "over 50 tokens goes to the larger model"
    );
    let mut huge = request();
    huge.messages = vec![Message::User("many words ".repeat(5_000))];
    let err = router.chat(&huge).await.unwrap_err();
    assert!(matches!(err, LlmError::TooLarge { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("o3 takes up to 47 (a window of 50")
            && text.contains("gemini-2.5-pro takes up to 4761 (a window of 5000"),
        "{text}"
    );
}

#[test]
fn models_without_keys_are_left_out_and_named() {
    // The seed's pairing: o3 up to 200K tokens, Gemini 2.5 Pro above.
    let seed = "llm:\n  models:\n    - {provider: openai, model: o3, max_input_tokens: 200000}\n    - {provider: gemini, model: gemini-2.5-pro, max_input_tokens: 1000000}\n";
    let config = Config::from_yaml(seed, Path::new("t.yaml"), Path::new("/tmp"), &|_| None).unwrap();
    let none = Secrets::from_lookup(&|_| None);
    let router = router::from_config(&config.llm, &none).unwrap();
    let err = router.candidates(10).err().expect("no usable model");
    let text = err.to_string();
    assert!(
        text.contains("o3 (OPENAI_API_KEY not set)")
            && text.contains("gemini-2.5-pro (GEMINI_API_KEY not set)"),
        "{text}"
    );

    // Only Gemini's key: small requests go to Gemini (the fallback on a missing key).
    let gemini_only = Secrets::from_lookup(&|v| (v == "GEMINI_API_KEY").then(|| "g-key".to_owned()));
    let router = router::from_config(&config.llm, &gemini_only).unwrap();
    let models: Vec<String> = router
        .candidates(10)
        .unwrap()
        .iter()
        .map(|r| r.model().to_owned())
        .collect();
    assert_eq!(models, vec!["gemini-2.5-pro"]);

    // Both keys: o3 first up to 200K tokens, Gemini alone above.
    let both =
        Secrets::from_lookup(&|v| matches!(v, "GEMINI_API_KEY" | "OPENAI_API_KEY").then(|| "k".to_owned()));
    let router = router::from_config(&config.llm, &both).unwrap();
    let names = |tokens| {
        router
            .candidates(tokens)
            .unwrap()
            .iter()
            .map(|r| r.model().to_owned())
            .collect::<Vec<_>>()
    };
    // The output room (llm.max_output_tokens) and the tokenizer margin count too.
    assert_eq!(names(150_000), vec!["o3", "gemini-2.5-pro"]);
    assert_eq!(names(190_000), vec!["gemini-2.5-pro"]);
    assert_eq!(names(500_000), vec!["gemini-2.5-pro"]);
    assert!(router.candidates(1_500_000).is_err());
}

#[test]
fn a_model_the_catalogue_lacks_must_say_its_window_and_config_replaces_what_the_catalogue_says() {
    let keys = Secrets::from_lookup(&|v| (v == "OPENAI_API_KEY").then(|| "k".to_owned()));
    let load =
        |yaml: &str| Config::from_yaml(yaml, Path::new("t.yaml"), Path::new("/tmp"), &|_| None).unwrap();
    let unknown = load("llm:\n  models:\n    - {provider: openai, model: my-finetune}\n");
    let err = router::from_config(&unknown.llm, &keys)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("my-finetune")
            && err.contains("llm.models[0].max_input_tokens")
            && err.contains("not in the model catalogue"),
        "{err}"
    );

    let local = load(
        "llm:\n  providers:\n    openai: {base_url: \"http://127.0.0.1:8000/v1\"}\n  models:\n    - {provider: openai, model: qwen-coder, max_input_tokens: 32000, temperature: false}\n    - {provider: openai, model: gpt-5.6, max_output_tokens: 4000, efforts: [low, high]}\n",
    );
    let router = router::from_config(&local.llm, &Secrets::from_lookup(&|_| None)).unwrap();
    let [qwen, gpt] = router.routes() else {
        panic!("two routes")
    };
    assert_eq!(
        (qwen.spec.window, qwen.spec.temperature, qwen.spec.api),
        (32_000, false, Api::ChatCompletions)
    );
    assert!(
        qwen.spec.origin.contains("not in the catalogue") && qwen.spec.origin.contains("temperature"),
        "{}",
        qwen.spec.origin
    );
    // Known to the catalogue, on another server: the catalogue's API (the
    // Responses API, with Chat Completions where the server has none; see
    // llm_gateway), the catalogue's window and the config's cap and levels.
    assert_eq!(
        (gpt.spec.api, gpt.spec.max_output, gpt.spec.window),
        (Api::Responses, 4000, 922_000)
    );
    assert_eq!(gpt.spec.efforts, ["low", "high"]);
    assert!(
        gpt.spec.origin.starts_with("catalogue (litellm"),
        "{}",
        gpt.spec.origin
    );

    // On OpenAI's own endpoint a known model goes through the Responses API.
    let shipped = load("");
    let all = Secrets::from_lookup(&|_| Some("k".to_owned()));
    let router = router::from_config(&shipped.llm, &all).unwrap();
    let apis: Vec<(String, Api)> = router
        .routes()
        .iter()
        .map(|r| (r.model().to_owned(), r.spec.api))
        .collect();
    assert_eq!(apis[0], ("gpt-5.6".to_owned(), Api::Responses));
    assert_eq!(apis[1], ("claude-opus-5-5".to_owned(), Api::Messages));
    assert_eq!(
        apis[2],
        ("gemini-3.1-pro-preview".to_owned(), Api::GenerateContent)
    );
    assert!(router.routes().iter().all(|r| r.spec.price.is_some()));
}
