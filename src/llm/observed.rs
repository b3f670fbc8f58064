//! A model that tells an observer of every call it forwards: which model
//! was asked by name (if one was), how long the answer took, and the
//! answer. What counts an evaluation's use and what writes a run's
//! planning calls into its transcript are observers. A streamed answer is
//! observed once, whole, when it completes: never a part of one.

use super::stream::{Quiet, StreamSink};
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
        self.stream(None, request, &Quiet).await
    }

    fn models(&self) -> Vec<ModelInfo> {
        self.inner.models()
    }

    async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.stream(Some(model), request, &Quiet).await
    }

    async fn stream(
        &self,
        model: Option<&str>,
        request: &ChatRequest,
        sink: &dyn StreamSink,
    ) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let answer = self.inner.stream(model, request, sink).await;
        self.observer.answered(model, started.elapsed(), &answer);
        answer
    }
}
