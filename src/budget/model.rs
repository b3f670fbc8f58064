//! The model a task talks to, with its spending checked before each call
//! and counted after it.

use super::Spend;
use crate::llm::tokens::count_text;
use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ModelInfo};
use async_trait::async_trait;
use std::sync::Arc;

/// `inner` under a task's [`Spend`].
pub struct Budgeted {
    inner: Arc<dyn ChatModel>,
    spend: Arc<Spend>,
}

impl Budgeted {
    pub fn new(inner: Arc<dyn ChatModel>, spend: Arc<Spend>) -> Budgeted {
        Budgeted { inner, spend }
    }

    /// The most a call of `request` can cost: on `model`, or on the
    /// dearest model the router may choose.
    fn worst_case(&self, model: Option<&str>, request: &ChatRequest) -> f64 {
        let names: Vec<String> = match model {
            Some(name) => vec![name.to_owned()],
            None => self.inner.models().into_iter().map(|m| m.name).collect(),
        };
        let (input, output) = (input_tokens(request) as f64, f64::from(request.max_output_tokens));
        names
            .iter()
            .filter_map(|name| self.spend.price(name))
            .map(|p| (input * p.input_per_million + output * p.output_per_million) / 1e6)
            .fold(0.0, f64::max)
    }

    fn check(&self, model: Option<&str>, request: &ChatRequest) -> Result<(), LlmError> {
        if !self.spend.capped() {
            return Ok(());
        }
        let worst = self.worst_case(model, request);
        self.spend.check(worst).map_err(|over| {
            LlmError::Budget(format!(
                "{over}; the next model call could cost up to ${worst:.4}, so it was not sent"
            ))
        })
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
        self.check(None, request)?;
        let response = self.inner.chat(request).await?;
        self.spend.record(&response.model, response.usage);
        Ok(response)
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.inner.models()
    }

    async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.check(Some(model), request)?;
        let response = self.inner.chat_on(model, request).await?;
        self.spend.record(&response.model, response.usage);
        Ok(response)
    }
}
