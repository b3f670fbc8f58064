//! Model providers behind one small trait, and what sits around them: what
//! each model is and accepts ([`catalogue`]), the conversation made fit for
//! the provider that gets it ([`history`]), retries with backoff ([`retry`]),
//! token counting ([`tokens`]), choosing a model by size and available keys
//! with fallback ([`router`]), and usage accounting ([`usage`]).
//!
//! One client per model API: [`responses`] (OpenAI's Responses API),
//! [`chat_completions`] (OpenAI-compatible servers), [`anthropic`] (Messages)
//! and [`gemini`] (generateContent), each API's request and answer format
//! apart from its client in [`wire`]. Every answer is streamed ([`stream`]):
//! `chat` is a fold over the stream's events.

pub mod anthropic;
pub mod catalogue;
pub mod chat_completions;
pub mod gateway;
pub mod gemini;
pub mod history;
mod http;
pub mod image;
pub mod observed;
pub mod responses;
pub mod retry;
pub mod router;
pub mod stream;
mod tokenizer;
pub mod tokens;
pub mod usage;
pub mod wire;

pub use catalogue::{Api, ModelSpec, ReasoningKind};
pub use stream::{ChatStream, StreamEvent, StreamSink};

use async_trait::async_trait;
use serde_json::{Map, Value};
use std::time::Duration;

/// A tool call the model asked for. `arguments` is the JSON text as the model
/// sent it: it may be invalid, and the agent loop says so to the model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub content: String,
    pub is_error: bool,
}

/// One turn of the conversation (the system prompt travels apart).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Message {
    User(String),
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
        /// The turn as the provider sent it, with its opaque reasoning state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        native: Option<NativeTurn>,
    },
    /// Results of the previous assistant turn's tool calls, in order.
    ToolResults(Vec<ToolResult>),
    /// An image in the user's turn (a screenshot from the thread): each
    /// provider sends it in its own format, joined to the user text around
    /// it; a model that cannot take it reads a note ([`history`]).
    Image(image::ImagePart),
}

impl Message {
    /// An assistant turn that forgehand wrote itself, or that carries no
    /// provider state.
    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCall>) -> Message {
        Message::Assistant {
            text: text.into(),
            tool_calls,
            native: None,
        }
    }
}

/// An assistant turn exactly as its provider sent it: Anthropic's content
/// blocks with their thinking and signatures, the Responses API's output
/// items with encrypted reasoning, Gemini's parts with thought signatures.
/// Each API wants that state back unchanged in later requests, and only the
/// API and model that made it can verify it (see [`history`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NativeTurn {
    pub api: Api,
    pub model: String,
    pub content: Value,
}

impl NativeTurn {
    /// The turn `items` make, `None` when there is nothing to send back.
    pub(crate) fn of(api: Api, model: &str, items: &[Value]) -> Option<NativeTurn> {
        (!items.is_empty()).then(|| NativeTurn {
            api,
            model: model.to_owned(),
            content: Value::Array(items.to_vec()),
        })
    }
}

/// Why the model stopped writing, read from each provider's own field
/// (`stop_reason`, `finishReason`, `status` + `incomplete_details`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FinishReason {
    /// A whole answer, or tool calls to run.
    #[default]
    Complete,
    /// Cut at the output limit (`max_tokens`, `MAX_TOKENS`,
    /// `max_output_tokens`), perhaps after thinking alone.
    OutputLimit,
    /// The model tried to call a tool and the provider could not parse the
    /// call (Gemini's `MALFORMED_FUNCTION_CALL`); the text says what.
    MalformedToolCall(String),
    /// The model or the provider's filter declined to answer.
    Refused(String),
}

