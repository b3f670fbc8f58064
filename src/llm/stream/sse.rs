//! One streamed call, whatever the API: the request is sent, an error
//! answer is mapped as the provider words it, and the body is read as
//! server-sent events (parsed by `eventsource-stream`) with a limit on the
//! silence between bytes, each event handed to the API's fold
//! ([`Assemble`]) until its terminal event.

use super::{ChatStream, StreamEvent, StreamLimits};
use crate::llm::http::{describe_reqwest, error_answer, parse_retry_after};
use crate::llm::{ChatResponse, LlmError, Refusal};
use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use serde_json::Value;
use std::collections::VecDeque;
use std::time::Duration;

/// An API's fold of its events into the answer it would have sent whole.
pub(crate) trait Assemble: Send {
    /// Reads one event, adding what a watcher should hear to `out`; true
    /// at the API's terminal event (nothing after it is read).
    fn feed(&mut self, event: &Event, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError>;

    /// Whether the stream may end here without a terminal event (a Gemini
    /// stream ends after the chunk with its finish reason).
    fn ends_here(&self) -> bool {
        false
    }

    /// The whole answer, once the stream is over.
    fn finish(self: Box<Self>) -> Result<ChatResponse, LlmError>;
}

/// One streamed call to a provider.
pub(crate) struct Call<'a> {
    /// As errors name it (`openai`, `anthropic`, `gemini`).
    pub provider: &'static str,
    /// The POST, with its headers and the JSON body that asks to stream.
    pub request: reqwest::RequestBuilder,
    pub limits: StreamLimits,
    /// The provider's reading of an error object: a refusal, or not.
    pub refusal: fn(&Value) -> Option<Refusal>,
    pub assembler: Box<dyn Assemble + 'a>,
}

/// Why reading the body stopped short.
#[derive(Debug)]
enum Broken {
    /// Nothing came for the idle limit.
    Idle,
    /// The total limit passed.
    TooLong,
    Transport(String),
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broken::Idle => f.write_str("idle"),
            Broken::TooLong => f.write_str("too long"),
            Broken::Transport(detail) => f.write_str(detail),
        }
    }
}

type Events = BoxStream<'static, Result<Event, EventStreamError<Broken>>>;

/// A stream being read.
struct Reading<'a> {
    provider: &'static str,
    limits: StreamLimits,
    events: Events,
    assembler: Box<dyn Assemble + 'a>,
    /// What the last event brought for watchers, not handed out yet.
    queued: VecDeque<StreamEvent>,
}

