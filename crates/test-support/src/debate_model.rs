//! A model server for planning tests that answers by what it is asked, in
//! the wire format of OpenAI, Gemini or Anthropic: a plan for a plan
//! request, critiques for a critique request, the scripted consensus JSON,
//! a final plan for the judge. It acts like a prompt cache: a request whose
//! system text it has seen before reports that text's tokens as cached.

use super::scripted_model::{endpoint, error_answer, provider_rules, success, view, Format, Issued, Reply};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wiremock::{MockServer, Request, ResponseTemplate};

/// How one model behaves.
#[derive(Clone, Default)]
pub struct Behaviour {
    /// Answers to consensus checks, in order (the last repeats).
    pub consensus: Vec<String>,
    /// Every call takes this long.
    pub delay: Option<Duration>,
    /// Plan requests fail with HTTP 400.
    pub refuse_plans: bool,
    /// Plan requests are refused as over the context window, in the
    /// provider's own error shape.
    pub plans_too_long: bool,
    /// Judge calls answer this instead of a final plan.
    pub judge_answer: Option<String>,
    /// Review calls answer this.
    pub review_answer: Option<String>,
}

#[derive(Default)]
struct State {
    seen_systems: HashSet<String>,
    consensus_calls: usize,
    calls: Vec<(String, Value)>,
    /// The errors of the requests the provider's rules refused.
    refused: Vec<Value>,
}

pub struct DebateModel {
    pub server: MockServer,
    pub format: Format,
    state: Arc<Mutex<State>>,
}

struct Responder {
    format: Format,
    label: String,
    behaviour: Behaviour,
    state: Arc<Mutex<State>>,
}

/// The system text and the last user text of a request, per wire format.
pub fn texts(format: Format, body: &Value) -> (String, String) {
    let view = view(format, body);
    let last = view.users.last().cloned().unwrap_or_default();
    (view.system, last)
}

/// The model id a prompt gives ("You are MODEL B").
fn model_id(user: &str) -> String {
    user.split("You are MODEL ")
        .nth(1)
        .and_then(|r| r.chars().next())
        .map(String::from)
        .unwrap_or_else(|| "?".into())
}

pub fn phase_of(user: &str) -> &'static str {
    if user.contains("Write a step-by-step implementation plan") {
        "plan"
    } else if user.contains("Critique the following implementation plans") {
        "critique"
    } else if user.contains("Review your previous implementation plan") {
        "revise"
    } else if user.contains("to determine whether they have reached consensus") {
        "consensus"
    } else if user.contains("You are the judge") {
        "judge"
    } else if user.contains("Chain of Recursive Thoughts") {
        "self"
    } else if user.contains("as an expert second opinion") {
        "opinion"
    } else if user.contains("as concrete code edits") {
        "review"
    } else {
        "other"
    }
}

