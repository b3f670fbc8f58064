//! A scripted model server for tests: a real HTTP server (wiremock) that
//! answers in the wire format of OpenAI (Chat Completions or the Responses
//! API), Gemini or Anthropic with the replies a test queued, in order, and
//! records what the client sent. Like the real services it refuses what they
//! refuse (`provider_rules`, `tool_rules`: a tool call left unanswered, say),
//! and a reply a test scripted with a call to a tool the request does not
//! declare is refused as the test's mistake. It answers like current models do:
//! reasoning items and thinking blocks before tool calls, signatures that
//! must come back unchanged, stop reasons. A request that asks to stream
//! gets the same answer as the API's server-sent events ([`sse`]); the
//! [`StreamingModel`] also paces, cuts and stalls them.

pub mod attempts;
mod error_shapes;
mod errors;
mod gateway;
pub mod image_rules;
pub mod prompt_cache;
pub mod provider_rules;
pub mod sse;
mod streaming;
pub mod tool_rules;
mod turn;

use errors::error_template;
pub use errors::{error_answer, ErrorAnswer};
pub use provider_rules::Issued;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
pub use streaming::{Delivery, StreamingModel};
pub use turn::{edit_and_commit, Arrival, TurnModel};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Chat Completions.
    OpenAi,
    /// OpenAI's Responses API.
    Responses,
    Gemini,
    Anthropic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Cut at the output limit after thinking only.
    Cut,
    /// Gemini's MALFORMED_FUNCTION_CALL.
    Malformed,
    /// The model declines.
    Refusal,
}

#[derive(Clone)]
pub enum Reply {
    Text(String),
    /// (name, arguments as JSON text; may be deliberately invalid).
    ToolCalls(Vec<(String, String)>),
    /// Text, then tool calls, in one answer.
    TextAndCalls(String, Vec<(String, String)>),
    /// An HTTP error with the provider's error body and an optional Retry-After.
    Status {
        code: u16,
        message: String,
        retry_after: Option<u64>,
    },
    /// An answer that stops for `Stop`'s reason.
    Stopped(Stop),
    /// The provider's refusal of a conversation over the context window.
    TooLong,
    /// The provider's content policy blocks the prompt.
    Blocked,
}

pub fn text(t: &str) -> Reply {
    Reply::Text(t.to_owned())
}

pub fn call(name: &str, arguments: Value) -> Reply {
    Reply::ToolCalls(vec![(name.to_owned(), arguments.to_string())])
}

/// Text, then one tool call, in one answer.
pub fn text_and_call(t: &str, name: &str, arguments: Value) -> Reply {
    Reply::TextAndCalls(t.to_owned(), vec![(name.to_owned(), arguments.to_string())])
}

/// A call to the command executor.
pub fn run(command: &str) -> Reply {
    call("command_executor_execute_command", json!({ "command": command }))
}

/// A `str_replace` in the greeting fixture's `greet.py`.
pub fn replace(old: &str, new: &str) -> Reply {
    call(
        "text_editor_str_replace",
        json!({"path": "/workspace/project/greet.py", "old_str": old, "new_str": new}),
    )
}

/// A Python project whose test wants the greeting "Hello, world".
pub const GREET: &str = "def greeting():\n    return 'Hello'\n";
pub const TEST: &str = "import unittest\nfrom greet import greeting\n\n\nclass Greeting(unittest.TestCase):\n    def test_world(self):\n        self.assertEqual(greeting(), 'Hello, world')\n\n\nif __name__ == '__main__':\n    unittest.main()\n";

/// The POST endpoint of `format`'s API on a mock server.
pub(crate) fn endpoint(format: Format) -> wiremock::MockBuilder {
    match format {
        Format::OpenAi => Mock::given(method("POST")).and(path("/v1/chat/completions")),
        Format::Responses => Mock::given(method("POST")).and(path("/v1/responses")),
        Format::Anthropic => Mock::given(method("POST")).and(path("/v1/messages")),
        Format::Gemini => Mock::given(method("POST")).and(path_regex(
            r"^/v1beta/models/[^/]+:(generateContent|streamGenerateContent)$",
        )),
    }
}

