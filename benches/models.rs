//! The model APIs on their wire-faithful fakes, over a 20-step agent loop
//! with a real system prompt, six tools and a file view per step:
//! - the share of input tokens the provider serves from its prompt cache
//!   (the fakes account caching as each provider documents it), after the
//!   second step and over the whole run;
//! - the cost forgehand estimates with the catalogue's prices next to the
//!   provider's bill for the same usage, computed from the fake's own
//!   figures with the provider's billing rule (cache writes and thought
//!   tokens included).
//!
//! - the first text of a streamed answer: from the call to the first text
//!   delta reaching the caller's watcher, and to the whole answer, for
//!   each API on its fake streaming over loopback.
//!
//! Run: `cargo bench --bench models`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support/targets.rs"]
mod targets;

use forgehand_test_support::scripted_model;

use forgehand::config::{Api, Price};
use forgehand::llm::catalogue;
use forgehand::llm::retry::RetryPolicy;
use forgehand::llm::router::{Route, Router};
use forgehand::llm::usage::UsageReport;
use forgehand::llm::{ChatRequest, Message, Provider, TokenUsage, ToolResult, ToolSpec};
use forgehand::llm::{StreamEvent, StreamSink};
use forgehand_test_support::stats;
use scripted_model::{call, text, Delivery, Format, ScriptedModel, StreamingModel};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const STEPS: usize = 20;

fn provider(format: Format, base: &str) -> Arc<dyn Provider> {
    use forgehand::config::Secret;
    use forgehand::llm::{
        anthropic::Anthropic, chat_completions::ChatCompletions, gemini::Gemini, responses::Responses,
    };
    let timeout = Duration::from_secs(30);
    match format {
        Format::Responses => Arc::new(Responses::new(base, Some(Secret::new("k")), timeout).unwrap()),
        Format::Anthropic => Arc::new(Anthropic::new(base, Secret::new("k"), timeout).unwrap()),
        Format::Gemini => Arc::new(Gemini::new(base, Secret::new("k"), timeout).unwrap()),
        Format::OpenAi => Arc::new(ChatCompletions::new(base, Some(Secret::new("k")), timeout).unwrap()),
    }
}

fn tools() -> Vec<ToolSpec> {
    ["view", "create", "str_replace", "insert", "undo_edit", "execute_command"]
        .iter()
        .map(|name| ToolSpec {
            name: format!("text_editor_{name}"),
            description: format!("{name}: {}", "Edits or reads files of the project under /workspace/project. ".repeat(12)),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}, "view_range": {"type": "array", "items": {"type": "integer"}}}, "required": ["path"]})
                .as_object()
                .unwrap()
                .clone(),
        })
        .collect()
}

/// A different 6 KB file view for each step.
fn file_view(step: usize) -> String {
    (1..=150)
        .map(|line| format!("{line:4}  let value_{step}_{line} = compute({line}, {step}); // keep\n"))
        .collect()
}

/// The provider's bill for the usage objects it sent, with its own rule.
fn bill(format: Format, usages: &[Value], p: &Price) -> f64 {
    let per = |n: &Value| n.as_u64().unwrap_or(0) as f64 / 1e6;
    usages
        .iter()
        .map(|u| match format {
            Format::Anthropic => {
                per(&u["input_tokens"]) * p.input_per_million
                    + per(&u["cache_read_input_tokens"]) * p.cached_input_per_million
                    + per(&u["cache_creation_input_tokens"]) * p.cache_write_per_million
                    + per(&u["output_tokens"]) * p.output_per_million
            }
            Format::Responses => {
                let cached = per(&u["input_tokens_details"]["cached_tokens"]);
                (per(&u["input_tokens"]) - cached) * p.input_per_million
                    + cached * p.cached_input_per_million
                    + per(&u["output_tokens"]) * p.output_per_million
            }
            Format::Gemini => {
                let cached = per(&u["cachedContentTokenCount"]);
                (per(&u["promptTokenCount"]) - cached) * p.input_per_million
                    + cached * p.cached_input_per_million
                    + (per(&u["candidatesTokenCount"]) + per(&u["thoughtsTokenCount"])) * p.output_per_million
            }
            Format::OpenAi => unreachable!(),
        })
        .sum()
}

