//! Streamed answers on each API against a fake that streams as the
//! provider does (its events, in their documented order), over loopback
//! HTTP: a streamed answer folds to the answer the API sends whole; a
//! stream that breaks off or goes idle is asked again whole and counted
//! once in the transcript and the budget; an answer that keeps streaming
//! outlives the idle limit; each provider's refusals come typed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::scripted_model::{
    call, text, text_and_call, Delivery, Format, Reply, ScriptedModel, StreamingModel,
};

use forgehand::budget::{Budgeted, Caps, Spend};
use forgehand::config::{Api, Secret, Secrets};
use forgehand::journal::Journal;
use forgehand::llm::anthropic::Anthropic;
use forgehand::llm::catalogue;
use forgehand::llm::chat_completions::ChatCompletions;
use forgehand::llm::gemini::Gemini;
use forgehand::llm::observed::Observed;
use forgehand::llm::responses::Responses;
use forgehand::llm::retry::RetryPolicy;
use forgehand::llm::router::{Route, Router};
use forgehand::llm::stream::StreamLimits;
use forgehand::llm::{
    ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, Message, ModelSpec, Provider, Refusal,
    StreamEvent, StreamSink, ToolSpec,
};
use forgehand::transcript::{self, Entry, Recorder, Transcript};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const FORMATS: [Format; 4] = [
    Format::OpenAi,
    Format::Responses,
    Format::Anthropic,
    Format::Gemini,
];

/// A model of each API that reasons as current models do (encrypted
/// reasoning, signed thinking, thought signatures); o3 on Chat Completions.
fn model_of(format: Format) -> &'static str {
    match format {
        Format::OpenAi => "o3",
        Format::Responses => "gpt-5.6",
        Format::Anthropic => "claude-opus-5-5",
        Format::Gemini => "gemini-3.1-pro-preview",
    }
}

fn spec(format: Format) -> ModelSpec {
    let mut spec = catalogue::lookup(model_of(format)).unwrap();
    spec.api = match format {
        Format::OpenAi => Api::ChatCompletions,
        Format::Responses => Api::Responses,
        Format::Gemini => Api::GenerateContent,
        Format::Anthropic => Api::Messages,
    };
    spec
}

fn provider(format: Format, base: &str, limits: StreamLimits) -> Arc<dyn Provider> {
    let key = || Secret::new("test-key-never-logged");
    let timeout = Duration::from_secs(30);
    match format {
        Format::OpenAi => Arc::new(
            ChatCompletions::new(base, Some(key()), timeout)
                .unwrap()
                .with_stream_limits(limits),
        ),
        Format::Responses => Arc::new(
            Responses::new(base, Some(key()), timeout)
                .unwrap()
                .with_stream_limits(limits),
        ),
        Format::Gemini => Arc::new(
            Gemini::new(base, key(), timeout)
                .unwrap()
                .with_stream_limits(limits),
        ),
        Format::Anthropic => Arc::new(
            Anthropic::new(base, key(), timeout)
                .unwrap()
                .with_stream_limits(limits),
        ),
    }
}

/// A router with the one model of `format` at `base`, `retries` retries
/// 10 ms apart.
fn router(format: Format, base: &str, limits: StreamLimits, retries: usize) -> Router {
    let route = Route {
        spec: spec(format),
        reasoning_effort: Some("high".into()),
        provider: provider(format, base, limits),
    };
    let retry = RetryPolicy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(10),
        max_retries: retries,
    };
    Router::new(vec![route], retry, vec![]).with_output_room(4000)
}

fn request() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "You are a test.".into(),
        messages: vec![Message::User("Read a.rs and say what you do.".into())],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters:
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
                    .as_object()
                    .unwrap()
                    .clone(),
        }],
        max_output_tokens: 16_000,
        temperature: None,
        reasoning_effort: None,
        cache_system: false,
        json_output: false,
    }
}

fn reply() -> Reply {
    text_and_call(
        "I will read a.rs first, then answer.",
        "read_file",
        json!({"path": "src/a.rs"}),
    )
}

/// What a watcher heard.
#[derive(Default)]
struct Heard(Mutex<Vec<StreamEvent>>);

