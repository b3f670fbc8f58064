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
