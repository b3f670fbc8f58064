//! The scripted model that answers by turn (a conversation started again
//! gets the same replies), with storms of overload and billed usage.

use super::provider_rules::Issued;
use super::{
    base_url_of, call, context_answer, endpoint, error_template, is_context_view, model_and_rules, reply_for,
    success, text, view, Format, Reply, SAGE_SYSTEM,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use wiremock::{MockServer, ResponseTemplate};

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
    arrivals: Arrivals,
}

/// When one request reached the model and what it carried, so a bench can
/// tell the agent's turns from the thread's classification sent beside them.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub at: std::time::Instant,
    /// A request of the agent's loop: not a planner's (the sage's system
    /// text), the thread's classification or a context-store call.
    pub agent: bool,
    /// It offered tools: a turn of the agent's loop (the thread's
    /// classification offers none).
    pub offers_tools: bool,
    /// It carried the result of a tool call the model asked for: the call
    /// was done.
    pub carries_tool_result: bool,
}

type Arrivals = Arc<Mutex<Vec<Arrival>>>;

/// Whether `body` holds a tool call's result, in `format`'s own shape.
fn carries_tool_result(format: Format, body: &Value) -> bool {
    let items = |key: &str| body[key].as_array().into_iter().flatten();
    let has =
        |list: &Value, test: &dyn Fn(&Value) -> bool| list.as_array().is_some_and(|l| l.iter().any(test));
    match format {
        Format::OpenAi => items("messages").any(|m| m["role"] == "tool"),
        Format::Responses => items("input").any(|i| i["type"] == "function_call_output"),
        Format::Anthropic => items("messages").any(|m| has(&m["content"], &|b| b["type"] == "tool_result")),
        Format::Gemini => {
            items("contents").any(|c| has(&c["parts"], &|p| p.get("functionResponse").is_some()))
        }
    }
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
    arrivals: Arrivals,
}

/// Usage every answer reports instead of the usual few tokens, in Chat
/// Completions' format and for the model asked (so a budget sees costs of
/// a real size): (prompt tokens, completion tokens).
type Billed = Arc<Mutex<Option<(u64, u64)>>>;

impl wiremock::Respond for ByTurn {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let at = std::time::Instant::now();
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let v = view(self.format, &body);
        self.arrivals.lock().unwrap().push(Arrival {
            at,
            agent: !v.system.starts_with(SAGE_SYSTEM) && !is_context_view(&v),
            offers_tools: body["tools"].as_array().is_some_and(|t| !t.is_empty()),
            carries_tool_result: carries_tool_result(self.format, &body),
        });
        self.received.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(refusal) = self.storm.lock().unwrap().next() {
            return refusal;
        }
        let mut issued = self.issued.lock().unwrap();
        let (model, checked) = model_and_rules(self.format, request.url.path(), &body, &issued);
        if let Err(error) = checked {
            self.refused.lock().unwrap().push((body, error.clone()));
            return ResponseTemplate::new(400).set_body_json(error);
        }
        let n = self.answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let billed = *self.billed.lock().unwrap();
        let answer = |reply: Reply, issued: &mut Issued| {
            let mut answer = match reply_for(self.format, &model, &body, reply, n, issued) {
                Ok(answer) => answer,
                Err(error) => {
                    self.refused.lock().unwrap().push((body.clone(), error.clone()));
                    return ResponseTemplate::new(400).set_body_json(error);
                }
            };
            if let (Some((prompt, completion)), Format::OpenAi) = (billed, self.format) {
                answer["model"] = json!(model);
                answer["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
            }
            success(self.format, request, &body, answer)
        };
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
        let template = match error_template(self.format, reply) {
            Some(refusal) => refusal,
            None => answer(reply.clone(), &mut issued),
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
        let arrivals = Arrivals::default();
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
            arrivals: arrivals.clone(),
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
            arrivals,
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

    /// Every request that reached it so far, in order: when, and whether
    /// it offered tools or carried a tool call's result.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().unwrap().clone()
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
