//! Chat Completions with tools, for OpenAI-compatible servers (vLLM, Ollama,
//! llama.cpp, OpenRouter), for OpenAI models an operator puts on it with
//! `api: chat_completions`, and for those behind a gateway without the
//! Responses API ([`super::gateway`]). OpenAI's models otherwise go through
//! [`super::responses`]: from GPT-5.2 on they refuse function tools here
//! while they reason.
//!
//! The request and answer format is [`super::wire::chat_completions`]; the
//! stream is folded by `stream::chat_completions`.

use super::catalogue::ModelSpec;
use super::http::BearerEndpoint;
use super::stream::{self, sse, ChatStream, StreamEvent, StreamLimits};
pub(crate) use super::wire::chat_completions::refusal;

pub use super::wire::chat_completions::{parse_response, request_body};
use super::{ChatRequest, ChatResponse, LlmError, Provider};
use crate::config::Secret;
use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::json;
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
