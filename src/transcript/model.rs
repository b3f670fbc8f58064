//! The model calls a run makes outside the agent's loop (reading the
//! thread, planning), written into its transcript as they are answered:
//! a model that records what passes through it.

use super::{entry, Entry, Transcript};
use crate::llm::usage::{Price, UsageReport};
use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ModelInfo};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

pub struct Recorded {
    inner: Arc<dyn ChatModel>,
    transcript: Arc<Transcript>,
    /// What the calls are for, as the transcript says it ("planning").
    purpose: &'static str,
    prices: UsageReport,
}

impl Recorded {
    pub fn new(
        inner: Arc<dyn ChatModel>,
        transcript: Arc<Transcript>,
        purpose: &'static str,
        prices: BTreeMap<String, Price>,
    ) -> Recorded {
        Recorded {
            inner,
            transcript,
            purpose,
            prices: UsageReport::new(prices),
        }
    }

    fn record(&self, asked: Option<&str>, started: Instant, answer: &Result<ChatResponse, LlmError>) {
        match answer {
            Ok(response) => {
                let (text, _) = entry::fold(&response.text);
                self.transcript.write(&Entry::Call {
                    purpose: self.purpose.to_owned(),
                    model: response.model.clone(),
                    text,
                    input_tokens: response.usage.input_tokens,
                    output_tokens: response.usage.output_tokens,
                    cost_usd: self.prices.cost_of(&response.model, response.usage),
                    ms: started.elapsed().as_millis() as u64,
                });
            }
            Err(e) => self.transcript.note(format!(
                "{} call{} failed: {e}",
                self.purpose,
                asked.map(|m| format!(" to {m}")).unwrap_or_default()
            )),
        }
    }
}

#[async_trait]
impl ChatModel for Recorded {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let answer = self.inner.chat(request).await;
        self.record(None, started, &answer);
        answer
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.inner.models()
    }

    async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let answer = self.inner.chat_on(model, request).await;
        self.record(Some(model), started, &answer);
        answer
    }
}