/// The base URL a client of `format` is configured with.
fn base_url_of(format: Format, server: &MockServer) -> String {
    match format {
        Format::OpenAi | Format::Responses => format!("{}/v1", server.uri()),
        Format::Gemini | Format::Anthropic => server.uri(),
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    answered: usize,
    issued: Issued,
    /// Bodies of the requests the rules refused, with why.
    refused: Vec<(Value, Value)>,
    /// Usage follows the provider's prompt caching (else fixed figures).
    cache: Option<prompt_cache::PromptCache>,
    /// The usage object of every answer, as sent.
    usages: Vec<Value>,
}

pub struct ScriptedModel {
    pub server: MockServer,
    pub format: Format,
    script: Arc<Mutex<Script>>,
}

struct Responder {
    format: Format,
    script: Arc<Mutex<Script>>,
}

/// The model named in a Gemini URL (`/v1beta/models/{model}:generateContent`
/// or `:streamGenerateContent`).
fn gemini_model(url_path: &str) -> String {
    url_path
        .rsplit('/')
        .next()
        .and_then(|last| last.split(':').next())
        .unwrap_or_default()
        .to_owned()
}

/// The model a request to `url_path` asks for (Gemini names it in the path),
/// and what `format`'s provider rules say of the request.
fn model_and_rules(
    format: Format,
    url_path: &str,
    body: &Value,
    issued: &Issued,
) -> (String, Result<(), Value>) {
    let model = match format {
        Format::Gemini => gemini_model(url_path),
        _ => body["model"].as_str().unwrap_or_default().to_owned(),
    };
    let checked = match format {
        Format::OpenAi => provider_rules::chat_completions(body),
        Format::Responses => provider_rules::responses(body, issued),
        Format::Anthropic => provider_rules::messages(body, issued),
        Format::Gemini => provider_rules::generate_content(&model, body, issued),
    };
    (model, checked)
}

impl wiremock::Respond for Responder {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let mut script = self.script.lock().unwrap();
        let (model, checked) = model_and_rules(self.format, request.url.path(), &body, &script.issued);
        if let Err(error) = checked {
            script.refused.push((body, error.clone()));
            return ResponseTemplate::new(400).set_body_json(error);
        }
        let Some(reply) = script.replies.pop_front() else {
            return ResponseTemplate::new(500)
                .set_body_json(json!({"error": {"message": "the test queued no more replies"}}));
        };
        let n = script.answered;
        script.answered += 1;
        match error_template(self.format, &reply) {
            Some(refusal) => refusal,
            None => {
                let mut answer = match reply_for(self.format, &model, &body, reply, n, &mut script.issued) {
                    Ok(answer) => answer,
                    Err(error) => {
                        script.refused.push((body, error.clone()));
                        return ResponseTemplate::new(400).set_body_json(error);
                    }
                };
                if let Some(cache) = &mut script.cache {
                    let usage = cache.account(self.format, &model, &body);
                    set_usage(self.format, &mut answer, usage);
                }
                let usage = match self.format {
                    Format::Gemini => answer["usageMetadata"].clone(),
                    _ => answer["usage"].clone(),
                };
                script.usages.push(usage);
                success(self.format, request, &body, answer)
            }
        }
    }
}

/// A success answer as `request` asks for it: JSON, or the API's events.
pub(crate) fn success(
    format: Format,
    request: &wiremock::Request,
    body: &Value,
    answer: Value,
) -> ResponseTemplate {
    let path = request.url.path();
    if !sse::asks_to_stream(format, path, body) {
        return ResponseTemplate::new(200).set_body_json(answer);
    }
    let sse_asked = request.url.query_pairs().any(|(k, v)| k == "alt" && v == "sse");
    if format == Format::Gemini && !sse_asked {
        // Without alt=sse, Gemini streams one JSON array of its chunks.
        return ResponseTemplate::new(200).set_body_json(sse::gemini_array(&answer));
    }
    let frames = sse::frames(format, body, &answer);
    ResponseTemplate::new(200).set_body_raw(sse::encode(format, &frames).into_bytes(), "text/event-stream")
}