async fn run(format: Format, model: &str, api: Api) {
    let scripted = ScriptedModel::start_caching(format).await;
    for step in 0..STEPS - 1 {
        scripted
            .push(call(
                "text_editor_view",
                json!({"path": format!("/workspace/project/src/m{step}.rs")}),
            ))
            .await;
    }
    scripted.push(text("Done.")).await;
    let mut spec = catalogue::lookup(model).unwrap();
    spec.api = api;
    let price = spec.price.unwrap();
    let route = Route {
        spec,
        reasoning_effort: Some("medium".into()),
        provider: provider(format, &scripted.base_url()),
    };
    let retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    let router = Router::new(vec![route], retry, vec![]).with_output_room(16_384);
    let mut system = forgehand::prompts::Prompts::embedded().agent.system_prompt(true);
    system.push_str(&"\n\nProject instructions: keep functions short and tested.".repeat(40));
    let mut messages = vec![Message::User(
        "Rename `compute` to `evaluate` everywhere in src/.".into(),
    )];
    let mut usage = Vec::new();
    for step in 0..STEPS {
        let request = ChatRequest {
            model: String::new(),
            system: system.clone(),
            messages: messages.clone(),
            tools: tools(),
            max_output_tokens: 16_384,
            temperature: None,
            reasoning_effort: None,
            cache_system: true,
            json_output: false,
        };
        let response = router
            .chat_on(model, &request)
            .await
            .unwrap_or_else(|e| panic!("{model} step {step}: {e} {:?}", scripted.refused()));
        usage.push(response.usage);
        messages.push(response.to_message());
        messages.push(Message::ToolResults(
            response
                .tool_calls
                .iter()
                .map(|c| ToolResult {
                    call_id: c.id.clone(),
                    name: c.name.clone(),
                    content: file_view(step),
                    is_error: false,
                })
                .collect(),
        ));
    }
    let share = |from: usize| {
        let (cached, input) = usage[from..].iter().fold((0, 0), |(c, i), u| {
            (c + u.cached_input_tokens, i + u.input_tokens)
        });
        100.0 * cached as f64 / input as f64
    };
    let total = usage.iter().fold(TokenUsage::default(), |mut acc, u| {
        acc.add(*u);
        acc
    });
    let estimate = UsageReport::new([(model.to_owned(), price)].into())
        .cost_of(model, total)
        .unwrap();
    let billed = bill(format, &scripted.usages(), &price);
    println!(
        "{model:<24} {:<17} cached after step 2: {:5.1} %   whole run: {:5.1} %   input {:>7} (cached {:>7}, written {:>6})  output {:>5} (thinking {:>5})   estimate ${estimate:.4}  bill ${billed:.4}  {}",
        api.name(),
        share(2),
        share(0),
        total.input_tokens,
        total.cached_input_tokens,
        total.cache_write_tokens,
        total.output_tokens,
        total.reasoning_tokens,
        if (estimate - billed).abs() < 1e-9 { "equal" } else { "DIFFERENT" },
    );
    assert!(scripted.refused().is_empty());
    targets::check(
        &format!("{model}: input served from the prompt cache after step 2"),
        format!("{:.1} %", share(2)),
        "at least 80 %",
        share(2) >= 80.0,
    );
    targets::check(
        &format!("{model}: the estimate against the provider's bill"),
        format!("${estimate:.4} against ${billed:.4}"),
        "equal",
        (estimate - billed).abs() < 1e-9,
    );
}

/// When the first text of an answer reached the watcher.
struct FirstText(std::sync::Mutex<Option<std::time::Instant>>);

impl StreamSink for FirstText {
    fn event(&self, event: &StreamEvent) {
        let mut first = self.0.lock().unwrap();
        if first.is_none() && matches!(event, StreamEvent::Text(t) if !t.is_empty()) {
            *first = Some(std::time::Instant::now());
        }
    }
}

/// The first text and the whole of 200 streamed answers of `model` (20 in the quick mode).
async fn first_text(format: Format, model: &str, api: Api) {
    let answers = targets::pick(200, 20);
    let fake = StreamingModel::start(format).await;
    let answer = "The greeting now names the whole world; the test passes. ".repeat(20);
    for _ in 0..answers {
        fake.push(text(&answer), Delivery::Whole);
    }
    let mut spec = catalogue::lookup(model).unwrap();
    spec.api = api;
    let route = Route {
        spec,
        reasoning_effort: Some("medium".into()),
        provider: provider(format, &fake.base_url()),
    };
    let router = Router::new(vec![route], RetryPolicy::default(), vec![]).with_output_room(16_384);
    let request = ChatRequest {
        model: String::new(),
        system: "You are a careful engineer.".into(),
        messages: vec![Message::User("Say what you changed.".into())],
        tools: tools(),
        max_output_tokens: 16_384,
        temperature: None,
        reasoning_effort: None,
        cache_system: true,
        json_output: false,
    };
    let (mut first, mut whole) = (Vec::new(), Vec::new());
    for _ in 0..answers {
        let sink = FirstText(std::sync::Mutex::new(None));
        let started = std::time::Instant::now();
        let response = router.stream(Some(model), &request, &sink).await.unwrap();
        whole.push(started.elapsed());
        first.push(sink.0.lock().unwrap().unwrap() - started);
        assert_eq!(response.text, answer);
    }
    stats::report(&format!("first text {}", api.name()), &mut first);
    stats::report(&format!("whole answer {}", api.name()), &mut whole);
    let median = stats::percentile(&mut first, 0.5).as_secs_f64() * 1e3;
    targets::check(
        &format!("first text of a streamed answer, {}, median", api.name()),
        format!("{median:.2} ms"),
        "under 100 ms",
        median < 100.0,
    );
}

#[tokio::main]
async fn main() {
    println!("# {STEPS}-step agent loop per provider on its fake (cargo bench --bench models)");
    run(Format::Responses, "gpt-5.6", Api::Responses).await;
    run(Format::Anthropic, "claude-opus-5-5", Api::Messages).await;
    run(Format::Gemini, "gemini-3.1-pro-preview", Api::GenerateContent).await;
    println!("# a streamed answer of 1,140 characters, from the call to its first text at the caller (cargo bench --bench models)");
    first_text(Format::Responses, "gpt-5.6", Api::Responses).await;
    first_text(Format::Anthropic, "claude-opus-5-5", Api::Messages).await;
    first_text(Format::Gemini, "gemini-3.1-pro-preview", Api::GenerateContent).await;
    first_text(Format::OpenAi, "o3", Api::ChatCompletions).await;
    targets::finish();
}
