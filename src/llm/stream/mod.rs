//! Streamed answers. Every provider asks for its answer as server-sent
//! events and reads them as they come ([`sse`]): each API's events are
//! folded into the answer the API would have sent whole, and what arrives
//! on the way (text, tool calls, reasoning) is handed to whoever watches
//! ([`StreamSink`]). `chat` is that fold with nobody watching.
//!
//! A stream that breaks off (the connection closes before the provider's
//! terminal event, an error event arrives, or nothing comes for
//! `llm.stream_idle_timeout`) is an error the retry policy sends again
//! whole: its partial answer is never returned, recorded or charged; a
//! watcher hears [`StreamEvent::Restarted`] and forgets what it was shown.
//!
//! One module per API folds its events: [`responses`] (OpenAI's Responses
//! API), [`messages`] (Anthropic), [`generate_content`] (Gemini) and
//! [`chat_completions`].

pub(crate) mod chat_completions;
pub(crate) mod generate_content;
pub(crate) mod messages;
pub(crate) mod responses;
pub(crate) mod sse;

use super::{ChatResponse, LlmError};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;

/// What a streamed answer brings, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More of the answer's text.
    Text(String),
    /// More of what the model thinks aloud (thinking, reasoning summaries):
    /// for watchers only, never part of the answer's text.
    Thinking(String),
    /// A tool call begins: its place among this answer's calls, its id
    /// (empty until the answer completes where the provider gives none, as
    /// Gemini does) and the tool's name.
    ToolCallStarted { index: usize, id: String, name: String },
    /// More of a tool call's arguments, as JSON text.
    ToolCallArguments { index: usize, delta: String },
    /// A reasoning item or thinking block, whole and verbatim as the
    /// provider sent it (signature or encrypted content included).
    Reasoning(Value),
    /// What came so far is void: the call is sent again (the stream broke
    /// off, or the next model answers instead).
    Restarted { reason: String },
    /// The whole answer, usage included: what `chat` returns.
    Completed(Box<ChatResponse>),
}

/// Whoever watches a streamed answer (a live transcript); told each event
/// as it comes, in order.
pub trait StreamSink: Send + Sync {
    fn event(&self, event: &StreamEvent);
}

/// Nobody watching: `chat`.
pub struct Quiet;

impl StreamSink for Quiet {
    fn event(&self, _: &StreamEvent) {}
}

/// A provider's answer as it streams; the last item is
/// [`StreamEvent::Completed`] or the error that ended it.
pub type ChatStream<'a> = BoxStream<'a, Result<StreamEvent, LlmError>>;

/// A stream of one whole answer (a model that does not stream).
pub fn whole(response: ChatResponse) -> ChatStream<'static> {
    futures_util::stream::iter(answered(response).into_iter().map(Ok)).boxed()
}

/// The events a whole answer would have streamed: its text, its calls, then
/// the answer itself.
fn answered(response: ChatResponse) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    if !response.text.is_empty() {
        events.push(StreamEvent::Text(response.text.clone()));
    }
    for (index, call) in response.tool_calls.iter().enumerate() {
        events.push(StreamEvent::ToolCallStarted {
            index,
            id: call.id.clone(),
            name: call.name.clone(),
        });
        events.push(StreamEvent::ToolCallArguments {
            index,
            delta: call.arguments.clone(),
        });
    }
    events.push(StreamEvent::Completed(Box::new(response)));
    events
}

/// Tells `sink` what a whole answer would have streamed (for a model that
/// answers whole), before the answer is returned.
pub fn replay(response: &ChatResponse, sink: &dyn StreamSink) {
    for event in answered(response.clone()) {
        if !matches!(event, StreamEvent::Completed(_)) {
            sink.event(&event);
        }
    }
}

/// Reads `stream` to its end, telling `sink` every event on the way, and
/// returns the answer it completes with.
pub async fn forward(mut stream: ChatStream<'_>, sink: &dyn StreamSink) -> Result<ChatResponse, LlmError> {
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::Completed(response) => return Ok(*response),
            other => sink.event(&other),
        }
    }
    Err(LlmError::StreamCut {
        provider: "the model".into(),
        detail: "the stream ended without an answer".into(),
    })
}

/// The answer `stream` completes with: a fold over its events.
pub async fn fold(stream: ChatStream<'_>) -> Result<ChatResponse, LlmError> {
    forward(stream, &Quiet).await
}

/// How long a streamed answer may take: `idle` without a byte (waiting for
/// the first one included), `total` in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    pub idle: Duration,
    pub total: Duration,
}

impl Default for StreamLimits {
    /// `llm.stream_idle_timeout` and `llm.stream_total_timeout`'s defaults.
    fn default() -> Self {
        StreamLimits {
            idle: Duration::from_secs(120),
            total: Duration::from_secs(60 * 60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Heard(Mutex<Vec<StreamEvent>>);

    impl StreamSink for Heard {
        fn event(&self, event: &StreamEvent) {
            self.0.lock().unwrap().push(event.clone());
        }
    }

    #[tokio::test]
    async fn a_whole_answer_streams_as_its_text_and_calls_and_folds_back() {
        let response = ChatResponse {
            text: "Reading it.".into(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read".into(),
                arguments: "{}".into(),
            }],
            ..Default::default()
        };
        let heard = Heard::default();
        let folded = forward(whole(response.clone()), &heard).await.unwrap();
        assert_eq!(folded, response);
        assert_eq!(
            *heard.0.lock().unwrap(),
            vec![
                StreamEvent::Text("Reading it.".into()),
                StreamEvent::ToolCallStarted {
                    index: 0,
                    id: "c1".into(),
                    name: "read".into()
                },
                StreamEvent::ToolCallArguments {
                    index: 0,
                    delta: "{}".into()
                },
            ]
        );
    }

    #[tokio::test]
    async fn a_stream_without_its_answer_is_cut() {
        let stream = futures_util::stream::iter(vec![Ok(StreamEvent::Text("half".into()))]).boxed();
        let err = fold(stream).await.unwrap_err();
        assert!(matches!(err, LlmError::StreamCut { .. }), "{err}");
        assert!(err.is_retryable());
    }
}