impl StreamSink for Heard {
    fn event(&self, event: &StreamEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

impl Heard {
    fn events(&self) -> Vec<StreamEvent> {
        self.0.lock().unwrap().clone()
    }

    fn text_since_last_restart(&self) -> String {
        let events = self.events();
        let start = events
            .iter()
            .rposition(|e| matches!(e, StreamEvent::Restarted { .. }))
            .map_or(0, |i| i + 1);
        events[start..]
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    fn restarts(&self) -> usize {
        self.events()
            .iter()
            .filter(|e| matches!(e, StreamEvent::Restarted { .. }))
            .count()
    }
}

/// The same request sent whole (no `stream`) to a fresh fake of `format`:
/// the API's whole answer, read as forgehand reads one.
async fn whole_answer(format: Format, streamed_request: &Value) -> ChatResponse {
    let fake = ScriptedModel::start(format).await;
    fake.push(reply()).await;
    let mut body = streamed_request.clone();
    let map = body.as_object_mut().unwrap();
    map.remove("stream");
    map.remove("stream_options");
    let model = model_of(format);
    let url = match format {
        Format::OpenAi => format!("{}/chat/completions", fake.base_url()),
        Format::Responses => format!("{}/responses", fake.base_url()),
        Format::Anthropic => format!("{}/v1/messages", fake.base_url()),
        Format::Gemini => format!("{}/v1beta/models/{model}:generateContent", fake.base_url()),
    };
    let answer: Value = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(fake.refused().is_empty(), "{:?}", fake.refused());
    let parsed = match format {
        Format::OpenAi => forgehand::llm::chat_completions::parse_response(&answer, model),
        Format::Responses => forgehand::llm::responses::parse_response(&answer, model),
        Format::Anthropic => forgehand::llm::anthropic::parse_response(&answer, model),
        Format::Gemini => forgehand::llm::gemini::parse_response(&answer, model),
    };
    parsed.unwrap()
}

/// Gemini gives its calls no ids: forgehand makes them up, differently
/// each time an answer is read.
fn without_made_up_ids(mut response: ChatResponse, format: Format) -> ChatResponse {
    if format == Format::Gemini {
        for call in &mut response.tool_calls {
            assert!(call.id.starts_with("forgehand-gemini-call-"), "{}", call.id);
            call.id.clear();
        }
    }
    response
}

#[tokio::test]
async fn a_streamed_answer_folds_to_the_answer_the_api_sends_whole() {
    for format in FORMATS {
        let fake = StreamingModel::start(format).await;
        fake.push(reply(), Delivery::Whole);
        let provider = provider(format, &fake.base_url(), StreamLimits::default());
        let mut request = request();
        request.model = model_of(format).into();
        request.reasoning_effort = Some("high".into());
        let heard = Heard::default();
        let streamed = forgehand::llm::stream::forward(provider.stream(&spec(format), &request), &heard)
            .await
            .unwrap_or_else(|e| panic!("{format:?}: {e}; refused: {:?}", fake.refused()));
        let sent = fake.requests().remove(0);
        let whole = whole_answer(format, &sent).await;
        assert_eq!(
            without_made_up_ids(streamed.clone(), format),
            without_made_up_ids(whole, format),
            "{format:?}"
        );
        assert_eq!(streamed.text, "I will read a.rs first, then answer.");
        assert_eq!(streamed.tool_calls[0].name, "read_file");
        assert_eq!(
            serde_json::from_str::<Value>(&streamed.tool_calls[0].arguments).unwrap(),
            json!({"path": "src/a.rs"})
        );
        // The reasoning state, as the provider sent it, goes back next turn.
        if format != Format::OpenAi {
            let native = serde_json::to_string(&streamed.native).unwrap();
            assert!(
                native.contains("sig-0-") || native.contains("enc-0-"),
                "{format:?}: {native}"
            );
        }
        // A watcher heard the text in pieces, and the call as it came.
        let events = heard.events();
        let texts = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Text(_)))
            .count();
        assert!(texts > 1, "{format:?}: {events:?}");
        assert_eq!(heard.text_since_last_restart(), streamed.text);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, StreamEvent::ToolCallStarted { name, .. } if name == "read_file")),
            "{format:?}"
        );
        if matches!(format, Format::Responses | Format::Anthropic) {
            assert!(
                events.iter().any(|e| matches!(e, StreamEvent::Reasoning(_))),
                "{format:?}"
            );
        }
    }
}

