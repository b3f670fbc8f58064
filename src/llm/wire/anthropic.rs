//! Anthropic Messages' request and answer format: pure, no I/O.
//!
//! Tool calls and their results go as `tool_use` / `tool_result` blocks.
//!
//! - Thinking: adaptive (`thinking: {type: "adaptive"}` with
//!   `output_config.effort`) or a token budget, as the catalogue says the
//!   model takes it. A turn's content comes back exactly as the model sent
//!   it, thinking blocks and their signatures first, as the API requires of
//!   the turn before a tool result.
//! - Caching: a breakpoint on the system text and a moving one on the
//!   newest turn, so each step of an agent reads the whole transcript
//!   before it from the cache (two of the four breakpoints allowed).

use crate::llm::catalogue::ModelSpec;
use crate::llm::{
    answering_model, arguments_object, array_at, count_at, temperature_json, Api, ChatRequest, ChatResponse,
    FinishReason, LlmError, Message, NativeTurn, ReasoningKind, Refusal, TokenUsage, ToolCall,
};
use serde_json::{json, Value};

pub const API_VERSION: &str = "2023-06-01";

/// The smallest thinking budget the API takes.
const MIN_THINKING_BUDGET: u32 = 1024;

/// Anthropic's refusals, from its error object (`type` and `message`; the
/// same in an error answer and an `error` event): a prompt over the window
/// ("prompt is too long: 208310 tokens > 200000 maximum", "input length and
/// `max_tokens` exceed context limit: ..."), a request over the size limit
/// (`request_too_large`, HTTP 413), or "Output blocked by content filtering
/// policy".
pub(crate) fn refusal(error: &Value) -> Option<Refusal> {
    let kind = error.get("type").and_then(Value::as_str)?;
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    match kind {
        "request_too_large" => Some(Refusal::ContextTooLong),
        "invalid_request_error"
            if message.starts_with("prompt is too long") || message.contains("exceed context limit") =>
        {
            Some(Refusal::ContextTooLong)
        }
        "invalid_request_error" if message.starts_with("Output blocked by content filtering policy") => {
            Some(Refusal::ContentPolicy)
        }
        _ => None,
    }
}

/// Appends `blocks` as a turn of `role`, joining it to the previous turn
/// when that has the same role (tool results followed by a user's text).
fn push_turn(messages: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if let Some(last) = messages.last_mut() {
        if last["role"] == role {
            if let Some(content) = last["content"].as_array_mut() {
                content.extend(blocks);
                return;
            }
        }
    }
    messages.push(json!({"role": role, "content": blocks}));
}

fn messages(request: &ChatRequest) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            Message::User(text) => {
                push_turn(&mut messages, "user", vec![json!({"type": "text", "text": text})])
            }
            Message::Image(image) => push_turn(
                &mut messages,
                "user",
                vec![
                    json!({"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": image.data}}),
                ],
            ),
            Message::Assistant {
                native: Some(native), ..
            } if native.api == Api::Messages => {
                // Unchanged: thinking blocks with their signatures, in place.
                let blocks = native.content.as_array().cloned().unwrap_or_default();
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            Message::Assistant { text, tool_calls, .. } => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments_object(&call.arguments)}));
                }
                messages.push(json!({"role": "assistant", "content": content}));
            }
            Message::ToolResults(results) => {
                let content: Vec<Value> = results
                    .iter()
                    .map(|r| json!({"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}))
                    .collect();
                push_turn(&mut messages, "user", content);
            }
        }
    }
    messages
}

/// `thinking` (and `output_config`) for the model and the effort asked for;
/// `None` when the request does not think.
fn thinking(model: &ModelSpec, request: &ChatRequest) -> Option<(Value, Option<Value>)> {
    let effort = request.reasoning_effort.as_deref().and_then(|e| model.effort(e));
    match model.reasoning {
        ReasoningKind::Adaptive => Some((json!({"type": "adaptive"}), effort.map(|e| json!({"effort": e})))),
        ReasoningKind::Budget => {
            let budget = match effort? {
                "none" | "minimal" => return None,
                "low" => 2048,
                "medium" => 8192,
                "high" => 16384,
                _ => 32768,
            };
            // The budget must stay below max_tokens, and leave room to answer.
            let budget = budget.min(request.max_output_tokens.saturating_sub(MIN_THINKING_BUDGET));
            (budget >= MIN_THINKING_BUDGET)
                .then(|| (json!({"type": "enabled", "budget_tokens": budget}), None))
        }
        _ => None,
    }
}

pub fn request_body(model: &ModelSpec, request: &ChatRequest) -> Value {
    let mut messages = messages(request);
    let mut body = json!({"model": request.model, "max_tokens": request.max_output_tokens});
    if !request.system.trim().is_empty() {
        body["system"] = if request.cache_system {
            json!([{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}])
        } else {
            json!(request.system)
        };
    }
    if request.cache_system {
        // The moving breakpoint: the end of the newest turn.
        if let Some(block) = messages
            .last_mut()
            .and_then(|m| m["content"].as_array_mut())
            .and_then(|blocks| blocks.last_mut())
        {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
    }
    body["messages"] = Value::Array(messages);
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    let thinks = match thinking(model, request) {
        Some((thinking, output_config)) => {
            body["thinking"] = thinking;
            if let Some(config) = output_config {
                body["output_config"] = config;
            }
            true
        }
        None => model.thinks_by_default,
    };
    // A thinking model takes only the default temperature.
    if let (Some(t), true, false) = (
        request.temperature.and_then(temperature_json),
        model.temperature,
        thinks,
    ) {
        body["temperature"] = t;
    }
    body
}

pub fn parse_response(body: &Value, requested_model: &str) -> Result<ChatResponse, LlmError> {
    let content = array_at(body, "content", "anthropic")?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        let field = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(&field("text")),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: field("id"),
                name: field("name"),
                arguments: block
                    .get("input")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into()),
            }),
            _ => {}
        }
    }
    let finish = match body.get("stop_reason").and_then(Value::as_str) {
        Some("max_tokens") | Some("model_context_window_exceeded") | Some("pause_turn") => {
            FinishReason::OutputLimit
        }
        Some("refusal") => FinishReason::Refused(if text.trim().is_empty() {
            "the model declined to continue (stop_reason: refusal)".to_owned()
        } else {
            text.clone()
        }),
        _ => FinishReason::Complete,
    };
    // Anthropic counts cache reads and writes apart from `input_tokens`.
    let cached = count_at(body, "/usage/cache_read_input_tokens");
    let written = count_at(body, "/usage/cache_creation_input_tokens");
    let usage = TokenUsage {
        input_tokens: count_at(body, "/usage/input_tokens") + cached + written,
        cached_input_tokens: cached,
        cache_write_tokens: written,
        output_tokens: count_at(body, "/usage/output_tokens"),
        reasoning_tokens: 0,
    };
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        model: answering_model(body, "model", requested_model),
        finish,
        native: NativeTurn::of(Api::Messages, requested_model, content),
    })
}
