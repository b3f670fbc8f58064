//! The model a task talks to, with its spending checked before each call
//! and counted after it.

use super::Spend;
use crate::llm::stream::{Quiet, StreamSink};
use crate::llm::tokens::count_text;
use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ModelInfo};
use async_trait::async_trait;
use std::sync::Arc;

/// The least output room a call is sent with when the money left would
/// cut it: enough for a short answer or a tool call.
pub const MIN_OUTPUT_TOKENS: u32 = 1_024;

/// `inner` under a task's [`Spend`].
pub struct Budgeted {
    inner: Arc<dyn ChatModel>,
    spend: Arc<Spend>,
}

impl Budgeted {
    pub fn new(inner: Arc<dyn ChatModel>, spend: Arc<Spend>) -> Budgeted {
        Budgeted { inner, spend }
    }

    /// The prices a call of `request` may be charged at: on `model`, or
    /// on each model the router may choose. Each: (the input's cost, the
    /// price of one output token).
    fn charges(&self, model: Option<&str>, request: &ChatRequest) -> Vec<(f64, f64)> {
        let names: Vec<String> = match model {
            Some(name) => vec![name.to_owned()],
            None => self.inner.models().into_iter().map(|m| m.name).collect(),
        };
        let input = input_tokens(request) as f64;
        names
            .iter()
            .filter_map(|name| self.spend.price(name))
            .map(|p| (input * p.input_per_million / 1e6, p.output_per_million / 1e6))
            .collect()
    }

    /// The output room the call gets: `None` to send it as it is, or
    /// fewer tokens that the money left pays for on every candidate model.
    /// Refused when not even [`MIN_OUTPUT_TOKENS`] fit.
    fn fit(&self, model: Option<&str>, request: &ChatRequest) -> Result<Option<u32>, LlmError> {
        if !self.spend.capped() {
            return Ok(None);
        }
        let Some(room) = self.spend.room() else {
            return Ok(None);
        };
        let charges = self.charges(model, request);
        let worst_with = |tokens: u32| {
            charges
                .iter()
                .map(|(input, output)| input + output * f64::from(tokens))
                .fold(0.0, f64::max)
        };
        if worst_with(request.max_output_tokens) <= room.left() {
            return Ok(None);
        }
        let affordable = charges
            .iter()
            .map(|(input, output)| match *output > 0.0 {
                true => ((room.left() - input) / output).floor(),
                false => f64::from(u32::MAX),
            })
            .fold(f64::from(request.max_output_tokens), f64::min);
        let floor = MIN_OUTPUT_TOKENS.min(request.max_output_tokens);
        if affordable >= f64::from(floor) {
            // Truncation is intended: `affordable` lies between floor and the request's room.
            return Ok(Some(affordable as u32));
        }
        Err(LlmError::Budget(format!(
            "{}: the next call's worst case (${:.4}) would pass the cap (${:.2}, ${:.4} used), so it was not sent",
            room.key,
            worst_with(floor),
            room.cap,
            room.spent
        )))
    }

    /// `request` with the room [`Budgeted::fit`] gave it; only the answer
    /// that completes is counted (a streamed attempt that broke off and was
    /// asked again is not), as the provider reported its usage.
    async fn send(
        &self,
        model: Option<&str>,
        request: &ChatRequest,
        sink: &dyn StreamSink,
    ) -> Result<ChatResponse, LlmError> {
        let fitted;
        let request = match self.fit(model, request)? {
            None => request,
            Some(room) => {
                tracing::debug!(
                    from = request.max_output_tokens,
                    to = room,
                    "the output room is cut to what the money left pays for"
                );
                fitted = ChatRequest {
                    max_output_tokens: room,
                    ..request.clone()
                };
                &fitted
            }
        };
        let response = self.inner.stream(model, request, sink).await?;
        self.spend.record(&response.model, response.usage);
        Ok(response)
    }
}

/// The request's input tokens, counted over its text as sent (the JSON of
/// the messages slightly overcounts, which a worst case may).
fn input_tokens(request: &ChatRequest) -> u64 {
    let messages = serde_json::to_string(&request.messages).unwrap_or_default();
    let tools: u64 = request
        .tools
        .iter()
        .map(|t| {
            count_text(&t.name)
                + count_text(&t.description)
                + count_text(&serde_json::Value::Object(t.parameters.clone()).to_string())
        })
        .sum();
    count_text(&request.system) + count_text(&messages) + tools
}

#[async_trait]
impl ChatModel for Budgeted {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.send(None, request, &Quiet).await
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.inner.models()
    }

    async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.send(Some(model), request, &Quiet).await
    }

    async fn stream(
        &self,
        model: Option<&str>,
        request: &ChatRequest,
        sink: &dyn StreamSink,
    ) -> Result<ChatResponse, LlmError> {
        self.send(model, request, sink).await
    }
}