/// The wrappers a run's calls go through: the budget over the transcript
/// over the router.
struct Wrapped {
    model: Budgeted,
    spend: Arc<Spend>,
    journal: Arc<Journal>,
    transcript: Arc<Transcript>,
    _dir: tempfile::TempDir,
}

fn wrapped(router: Router) -> Wrapped {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open(dir.path()).unwrap());
    let secrets = Arc::new(Secrets::from_lookup(&|_| None));
    let transcript = Transcript::begin(journal.clone(), secrets, "acme/app#41", None).unwrap();
    // The catalogue's prices of the four models.
    let prices: std::collections::BTreeMap<_, _> = FORMATS
        .iter()
        .map(|f| {
            (
                model_of(*f).to_owned(),
                catalogue::lookup(model_of(*f)).unwrap().price.unwrap(),
            )
        })
        .collect();
    let recorder = Recorder::new(transcript.clone(), "planning", prices.clone());
    let observed = Observed::new(Arc::new(router), recorder);
    let spend = Arc::new(Spend::new(
        Caps::default(),
        journal.clone(),
        Arc::default(),
        "acme/app",
        prices,
    ));
    Wrapped {
        model: Budgeted::new(Arc::new(observed), spend.clone()),
        spend,
        journal,
        transcript,
        _dir: dir,
    }
}

impl Wrapped {
    /// The model calls the transcript holds.
    fn calls(&self) -> Vec<(String, u64)> {
        let (_, entries) = transcript::load(&self.journal, self.transcript.id())
            .unwrap()
            .unwrap();
        entries
            .into_iter()
            .filter_map(|e| match e {
                Entry::Call {
                    text, output_tokens, ..
                } => Some((text, output_tokens)),
                _ => None,
            })
            .collect()
    }
}

/// A stream delivered as `broken`, then one delivered whole: one answer.
async fn broken_then_whole(format: Format, broken: Delivery, limits: StreamLimits) {
    let fake = StreamingModel::start(format).await;
    fake.push(reply(), broken);
    fake.push(reply(), Delivery::Whole);
    let wrapped = wrapped(router(format, &fake.base_url(), limits, 2));
    let heard = Heard::default();
    let model = model_of(format);
    let answer = tokio::time::timeout(
        Duration::from_secs(20),
        wrapped.model.stream(Some(model), &request(), &heard),
    )
    .await
    .expect("a broken stream ends")
    .unwrap_or_else(|e| panic!("{format:?} {broken:?}: {e}; refused: {:?}", fake.refused()));
    assert_eq!(answer.text, "I will read a.rs first, then answer.", "{format:?}");
    assert_eq!(answer.tool_calls.len(), 1, "{format:?}");
    assert_eq!(
        fake.requests().len(),
        2,
        "{format:?} {broken:?}: asked again whole"
    );
    assert_eq!(
        heard.restarts(),
        1,
        "{format:?}: the watcher was told to forget the first"
    );
    assert_eq!(heard.text_since_last_restart(), answer.text);
    // One answer in the transcript and in the budget: the one that completed.
    let calls = wrapped.calls();
    assert_eq!(calls.len(), 1, "{format:?} {broken:?}: {calls:?}");
    assert_eq!(calls[0].0, answer.text);
    assert_eq!(calls[0].1, answer.usage.output_tokens);
    let cost = wrapped.spend.cost(model, answer.usage);
    assert!(cost > 0.0, "{model} has a price");
    assert!(
        (wrapped.spend.task_spent() - cost).abs() < 1e-12,
        "{format:?}: charged {} for one answer of {cost}",
        wrapped.spend.task_spent()
    );
}

#[tokio::test]
async fn a_stream_cut_mid_answer_is_asked_again_whole_and_counted_once() {
    for format in FORMATS {
        broken_then_whole(format, Delivery::CutAfter(4), StreamLimits::default()).await;
        broken_then_whole(format, Delivery::ErrorAfter(4), StreamLimits::default()).await;
    }
}