impl ScriptedModel {
    pub async fn start(format: Format) -> ScriptedModel {
        let server = MockServer::start().await;
        let script = Arc::new(Mutex::new(Script::default()));
        let mock = endpoint(format);
        mock.respond_with(Responder {
            format,
            script: script.clone(),
        })
        .mount(&server)
        .await;
        ScriptedModel {
            server,
            format,
            script,
        }
    }

    /// The base URL a provider client is configured with.
    pub fn base_url(&self) -> String {
        base_url_of(self.format, &self.server)
    }

    /// Queues one reply; replies are served in the order they were pushed.
    pub async fn push(&self, reply: Reply) {
        self.script.lock().unwrap().replies.push_back(reply);
    }

    /// The requests the provider's rules refused, with the error each got.
    pub fn refused(&self) -> Vec<(Value, Value)> {
        self.script.lock().unwrap().refused.clone()
    }

    /// The same server, its usage figures following the provider's prompt
    /// caching.
    pub async fn start_caching(format: Format) -> ScriptedModel {
        let model = ScriptedModel::start(format).await;
        model.script.lock().unwrap().cache = Some(prompt_cache::PromptCache::default());
        model
    }

    /// The usage object of every answer so far, as the provider sent it.
    pub fn usages(&self) -> Vec<Value> {
        self.script.lock().unwrap().usages.clone()
    }
}

/// Puts a cache-accounted input into an answer's usage, in `format`'s fields.
fn set_usage(format: Format, answer: &mut Value, usage: prompt_cache::CacheUsage) {
    match format {
        Format::Anthropic => {
            answer["usage"]["input_tokens"] = json!(usage.total - usage.read - usage.written);
            answer["usage"]["cache_read_input_tokens"] = json!(usage.read);
            answer["usage"]["cache_creation_input_tokens"] = json!(usage.written);
        }
        Format::Responses => {
            answer["usage"]["input_tokens"] = json!(usage.total);
            answer["usage"]["input_tokens_details"]["cached_tokens"] = json!(usage.read);
        }
        Format::Gemini => {
            answer["usageMetadata"]["promptTokenCount"] = json!(usage.total);
            answer["usageMetadata"]["cachedContentTokenCount"] = json!(usage.read);
        }
        Format::OpenAi => {
            answer["usage"]["prompt_tokens"] = json!(usage.total);
            answer["usage"]["prompt_tokens_details"] = json!({"cached_tokens": usage.read});
        }
    }
}

/// The provider's success body for a reply; an error body (for a 400)
/// when the reply calls a tool the request does not declare, which no
/// model does ([`tool_rules::scripted_calls`]).
fn reply_for(
    format: Format,
    model: &str,
    request: &Value,
    reply: Reply,
    n: usize,
    issued: &mut Issued,
) -> Result<Value, Value> {
    tool_rules::scripted_calls(format, request, &parts_of(&reply).1)?;
    Ok(match format {
        Format::OpenAi => reply_body(Format::OpenAi, reply, n),
        Format::Responses => responses_body(model, reply, n, issued),
        Format::Anthropic => anthropic_body(model, request, reply, n, issued),
        Format::Gemini => gemini_body(model, reply, n, issued),
    })
}

fn parts_of(reply: &Reply) -> (String, Vec<(String, String)>) {
    match reply {
        Reply::Text(t) => (t.clone(), Vec::new()),
        Reply::ToolCalls(calls) => (String::new(), calls.clone()),
        Reply::TextAndCalls(text, calls) => (text.clone(), calls.clone()),
        _ => (String::new(), Vec::new()),
    }
}

