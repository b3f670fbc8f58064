//! Plain settings that other modules give behaviour to (retries in
//! `llm::retry`, prices in `llm::usage`, the agent's caps in `agent`). They
//! live here so the configuration needs none of those modules.

use std::time::Duration;

/// Waiting out overload: `initial_backoff` doubling to `max_backoff`,
/// `max_retries` times (`llm::retry` runs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub max_retries: usize,
}

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_million: f64,
    pub output_per_million: f64,
    /// Input tokens the provider served from its prompt cache.
    pub cached_input_per_million: f64,
    /// Input tokens written to the prompt cache (Anthropic bills them above
    /// plain input; the others do not bill writes apart, so it equals input).
    pub cache_write_per_million: f64,
}

/// The wire format a model is reached through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// OpenAI's Responses API (`/v1/responses`): reasoning carried between
    /// tool turns, function tools while the model reasons.
    Responses,
    /// Chat Completions (`/v1/chat/completions`): OpenAI-compatible servers.
    ChatCompletions,
    /// Anthropic Messages.
    Messages,
    /// Gemini generateContent.
    GenerateContent,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Responses => "responses",
            Api::ChatCompletions => "chat_completions",
            Api::Messages => "messages",
            Api::GenerateContent => "generate_content",
        }
    }

    /// The setting's values, for `llm.models[].api`.
    pub fn parse(value: &str) -> Option<Api> {
        match value {
            "responses" => Some(Api::Responses),
            "chat_completions" => Some(Api::ChatCompletions),
            "messages" => Some(Api::Messages),
            "generate_content" => Some(Api::GenerateContent),
            _ => None,
        }
    }

    /// The APIs a provider's models are reached through.
    pub fn serves(self, provider: super::ProviderKind) -> bool {
        matches!(
            (provider, self),
            (super::ProviderKind::OpenAi, Api::Responses | Api::ChatCompletions)
                | (super::ProviderKind::Anthropic, Api::Messages)
                | (super::ProviderKind::Gemini, Api::GenerateContent)
        )
    }
}

/// How a model is asked to think.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningKind {
    /// It does not reason (or not in a way the request controls).
    None,
    /// OpenAI: `reasoning.effort` (Responses) or `reasoning_effort` (Chat
    /// Completions); no temperature.
    Effort,
    /// Anthropic: `thinking: {type: "adaptive"}` with `output_config.effort`.
    Adaptive,
    /// Anthropic `thinking: {type: "enabled", budget_tokens}`, or Gemini 2.5's
    /// `thinkingConfig.thinkingBudget`: a number of tokens.
    Budget,
    /// Gemini 3: `thinkingConfig.thinkingLevel`; its thoughts are signed and
    /// the signatures must come back with the calls they preceded.
    Level,
}

impl ReasoningKind {
    pub fn name(self) -> &'static str {
        match self {
            ReasoningKind::None => "none",
            ReasoningKind::Effort => "effort",
            ReasoningKind::Adaptive => "adaptive",
            ReasoningKind::Budget => "budget",
            ReasoningKind::Level => "level",
        }
    }

    pub fn parse(value: &str) -> Option<ReasoningKind> {
        match value {
            "none" => Some(ReasoningKind::None),
            "effort" => Some(ReasoningKind::Effort),
            "adaptive" => Some(ReasoningKind::Adaptive),
            "budget" => Some(ReasoningKind::Budget),
            "level" => Some(ReasoningKind::Level),
            _ => None,
        }
    }
}

/// The caps of one agent run (`agent` enforces them).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentLimits {
    pub max_steps: u32,
    /// Input + output tokens over the whole run.
    pub token_budget: u64,
    pub wall_clock: Duration,
    /// Longer tool results are cut, with a marker.
    pub max_tool_result_bytes: usize,
    /// The same failing call this often stops the run (the model is warned before).
    pub max_repeated_failures: u32,
    /// Tool calls run per model turn; the rest are refused.
    pub max_tool_calls_per_step: usize,
    pub max_output_tokens: u32,
    pub temperature: Option<f32>,
}
