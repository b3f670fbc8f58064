//! Chat Completions' request and answer format: pure, no I/O. Refusals
//! are OpenAI's (`responses::refusal`) and those of the
//! OpenAI-compatible servers that word their own.

use crate::llm::catalogue::ModelSpec;
use crate::llm::{
    answering_model, count_at, made_up_call_id, temperature_json, ChatRequest, ChatResponse, FinishReason,
    LlmError, Message, ReasoningKind, Refusal, TokenUsage, ToolCall,
};
use serde_json::{json, Value};

/// Refusals as OpenAI words them ([`super::responses::refusal`]), and as the
/// OpenAI-compatible servers do that give no code: llama.cpp's
/// `exceed_context_size_error`, vLLM's "This model's maximum context length
/// is N tokens" (OpenAI's own older wording).
pub(crate) fn refusal(error: &Value) -> Option<Refusal> {
    if let Some(refusal) = super::responses::refusal(error) {
        return Some(refusal);
    }
    let kind = error.get("type").and_then(Value::as_str).unwrap_or_default();
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    (kind == "exceed_context_size_error" || message.contains("maximum context length"))
        .then_some(Refusal::ContextTooLong)
}

pub fn request_body(model: &ModelSpec, request: &ChatRequest) -> Value {
    let mut messages = Vec::new();
    if !request.system.trim().is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        match message {
            Message::User(text) => messages.push(json!({"role": "user", "content": text})),
            Message::Image(image) => messages.push(json!({
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": image.data_url()}}],
            })),
            Message::Assistant { text, tool_calls, .. } => {
                let mut turn = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !tool_calls.is_empty() {
                    turn["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                }
                messages.push(turn);
            }
            Message::ToolResults(results) => {
                for r in results {
                    messages.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content}));
                }
            }
        }
    }
    let mut body = json!({"model": request.model, "messages": messages});
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    if request.json_output {
        body["response_format"] = json!({"type": "json_object"});
    }
    if model.reasoning == ReasoningKind::Effort {
        body["max_completion_tokens"] = json!(request.max_output_tokens);
        // Here a reasoning OpenAI model takes function tools only with an
        // effort of "none" (the Responses API carries both).
        let effort = if request.tools.is_empty() {
            request.reasoning_effort.as_deref().and_then(|e| model.effort(e))
        } else {
            model.effort("none").filter(|e| *e == "none")
        };
        if let Some(effort) = effort {
            body["reasoning_effort"] = json!(effort);
        }
    } else {
        body["max_tokens"] = json!(request.max_output_tokens);
    }
    if let (Some(t), true) = (request.temperature.and_then(temperature_json), model.temperature) {
        body["temperature"] = t;
    }
    body
}

pub fn parse_response(body: &Value, requested_model: &str) -> Result<ChatResponse, LlmError> {
    let decode = |detail: &str| LlmError::Decode {
        provider: "openai".into(),
        detail: detail.to_owned(),
    };
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| decode("no choices[0] in the answer"))?;
    let message = choice
        .get("message")
        .ok_or_else(|| decode("no choices[0].message in the answer"))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut tool_calls = Vec::new();
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let arguments = match call.pointer("/function/arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        tool_calls.push(ToolCall {
            // Servers that give no id get one; `history` keeps ids unique.
            id: str_at(call, "/id").unwrap_or_else(|| made_up_call_id("call_")),
            name: str_at(call, "/function/name").unwrap_or_default(),
            arguments,
        });
    }
    let refusal = str_at(message, "/refusal").filter(|r| !r.is_empty());
    let finish = match (refusal, choice.get("finish_reason").and_then(Value::as_str)) {
        (Some(refusal), _) => FinishReason::Refused(refusal),
        (None, Some("length")) => FinishReason::OutputLimit,
        (None, Some("content_filter")) => {
            FinishReason::Refused("the provider's content filter stopped the answer".into())
        }
        _ => FinishReason::Complete,
    };
    let usage = TokenUsage {
        input_tokens: count_at(body, "/usage/prompt_tokens"),
        cached_input_tokens: count_at(body, "/usage/prompt_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
        output_tokens: count_at(body, "/usage/completion_tokens"),
        reasoning_tokens: count_at(body, "/usage/completion_tokens_details/reasoning_tokens"),
    };
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        model: answering_model(body, "model", requested_model),
        finish,
        native: None,
    })
}

fn str_at(value: &Value, pointer: &str) -> Option<String> {
    value.pointer(pointer).and_then(Value::as_str).map(str::to_owned)
}
