//! Gemini's `streamGenerateContent?alt=sse`, folded into the answer
//! `generateContent` would have sent whole. Each event is a
//! GenerateContentResponse with the next parts of the one candidate; the
//! last carries the finish reason and the whole usage, and the stream ends
//! after it (there is no terminal event). Text parts that follow one
//! another are joined, as the whole answer has them; a `thoughtSignature`
//! that comes on its own at the end (in an empty or text-less part) goes
//! back on the text it signs.

use super::sse::{json_of, Assemble};
use super::StreamEvent;
use crate::llm::http::in_stream_error;
use crate::llm::wire::gemini::{parse_response, refusal};
use crate::llm::{ChatResponse, LlmError};
use eventsource_stream::Event;
use serde_json::{json, Map, Value};

const PROVIDER: &str = "gemini";

#[derive(Default)]
pub(crate) struct Fold {
    requested_model: String,
    parts: Vec<Value>,
    /// The candidate's own fields but its content (finish reason, ratings).
    candidate: Map<String, Value>,
    /// Fields of the answer beyond the candidate, as the latest event had
    /// them (usage, model version, prompt feedback).
    answer: Map<String, Value>,
    saw_candidate: bool,
    finished: bool,
    calls: usize,
}

impl Fold {
    pub(crate) fn new(requested_model: &str) -> Fold {
        Fold {
            requested_model: requested_model.to_owned(),
            ..Fold::default()
        }
    }

    /// Adds one part, joined to the text part before it where the whole
    /// answer would have had one part.
    fn add(&mut self, part: Value, out: &mut Vec<StreamEvent>) {
        let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
        if let Some(call) = part.get("functionCall") {
            out.push(StreamEvent::ToolCallStarted {
                index: self.calls,
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                name: call
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            });
            out.push(StreamEvent::ToolCallArguments {
                index: self.calls,
                delta: call
                    .get("args")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into()),
            });
            self.calls += 1;
            self.parts.push(part);
            return;
        }
        let text = part.get("text").and_then(Value::as_str);
        if let Some(text) = text.filter(|t| !t.is_empty()) {
            out.push(match thought {
                true => StreamEvent::Thinking(text.to_owned()),
                false => StreamEvent::Text(text.to_owned()),
            });
        }
        let signature = part.get("thoughtSignature").cloned();
        // An empty text that carries nothing (a last chunk's) is no part:
        // Gemini refuses an empty text part sent back.
        if text == Some("") && signature.is_none() {
            return;
        }
        // Text, a signature, or both: nothing a part must keep apart.
        let plain_text = part.as_object().is_some_and(|p| {
            p.keys()
                .all(|k| k == "thoughtSignature" || k == "text" || k == "thought")
        });
        let joins = |previous: &Value| {
            previous.get("text").is_some()
                && previous.get("thoughtSignature").is_none()
                && (previous.get("thought").and_then(Value::as_bool) == Some(true)) == thought
        };
        match self.parts.last_mut() {
            Some(previous) if plain_text && joins(previous) => {
                let mut joined = previous
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                joined.push_str(text.unwrap_or_default());
                previous["text"] = Value::String(joined);
                if let Some(signature) = signature {
                    previous["thoughtSignature"] = signature;
                }
            }
            _ => self.parts.push(part),
        }
    }
}

impl Assemble for Fold {
    fn feed(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError> {
        let data = json_of(PROVIDER, event)?;
        if let Some(error) = data.get("error") {
            return Err(in_stream_error(PROVIDER, error, refusal));
        }
        let Value::Object(mut chunk) = data else {
            return Err(LlmError::Decode {
                provider: PROVIDER.into(),
                detail: "a streamed chunk is not a JSON object".into(),
            });
        };
        if let Some(Value::Array(candidates)) = chunk.remove("candidates") {
            if let Some(Value::Object(mut candidate)) = candidates.into_iter().next() {
                self.saw_candidate = true;
                let parts = candidate
                    .remove("content")
                    .and_then(|mut c| c.get_mut("parts").map(Value::take));
                for part in parts.and_then(|p| p.as_array().cloned()).unwrap_or_default() {
                    self.add(part, out);
                }
                self.finished |= candidate.contains_key("finishReason");
                self.candidate.extend(candidate);
            }
        }
        // A prompt blocked whole comes as feedback without candidates.
        self.finished |= chunk
            .get("promptFeedback")
            .is_some_and(|f| f.get("blockReason").is_some());
        self.answer.extend(chunk);
        Ok(false)
    }

    fn ends_here(&self) -> bool {
        self.finished
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, LlmError> {
        let mut body = Value::Object(self.answer);
        if self.saw_candidate {
            let mut candidate = self.candidate;
            candidate.insert("content".into(), json!({"role": "model", "parts": self.parts}));
            body["candidates"] = json!([candidate]);
        }
        parse_response(&body, &self.requested_model)
    }
}
