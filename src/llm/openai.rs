//! OpenAI Chat Completions with tools. The same client serves any
//! OpenAI-compatible server (Ollama, vLLM, llama.cpp, OpenRouter) through its
//! base URL. Reasoning models (o-series) get `max_completion_tokens` and
//! `reasoning_effort`, and no `temperature`.

use super::http::{client, post_json};
use super::{answering_model, ChatRequest, ChatResponse, LlmError, Message, Provider, TokenUsage, ToolCall};
use crate::config::Secret;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::time::Duration;

pub struct OpenAi {
    http: reqwest::Client,
    base_url: String,
    key: Option<Secret>,
}

impl OpenAi {
    /// `key` may be absent for local OpenAI-compatible servers.
    pub fn new(base_url: &str, key: Option<Secret>, timeout: Duration) -> Result<OpenAi, LlmError> {
        Ok(OpenAi {
            http: client(timeout)?,
            base_url: base_url.trim_end_matches('/').to_owned(),
            key,
        })
    }
}

/// o1, o3, o4-mini, ...: the models that reason and reject `temperature`.
pub fn is_reasoning_model(model: &str) -> bool {
    let mut chars = model.chars();
    chars.next() == Some('o') && chars.next().is_some_and(|c| c.is_ascii_digit())
}

pub fn request_body(request: &ChatRequest) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    for message in &request.messages {
        match message {
            Message::User(text) => messages.push(json!({"role": "user", "content": text})),
            Message::Assistant { text, tool_calls } => {
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
    if is_reasoning_model(&request.model) {
        body["max_completion_tokens"] = json!(request.max_output_tokens);
        if let Some(effort) = &request.reasoning_effort {
            body["reasoning_effort"] = json!(effort);
        }
    } else {
        body["max_tokens"] = json!(request.max_output_tokens);
        if let Some(t) = request.temperature {
            body["temperature"] = json!(t);
        }
    }
    body
}

pub fn parse_response(body: &Value, requested_model: &str) -> Result<ChatResponse, LlmError> {
    let decode = |detail: &str| LlmError::Decode {
        provider: "openai".into(),
        detail: detail.to_owned(),
    };
    let message = body
        .pointer("/choices/0/message")
        .ok_or_else(|| decode("no choices[0].message in the answer"))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut tool_calls = Vec::new();
    for (index, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let arguments = match call.pointer("/function/arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("call_{index}"));
        tool_calls.push(ToolCall {
            id,
            name: name.to_owned(),
            arguments,
        });
    }
    let usage = TokenUsage::at(
        body,
        "/usage/prompt_tokens",
        "/usage/prompt_tokens_details/cached_tokens",
        "/usage/completion_tokens",
    );
    let model = answering_model(body, "model", requested_model);
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        model,
    })
}

#[async_trait]
impl Provider for OpenAi {
    fn name(&self) -> &str {
        "openai"
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut http = self.http.post(format!("{}/chat/completions", self.base_url));
        if let Some(key) = &self.key {
            http = http.bearer_auth(key.expose());
        }
        let body = post_json("openai", http, &request_body(request)).await?;
        parse_response(&body, &request.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_models_are_told_apart() {
        for m in ["o1", "o3", "o3-mini", "o4-mini"] {
            assert!(is_reasoning_model(m), "{m}");
        }
        for m in ["gpt-4o", "gpt-4.1", "omni", "llama3"] {
            assert!(!is_reasoning_model(m), "{m}");
        }
    }
}
