//! Each model API's error body for a request it refuses (HTTP 400), in its
//! own shape: what the request, image and tool rules answer with.

use serde_json::{json, Value};

/// OpenAI's invalid request error (Chat Completions and Responses).
pub(super) fn openai_error(message: String, param: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": null}})
}

/// OpenAI's invalid request error with its `code`.
pub(super) fn openai_error_coded(message: String, param: Option<&str>, code: &str) -> Value {
    json!({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}})
}

/// Anthropic's invalid request error.
pub(super) fn anthropic_error(message: String) -> Value {
    json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
}

/// Gemini's invalid argument error.
pub(super) fn gemini_error(message: String) -> Value {
    json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
}
