//! A scripted model server for tests: a real HTTP server (wiremock) that
//! answers in the wire format of OpenAI, Gemini or Anthropic with the replies
//! a test queued, in order, and records what the client sent.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenAi,
    Gemini,
    Anthropic,
}

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
}

pub fn text(t: &str) -> Reply {
    Reply::Text(t.to_owned())
}

pub fn call(name: &str, arguments: Value) -> Reply {
    Reply::ToolCalls(vec![(name.to_owned(), arguments.to_string())])
}

pub struct ScriptedModel {
    pub server: MockServer,
    pub format: Format,
    pushed: AtomicUsize,
}

impl ScriptedModel {
    pub async fn start(format: Format) -> ScriptedModel {
        ScriptedModel {
            server: MockServer::start().await,
            format,
            pushed: AtomicUsize::new(0),
        }
    }

    /// The base URL a provider client is configured with.
    pub fn base_url(&self) -> String {
        match self.format {
            Format::OpenAi => format!("{}/v1", self.server.uri()),
            Format::Gemini | Format::Anthropic => self.server.uri(),
        }
    }

    /// Queues one reply; replies are served in the order they were pushed.
    pub async fn push(&self, reply: Reply) {
        let n = self.pushed.fetch_add(1, Ordering::SeqCst);
        let template = match reply {
            Reply::Status {
                code,
                message,
                retry_after,
            } => {
                let body = match self.format {
                    Format::Anthropic => {
                        json!({"type": "error", "error": {"type": if code == 529 { "overloaded_error" } else { "invalid_request_error" }, "message": message}})
                    }
                    Format::Gemini => {
                        json!({"error": {"code": code, "message": message, "status": "UNAVAILABLE"}})
                    }
                    Format::OpenAi => {
                        json!({"error": {"message": message, "type": "server_error", "code": null}})
                    }
                };
                let mut t = ResponseTemplate::new(code).set_body_json(body);
                if let Some(seconds) = retry_after {
                    t = t.insert_header("retry-after", seconds.to_string().as_str());
                }
                t
            }
            other => ResponseTemplate::new(200).set_body_json(reply_body(self.format, other, n)),
        };
        let mock = match self.format {
            Format::OpenAi => Mock::given(method("POST")).and(path("/v1/chat/completions")),
            Format::Anthropic => Mock::given(method("POST")).and(path("/v1/messages")),
            Format::Gemini => {
                Mock::given(method("POST")).and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
            }
        };
        mock.respond_with(template)
            .up_to_n_times(1)
            .mount(&self.server)
            .await;
    }
}

/// The provider's success body for a text or tool-call reply.
fn reply_body(format: Format, reply: Reply, n: usize) -> Value {
    {
        let (text, calls) = match reply {
            Reply::Text(t) => (t, Vec::new()),
            Reply::ToolCalls(calls) => (String::new(), calls),
            Reply::Status { .. } => unreachable!(),
        };
        match format {
            Format::OpenAi => {
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| json!({"id": format!("call_{n}_{i}"), "type": "function", "function": {"name": name, "arguments": args}}))
                    .collect();
                let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !tool_calls.is_empty() {
                    message["tool_calls"] = json!(tool_calls);
                }
                json!({
                    "id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": "o3-2025-04-16",
                    "choices": [{"index": 0, "message": message, "finish_reason": if tool_calls.is_empty() { "stop" } else { "tool_calls" }}],
                    "usage": {"prompt_tokens": 100 + n as u64, "completion_tokens": 10, "total_tokens": 110 + n as u64}
                })
            }
            Format::Anthropic => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                for (i, (name, args)) in calls.iter().enumerate() {
                    let input: Value = serde_json::from_str(args).unwrap_or(json!({}));
                    content.push(json!({"type": "tool_use", "id": format!("toolu_{n}_{i}"), "name": name, "input": input}));
                }
                json!({
                    "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": "claude-test",
                    "content": content, "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
                    "usage": {"input_tokens": 200 + n as u64, "output_tokens": 20}
                })
            }
            Format::Gemini => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(json!({"text": text}));
                }
                for (name, args) in &calls {
                    let args: Value = serde_json::from_str(args).unwrap_or(json!({}));
                    parts.push(json!({"functionCall": {"name": name, "args": args}}));
                }
                json!({
                    "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
                    "usageMetadata": {"promptTokenCount": 300 + n as u64, "candidatesTokenCount": 30, "totalTokenCount": 330 + n as u64},
                    "modelVersion": "gemini-2.5-pro"
                })
            }
        }
    }
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
    storm: std::sync::Arc<std::sync::Mutex<Storm>>,
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
    turns: Vec<(Reply, Option<std::time::Duration>)>,
    /// The answer to planning calls (those with the sage system text).
    plan: Option<String>,
    plan_delay: Option<std::time::Duration>,
    storm: std::sync::Arc<std::sync::Mutex<Storm>>,
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

