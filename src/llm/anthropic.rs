//! Anthropic Messages with `tool_use` / `tool_result` blocks.

use super::http::{client, post_json};
use super::{
    answering_model, arguments_object, ChatRequest, ChatResponse, LlmError, Message, Provider, TokenUsage,
    ToolCall,
};
use crate::config::Secret;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::time::Duration;

pub const API_VERSION: &str = "2023-06-01";

pub struct Anthropic {
    http: reqwest::Client,
    base_url: String,
    key: Secret,
}

impl Anthropic {
    pub fn new(base_url: &str, key: Secret, timeout: Duration) -> Result<Anthropic, LlmError> {
        Ok(Anthropic {
            http: client(timeout)?,
            base_url: base_url.trim_end_matches('/').to_owned(),
            key,
        })
    }
}

pub fn request_body(request: &ChatRequest) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            Message::User(text) => {
                messages.push(json!({"role": "user", "content": [{"type": "text", "text": text}]}))
            }
            Message::Assistant { text, tool_calls } => {
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
                messages.push(json!({"role": "user", "content": content}));
            }
        }
    }
    // A shared system prefix (packed code) gets a cache breakpoint at its end.
    let system = if request.cache_system {
        json!([{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}])
    } else {
        json!(request.system)
    };
    let mut body = json!({
        "model": request.model,
        "system": system,
        "max_tokens": request.max_output_tokens,
        "messages": messages,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    body
}

pub fn parse_response(body: &Value, requested_model: &str) -> Result<ChatResponse, LlmError> {
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::Decode {
            provider: "anthropic".into(),
            detail: "no content array in the answer".into(),
        })?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: block
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                name: block
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                arguments: block
                    .get("input")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into()),
            }),
            _ => {}
        }
    }
    // Anthropic counts cache reads and writes apart from `input_tokens`.
    let count = |pointer: &str| body.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
    let cached = count("/usage/cache_read_input_tokens");
    let usage = TokenUsage {
        input_tokens: count("/usage/input_tokens") + cached + count("/usage/cache_creation_input_tokens"),
        cached_input_tokens: cached,
        output_tokens: count("/usage/output_tokens"),
    };
    let model = answering_model(body, "model", requested_model);
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        model,
    })
}

#[async_trait]
impl Provider for Anthropic {
    fn name(&self) -> &str {
        "anthropic"
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let http = self
            .http
            .post(format!("{}/v1/messages", self.base_url))
            .header("x-api-key", self.key.expose())
            .header("anthropic-version", API_VERSION);
        let body = post_json("anthropic", http, &request_body(request)).await?;
        parse_response(&body, &request.model)
    }
}