impl wiremock::Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        // What the provider would refuse is refused here too.
        let issued = Issued::default();
        let checked = match self.format {
            Format::OpenAi => provider_rules::chat_completions(&body),
            Format::Responses => provider_rules::responses(&body, &issued),
            Format::Anthropic => provider_rules::messages(&body, &issued),
            Format::Gemini => provider_rules::generate_content(&self.label, &body, &issued),
        };
        if let Err(error) = checked {
            self.state.lock().unwrap().refused.push(error.clone());
            return ResponseTemplate::new(400).set_body_json(error);
        }
        let (system, user) = texts(self.format, &body);
        let phase = phase_of(&user);
        let cached_chars = {
            let mut state = self.state.lock().unwrap();
            state.calls.push((phase.to_owned(), body.clone()));
            if state.seen_systems.contains(&system) {
                system.len()
            } else {
                state.seen_systems.insert(system.clone());
                0
            }
        };
        let id = model_id(&user);
        let text = match phase {
            "plan" if self.behaviour.refuse_plans => {
                return ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "this model refuses", "type": "invalid_request_error"}}));
            }
            "plan" if self.behaviour.plans_too_long => {
                let (status, refusal, _) = error_answer(self.format, &Reply::TooLong).unwrap_or_default();
                return ResponseTemplate::new(status).set_body_json(refusal);
            }
            "plan" | "revise" => format!(
                "# Implementation Plan (Model {id})\n\nBy {label}, {phase}.\n\n## Checklist\n- [ ] Add the flag parser ({label})\n- [ ] Test the parser\n",
                label = self.label
            ),
            "critique" => {
                let plans: Vec<&str> = user.split("## PLAN ").skip(1).map(|p| &p[..1]).collect();
                // As the prompt asks: tagged sections, with headings of their own.
                plans.iter().map(|p| format!("<critique of=\"{p}\">\n## Strengths\nClear.\n### Weaknesses\n{} says plan {p} needs tests.\n</critique>\n", self.label)).collect()
            }
            "consensus" => {
                let mut state = self.state.lock().unwrap();
                let n = state.consensus_calls;
                state.consensus_calls += 1;
                let list = &self.behaviour.consensus;
                list.get(n).or(list.last()).cloned().unwrap_or_else(|| r#"{"consensusScore": 0.5, "consensusReached": false, "reasoning": "differ"}"#.into())
            }
            "judge" => self.behaviour.judge_answer.clone().unwrap_or_else(|| {
                "# Final Implementation Plan\n\nMerged.\n\n## Checklist\n- [ ] Add the flag parser\n- [ ] Test the parser\n- [ ] Document the flag\n\nConfidence Score: 0.8".into()
            }),
            "self" => {
                let n = user.split("\"# Implementation Plan ").nth(1).and_then(|r| r.split('"').next()).unwrap_or("?").to_owned();
                format!("# Implementation Plan {n}\n\nSelf plan {n} by {}.\n\n## Checklist\n- [ ] Step of plan {n}\n", self.label)
            }
            "opinion" => format!("Opinion of {}: looks fine.", self.label),
            "review" => self.behaviour.review_answer.clone().unwrap_or_default(),
            _ => "?".into(),
        };
        let cached = (cached_chars / 4) as u64;
        let prompt = (system.len() + user.len()) as u64 / 4;
        let out = 50u64;
        let answer = match self.format {
            Format::OpenAi => json!({
                "id": "chatcmpl-1", "object": "chat.completion", "model": self.label,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out, "prompt_tokens_details": {"cached_tokens": cached}}
            }),
            Format::Responses => json!({
                "id": "resp_1", "object": "response", "status": "completed", "model": self.label,
                "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + out}
            }),
            Format::Anthropic => json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": self.label,
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "usage": {"input_tokens": prompt - cached, "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0, "output_tokens": out}
            }),
            Format::Gemini => json!({
                "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": prompt, "cachedContentTokenCount": cached, "candidatesTokenCount": out, "totalTokenCount": prompt + out},
                "modelVersion": self.label
            }),
        };
        let template = success(self.format, request, &body, answer);
        match self.behaviour.delay {
            Some(d) => template.set_delay(d),
            None => template,
        }
    }
}

impl DebateModel {
    /// `label` is the model name it answers as (and the name in usage).
    pub async fn start(format: Format, label: &str, behaviour: Behaviour) -> DebateModel {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State::default()));
        // Its API's path only: another path gets a 404, as on a real server.
        endpoint(format)
            .respond_with(Responder {
                format,
                label: label.to_owned(),
                behaviour,
                state: state.clone(),
            })
            .mount(&server)
            .await;
        DebateModel {
            server,
            format,
            state,
        }
    }

    pub fn base_url(&self) -> String {
        match self.format {
            Format::OpenAi | Format::Responses => format!("{}/v1", self.server.uri()),
            Format::Gemini | Format::Anthropic => self.server.uri(),
        }
    }

    /// (phase, body) of every call so far, in order.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The errors of the requests the provider's rules refused.
    pub fn refused(&self) -> Vec<Value> {
        self.state.lock().unwrap().refused.clone()
    }

    pub fn phases(&self) -> Vec<String> {
        self.calls().into_iter().map(|(p, _)| p).collect()
    }
}
