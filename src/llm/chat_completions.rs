//! Chat Completions with tools, for OpenAI-compatible servers (vLLM, Ollama,
//! llama.cpp, OpenRouter), for OpenAI models an operator puts on it with
//! `api: chat_completions`, and for those behind a gateway without the
//! Responses API ([`super::gateway`]). OpenAI's models otherwise go through
//! [`super::responses`]: from GPT-5.2 on they refuse function tools here
//! while they reason.

use super::catalogue::ModelSpec;
use super::http::BearerEndpoint;
use super::stream::{self, sse, ChatStream, StreamEvent, StreamLimits};
use super::{
    answering_model, count_at, made_up_call_id, temperature_json, ChatRequest, ChatResponse, FinishReason,
    LlmError, Message, Provider, ReasoningKind, Refusal, TokenUsage, ToolCall,
};
use crate::config::Secret;
use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;

pub struct ChatCompletions {
    endpoint: BearerEndpoint,
    limits: StreamLimits,
}

impl ChatCompletions {
    /// `key` may be absent for local OpenAI-compatible servers.
    pub fn new(base_url: &str, key: Option<Secret>, timeout: Duration) -> Result<ChatCompletions, LlmError> {
        Ok(ChatCompletions {
            endpoint: BearerEndpoint::new(base_url, key, timeout)?,
            limits: StreamLimits::default(),
        })
    }

    /// Streams with `limits` instead of the defaults.
    pub fn with_stream_limits(mut self, limits: StreamLimits) -> ChatCompletions {
        self.limits = limits;
        self
    }
}

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

/// A server that cannot call tools says so in its own words, often with a
/// 500: that is a setting to change, not a request to repeat five times.
fn tools_unsupported(err: LlmError, asked_for_tools: bool) -> LlmError {
    let (LlmError::Server { message, .. } | LlmError::Rejected { message, .. }) = &err else {
        return err;
    };
    let lower = message.to_ascii_lowercase();
    let about_tools = lower.contains("tool") || lower.contains("function");
    let unsupported = [
        "not support",
        "unsupported",
        "--jinja",
        "enable-auto-tool-choice",
        "tool-call-parser",
        "tool_call_parser",
    ]
    .iter()
    .any(|s| lower.contains(s));
    if !(asked_for_tools && about_tools && unsupported) {
        return err;
    }
    LlmError::Unsupported {
        provider: "openai".into(),
        message: message.clone(),
        advice: "forgehand needs tool calling: start vLLM with --enable-auto-tool-choice and a --tool-call-parser for the model, llama.cpp's server with --jinja, or pick an Ollama model that supports tools".into(),
    }
}

#[async_trait]
impl Provider for ChatCompletions {
    fn name(&self) -> &str {
        "openai"
    }

    async fn chat(&self, model: &ModelSpec, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        stream::fold(self.stream(model, request)).await
    }

    fn stream<'a>(&'a self, model: &'a ModelSpec, request: &'a ChatRequest) -> ChatStream<'a> {
        let mut body = request_body(model, request);
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let asked_for_tools = !request.tools.is_empty();
        sse::stream(sse::Call {
            provider: "openai",
            request: self.endpoint.post("/chat/completions").json(&body),
            limits: self.limits,
            refusal,
            assembler: Box::new(stream::chat_completions::Fold::new(&request.model)),
        })
        .map(move |event: Result<StreamEvent, LlmError>| {
            event.map_err(|e| tools_unsupported(e, asked_for_tools))
        })
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_without_tool_calling_is_a_setting_to_change() {
        for message in [
            "tools param requires --jinja flag",
            "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
            "registry.ollama.ai/library/llama2:latest does not support tools",
        ] {
            let err = tools_unsupported(
                LlmError::Server {
                    provider: "openai".into(),
                    status: 500,
                    message: message.into(),
                },
                true,
            );
            assert!(matches!(err, LlmError::Unsupported { .. }), "{message}: {err:?}");
            assert!(!err.is_retryable() && !err.falls_back());
            assert!(err.to_string().contains("--jinja"), "{err}");
        }
        let other = tools_unsupported(
            LlmError::Server {
                provider: "openai".into(),
                status: 500,
                message: "internal error".into(),
            },
            true,
        );
        assert!(other.is_retryable());
    }
}
