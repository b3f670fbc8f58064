//! The Anthropic Messages client: `POST /v1/messages`, streamed, folded by
//! `stream::messages`. The request and answer format (thinking, prompt
//! caching) is [`super::wire::anthropic`].

use super::catalogue::ModelSpec;
use super::http::client;
use super::stream::{self, sse, ChatStream, StreamLimits};
pub(crate) use super::wire::anthropic::refusal;
use super::{ChatRequest, ChatResponse, LlmError, Provider};

pub use super::wire::anthropic::{parse_response, request_body, API_VERSION};
use crate::config::Secret;
use async_trait::async_trait;
use serde_json::json;
use std::time::Duration;

pub struct Anthropic {
    http: reqwest::Client,
    base_url: String,
    key: Secret,
    limits: StreamLimits,
}

impl Anthropic {
    pub fn new(base_url: &str, key: Secret, timeout: Duration) -> Result<Anthropic, LlmError> {
        Ok(Anthropic {
            http: client(timeout)?,
            base_url: base_url.trim_end_matches('/').to_owned(),
            key,
            limits: StreamLimits::default(),
        })
    }

    /// Streams with `limits` instead of the defaults.
    pub fn with_stream_limits(mut self, limits: StreamLimits) -> Anthropic {
        self.limits = limits;
        self
    }
}

#[async_trait]
impl Provider for Anthropic {
    fn name(&self) -> &str {
        "anthropic"
    }

    async fn chat(&self, model: &ModelSpec, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        stream::fold(self.stream(model, request)).await
    }

    fn stream<'a>(&'a self, model: &'a ModelSpec, request: &'a ChatRequest) -> ChatStream<'a> {
        let mut body = request_body(model, request);
        body["stream"] = json!(true);
        let http = self
            .http
            .post(format!("{}/v1/messages", self.base_url))
            .header("x-api-key", self.key.expose())
            .header("anthropic-version", API_VERSION)
            .json(&body);
        sse::stream(sse::Call {
            provider: "anthropic",
            request: http,
            limits: self.limits,
            refusal,
            assembler: Box::new(stream::messages::Fold::new(&request.model)),
        })
    }
}