fn responses_body(model: &str, reply: Reply, n: usize, issued: &mut Issued) -> Value {
    let (text, calls) = parts_of(&reply);
    let encrypted = format!("enc-{n}-{model}");
    issued.signatures.insert(encrypted.clone());
    let mut output = vec![
        json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [], "encrypted_content": encrypted}),
    ];
    let (status, incomplete) = match reply {
        Reply::Stopped(Stop::Cut) => ("incomplete", json!({"reason": "max_output_tokens"})),
        Reply::Stopped(Stop::Refusal) => {
            output.push(json!({"type": "message", "id": format!("msg_{n}"), "status": "completed", "role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}));
            ("completed", Value::Null)
        }
        _ => ("completed", Value::Null),
    };
    if !text.is_empty() {
        output.push(json!({"type": "message", "id": format!("msg_{n}"), "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        output.push(json!({"type": "function_call", "id": format!("fc_{n}_{i}"), "call_id": format!("call_{n}_{i}"), "name": name, "arguments": args, "status": "completed"}));
    }
    json!({
        "id": format!("resp_{n}"), "object": "response", "status": status, "incomplete_details": incomplete,
        "model": format!("{model}-2026-08-01"), "output": output,
        "usage": {"input_tokens": 100 + n as u64, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 20}, "total_tokens": 130 + n as u64}
    })
}

fn anthropic_body(model: &str, request: &Value, reply: Reply, n: usize, issued: &mut Issued) -> Value {
    let (text, calls) = parts_of(&reply);
    let mut content = Vec::new();
    if request.get("thinking").is_some() || provider_rules::claude_thinks_by_default(model) {
        let signature = format!("sig-{n}-{model}");
        issued.signatures.insert(signature.clone());
        content.push(json!({"type": "thinking", "thinking": "I should look at the file first.", "signature": signature}));
    }
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        let input: Value = serde_json::from_str(args).unwrap_or(json!({}));
        content
            .push(json!({"type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": name, "input": input}));
    }
    let stop = match reply {
        Reply::Stopped(Stop::Cut) => "max_tokens",
        Reply::Stopped(Stop::Refusal) => {
            content.clear();
            "refusal"
        }
        _ if calls.is_empty() => "end_turn",
        _ => "tool_use",
    };
    json!({
        "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 200 + n as u64, "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
    })
}

fn gemini_body(model: &str, reply: Reply, n: usize, issued: &mut Issued) -> Value {
    let (text, calls) = parts_of(&reply);
    let signs = provider_rules::gemini_signs(model);
    let mut parts = Vec::new();
    let mut signature = || {
        let s = format!("gsig-{n}-{model}");
        issued.signatures.insert(s.clone());
        s
    };
    if !text.is_empty() {
        let mut part = json!({"text": text});
        if signs && calls.is_empty() {
            part["thoughtSignature"] = json!(signature());
        }
        parts.push(part);
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        let args: Value = serde_json::from_str(args).unwrap_or(json!({}));
        let mut part = json!({"functionCall": {"name": name, "args": args}});
        if signs && i == 0 {
            part["thoughtSignature"] = json!(signature());
        }
        parts.push(part);
    }
    let mut candidate =
        json!({"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0});
    match reply {
        Reply::Stopped(Stop::Cut) => {
            candidate = json!({"content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0});
        }
        Reply::Stopped(Stop::Malformed) => {
            candidate = json!({"finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": "Malformed function call: print(default_api.read_file(path=README.md", "index": 0});
        }
        Reply::Stopped(Stop::Refusal) => {
            candidate = json!({"finishReason": "SAFETY", "index": 0, "safetyRatings": []});
        }
        // Gemini answers a prompt its policy blocks, without candidates.
        Reply::Blocked => {
            return json!({
                "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                "usageMetadata": {"promptTokenCount": 300 + n as u64, "totalTokenCount": 300 + n as u64},
                "modelVersion": model
            });
        }
        _ => {}
    }
    json!({
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 300 + n as u64, "candidatesTokenCount": 30, "thoughtsTokenCount": 12, "totalTokenCount": 342 + n as u64},
        "modelVersion": model
    })
}

/// The Chat Completions success body for a text or tool-call reply.
fn reply_body(format: Format, reply: Reply, n: usize) -> Value {
    assert_eq!(format, Format::OpenAi, "reply_body speaks Chat Completions");
    let (text, calls) = parts_of(&reply);
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("call_{n}_{i}"), "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let mut message =
        json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
    }
    let finish = match reply {
        Reply::Stopped(Stop::Cut) => "length",
        Reply::Stopped(Stop::Refusal) => {
            message["refusal"] = json!("I can't help with that.");
            "stop"
        }
        _ if tool_calls.is_empty() => "stop",
        _ => "tool_calls",
    };
    json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": "o3-2025-04-16",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100 + n as u64, "completion_tokens": 10, "total_tokens": 110 + n as u64}
    })
}

impl ScriptedModel {
    /// Every request received so far: (headers, JSON body).
    pub async fn requests(&self) -> Vec<(wiremock::http::HeaderMap, Value)> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|r| (r.headers.clone(), r.body_json::<Value>().unwrap_or(Value::Null)))
            .collect()
    }
}

/// How every sage planning call's system text begins.
pub const SAGE_SYSTEM: &str = "You are a senior software engineer advising on a code base.";
/// How the context store's classifier's system text begins.
pub const CLASSIFIER_SYSTEM: &str = "You classify the intent of a message";
/// How a request to summarise a constraint begins.
pub const SUMMARY_PROMPT: &str = "The text below is a constraint or refinement";
/// What the idea options' first stage (categories) says.
pub const IDEAS_CATEGORIES: &str = "categories that let a \"";
/// What the idea options' second stage says, right before the category.
pub const IDEAS_OPTIONS: &str = "choices for the category \"";

/// The message inside the classifier's prompt (between the seed's quotes).
pub fn classified_message(prompt: &str) -> &str {
    let start = prompt
        .find("User's message: \"\"\"\n")
        .map(|i| i + "User's message: \"\"\"\n".len())
        .unwrap_or(0);
    let rest = &prompt[start..];
    &rest[..rest.find("\n\"\"\"").unwrap_or(rest.len())]
}

/// Labels as a light model would give them, by the words in the message:
/// "must", "only", "do not", "never", "keep" add a constraint; "also",
/// "instead", "rather" refine; a request verb ("add", "fix", "make",
/// "should", ...) defines the problem; a question mark asks; anything else
/// (thanks, "ok") is unclear.
pub fn classify_like_a_model(message: &str) -> Value {
    let lower = message.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).collect();
    let has = |w: &str| words.contains(&w);
    let mut labels = Vec::new();
    if ["must", "only", "never", "keep"].iter().any(|w| has(w))
        || lower.contains("do not")
        || lower.contains("don't")
        || ["必ず", "だけ", "しないで", "禁止"]
            .iter()
            .any(|w| message.contains(w))
    {
        labels.push("CONSTRAINT_ADDITION");
    }
    if ["also", "instead", "rather"].iter().any(|w| has(w)) {
        labels.push("REFINEMENT");
    }
    let problem = [
        "add",
        "fix",
        "build",
        "make",
        "implement",
        "should",
        "want",
        "need",
        "change",
        "support",
        "create",
        "greet",
    ];
    let japanese_request = ["してください", "したい", "追加", "修正"]
        .iter()
        .any(|w| message.contains(w));
    if labels.is_empty() && (problem.iter().any(|w| has(w)) || japanese_request) {
        labels.push("PROBLEM_DEFINITION");
    }
    if lower.trim_end().ends_with('?') || lower.trim_end().ends_with('？') {
        labels.push("QUESTION");
    }
    if labels.is_empty() {
        labels.push("UNCLEAR");
    }
    labels.truncate(2);
    json!({"intent": labels, "reason": "scripted"})
}

