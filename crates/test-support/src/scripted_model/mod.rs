//! A scripted model server for tests: a real HTTP server (wiremock) that
//! answers in the wire format of OpenAI (Chat Completions or the Responses
//! API), Gemini or Anthropic with the replies a test queued, in order, and
//! records what the client sent. Like the real services it refuses what they
//! refuse (`provider_rules`), and it answers like current models do:
//! reasoning items and thinking blocks before tool calls, signatures that
//! must come back unchanged, stop reasons.

mod gateway;
pub mod prompt_cache;
pub mod provider_rules;

pub use provider_rules::Issued;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
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
    /// An HTTP error with the provider's error body and an optional Retry-After.
    Status {
        code: u16,
        message: String,
        retry_after: Option<u64>,
    },
    /// An answer that stops for `Stop`'s reason.
    Stopped(Stop),
}

pub fn text(t: &str) -> Reply {
    Reply::Text(t.to_owned())
}

pub fn call(name: &str, arguments: Value) -> Reply {
    Reply::ToolCalls(vec![(name.to_owned(), arguments.to_string())])
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
        Format::Gemini => {
            Mock::given(method("POST")).and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
        }
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

/// The model named in a Gemini URL (`/v1beta/models/{model}:generateContent`).
fn gemini_model(url_path: &str) -> String {
    url_path
        .rsplit('/')
        .next()
        .and_then(|last| last.split(':').next())
        .unwrap_or_default()
        .to_owned()
}

impl wiremock::Respond for Responder {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let mut script = self.script.lock().unwrap();
        let model = match self.format {
            Format::Gemini => gemini_model(request.url.path()),
            _ => body["model"].as_str().unwrap_or_default().to_owned(),
        };
        let checked = match self.format {
            Format::OpenAi => provider_rules::chat_completions(&body),
            Format::Responses => provider_rules::responses(&body, &script.issued),
            Format::Anthropic => provider_rules::messages(&body, &script.issued),
            Format::Gemini => provider_rules::generate_content(&model, &body, &script.issued),
        };
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
        match reply {
            Reply::Status {
                code,
                message,
                retry_after,
            } => status_template(self.format, code, &message, retry_after),
            other => {
                let mut answer = reply_for(self.format, &model, &body, other, n, &mut script.issued);
                if let Some(cache) = &mut script.cache {
                    let usage = cache.account(self.format, &model, &body);
                    set_usage(self.format, &mut answer, usage);
                }
                let usage = match self.format {
                    Format::Gemini => answer["usageMetadata"].clone(),
                    _ => answer["usage"].clone(),
                };
                script.usages.push(usage);
                ResponseTemplate::new(200).set_body_json(answer)
            }
        }
    }
}

fn status_template(format: Format, code: u16, message: &str, retry_after: Option<u64>) -> ResponseTemplate {
    let body = match format {
        Format::Anthropic => {
            json!({"type": "error", "error": {"type": if code == 529 { "overloaded_error" } else { "invalid_request_error" }, "message": message}})
        }
        Format::Gemini => json!({"error": {"code": code, "message": message, "status": "UNAVAILABLE"}}),
        Format::OpenAi | Format::Responses => {
            json!({"error": {"message": message, "type": "server_error", "code": null}})
        }
    };
    let mut t = ResponseTemplate::new(code).set_body_json(body);
    if let Some(seconds) = retry_after {
        t = t.insert_header("retry-after", seconds.to_string().as_str());
    }
    t
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

/// The provider's success body for a reply.
fn reply_for(
    format: Format,
    model: &str,
    request: &Value,
    reply: Reply,
    n: usize,
    issued: &mut Issued,
) -> Value {
    match format {
        Format::OpenAi => reply_body(Format::OpenAi, reply, n),
        Format::Responses => responses_body(model, reply, n, issued),
        Format::Anthropic => anthropic_body(model, request, reply, n, issued),
        Format::Gemini => gemini_body(model, reply, n, issued),
    }
}

fn parts_of(reply: &Reply) -> (String, Vec<(String, String)>) {
    match reply {
        Reply::Text(t) => (t.clone(), Vec::new()),
        Reply::ToolCalls(calls) => (String::new(), calls.clone()),
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

/// An OpenAI-format model that answers by turn: the reply is picked by how
/// many assistant messages the request already holds, so a conversation
/// started again from the beginning (a resumed task) gets the same replies.
/// Turns past the end get the last reply.
pub struct TurnModel {
    pub server: MockServer,
    pub format: Format,
    storm: std::sync::Arc<std::sync::Mutex<Storm>>,
    refused: Arc<Mutex<Vec<(Value, Value)>>>,
    billed: Billed,
    received: Arc<std::sync::atomic::AtomicUsize>,
}

/// Requests still to refuse, and the statuses refused so far.
#[derive(Default)]
struct Storm {
    left: u32,
    answered: Vec<u16>,
}

impl Storm {
    /// The next refusal, cycling 429 (with Retry-After), 529 and 503.
    fn next(&mut self) -> Option<ResponseTemplate> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let status = [429, 529, 503][self.answered.len() % 3];
        self.answered.push(status);
        let body = match status {
            429 => {
                json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}})
            }
            529 => json!({"error": {"message": "Overloaded", "type": "overloaded_error", "code": null}}),
            _ => {
                json!({"error": {"message": "The server is overloaded or not ready yet.", "type": "server_error", "code": null}})
            }
        };
        let template = ResponseTemplate::new(status).set_body_json(body);
        Some(if status == 429 {
            template.insert_header("retry-after", "1")
        } else {
            template
        })
    }
}

