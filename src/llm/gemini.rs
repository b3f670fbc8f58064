//! The Gemini client: `generateContent`, streamed
//! (`streamGenerateContent?alt=sse`) and folded by
//! `stream::generate_content`. The request and answer format (thought
//! signatures, thinking, tool schemas) is [`super::wire::gemini`].

use super::catalogue::ModelSpec;
use super::http::client;
use super::stream::{self, sse, ChatStream, StreamLimits};
pub(crate) use super::wire::gemini::refusal;

pub use super::wire::gemini::{parse_response, request_body, PLACEHOLDER_SIGNATURE};
use super::{ChatRequest, ChatResponse, LlmError, Provider};
use crate::config::Secret;
use async_trait::async_trait;
use std::time::Duration;

pub struct Gemini {
    http: reqwest::Client,
    base_url: String,
    key: Secret,
    limits: StreamLimits,
}

impl Gemini {
    pub fn new(base_url: &str, key: Secret, timeout: Duration) -> Result<Gemini, LlmError> {
        Ok(Gemini {
            http: client(timeout)?,
            base_url: base_url.trim_end_matches('/').to_owned(),
            key,
            limits: StreamLimits::default(),
        })
    }

    /// Streams with `limits` instead of the defaults.
    pub fn with_stream_limits(mut self, limits: StreamLimits) -> Gemini {
        self.limits = limits;
        self
    }
}

#[async_trait]
impl Provider for Gemini {
    fn name(&self) -> &str {
        "gemini"
    }

    async fn chat(&self, model: &ModelSpec, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        stream::fold(self.stream(model, request)).await
    }

    fn stream<'a>(&'a self, model: &'a ModelSpec, request: &'a ChatRequest) -> ChatStream<'a> {
        let http = self
            .http
            .post(format!(
                "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
                self.base_url, request.model
            ))
            .header("x-goog-api-key", self.key.expose())
            .json(&request_body(model, request));
        sse::stream(sse::Call {
            provider: "gemini",
            request: http,
            limits: self.limits,
            refusal,
            assembler: Box::new(stream::generate_content::Fold::new(&request.model)),
        })
    }
}
