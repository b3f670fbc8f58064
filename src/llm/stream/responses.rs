//! The Responses API's stream (openai-openapi: ResponseStreamEvent) folded
//! into the response it would have sent whole: each output item exactly as
//! its `response.output_item.done` gave it, in `output_index` order, in the
//! response of the terminal event (`response.completed` or
//! `response.incomplete`). `response.failed` and `error` are errors.

use super::sse::{json_of, text, Assemble};
use super::StreamEvent;
use crate::llm::http::in_stream_error;
use crate::llm::wire::responses::{parse_response, refusal};
use crate::llm::{ChatResponse, LlmError};
use eventsource_stream::Event;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};

const PROVIDER: &str = "openai";

pub(crate) struct Fold {
    requested_model: String,
    /// Finished output items by `output_index`.
    items: BTreeMap<u64, Value>,
    /// The watcher's call index of each function call's `output_index`.
    calls: HashMap<u64, usize>,
    /// The terminal event's response.
    response: Option<Value>,
}

impl Fold {
    pub(crate) fn new(requested_model: &str) -> Fold {
        Fold {
            requested_model: requested_model.to_owned(),
            items: BTreeMap::new(),
            calls: HashMap::new(),
            response: None,
        }
    }
}

impl Assemble for Fold {
    fn feed(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError> {
        let data = json_of(PROVIDER, event)?;
        let output_index = data.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        match data.get("type").and_then(Value::as_str).unwrap_or(&event.event) {
            "response.output_text.delta" => out.push(StreamEvent::Text(text(&data, "delta"))),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                out.push(StreamEvent::Thinking(text(&data, "delta")))
            }
            "response.output_item.added"
                if data.pointer("/item/type").and_then(Value::as_str) == Some("function_call") =>
            {
                let index = self.calls.len();
                self.calls.insert(output_index, index);
                out.push(StreamEvent::ToolCallStarted {
                    index,
                    id: text(&data["item"], "call_id"),
                    name: text(&data["item"], "name"),
                });
            }
            "response.function_call_arguments.delta" => {
                if let Some(index) = self.calls.get(&output_index) {
                    out.push(StreamEvent::ToolCallArguments {
                        index: *index,
                        delta: text(&data, "delta"),
                    });
                }
            }
            "response.output_item.done" => {
                let item = data.get("item").cloned().unwrap_or(Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("reasoning") {
                    out.push(StreamEvent::Reasoning(item.clone()));
                }
                self.items.insert(output_index, item);
            }
            "response.completed" | "response.incomplete" => {
                self.response = data.get("response").cloned();
                return Ok(true);
            }
            "response.failed" => {
                let error = data.pointer("/response/error").cloned().unwrap_or(Value::Null);
                return Err(in_stream_error(PROVIDER, &error, refusal));
            }
            "error" => {
                // The event is its own error object (`code`, `message`, `param`).
                let mut error: Map<String, Value> = data.as_object().cloned().unwrap_or_default();
                error.remove("type");
                return Err(in_stream_error(PROVIDER, &Value::Object(error), refusal));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, LlmError> {
        let mut body = self.response.unwrap_or_else(|| Value::Object(Map::new()));
        // A server that sends no items keeps the terminal response's own.
        if !self.items.is_empty() {
            body["output"] = Value::Array(self.items.into_values().collect());
        }
        parse_response(&body, &self.requested_model)
    }
}