enum Drive<'a> {
    Opening(Box<Call<'a>>),
    Reading(Reading<'a>),
    /// The items left to hand out before the stream ends.
    Draining(VecDeque<Result<StreamEvent, LlmError>>),
}

enum Step<'a> {
    Yield(Result<StreamEvent, LlmError>, Option<Drive<'a>>),
    Continue(Drive<'a>),
    Done,
}

/// The call's answer as a stream of events.
pub(crate) fn stream(call: Call<'_>) -> ChatStream<'_> {
    futures_util::stream::unfold(Some(Drive::Opening(Box::new(call))), |state| async move {
        let mut state = state?;
        loop {
            match step(state).await {
                Step::Yield(item, next) => return Some((item, next)),
                Step::Continue(next) => state = next,
                Step::Done => return None,
            }
        }
    })
    .boxed()
}

async fn step(state: Drive<'_>) -> Step<'_> {
    match state {
        Drive::Opening(call) => {
            let Call {
                provider,
                request,
                limits,
                refusal,
                assembler,
            } = *call;
            match open(provider, request, limits, refusal).await {
                Ok(events) => Step::Continue(Drive::Reading(Reading {
                    provider,
                    limits,
                    events,
                    assembler,
                    queued: VecDeque::new(),
                })),
                Err(err) => Step::Yield(Err(err), None),
            }
        }
        Drive::Reading(reading) => read(reading).await,
        Drive::Draining(mut left) => match left.pop_front() {
            Some(item) => Step::Yield(item, Some(Drive::Draining(left))),
            None => Step::Done,
        },
    }
}

/// Hands out what the last event brought, else reads the next one; at the
/// end, the answer.
async fn read(mut reading: Reading<'_>) -> Step<'_> {
    if let Some(event) = reading.queued.pop_front() {
        return Step::Yield(Ok(event), Some(Drive::Reading(reading)));
    }
    let provider = reading.provider;
    let ended = match reading.events.next().await {
        Some(Ok(event)) => {
            let mut out = Vec::new();
            match reading.assembler.feed(&event, &mut out) {
                Ok(terminal) => {
                    reading.queued.extend(out);
                    terminal
                }
                Err(err) => return Step::Yield(Err(err), None),
            }
        }
        Some(Err(err)) => return Step::Yield(Err(broken(provider, reading.limits, err)), None),
        None if reading.assembler.ends_here() => true,
        None => {
            let err = LlmError::StreamCut {
                provider: provider.to_owned(),
                detail: "the connection closed before the end of the answer".into(),
            };
            return Step::Yield(Err(err), None);
        }
    };
    if !ended {
        return Step::Continue(Drive::Reading(reading));
    }
    let mut left: VecDeque<_> = reading.queued.into_iter().map(Ok).collect();
    left.push_back(
        reading
            .assembler
            .finish()
            .map(|answer| StreamEvent::Completed(Box::new(answer))),
    );
    Step::Continue(Drive::Draining(left))
}

/// Sends the request; its body's events, or the error the answer maps to.
async fn open(
    provider: &'static str,
    request: reqwest::RequestBuilder,
    limits: StreamLimits,
    refusal: fn(&Value) -> Option<Refusal>,
) -> Result<Events, LlmError> {
    let request = request.timeout(limits.total);
    let total = too_long(limits.total);
    let response = match tokio::time::timeout(limits.idle, request.send()).await {
        Err(_) => {
            return Err(LlmError::StreamIdle {
                provider: provider.to_owned(),
                idle: limits.idle,
            })
        }
        Ok(Err(e)) => {
            return Err(LlmError::Network {
                provider: provider.to_owned(),
                detail: describe_reqwest(&e, &total),
            })
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let text = response.text().await.map_err(|e| LlmError::Network {
            provider: provider.to_owned(),
            detail: describe_reqwest(&e, &total),
        })?;
        return Err(error_answer(provider, status, retry_after, &text, refusal));
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type.starts_with("application/json") {
        return Err(LlmError::Decode {
            provider: provider.to_owned(),
            detail: "the answer came whole (JSON) instead of the stream of events asked for; the server (or a proxy before it) does not stream, which forgehand needs".into(),
        });
    }
    Ok(bytes(response, limits.idle).eventsource().boxed())
}

/// The body's bytes as they come, each wait for more bounded by `idle`.
fn bytes(
    response: reqwest::Response,
    idle: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, Broken>> + Send + 'static {
    futures_util::stream::unfold(Some(response), move |response| async move {
        let mut response = response?;
        match tokio::time::timeout(idle, response.chunk()).await {
            Err(_) => Some((Err(Broken::Idle), None)),
            Ok(Err(e)) if e.is_timeout() => Some((Err(Broken::TooLong), None)),
            Ok(Err(e)) => Some((Err(Broken::Transport(describe_reqwest(&e, ""))), None)),
            Ok(Ok(None)) => None,
            Ok(Ok(Some(chunk))) => Some((Ok(chunk), Some(response))),
        }
    })
}

fn too_long(total: Duration) -> String {
    format!(
        "the answer took longer than llm.stream_total_timeout ({} s)",
        total.as_secs()
    )
}

/// What a failure while reading the body means: an idle or broken stream
/// is asked again; one that ran past the total limit is not.
fn broken(provider: &str, limits: StreamLimits, err: EventStreamError<Broken>) -> LlmError {
    let provider = provider.to_owned();
    let detail = match err {
        EventStreamError::Transport(Broken::Idle) => {
            return LlmError::StreamIdle {
                provider,
                idle: limits.idle,
            }
        }
        EventStreamError::Transport(Broken::TooLong) => {
            return LlmError::Network {
                provider,
                detail: too_long(limits.total),
            }
        }
        EventStreamError::Transport(Broken::Transport(detail)) => {
            format!("the connection broke mid-answer: {detail}")
        }
        EventStreamError::Utf8(e) => format!("the stream is not UTF-8 text: {e}"),
        EventStreamError::Parser(e) => format!("the stream is not server-sent events: {e}"),
    };
    LlmError::StreamCut { provider, detail }
}

/// An event's data as JSON, or what is wrong with it.
pub(crate) fn json_of(provider: &str, event: &Event) -> Result<Value, LlmError> {
    serde_json::from_str(&event.data).map_err(|e| LlmError::Decode {
        provider: provider.to_owned(),
        detail: format!(
            "the {} event is not JSON ({e}): {}",
            event.event,
            clip(&event.data)
        ),
    })
}

/// The string at `key` of an event's JSON, or an empty one.
pub(crate) fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn clip(text: &str) -> String {
    text.chars().take(300).collect()
}
