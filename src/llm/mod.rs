//! Model providers behind one small trait, and what sits around them:
//! retries with backoff ([`retry`]), token counting ([`tokens`]), choosing a
//! model by size and available keys with fallback ([`router`]), and usage
//! accounting ([`usage`]).

pub mod anthropic;
pub mod gemini;
mod http;
pub mod openai;
pub mod retry;
pub mod router;
pub mod tokens;
pub mod usage;

use async_trait::async_trait;
use serde_json::{Map, Value};
use std::time::Duration;

/// A tool call the model asked for. `arguments` is the JSON text as the model
/// sent it: it may be invalid, and the agent loop says so to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub content: String,
    pub is_error: bool,
}

/// One turn of the conversation (the system prompt travels apart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    User(String),
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// Results of the previous assistant turn's tool calls, in order.
    ToolResults(Vec<ToolResult>),
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
    /// Ignored by reasoning models, which do not take one.
    pub temperature: Option<f32>,
    /// For reasoning models (OpenAI o-series): "low", "medium" or "high".
    pub reasoning_effort: Option<String>,
    /// The system text is a long prefix shared by many requests (a packed
    /// code context): mark it for the provider's prompt cache where the API
    /// needs a mark (Anthropic's `cache_control`). OpenAI and Gemini cache
    /// identical prefixes by themselves.
    pub cache_system: bool,
    /// Ask for a JSON answer in the provider's JSON mode where it has one
    /// (OpenAI `response_format`, Gemini `responseMimeType`); Anthropic has
    /// none, and the prompt asks for JSON anyway.
    pub json_output: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenUsage {
    /// Every input token, cached ones included.
    pub input_tokens: u64,
    /// The part of `input_tokens` the provider served from its prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
}

impl TokenUsage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    pub fn add(&mut self, other: TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: TokenUsage,
    /// The model that answered, as the provider names it.
    pub model: String,
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
}

impl LlmError {
    /// Whether waiting and sending the same request again can help.
    pub fn is_retryable(&self) -> bool {
        matches!(self, LlmError::Overloaded { .. } | LlmError::Server { .. })
    }

    /// Whether the next model in line should be tried (after retries).
    pub fn falls_back(&self) -> bool {
        matches!(
            self,
            LlmError::Overloaded { .. } | LlmError::Server { .. } | LlmError::Network { .. }
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
}

/// A model that can be asked by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub name: String,
    pub max_input_tokens: u64,
}

/// One model API.
#[async_trait]
pub trait Provider: Send + Sync {
    /// `openai`, `gemini` or `anthropic`.
    fn name(&self) -> &str;
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;
}

impl TokenUsage {
    /// Reads the input, cached-input and output counts at three JSON
    /// pointers (0 when absent).
    pub(crate) fn at(body: &Value, input: &str, cached: &str, output: &str) -> TokenUsage {
        let count = |pointer: &str| body.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
        TokenUsage {
            input_tokens: count(input),
            cached_input_tokens: count(cached),
            output_tokens: count(output),
        }
    }
}

/// The model the provider says answered (at `key`), else the one asked for.
pub(crate) fn answering_model(body: &Value, key: &str, requested: &str) -> String {
    body.get(key)
        .and_then(Value::as_str)
        .unwrap_or(requested)
        .to_owned()
}

/// Arguments as a JSON object for APIs that want one; invalid text becomes `{}`.
pub(crate) fn arguments_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => Value::Object(Map::new()),
    }
}