/// Whether a request is one of the context store's (classification, summary).
pub fn is_context_call(body: &Value) -> bool {
    let first = body["messages"][0]["content"].as_str().unwrap_or_default();
    let second = body["messages"][1]["content"].as_str().unwrap_or_default();
    first.starts_with(CLASSIFIER_SYSTEM)
        || [first, second].iter().any(|t| {
            t.starts_with(SUMMARY_PROMPT) || t.contains(IDEAS_CATEGORIES) || t.contains(IDEAS_OPTIONS)
        })
}

/// The answer a context-store call gets from the scripted models.
fn context_answer(body: &Value) -> Option<String> {
    let first = body["messages"][0]["content"].as_str().unwrap_or_default();
    if first.starts_with(CLASSIFIER_SYSTEM) {
        let prompt = body["messages"][1]["content"].as_str().unwrap_or_default();
        return Some(classify_like_a_model(classified_message(prompt)).to_string());
    }
    let user = body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
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
        if let Some(refusal) = self.storm.lock().unwrap().next() {
            return refusal;
        }
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        if let Some(answer) = context_answer(&body) {
            return ResponseTemplate::new(200).set_body_json(reply_body(
                Format::OpenAi,
                Reply::Text(answer),
                0,
            ));
        }
        if let (Some(plan), true) = (&self.plan, system.starts_with(SAGE_SYSTEM)) {
            let template = ResponseTemplate::new(200).set_body_json(reply_body(
                Format::OpenAi,
                Reply::Text(plan.clone()),
                0,
            ));
            return match self.plan_delay {
                Some(d) => template.set_delay(d),
                None => template,
            };
        }
        let turn = body["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
            .unwrap_or(0);
        let (reply, delay) = &self.turns[turn.min(self.turns.len() - 1)];
        let reply = match reply {
            Reply::Text(t) => Reply::Text(t.clone()),
            Reply::ToolCalls(c) => Reply::ToolCalls(c.clone()),
            Reply::Status {
                code,
                message,
                retry_after,
            } => Reply::Status {
                code: *code,
                message: message.clone(),
                retry_after: *retry_after,
            },
        };
        let template = match reply {
            Reply::Status { code, message, .. } => ResponseTemplate::new(code)
                .set_body_json(json!({"error": {"message": message, "type": "server_error", "code": null}})),
            other => ResponseTemplate::new(200).set_body_json(reply_body(Format::OpenAi, other, turn)),
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
        assert!(!turns.is_empty());
        let server = MockServer::start().await;
        let storm = std::sync::Arc::new(std::sync::Mutex::new(Storm::default()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ByTurn {
                turns,
                plan,
                plan_delay,
                storm: storm.clone(),
            })
            .mount(&server)
            .await;
        TurnModel { server, storm }
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
        format!("{}/v1", self.server.uri())
    }

    /// The JSON bodies of every request of the agent so far (planning and
    /// context-store calls are left out).
    pub async fn requests(&self) -> Vec<Value> {
        self.all_requests()
            .await
            .into_iter()
            .filter(|r| {
                !r["messages"][0]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with(SAGE_SYSTEM)
                    && !is_context_call(r)
            })
            .collect()
    }

    /// The JSON bodies of every request so far, planning calls included.
    pub async fn all_requests(&self) -> Vec<Value> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
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
