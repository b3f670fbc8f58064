//! Anthropic's Messages stream folded into the message it would have sent
//! whole, as Anthropic's own SDKs accumulate it: `message_start` gives the
//! message, each content block starts as `content_block_start` gave it and
//! grows by its deltas (`text_delta`, `input_json_delta`, `thinking_delta`,
//! `signature_delta`, `citations_delta`), `message_delta` sets the stop
//! reason and the cumulative usage, and `message_stop` ends it. `ping`s
//! come any time; an `error` event is an error.

use super::sse::{json_of, text, Assemble};
use super::StreamEvent;
use crate::llm::http::in_stream_error;
use crate::llm::wire::anthropic::{parse_response, refusal};
use crate::llm::{ChatResponse, LlmError};
use eventsource_stream::Event;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};

const PROVIDER: &str = "anthropic";

pub(crate) struct Fold {
    requested_model: String,
    message: Value,
    /// Content blocks by index.
    blocks: BTreeMap<u64, Value>,
    /// The input JSON text of each tool-use block so far.
    inputs: HashMap<u64, String>,
    /// The watcher's call index of each tool-use block.
    calls: HashMap<u64, usize>,
}

impl Fold {
    pub(crate) fn new(requested_model: &str) -> Fold {
        Fold {
            requested_model: requested_model.to_owned(),
            message: Value::Object(Map::new()),
            blocks: BTreeMap::new(),
            inputs: HashMap::new(),
            calls: HashMap::new(),
        }
    }

    fn start_block(&mut self, index: u64, block: Value, out: &mut Vec<StreamEvent>) {
        if block.get("type").and_then(Value::as_str) == Some("tool_use") {
            let call = self.calls.len();
            self.calls.insert(index, call);
            out.push(StreamEvent::ToolCallStarted {
                index: call,
                id: text(&block, "id"),
                name: text(&block, "name"),
            });
        }
        self.blocks.insert(index, block);
    }

    fn grow_block(&mut self, index: u64, delta: &Value, out: &mut Vec<StreamEvent>) {
        let Some(block) = self.blocks.get_mut(&index) else {
            return;
        };
        let append = |block: &mut Value, key: &str, more: &str| {
            let mut now = text(block, key);
            now.push_str(more);
            block[key] = Value::String(now);
        };
        match delta.get("type").and_then(Value::as_str).unwrap_or_default() {
            "text_delta" => {
                let more = text(delta, "text");
                append(block, "text", &more);
                out.push(StreamEvent::Text(more));
            }
            "thinking_delta" => {
                let more = text(delta, "thinking");
                append(block, "thinking", &more);
                out.push(StreamEvent::Thinking(more));
            }
            // The signature comes whole, after the thinking it signs.
            "signature_delta" => block["signature"] = Value::String(text(delta, "signature")),
            "input_json_delta" => {
                let more = text(delta, "partial_json");
                self.inputs.entry(index).or_default().push_str(&more);
                if let Some(call) = self.calls.get(&index) {
                    out.push(StreamEvent::ToolCallArguments {
                        index: *call,
                        delta: more,
                    });
                }
            }
            "citations_delta" => {
                let citation = delta.get("citation").cloned().unwrap_or(Value::Null);
                match block.get_mut("citations").and_then(Value::as_array_mut) {
                    Some(citations) => citations.push(citation),
                    None => block["citations"] = Value::Array(vec![citation]),
                }
            }
            _ => {}
        }
    }

    /// A finished block: a tool call's input parsed, thinking handed out.
    fn stop_block(&mut self, index: u64, out: &mut Vec<StreamEvent>) -> Result<(), LlmError> {
        let Some(block) = self.blocks.get_mut(&index) else {
            return Ok(());
        };
        if let Some(json) = self.inputs.remove(&index).filter(|j| !j.is_empty()) {
            block["input"] = serde_json::from_str(&json).map_err(|e| LlmError::Decode {
                provider: PROVIDER.into(),
                detail: format!("a tool call's input is not JSON ({e}): {json}"),
            })?;
        }
        if matches!(
            block.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        ) {
            out.push(StreamEvent::Reasoning(block.clone()));
        }
        Ok(())
    }

    /// `message_delta`: the stop reason, and usage counts that replace
    /// `message_start`'s (they are cumulative).
    fn end_message(&mut self, data: &Value) {
        for key in ["stop_reason", "stop_sequence"] {
            if let Some(value) = data.pointer(&format!("/delta/{key}")) {
                self.message[key] = value.clone();
            }
        }
        let counts = data
            .get("usage")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if !self.message.get("usage").is_some_and(Value::is_object) {
            self.message["usage"] = Value::Object(Map::new());
        }
        for (key, value) in counts.into_iter().filter(|(_, v)| !v.is_null()) {
            self.message["usage"][key] = value;
        }
    }
}

impl Assemble for Fold {
    fn feed(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError> {
        let data = json_of(PROVIDER, event)?;
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match data.get("type").and_then(Value::as_str).unwrap_or(&event.event) {
            "message_start" => self.message = data.get("message").cloned().unwrap_or(Value::Null),
            "content_block_start" => {
                let block = data.get("content_block").cloned().unwrap_or(Value::Null);
                self.start_block(index, block, out);
            }
            "content_block_delta" => self.grow_block(index, &data["delta"], out),
            "content_block_stop" => self.stop_block(index, out)?,
            "message_delta" => self.end_message(&data),
            "message_stop" => return Ok(true),
            "error" => {
                let error = data.get("error").cloned().unwrap_or(Value::Null);
                return Err(in_stream_error(PROVIDER, &error, refusal));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, LlmError> {
        let mut message = self.message;
        message["content"] = Value::Array(self.blocks.into_values().collect());
        parse_response(&message, &self.requested_model)
    }
}
