//! Chat Completions' stream (openai-openapi:
//! CreateChatCompletionStreamResponse) folded into the completion it would
//! have sent whole: each chunk's `choices[0].delta` adds to the message
//! (`content`, `refusal`, and `tool_calls` by their `index`), the last
//! choice chunk has the finish reason, a chunk without choices the usage
//! (`stream_options.include_usage`), and `data: [DONE]` ends it. An
//! `error` object instead of a chunk is an error.

use super::sse::{json_of, Assemble};
use super::StreamEvent;
use crate::llm::http::in_stream_error;
use crate::llm::wire::chat_completions::{parse_response, refusal};
use crate::llm::{ChatResponse, LlmError};
use eventsource_stream::Event;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

const PROVIDER: &str = "openai";

/// One tool call as its deltas build it.
#[derive(Default)]
struct Call {
    id: Option<String>,
    name: String,
    arguments: String,
    /// The watcher's index (the order calls began in).
    watched: usize,
}

#[derive(Default)]
pub(crate) struct Fold {
    requested_model: String,
    /// `id`, `model` and `usage` as the chunks had them.
    completion: Map<String, Value>,
    content: Option<String>,
    refusal: Option<String>,
    calls: BTreeMap<u64, Call>,
    finish_reason: Value,
}

impl Fold {
    pub(crate) fn new(requested_model: &str) -> Fold {
        Fold {
            requested_model: requested_model.to_owned(),
            finish_reason: Value::Null,
            ..Fold::default()
        }
    }

    fn add_call(&mut self, delta: &Value, out: &mut Vec<StreamEvent>) {
        let index = delta.get("index").and_then(Value::as_u64).unwrap_or(0);
        let field = |pointer: &str| delta.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
        let next = self.calls.len();
        let call = self.calls.entry(index).or_insert_with(|| Call {
            watched: next,
            ..Call::default()
        });
        let started = call.id.is_some() || !call.name.is_empty();
        if let Some(id) = field("/id") {
            call.id = Some(id);
        }
        if let Some(name) = field("/function/name") {
            call.name.push_str(&name);
        }
        if !started && (call.id.is_some() || !call.name.is_empty()) {
            out.push(StreamEvent::ToolCallStarted {
                index: call.watched,
                id: call.id.clone().unwrap_or_default(),
                name: call.name.clone(),
            });
        }
        if let Some(more) = field("/function/arguments").filter(|m| !m.is_empty()) {
            call.arguments.push_str(&more);
            out.push(StreamEvent::ToolCallArguments {
                index: call.watched,
                delta: more,
            });
        }
    }

    fn add_choice(&mut self, choice: &Value, out: &mut Vec<StreamEvent>) {
        let delta = &choice["delta"];
        if let Some(more) = delta.get("content").and_then(Value::as_str) {
            self.content.get_or_insert_with(String::new).push_str(more);
            if !more.is_empty() {
                out.push(StreamEvent::Text(more.to_owned()));
            }
        }
        if let Some(more) = delta.get("refusal").and_then(Value::as_str) {
            self.refusal.get_or_insert_with(String::new).push_str(more);
        }
        // What OpenAI-compatible servers (vLLM, Ollama) stream of a reasoning model's thinking.
        for key in ["reasoning_content", "reasoning"] {
            if let Some(more) = delta.get(key).and_then(Value::as_str).filter(|m| !m.is_empty()) {
                out.push(StreamEvent::Thinking(more.to_owned()));
            }
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.add_call(call, out);
        }
        if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
            self.finish_reason = reason.clone();
        }
    }
}

impl Assemble for Fold {
    fn feed(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError> {
        if event.data.trim() == "[DONE]" {
            return Ok(true);
        }
        let data = json_of(PROVIDER, event)?;
        if let Some(error) = data.get("error") {
            return Err(in_stream_error(PROVIDER, error, refusal));
        }
        for key in ["id", "model", "usage"] {
            if let Some(value) = data.get(key).filter(|v| !v.is_null()) {
                self.completion.insert(key.to_owned(), value.clone());
            }
        }
        let choices = data.get("choices").and_then(Value::as_array);
        if let Some(choice) = choices
            .into_iter()
            .flatten()
            .find(|c| c["index"].as_u64().unwrap_or(0) == 0)
        {
            self.add_choice(choice, out);
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, LlmError> {
        let mut message = json!({"role": "assistant", "content": self.content});
        if !self.calls.is_empty() {
            message["tool_calls"] = self
                .calls
                .into_values()
                .map(|c| {
                    let mut call =
                        json!({"type": "function", "function": {"name": c.name, "arguments": c.arguments}});
                    if let Some(id) = c.id {
                        call["id"] = json!(id);
                    }
                    call
                })
                .collect();
        }
        if let Some(refusal) = self.refusal {
            message["refusal"] = json!(refusal);
        }
        let mut body = Value::Object(self.completion);
        body["choices"] = json!([{"index": 0, "message": message, "finish_reason": self.finish_reason}]);
        parse_response(&body, &self.requested_model)
    }
}