/// A function the model may call; `parameters` is a JSON Schema object.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_output_tokens: u32,
    /// Left out for models that refuse one (the catalogue says which).
    pub temperature: Option<f32>,
    /// How hard a reasoning model thinks: one of the levels the catalogue
    /// lists for the model ("none", "minimal", "low", "medium", "high",
    /// "xhigh", "max"); the nearest one the model has is sent.
    pub reasoning_effort: Option<String>,
    /// The request shares a long prefix with the next ones (a packed code
    /// context, an agent's growing transcript): mark it for the provider's
    /// prompt cache where the API needs a mark (Anthropic's `cache_control`
    /// on the system text and on the newest turn). OpenAI and Gemini cache
    /// identical prefixes by themselves.
    pub cache_system: bool,
    /// Ask for a JSON answer in the provider's JSON mode where it has one
    /// (OpenAI `response_format`, Gemini `responseMimeType`); Anthropic has
    /// none, and the prompt asks for JSON anyway.
    pub json_output: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenUsage {
    /// Every input token, cached ones and cache writes included.
    pub input_tokens: u64,
    /// The part of `input_tokens` the provider served from its prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// The part of `input_tokens` written to the prompt cache (Anthropic
    /// prices it above plain input).
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Every output token, thinking included (all three bill it as output).
    pub output_tokens: u64,
    /// The part of `output_tokens` the model spent thinking.
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl TokenUsage {
    /// The counts `/metrics` records.
    pub fn metric_counts(&self) -> crate::metrics::ModelTokens {
        crate::metrics::ModelTokens {
            input: self.input_tokens,
            cached_input: self.cached_input_tokens,
            output: self.output_tokens,
        }
    }

    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    pub fn add(&mut self, other: TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.output_tokens += other.output_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: TokenUsage,
    /// The model that answered, as the provider names it.
    pub model: String,
    pub finish: FinishReason,
    /// The turn as the provider sent it, to send back in later requests.
    pub native: Option<NativeTurn>,
}

impl ChatResponse {
    /// The assistant turn to append to the conversation.
    pub fn to_message(&self) -> Message {
        Message::Assistant {
            text: self.text.clone(),
            tool_calls: self.tool_calls.clone(),
            native: self.native.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// Rate limits and overload (429, 529, 503, an "overloaded" body): worth
    /// waiting for, honouring `retry_after` when the provider gave one.
    #[error("{provider} is overloaded or rate-limited (HTTP {status}): {message}")]
    Overloaded {
        provider: String,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// A server-side failure (other 5xx): worth another try.
    #[error("{provider} failed on its side (HTTP {status}): {message}")]
    Server {
        provider: String,
        status: u16,
        message: String,
    },
    /// The request itself was refused (4xx); the provider's message says why.
    #[error("{provider} refused the request (HTTP {status}): {message}")]
    Rejected {
        provider: String,
        status: u16,
        message: String,
    },
    /// The provider could not be reached or did not answer in time.
    #[error("cannot reach {provider}: {detail}")]
    Network { provider: String, detail: String },
    #[error("{provider} answered something forgehand cannot read: {detail}")]
    Decode { provider: String, detail: String },
    #[error("{tokens} tokens do not fit any usable model: {limits}. Send fewer files, or configure a model with a larger context under llm.models")]
    TooLarge { tokens: u64, limits: String },
    #[error("no model can be used: {detail}")]
    NoModel { detail: String },
    /// The server cannot do what forgehand needs (an OpenAI-compatible
    /// server started without tool calling): a setting to change, not a
    /// request to repeat.
    #[error("{provider} cannot serve this request: {message}. {advice}")]
    Unsupported {
        provider: String,
        message: String,
        advice: String,
    },
    /// A spending cap (`budget.*`) would be passed by this call's worst case.
    #[error("{0}")]
    Budget(String),
    /// The streamed answer broke off before its end (the connection closed,
    /// or the provider sent an error event instead of the rest): the whole
    /// call is worth sending again.
    #[error("{provider}'s answer broke off: {detail}")]
    StreamCut { provider: String, detail: String },
    /// Nothing came for `llm.stream_idle_timeout` (a stalled model or a
    /// proxy holding a dead connection): the whole call is worth sending again.
    #[error("{provider} sent nothing for {} s (llm.stream_idle_timeout); the answer is asked again", .idle.as_secs())]
    StreamIdle { provider: String, idle: Duration },
    /// The provider refused the request for a reason it names in its own
    /// error shape (each provider module reads its own): sending it again,
    /// or to the same model, cannot help.
    #[error("{provider} refused the request: {refusal} ({message})")]
    Refused {
        provider: String,
        refusal: Refusal,
        message: String,
    },
}

/// Why a provider refused a request, as it says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The conversation does not fit the model's context window (OpenAI's
    /// `context_length_exceeded`, Anthropic's "prompt is too long", Gemini's
    /// "exceeds the maximum number of tokens").
    ContextTooLong,
    /// The provider's content policy blocked the prompt or the answer
    /// (OpenAI's `invalid_prompt`, Anthropic's "Output blocked by content
    /// filtering policy").
    ContentPolicy,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::ContextTooLong => "the conversation does not fit the model's context window",
            Refusal::ContentPolicy => "its content policy blocked the prompt or the answer",
        })
    }
}

impl LlmError {
    /// Whether waiting and sending the same request again can help.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::Overloaded { .. }
                | LlmError::Server { .. }
                | LlmError::StreamCut { .. }
                | LlmError::StreamIdle { .. }
        )
    }

    /// Whether the next model in line should be tried (after retries).
    pub fn falls_back(&self) -> bool {
        matches!(
            self,
            LlmError::Overloaded { .. }
                | LlmError::Server { .. }
                | LlmError::Network { .. }
                | LlmError::StreamCut { .. }
                | LlmError::StreamIdle { .. }
        )
    }

    /// Whether the request is too large for the model: forgehand's own
    /// count, or the provider's typed refusal.
    pub fn is_too_large(&self) -> bool {
        matches!(
            self,
            LlmError::TooLarge { .. }
                | LlmError::Refused {
                    refusal: Refusal::ContextTooLong,
                    ..
                }
        )
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Overloaded { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Whatever answers chat requests: the router in production, a fake in tests.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Sends the request to the model the size and the keys choose.
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// The models that can be asked by name, in order of preference.
    fn models(&self) -> Vec<ModelInfo> {
        Vec::new()
    }

    /// Sends the request to one named model (with its retries, without
    /// falling back to another): a debater must answer as itself.
    async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let _ = model;
        self.chat(request).await
    }

    /// Sends the request as [`ChatModel::chat_on`] does when `model` names
    /// one, else as [`ChatModel::chat`] does, telling `sink` what streams
    /// in as it comes; returns the whole answer. A model that answers whole
    /// tells `sink` the answer's text and calls before returning it.
    async fn stream(
        &self,
        model: Option<&str>,
        request: &ChatRequest,
        sink: &dyn StreamSink,
    ) -> Result<ChatResponse, LlmError> {
        let response = match model {
            Some(model) => self.chat_on(model, request).await?,
            None => self.chat(request).await?,
        };
        stream::replay(&response, sink);
        Ok(response)
    }
}

