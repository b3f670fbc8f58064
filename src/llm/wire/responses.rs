//! The Responses API's request and answer format: pure, no I/O.
//!
//! Used statelessly: nothing is stored at OpenAI (`store: false`), and the
//! model's reasoning comes back encrypted
//! (`include: ["reasoning.encrypted_content"]`) so that it can be passed
//! back with the calls it preceded. Function tools work while the model
//! reasons, which Chat Completions refuses from GPT-5.2 on.

use crate::llm::catalogue::ModelSpec;
use crate::llm::{
    answering_model, array_at, count_at, temperature_json, Api, ChatRequest, ChatResponse, FinishReason,
    LlmError, Message, NativeTurn, ReasoningKind, Refusal, TokenUsage, ToolCall,
};
use serde_json::{json, Map, Value};

/// OpenAI's refusals by their error `code` (openai-openapi's Error; the
/// same object comes in an error answer, an `error` event and a failed
/// response): a context overflow, or the usage policy (`invalid_prompt`,
/// and Azure OpenAI's `content_filter`).
pub(crate) fn refusal(error: &Value) -> Option<Refusal> {
    match error.get("code").and_then(Value::as_str)? {
        "context_length_exceeded" => Some(Refusal::ContextTooLong),
        "invalid_prompt" | "content_policy_violation" | "content_filter" => Some(Refusal::ContentPolicy),
        _ => None,
    }
}

pub fn request_body(model: &ModelSpec, request: &ChatRequest) -> Value {
    let mut input = Vec::new();
    for message in &request.messages {
        match message {
            Message::User(text) => input.push(json!({
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}],
            })),
            // InputImageContent, joined to the user's message before it.
            Message::Image(image) => {
                let part = json!({"type": "input_image", "image_url": image.data_url(), "detail": "auto"});
                match input.last_mut() {
                    Some(last) if last["type"] == "message" && last["role"] == "user" => {
                        if let Some(content) = last["content"].as_array_mut() {
                            content.push(part);
                        }
                    }
                    _ => input.push(json!({"type": "message", "role": "user", "content": [part]})),
                }
            }
            Message::Assistant {
                native: Some(native), ..
            } if native.api == Api::Responses => {
                input.extend(native.content.as_array().into_iter().flatten().map(replayable));
            }
            Message::Assistant { text, tool_calls, .. } => {
                if !text.is_empty() {
                    input.push(json!({
                        "type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}],
                    }));
                }
                for call in tool_calls {
                    input.push(json!({
                        "type": "function_call", "call_id": call.id,
                        "name": call.name, "arguments": call.arguments,
                    }));
                }
            }
            Message::ToolResults(results) => {
                for r in results {
                    input.push(
                        json!({"type": "function_call_output", "call_id": r.call_id, "output": r.content}),
                    );
                }
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "input": input,
        "max_output_tokens": request.max_output_tokens,
        "store": false,
    });
    if !request.system.trim().is_empty() {
        body["instructions"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": false}))
            .collect();
    }
    if request.json_output {
        body["text"] = json!({"format": {"type": "json_object"}});
    }
    if model.reasoning == ReasoningKind::Effort {
        body["include"] = json!(["reasoning.encrypted_content"]);
        if let Some(effort) = request.reasoning_effort.as_deref().and_then(|e| model.effort(e)) {
            body["reasoning"] = json!({"effort": effort});
        }
    }
    if let (Some(t), true) = (request.temperature.and_then(temperature_json), model.temperature) {
        body["temperature"] = t;
    }
    body
}

/// An output item as it may be sent back as input: reasoning items whole
/// (their id and encrypted content), the others without the server-side
/// `id` and `status`, which refer to stored items (nothing is stored).
fn replayable(item: &Value) -> Value {
    let Value::Object(map) = item else {
        return item.clone();
    };
    if map.get("type").and_then(Value::as_str) == Some("reasoning") {
        let mut kept = Map::new();
        for key in ["type", "id", "summary", "encrypted_content"] {
            if let Some(v) = map.get(key) {
                kept.insert(key.to_owned(), v.clone());
            }
        }
        return Value::Object(kept);
    }
    let mut kept = map.clone();
    kept.remove("id");
    kept.remove("status");
    Value::Object(kept)
}

pub fn parse_response(body: &Value, requested_model: &str) -> Result<ChatResponse, LlmError> {
    let output = array_at(body, "output", "openai")?;
    let mut text = String::new();
    let mut refusal = None;
    let mut tool_calls = Vec::new();
    for item in output {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => {
                            text.push_str(part.get("text").and_then(Value::as_str).unwrap_or_default())
                        }
                        Some("refusal") => {
                            refusal = part.get("refusal").and_then(Value::as_str).map(str::to_owned);
                        }
                        _ => {}
                    }
                }
            }
            Some("function_call") => tool_calls.push(ToolCall {
                id: str_of(item, "call_id"),
                name: str_of(item, "name"),
                arguments: str_of(item, "arguments"),
            }),
            _ => {}
        }
    }
    let finish = match (refusal, body.get("status").and_then(Value::as_str)) {
        (Some(refusal), _) => FinishReason::Refused(refusal),
        (None, Some("incomplete")) => {
            match body.pointer("/incomplete_details/reason").and_then(Value::as_str) {
                Some("content_filter") => {
                    FinishReason::Refused("the provider's content filter stopped the answer".into())
                }
                _ => FinishReason::OutputLimit,
            }
        }
        _ => FinishReason::Complete,
    };
    let usage = TokenUsage {
        input_tokens: count_at(body, "/usage/input_tokens"),
        cached_input_tokens: count_at(body, "/usage/input_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
        output_tokens: count_at(body, "/usage/output_tokens"),
        reasoning_tokens: count_at(body, "/usage/output_tokens_details/reasoning_tokens"),
    };
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        model: answering_model(body, "model", requested_model),
        finish,
        native: NativeTurn::of(Api::Responses, requested_model, output),
    })
}

fn str_of(item: &Value, key: &str) -> String {
    item.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