struct ByTurn {
    format: Format,
    issued: Arc<Mutex<Issued>>,
    refused: Arc<Mutex<Vec<(Value, Value)>>>,
    answered: std::sync::atomic::AtomicUsize,
    turns: Vec<(Reply, Option<std::time::Duration>)>,
    /// The answer to planning calls (those with the sage system text).
    plan: Option<String>,
    plan_delay: Option<std::time::Duration>,
    storm: std::sync::Arc<std::sync::Mutex<Storm>>,
    billed: Billed,
    received: Arc<std::sync::atomic::AtomicUsize>,
}

/// Usage every answer reports instead of the usual few tokens, in Chat
/// Completions' format and for the model asked (so a budget sees costs of
/// a real size): (prompt tokens, completion tokens).
type Billed = Arc<Mutex<Option<(u64, u64)>>>;

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

impl wiremock::Respond for ByTurn {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        self.received.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(refusal) = self.storm.lock().unwrap().next() {
            return refusal;
        }
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let model = match self.format {
            Format::Gemini => gemini_model(request.url.path()),
            _ => body["model"].as_str().unwrap_or_default().to_owned(),
        };
        let mut issued = self.issued.lock().unwrap();
        let checked = match self.format {
            Format::OpenAi => provider_rules::chat_completions(&body),
            Format::Responses => provider_rules::responses(&body, &issued),
            Format::Anthropic => provider_rules::messages(&body, &issued),
            Format::Gemini => provider_rules::generate_content(&model, &body, &issued),
        };
        if let Err(error) = checked {
            self.refused.lock().unwrap().push((body, error.clone()));
            return ResponseTemplate::new(400).set_body_json(error);
        }
        let n = self.answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let billed = *self.billed.lock().unwrap();
        let answer = |reply: Reply, issued: &mut Issued| {
            let mut answer = reply_for(self.format, &model, &body, reply, n, issued);
            if let (Some((prompt, completion)), Format::OpenAi) = (billed, self.format) {
                answer["model"] = json!(model);
                answer["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
            }
            ResponseTemplate::new(200).set_body_json(answer)
        };
        let v = view(self.format, &body);
        if let Some(text) = context_answer(&v) {
            return answer(Reply::Text(text), &mut issued);
        }
        if let (Some(plan), true) = (&self.plan, v.system.starts_with(SAGE_SYSTEM)) {
            let template = answer(Reply::Text(plan.clone()), &mut issued);
            return match self.plan_delay {
                Some(d) => template.set_delay(d),
                None => template,
            };
        }
        let turn = v.turns;
        let (reply, delay) = &self.turns[turn.min(self.turns.len() - 1)];
        let template = match reply.clone() {
            Reply::Status {
                code,
                message,
                retry_after,
            } => status_template(self.format, code, &message, retry_after),
            other => answer(other, &mut issued),
        };
        match delay {
            Some(d) => template.set_delay(*d),
            None => template,
        }
    }
}

impl TurnModel {
    pub async fn start(turns: Vec<(Reply, Option<std::time::Duration>)>) -> TurnModel {
        TurnModel::start_with_plan(turns, None).await
    }

