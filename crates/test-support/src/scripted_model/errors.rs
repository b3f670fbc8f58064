//! Error answers in each provider's own shape and words: statuses a test
//! queues (429, 529, 503 ...), a conversation over the context window, and
//! a prompt the provider's content policy blocks. Sources: OpenAI's Error
//! object (openai-openapi) with its `context_length_exceeded` and
//! `invalid_prompt` codes; Anthropic's error responses ("prompt is too
//! long: N tokens > M maximum", "Output blocked by content filtering
//! policy", both `invalid_request_error`); Gemini's google.rpc.Status
//! ("The input token count (N) exceeds the maximum number of tokens allowed
//! (M).", INVALID_ARGUMENT). Gemini reports a blocked prompt in a 200
//! answer (`promptFeedback.blockReason`), not as an error.

use super::{Format, Reply};
use serde_json::{json, Value};
use wiremock::ResponseTemplate;

/// An error answer: (HTTP status, JSON body, Retry-After seconds).
pub type ErrorAnswer = (u16, Value, Option<u64>);

/// The error answer `reply` is in `format`, `None` for an answer.
pub fn error_answer(format: Format, reply: &Reply) -> Option<ErrorAnswer> {
    match reply {
        Reply::Status {
            code,
            message,
            retry_after,
        } => Some((*code, status_body(format, *code, message), *retry_after)),
        Reply::TooLong => Some((400, too_long_body(format), None)),
        Reply::Blocked if format != Format::Gemini => Some((400, blocked_body(format), None)),
        _ => None,
    }
}

/// [`error_answer`] as a mock server's answer.
pub(crate) fn error_template(format: Format, reply: &Reply) -> Option<ResponseTemplate> {
    let (code, body, retry_after) = error_answer(format, reply)?;
    let mut template = ResponseTemplate::new(code).set_body_json(body);
    if let Some(seconds) = retry_after {
        template = template.insert_header("retry-after", seconds.to_string().as_str());
    }
    Some(template)
}

fn status_body(format: Format, code: u16, message: &str) -> Value {
    match format {
        Format::Anthropic => {
            json!({"type": "error", "error": {"type": if code == 529 { "overloaded_error" } else { "invalid_request_error" }, "message": message}})
        }
        Format::Gemini => json!({"error": {"code": code, "message": message, "status": "UNAVAILABLE"}}),
        Format::OpenAi | Format::Responses => {
            json!({"error": {"message": message, "type": "server_error", "code": null}})
        }
    }
}

fn too_long_body(format: Format) -> Value {
    match format {
        Format::OpenAi => json!({"error": {
            "message": "This model's maximum context length is 200000 tokens. However, your messages resulted in 216533 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"
        }}),
        Format::Responses => json!({"error": {
            "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"
        }}),
        Format::Anthropic => json!({
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 208310 tokens > 200000 maximum"},
            "request_id": "req_011CWdepJvA2D819tdYYq4h7"
        }),
        Format::Gemini => json!({"error": {
            "code": 400,
            "message": "The input token count (1048600) exceeds the maximum number of tokens allowed (1048576).",
            "status": "INVALID_ARGUMENT"
        }}),
    }
}

fn blocked_body(format: Format) -> Value {
    match format {
        Format::Anthropic => json!({
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "Output blocked by content filtering policy"},
            "request_id": "req_011CaxpBxEpLvE6AvvuDD5BW"
        }),
        _ => json!({"error": {
            "message": "Invalid prompt: your prompt was flagged as potentially violating our usage policy. Please try again with a different prompt.",
            "type": "invalid_request_error", "param": null, "code": "invalid_prompt"
        }}),
    }
}
