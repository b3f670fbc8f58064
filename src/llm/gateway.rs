//! OpenAI models behind a gateway (Azure OpenAI's v1 endpoint, LiteLLM's
//! proxy, Cloudflare's and Portkey's gateways, each serving
//! `/v1/responses`): a model the catalogue knows as a Responses model goes
//! through the Responses API on any base URL, since only that API carries
//! reasoning with tools. A server without it (a 404 on `/responses`, or its
//! own "unsupported") is remembered by the client, which sends its requests
//! through Chat Completions from then on; a client made again (a config
//! reload) asks once more, which costs one answered 404.

use super::catalogue::ModelSpec;
use super::chat_completions::ChatCompletions;
use super::responses::Responses;
use super::stream::{self, ChatStream};
use super::{ChatRequest, ChatResponse, LlmError, Provider};
use async_trait::async_trait;
use futures_util::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// The Responses API first, Chat Completions where the server has none.
pub struct ResponsesOrChat {
    base_url: String,
    responses: Responses,
    chat: ChatCompletions,
    /// Set once the server said it has no Responses API.
    without_responses: AtomicBool,
}

impl ResponsesOrChat {
    /// Both clients of one server at `base_url`.
    pub fn new(base_url: &str, responses: Responses, chat: ChatCompletions) -> ResponsesOrChat {
        ResponsesOrChat {
            base_url: base_url.trim_end_matches('/').to_owned(),
            responses,
            chat,
            without_responses: AtomicBool::new(false),
        }
    }

    /// Whether the server is known to have no Responses API.
    pub fn lacks_responses(&self) -> bool {
        self.without_responses.load(Ordering::Relaxed)
    }

    /// Remembers that the server has no Responses API; true the first time.
    fn remember(&self) -> bool {
        !self.without_responses.swap(true, Ordering::Relaxed)
    }
}

/// Whether `err` says the server has no Responses API at all, rather than
/// refusing this request: 404 (the route is missing; a missing model says
/// so and is not this), 405, 501, or a refusal that calls the Responses API
/// (or the operation) unsupported, which is not a refused parameter.
pub fn no_responses_api(err: &LlmError) -> bool {
    let (status, message) = match err {
        LlmError::Rejected { status, message, .. } | LlmError::Server { status, message, .. } => {
            (*status, message.to_ascii_lowercase())
        }
        _ => return false,
    };
    let about_a_model = [
        "does not exist",
        "model_not_found",
        "model not found",
        "invalid model",
    ]
    .iter()
    .any(|s| message.contains(s));
    let about_a_parameter =
        message.contains("unsupported parameter") || message.contains("unsupported value");
    let unsupported = ["not supported", "unsupported", "not implemented", "does not work"]
        .iter()
        .any(|s| message.contains(s));
    let about_the_api = message.contains("responses") || message.contains("operation");
    match status {
        404 => !about_a_model,
        405 | 501 => true,
        400 | 422 => unsupported && about_the_api && !about_a_parameter,
        _ => false,
    }
}

#[async_trait]
impl Provider for ResponsesOrChat {
    fn name(&self) -> &str {
        "openai"
    }

    async fn chat(&self, model: &ModelSpec, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        stream::fold(self.stream(model, request)).await
    }

    /// The Responses API's stream, unless its first item says the server
    /// has no such API: then Chat Completions'.
    fn stream<'a>(&'a self, model: &'a ModelSpec, request: &'a ChatRequest) -> ChatStream<'a> {
        if self.lacks_responses() {
            return self.chat.stream(model, request);
        }
        let mut responses = self.responses.stream(model, request);
        futures_util::stream::once(async move {
            match responses.next().await {
                Some(Err(err)) if no_responses_api(&err) => {
                    if self.remember() {
                        tracing::warn!(
                            "{} has no Responses API ({err}); OpenAI models there go through Chat Completions from now on, where a reasoning model called with tools reasons at effort \"none\"",
                            self.base_url
                        );
                    }
                    self.chat.stream(model, request)
                }
                Some(first) => futures_util::stream::iter([first]).chain(responses).boxed(),
                None => responses,
            }
        })
        .flatten()
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(status: u16, message: &str) -> LlmError {
        LlmError::Rejected {
            provider: "openai".into(),
            status,
            message: message.into(),
        }
    }

    #[test]
    fn only_a_missing_api_sends_a_model_to_chat_completions() {
        for missing in [
            rejected(404, ""),
            rejected(404, "Not Found"),
            rejected(404, "not_found_error: File Not Found"),
            rejected(405, "Method Not Allowed"),
            rejected(400, "The Responses API is not supported by this deployment"),
            rejected(400, "The requested operation is unsupported."),
            LlmError::Server {
                provider: "openai".into(),
                status: 501,
                message: "Not Implemented".into(),
            },
        ] {
            assert!(no_responses_api(&missing), "{missing}");
        }
        for other in [
            rejected(
                404,
                "invalid_request_error: The model `gpt-9` does not exist or you do not have access to it.",
            ),
            rejected(
                400,
                "invalid_request_error: Unsupported parameter: 'temperature' is not supported with this model.",
            ),
            rejected(400, "invalid_request_error: tools[0] is invalid"),
            rejected(401, "Incorrect API key provided"),
            LlmError::Server {
                provider: "openai".into(),
                status: 500,
                message: "boom".into(),
            },
        ] {
            assert!(!no_responses_api(&other), "{other}");
        }
    }

    #[test]
    fn a_server_without_responses_is_remembered_once() {
        let url = "http://127.0.0.1:1/v1/";
        let timeout = std::time::Duration::from_secs(1);
        let client = ResponsesOrChat::new(
            url,
            Responses::new(url, None, timeout).unwrap(),
            ChatCompletions::new(url, None, timeout).unwrap(),
        );
        assert!(!client.lacks_responses());
        assert!(client.remember());
        assert!(!client.remember(), "remembered once");
        assert!(client.lacks_responses());
    }
}
