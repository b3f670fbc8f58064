//! The scripted answers as the providers stream them: each API's events,
//! in its documented order, made from the whole answer the API would have
//! sent for the same reply (the fake's JSON body), so a streamed and a
//! whole answer of one reply are the same answer. Sources, per API:
//! - Responses: openai-openapi's ResponseStreamEvent (`response.created`,
//!   `response.in_progress`, `response.output_item.added`,
//!   `response.content_part.added`, `response.output_text.delta`, ...,
//!   `response.output_item.done`, `response.completed` or
//!   `response.incomplete`);
//! - Messages: Anthropic's streaming reference (`message_start`, `ping`,
//!   `content_block_start`, `content_block_delta` with `text_delta`,
//!   `input_json_delta`, `thinking_delta`, `signature_delta`,
//!   `content_block_stop`, `message_delta`, `message_stop`);
//! - generateContent: `streamGenerateContent?alt=sse`, chunks of
//!   GenerateContentResponse, the signature in the last chunk's empty part;
//! - Chat Completions: `chat.completion.chunk`s, the usage in a chunk
//!   without choices (`stream_options.include_usage`), `data: [DONE]`.

mod chat;
mod gemini;
mod messages;
mod responses;

use super::Format;
use serde_json::{json, Value};

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub event: Option<String>,
    pub data: String,
}

impl Frame {
    /// An event named as its `type` (Responses, Messages).
    fn typed(data: Value) -> Frame {
        Frame {
            event: data["type"].as_str().map(str::to_owned),
            data: data.to_string(),
        }
    }

    /// A nameless event (generateContent, Chat Completions).
    fn data(data: impl Into<String>) -> Frame {
        Frame {
            event: None,
            data: data.into(),
        }
    }

    /// The event as it goes on the wire. Gemini ends its lines with CRLF.
    pub fn encode(&self, format: Format) -> String {
        let end = if format == Format::Gemini { "\r\n" } else { "\n" };
        let mut out = String::new();
        if let Some(event) = &self.event {
            out.push_str(&format!("event: {event}{end}"));
        }
        out.push_str(&format!("data: {}{end}{end}", self.data));
        out
    }
}

/// Whether a request asks for a streamed answer: `stream: true`, or
/// Gemini's `:streamGenerateContent` path.
pub fn asks_to_stream(format: Format, path: &str, body: &Value) -> bool {
    match format {
        Format::Gemini => path.ends_with(":streamGenerateContent"),
        _ => body["stream"] == json!(true),
    }
}

/// The events of the whole answer `body`, for `request`.
pub fn frames(format: Format, request: &Value, body: &Value) -> Vec<Frame> {
    match format {
        Format::Responses => responses::frames(body),
        Format::Anthropic => messages::frames(body),
        Format::Gemini => gemini::chunks(body)
            .into_iter()
            .map(|c| Frame::data(c.to_string()))
            .collect(),
        Format::OpenAi => chat::frames(
            body,
            request.pointer("/stream_options/include_usage") == Some(&json!(true)),
        ),
    }
}

/// Gemini without `alt=sse` streams one JSON array of its chunks.
pub fn gemini_array(body: &Value) -> Value {
    Value::Array(gemini::chunks(body))
}

/// All of `frames` as one body.
pub fn encode(format: Format, frames: &[Frame]) -> String {
    frames.iter().map(|f| f.encode(format)).collect()
}

/// The error event a provider sends mid-stream when it is overloaded
/// (Anthropic's `overloaded_error` event, a failed response, Gemini's and
/// Chat Completions' error objects).
pub fn overload_frame(format: Format) -> Frame {
    match format {
        Format::Anthropic => Frame::typed(
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        Format::Responses => Frame::typed(json!({
            "type": "response.failed", "sequence_number": 999,
            "response": {"object": "response", "status": "failed",
                         "error": {"code": "server_error", "message": "The server had an error processing your request. Sorry about that!"}}
        })),
        Format::Gemini => Frame::data(
            json!({"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}})
                .to_string(),
        ),
        Format::OpenAi => Frame::data(
            json!({"error": {"message": "The server had an error while processing your request. Sorry about that!", "type": "server_error", "param": null, "code": null}})
                .to_string(),
        ),
    }
}

/// `text` in the small pieces a model streams it in (a few words each).
pub fn pieces(text: &str) -> Vec<String> {
    const SIZE: usize = 12;
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if current.len() >= SIZE && (c == ' ' || current.len() >= 2 * SIZE) {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() || out.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_back_to_the_text() {
        let text = "The change is in greet.py: the greeting now names the whole world.";
        let parts = pieces(text);
        assert!(parts.len() > 3, "{parts:?}");
        assert_eq!(parts.concat(), text);
        assert_eq!(pieces(""), vec![String::new()]);
    }
}
