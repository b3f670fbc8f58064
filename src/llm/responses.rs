//! The client of OpenAI's Responses API (`POST /v1/responses`), streamed
//! and folded by `stream::responses`. The request and answer format
//! (stateless, with the reasoning passed back encrypted) is
//! [`super::wire::responses`].

use super::catalogue::ModelSpec;
use super::http::BearerEndpoint;
use super::stream::{self, sse, ChatStream, StreamLimits};
pub(crate) use super::wire::responses::refusal;

pub use super::wire::responses::{parse_response, request_body};
use super::{ChatRequest, ChatResponse, LlmError, Provider};
use crate::config::Secret;
use async_trait::async_trait;
use serde_json::json;
use std::time::Duration;

pub struct Responses {
    endpoint: BearerEndpoint,
    limits: StreamLimits,
}

impl Responses {
    pub fn new(base_url: &str, key: Option<Secret>, timeout: Duration) -> Result<Responses, LlmError> {
        Ok(Responses {
            endpoint: BearerEndpoint::new(base_url, key, timeout)?,
            limits: StreamLimits::default(),
        })
    }

    /// Streams with `limits` instead of the defaults.
    pub fn with_stream_limits(mut self, limits: StreamLimits) -> Responses {
        self.limits = limits;
        self
    }
}

#[async_trait]
impl Provider for Responses {
    fn name(&self) -> &str {
        "openai"
    }

    async fn chat(&self, model: &ModelSpec, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        stream::fold(self.stream(model, request)).await
    }

    fn stream<'a>(&'a self, model: &'a ModelSpec, request: &'a ChatRequest) -> ChatStream<'a> {
        let mut body = request_body(model, request);
        body["stream"] = json!(true);
        sse::stream(sse::Call {
            provider: "openai",
            request: self.endpoint.post("/responses").json(&body),
            limits: self.limits,
            refusal,
            assembler: Box::new(stream::responses::Fold::new(&request.model)),
        })
    }
}
