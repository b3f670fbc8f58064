//! A model that tells an observer of every call it forwards: which model
//! was asked by name (if one was), how long the answer took, and the
//! answer. What counts an evaluation's use and what writes a run's
//! planning calls into its transcript are observers.

use super::{ChatModel, ChatRequest, ChatResponse, LlmError, ModelInfo};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Hears each call an [`Observed`] model forwards.
pub trait CallObserver: Send + Sync {
    fn answered(&self, asked: Option<&str>, took: Duration, answer: &Result<ChatResponse, LlmError>);
}

pub struct Observed<O> {
    inner: Arc<dyn ChatModel>,
    pub observer: O,
}

impl<O: CallObserver> Observed<O> {
    pub fn new(inner: Arc<dyn ChatModel>, observer: O) -> Observed<O> {
        Observed { inner, observer }
    }
}

#[async_trait]
impl<O: CallObserver> ChatModel for Observed<O> {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let answer = self.inner.chat(request).await;
        self.observer.answered(None, started.elapsed(), &answer);
        answer
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.inner.models()
    }

    async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let answer = self.inner.chat_on(model, request).await;
        self.observer.answered(Some(model), started.elapsed(), &answer);
        answer
    }
}