/// What the scripted models answer by, read from a request in any format:
/// the system text, the user turns' texts, and how many answers of the
/// model the conversation already holds.
pub struct View {
    pub system: String,
    pub users: Vec<String>,
    pub turns: usize,
}

fn texts_of(blocks: &Value, key: &str) -> String {
    match blocks {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p[key].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

pub fn view(format: Format, body: &Value) -> View {
    let list = |key: &str| body[key].as_array().cloned().unwrap_or_default();
    match format {
        Format::OpenAi => {
            let messages = list("messages");
            let of = |role: &'static str| messages.iter().filter(move |m| m["role"] == role);
            View {
                system: of("system").map(|m| texts_of(&m["content"], "text")).collect(),
                users: of("user").map(|m| texts_of(&m["content"], "text")).collect(),
                turns: of("assistant").count(),
            }
        }
        Format::Responses => {
            let input = list("input");
            View {
                system: body["instructions"].as_str().unwrap_or_default().to_owned(),
                users: input
                    .iter()
                    .filter(|i| i["role"] == "user")
                    .map(|i| texts_of(&i["content"], "text"))
                    .collect(),
                // One answer: a run of the model's items between inputs.
                turns: input
                    .iter()
                    .map(|i| {
                        i["type"] == "reasoning" || i["type"] == "function_call" || i["role"] == "assistant"
                    })
                    .fold((0, false), |(runs, inside), model| {
                        (runs + usize::from(model && !inside), model)
                    })
                    .0,
            }
        }
        Format::Anthropic => {
            let messages = list("messages");
            View {
                system: texts_of(&body["system"], "text"),
                users: messages
                    .iter()
                    .filter(|m| m["role"] == "user")
                    .map(|m| texts_of(&m["content"], "text"))
                    .filter(|t| !t.is_empty())
                    .collect(),
                turns: messages.iter().filter(|m| m["role"] == "assistant").count(),
            }
        }
        Format::Gemini => {
            let contents = list("contents");
            View {
                system: texts_of(&body["systemInstruction"]["parts"], "text"),
                users: contents
                    .iter()
                    .filter(|c| c["role"] == "user")
                    .map(|c| texts_of(&c["parts"], "text"))
                    .filter(|t| !t.is_empty())
                    .collect(),
                turns: contents.iter().filter(|c| c["role"] == "model").count(),
            }
        }
    }
}

/// Whether a request is one of the context store's (classification, summary).
pub fn is_context_call(body: &Value) -> bool {
    is_context_view(&view(Format::OpenAi, body))
}

fn is_context_view(v: &View) -> bool {
    let first = v.users.first().map(String::as_str).unwrap_or_default();
    v.system.starts_with(CLASSIFIER_SYSTEM)
        || [v.system.as_str(), first].iter().any(|t| {
            t.starts_with(SUMMARY_PROMPT) || t.contains(IDEAS_CATEGORIES) || t.contains(IDEAS_OPTIONS)
        })
}

/// The answer a context-store call gets from the scripted models.
fn context_answer(v: &View) -> Option<String> {
    let user = v.users.first().map(String::as_str).unwrap_or_default();
    if v.system.starts_with(CLASSIFIER_SYSTEM) {
        return Some(classify_like_a_model(classified_message(user)).to_string());
    }
    if user.contains(IDEAS_CATEGORIES) {
        return Some(
            json!([
                {"name": "Error handling", "description": "How failures show", "example_choices": ["exit codes", "messages", "retries"]},
                {"name": "Compatibility", "description": "What must keep working", "example_choices": ["old flags", "scripts", "output format"]}
            ])
            .to_string(),
        );
    }
    if user.contains(IDEAS_OPTIONS) {
        let category = user
            .split(IDEAS_OPTIONS)
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("?");
        let options: Vec<String> = (1..=6).map(|i| format!("{category} option {i}")).collect();
        return Some(format!("```json\n{}\n```", json!(options)));
    }
    user.starts_with(SUMMARY_PROMPT).then(|| {
        let text = user.split("\"\"\"").nth(1).unwrap_or_default().trim();
        format!("Summary: {}", text.chars().take(60).collect::<String>())
    })
}
