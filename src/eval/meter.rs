//! One instance's model use: every answer's tokens and cost, and the time
//! spent waiting on the models (what the eval's own overhead leaves out).

use crate::llm::usage::{Price, UsageReport};
use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ModelInfo};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A model that counts what passes through it.
pub struct Metered {
    inner: Arc<dyn ChatModel>,
    counted: Mutex<Counted>,
}

struct Counted {
    usage: UsageReport,
    waited: Duration,
    calls: u64,
}

/// What an instance's model calls came to.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ModelUse {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// At the catalogue's prices (a model without one counts 0).
    pub cost_usd: f64,
    pub waited: Duration,
}

impl Metered {
    pub fn new(inner: Arc<dyn ChatModel>, prices: BTreeMap<String, Price>) -> Metered {
        Metered {
            inner,
            counted: Mutex::new(Counted {
                usage: UsageReport::new(prices),
                waited: Duration::ZERO,
                calls: 0,
            }),
        }
    }

    pub fn used(&self) -> ModelUse {
        let counted = self.counted.lock().unwrap_or_else(|p| p.into_inner());
        let total = counted.usage.total();
        ModelUse {
            calls: counted.calls,
            input_tokens: total.input_tokens,
            output_tokens: total.output_tokens,
            cost_usd: counted.usage.estimated_cost().0,
            waited: counted.waited,
        }
    }

    fn count(&self, started: Instant, answer: &Result<ChatResponse, LlmError>) {
        let mut counted = self.counted.lock().unwrap_or_else(|p| p.into_inner());
        counted.waited += started.elapsed();
        counted.calls += 1;
        if let Ok(response) = answer {
            counted.usage.add(&response.model, response.usage);
        }
    }
}

#[async_trait]
impl ChatModel for Metered {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let answer = self.inner.chat(request).await;
        self.count(started, &answer);
        answer
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.inner.models()
    }

    async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let answer = self.inner.chat_on(model, request).await;
        self.count(started, &answer);
        answer
    }
}