#[tokio::test]
async fn a_stream_that_goes_idle_ends_with_the_idle_error_and_is_asked_again() {
    let limits = StreamLimits {
        idle: Duration::from_millis(300),
        total: Duration::from_secs(60),
    };
    for format in FORMATS {
        let fake = StreamingModel::start(format).await;
        fake.push(reply(), Delivery::StallAfter(3));
        let asked = router(format, &fake.base_url(), limits, 0);
        let err = tokio::time::timeout(
            Duration::from_secs(20),
            asked.chat_on(model_of(format), &request()),
        )
        .await
        .expect("the idle limit ends a stalled stream")
        .unwrap_err();
        assert!(
            matches!(&err, LlmError::StreamIdle { idle, .. } if *idle == limits.idle),
            "{format:?}: {err}"
        );
        assert!(err.to_string().contains("llm.stream_idle_timeout"), "{err}");
        broken_then_whole(format, Delivery::StallAfter(3), limits).await;
    }
}

#[tokio::test]
async fn an_answer_that_keeps_streaming_outlives_the_idle_limit() {
    let limits = StreamLimits {
        idle: Duration::from_secs(1),
        total: Duration::from_secs(120),
    };
    let long = "A long answer that a slow model writes a few words at a time, never pausing longer than the idle limit, for longer than it in all.";
    let runs = FORMATS.map(|format| async move {
        let fake = StreamingModel::start(format).await;
        fake.push(text(long), Delivery::Paced(Duration::from_millis(300)));
        let started = Instant::now();
        let heard = Heard::default();
        let answer = router(format, &fake.base_url(), limits, 0)
            .stream(Some(model_of(format)), &request(), &heard)
            .await
            .unwrap_or_else(|e| panic!("{format:?}: {e}"));
        assert!(
            started.elapsed() > 2 * limits.idle,
            "{format:?}: the answer took longer than the idle limit"
        );
        assert_eq!(answer.text, long);
        assert_eq!(fake.requests().len(), 1, "{format:?}: never asked again");
        assert_eq!(heard.restarts(), 0);
        assert_eq!(heard.text_since_last_restart(), long);
    });
    futures_util::future::join_all(runs).await;
}

#[tokio::test]
async fn each_providers_refusals_come_typed_and_are_not_asked_again() {
    for format in FORMATS {
        let fake = ScriptedModel::start(format).await;
        fake.push(Reply::TooLong).await;
        fake.push(Reply::Blocked).await;
        fake.push(call("read_file", json!({"path": "a"}))).await;
        let router = router(format, &fake.base_url(), StreamLimits::default(), 3);
        let model = model_of(format);
        let err = router.chat_on(model, &request()).await.unwrap_err();
        assert!(
            matches!(
                &err,
                LlmError::Refused {
                    refusal: Refusal::ContextTooLong,
                    ..
                }
            ),
            "{format:?}: {err}"
        );
        assert!(err.is_too_large() && !err.is_retryable() && !err.falls_back());
        match router.chat_on(model, &request()).await {
            // Gemini answers a blocked prompt, with its block reason.
            Ok(answer) if format == Format::Gemini => {
                assert!(
                    matches!(&answer.finish, FinishReason::Refused(why) if why.contains("PROHIBITED_CONTENT")),
                    "{answer:?}"
                );
            }
            Ok(answer) => panic!("{format:?}: {answer:?}"),
            Err(err) => assert!(
                matches!(
                    &err,
                    LlmError::Refused {
                        refusal: Refusal::ContentPolicy,
                        ..
                    }
                ),
                "{format:?}: {err}"
            ),
        }
        assert_eq!(
            fake.requests().await.len(),
            2,
            "{format:?}: refusals are not asked again"
        );
    }
}

#[tokio::test]
async fn a_stream_with_nothing_but_a_ping_is_not_an_answer() {
    // Anthropic's stream closed after message_start and ping.
    let fake = StreamingModel::start(Format::Anthropic).await;
    fake.push(text("never finished"), Delivery::CutAfter(2));
    let err = router(Format::Anthropic, &fake.base_url(), StreamLimits::default(), 0)
        .chat_on(model_of(Format::Anthropic), &request())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::StreamCut { .. }), "{err}");
    assert!(err.is_retryable() && err.falls_back());
}