    /// The same, answering planning calls with `plan`.
    pub async fn start_with_plan(
        turns: Vec<(Reply, Option<std::time::Duration>)>,
        plan: Option<String>,
    ) -> TurnModel {
        TurnModel::start_with_slow_plan(turns, plan, None).await
    }

    /// The same, each planning answer taking `plan_delay`.
    pub async fn start_with_slow_plan(
        turns: Vec<(Reply, Option<std::time::Duration>)>,
        plan: Option<String>,
        plan_delay: Option<std::time::Duration>,
    ) -> TurnModel {
        TurnModel::start_as(Format::OpenAi, turns, plan, plan_delay).await
    }

    /// The same, in `format`'s wire format (and its rules).
    pub async fn start_as(
        format: Format,
        turns: Vec<(Reply, Option<std::time::Duration>)>,
        plan: Option<String>,
        plan_delay: Option<std::time::Duration>,
    ) -> TurnModel {
        assert!(!turns.is_empty());
        let server = MockServer::start().await;
        let storm = std::sync::Arc::new(std::sync::Mutex::new(Storm::default()));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let billed = Billed::default();
        let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mock = endpoint(format);
        mock.respond_with(ByTurn {
            format,
            issued: Arc::default(),
            refused: refused.clone(),
            answered: Default::default(),
            turns,
            plan,
            plan_delay,
            storm: storm.clone(),
            billed: billed.clone(),
            received: received.clone(),
        })
        .mount(&server)
        .await;
        TurnModel {
            server,
            format,
            storm,
            refused,
            billed,
            received,
        }
    }

    /// From now on every answer (Chat Completions) reports `prompt` input
    /// and `completion` output tokens, for the model that was asked.
    pub fn bill(&self, prompt: u64, completion: u64) {
        *self.billed.lock().unwrap() = Some((prompt, completion));
    }

    /// How many requests reached it so far, of every kind: cheap enough to
    /// poll every millisecond (`requests` copies and parses every body).
    pub fn received(&self) -> usize {
        self.received.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The requests the provider's rules refused, with the error each got.
    pub fn refused(&self) -> Vec<(Value, Value)> {
        self.refused.lock().unwrap().clone()
    }

    /// The next `requests` requests are refused (429, 529, 503 in turn).
    pub async fn storm(&self, requests: u32) {
        self.storm.lock().unwrap().left = requests;
    }

    /// The statuses the storms answered so far.
    pub async fn storm_statuses(&self) -> Vec<u16> {
        self.storm.lock().unwrap().answered.clone()
    }

    pub fn base_url(&self) -> String {
        base_url_of(self.format, &self.server)
    }

    /// The JSON bodies of every request of the agent so far (planning and
    /// context-store calls are left out).
    pub async fn requests(&self) -> Vec<Value> {
        self.all_requests()
            .await
            .into_iter()
            .filter(|r| {
                let v = view(self.format, r);
                !v.system.starts_with(SAGE_SYSTEM) && !is_context_view(&v)
            })
            .collect()
    }

    /// The JSON bodies of every request it answered so far, planning calls
    /// included (not those to another API's path, which got a 404).
    pub async fn all_requests(&self) -> Vec<Value> {
        let answered = |path: &str| match self.format {
            Format::OpenAi => path == "/v1/chat/completions",
            Format::Responses => path == "/v1/responses",
            Format::Anthropic | Format::Gemini => true,
        };
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|r| answered(r.url.path()))
            .map(|r| r.body_json::<Value>().unwrap_or(Value::Null))
            .collect()
    }
}

/// The usual work of a task: edit greet.py, commit it (after `scan_window`,
/// during which a test may inspect the live sandbox), answer.
pub fn edit_and_commit(scan_window: std::time::Duration) -> Vec<(Reply, Option<std::time::Duration>)> {
    vec![
        (
            call(
                "text_editor_str_replace",
                json!({"path": "/workspace/project/greet.py", "old_str": "Hello", "new_str": "Hello, world"}),
            ),
            None,
        ),
        (
            call(
                "command_executor_execute_command",
                json!({"command": "env; git add -A && git commit -qm 'Greet the whole world' && git log --oneline -3"}),
            ),
            // The model "thinks" a while: the test scans the live container meanwhile.
            Some(scan_window),
        ),
        (
            text("Changed the greeting in greet.py to greet the whole world."),
            None,
        ),
    ]
}