/// A model that can be asked by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub name: String,
    pub max_input_tokens: u64,
}

/// One model API. `model` is what the catalogue (and config) know of the
/// model the request is for: what it accepts, how it reasons.
#[async_trait]
pub trait Provider: Send + Sync {
    /// `openai`, `gemini` or `anthropic`.
    fn name(&self) -> &str;

    /// The whole answer. The real APIs fold their stream
    /// ([`stream::fold`] over [`Provider::stream`]).
    async fn chat(&self, model: &ModelSpec, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// The answer as it streams; one that answers whole streams its answer
    /// at once.
    fn stream<'a>(&'a self, model: &'a ModelSpec, request: &'a ChatRequest) -> ChatStream<'a> {
        use futures_util::StreamExt;
        futures_util::stream::once(self.chat(model, request))
            .flat_map(|answer| match answer {
                Ok(response) => stream::whole(response),
                Err(err) => futures_util::stream::iter([Err(err)]).boxed(),
            })
            .boxed()
    }
}

/// The count at a JSON pointer, 0 when absent.
pub(crate) fn count_at(body: &Value, pointer: &str) -> u64 {
    body.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// The array at `key` of an answer, or what is wrong with the answer.
pub(crate) fn array_at<'a>(body: &'a Value, key: &str, provider: &str) -> Result<&'a Vec<Value>, LlmError> {
    body.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::Decode {
            provider: provider.to_owned(),
            detail: format!("no {key} array in the answer"),
        })
}

/// The model the provider says answered (at `key`), else the one asked for.
pub(crate) fn answering_model(body: &Value, key: &str, requested: &str) -> String {
    body.get(key)
        .and_then(Value::as_str)
        .unwrap_or(requested)
        .to_owned()
}

/// An id for a tool call the provider gave none: unique in this process
/// and, through the start time in it, across restarts (a resumed run's
/// history keeps the ids of the run before it).
pub(crate) fn made_up_call_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static START: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = *START.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    });
    format!("{prefix}{start:x}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A temperature as the decimal the config or the code wrote: `f32`'s
/// shortest form, read as `f64` (widening the `f32` itself would send 0.1
/// as 0.10000000149011612). `None` for a value JSON cannot carry.
pub(crate) fn temperature_json(temperature: f32) -> Option<Value> {
    let decimal: f64 = temperature.to_string().parse().ok()?;
    serde_json::Number::from_f64(decimal).map(Value::Number)
}

/// Arguments as a JSON object for APIs that want one; invalid text becomes `{}`.
pub(crate) fn arguments_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => Value::Object(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperatures_keep_the_decimal_they_were_written_as() {
        for (t, text) in [
            (0.1f32, "0.1"),
            (0.2, "0.2"),
            (0.7, "0.7"),
            (1.0, "1.0"),
            (0.0, "0.0"),
        ] {
            assert_eq!(temperature_json(t).map(|v| v.to_string()), Some(text.to_owned()));
        }
        assert_eq!(temperature_json(f32::NAN), None);
    }
}
