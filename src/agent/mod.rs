//! The tool-calling loop: send the system prompt, the conversation
//! and the tools; run every tool call the model asks for, in order; append
//! the results (a failure is result text, never a crash); repeat until the
//! model answers without tool calls, or a cap stops it.

pub mod condense;
pub mod plan;
pub mod prompts;
mod steps;
pub mod tools;
mod wrap_up;

use crate::llm::usage::{Price, UsageReport};
use crate::llm::{ChatRequest, ChatResponse, FinishReason, LlmError, Message, ToolCall, ToolResult};
use async_trait::async_trait;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
pub use steps::{Checkpointer, Start, StepPoint};
use tools::ToolRegistry;

pub use crate::llm::ChatModel;

/// Resolves once the sandbox is prepared for tools (a setup snapshot
/// restored), or with why it could not be. The model's first turn does not
/// wait for it; the first tool call does.
pub type Readiness =
    futures_util::future::Shared<futures_util::future::BoxFuture<'static, Result<(), String>>>;

/// Asked before every model turn whether the run may go on: the task runner
/// uses it for the pause and stop labels and for daemon shutdown.
#[async_trait]
pub trait StepGate: Send + Sync {
    /// `None`: go on (after waiting, while paused in place). `Some`: the
    /// run ends here, stopped or suspended.
    async fn before_step(&self, step: u32) -> Option<Halt>;

    /// What people said to the run since the last step (steering), each
    /// as the user message the model reads before its next answer.
    async fn heard(&self) -> Vec<String> {
        Vec::new()
    }

    /// The model answered a request that carried what [`heard`](Self::heard)
    /// gave: it has read it.
    async fn read(&self) {}
}

/// Why a gate ends the run before a model turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Halt {
    /// Stop for good (the processing label removed, the daemon stopping).
    Stop(String),
    /// Suspend: the run goes on later from its last step's checkpoint
    /// (paused by a label; the task holds nothing meanwhile).
    Suspend(String),
}

/// Told of each step as it happens: the transcript of the run.
pub trait StepRecorder: Send + Sync {
    /// The model answered (its text and the tool calls it asked for).
    fn model_turn(&self, turn: &ModelTurn<'_>);
    /// A tool call ran and gave `result`.
    fn tool_ran(&self, step: u32, call: &ToolCall, result: &ToolResult, took: Duration);
    /// More of step `step`'s answer streamed in (for live readers).
    fn streamed(&self, step: u32, event: &crate::llm::stream::StreamEvent) {
        let _ = (step, event);
    }
    /// A tool call of step `step` starts running (for live readers).
    fn tool_started(&self, step: u32, call: &ToolCall) {
        let _ = (step, call);
    }
    /// `said` (steering: what a person wrote while the run works) is given
    /// to the model before step `step`.
    fn heard(&self, step: u32, said: &str) {
        let _ = (step, said);
    }
    /// The run goes on after step `step` from its checkpoint (the task
    /// was interrupted and started again).
    fn resumed(&self, step: u32) {
        let _ = step;
    }
}

/// Hands what streams in for step `step` to the recorder.
struct StepStream<'a> {
    recorder: &'a dyn StepRecorder,
    step: u32,
}

impl crate::llm::stream::StreamSink for StepStream<'_> {
    fn event(&self, event: &crate::llm::stream::StreamEvent) {
        self.recorder.streamed(self.step, event);
    }
}

/// One answer of the model, as a [`StepRecorder`] hears it.
pub struct ModelTurn<'a> {
    pub step: u32,
    pub model: &'a str,
    pub text: &'a str,
    pub tool_calls: &'a [ToolCall],
    pub usage: crate::llm::TokenUsage,
    pub cost: Option<f64>,
    pub took: Duration,
}

pub use crate::config::AgentLimits;

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_steps: 50,
            token_budget: 2_000_000,
            wall_clock: Duration::from_secs(2 * 3600),
            max_tool_result_bytes: 32 * 1024,
            max_repeated_failures: 3,
            max_tool_calls_per_step: 16,
            max_output_tokens: 8192,
            temperature: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum StopReason {
    Answered,
    MaxSteps {
        limit: u32,
    },
    TokenBudget {
        used: u64,
        limit: u64,
    },
    WallClock {
        limit: Duration,
    },
    RepeatedFailure {
        tool: String,
        times: u32,
    },
    Model(String),
    /// The step gate stopped the run (label removed, daemon shutting down).
    Halted(String),
    /// The step gate suspended the run (the paused label): it goes on later
    /// from its last step's checkpoint.
    Suspended(String),
    /// The sandbox could not be prepared (see [`Agent::with_ready`]); no tool ran.
    NotReady(String),
    /// The model (or its provider's filter) declined to go on.
    Refused(String),
    /// A spending cap (`budget.*`) was reached; the reason names it.
    Budget(String),
    /// Every answer was cut at the output limit, even with more room.
    OutputLimit {
        times: u32,
    },
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Answered => write!(f, "the model answered"),
            StopReason::MaxSteps { limit } => write!(f, "stopped after {limit} steps (agent.max_steps)"),
            StopReason::TokenBudget { used, limit } => {
                write!(f, "stopped: {used} tokens used, over the budget of {limit} (agent.token_budget)")
            }
            StopReason::WallClock { limit } => {
                write!(f, "stopped: the run took longer than {} s (agent.wall_clock_limit)", limit.as_secs())
            }
            StopReason::RepeatedFailure { tool, times } => write!(
                f,
                "stopped: the model made the same failing call to {tool} {times} times (agent.max_repeated_failures)"
            ),
            StopReason::Model(error) => write!(f, "stopped: the model could not be asked: {error}"),
            StopReason::Halted(reason) => write!(f, "stopped: {reason}"),
            StopReason::Suspended(reason) => write!(f, "suspended: {reason}"),
            StopReason::NotReady(reason) => write!(f, "stopped before any tool ran: the sandbox was not prepared ({reason})"),
            StopReason::Refused(why) => write!(f, "stopped: the model declined to continue ({why})"),
            StopReason::Budget(why) => write!(f, "stopped at the budget: {why}"),
            StopReason::OutputLimit { times } => write!(
                f,
                "stopped: the model's answer was cut at its output limit {times} times (llm.max_output_tokens, the model's max_output_tokens)"
            ),
        }
    }
}

#[derive(Debug, Clone)]
pub struct AgentOutcome {
    /// The model's final answer, when it gave one.
    pub answer: Option<String>,
    pub stop: StopReason,
    pub steps: u32,
    pub tool_calls: u32,
    pub usage: UsageReport,
    pub messages: Vec<Message>,
}

pub struct Agent {
    model: Arc<dyn ChatModel>,
    tools: ToolRegistry,
    limits: AgentLimits,
    prices: BTreeMap<String, Price>,
    gate: Option<Arc<dyn StepGate>>,
    condense: Option<condense::CondenseSettings>,
    ready: Option<Readiness>,
    /// Where each tool call is counted.
    metrics: Arc<crate::metrics::Metrics>,
    recorder: Option<Arc<dyn StepRecorder>>,
    /// Keeps each step boundary, for a run resumed after a kill.
    checkpointer: Option<Arc<dyn Checkpointer>>,
}

impl Agent {
    pub fn new(
        model: Arc<dyn ChatModel>,
        tools: ToolRegistry,
        limits: AgentLimits,
        prices: BTreeMap<String, Price>,
    ) -> Agent {
        Agent {
            model,
            tools,
            limits,
            prices,
            gate: None,
            condense: None,
            ready: None,
            metrics: Arc::default(),
            recorder: None,
            checkpointer: None,
        }
    }

    /// Each step boundary goes to `checkpointer` (none: nothing is kept).
    pub fn set_checkpointer(&mut self, checkpointer: Option<Arc<dyn Checkpointer>>) {
        self.checkpointer = checkpointer;
    }

    /// Tool calls wait for `ready` (none: they run at once); when it fails,
    /// the run stops with [`StopReason::NotReady`] before any tool runs.
    pub fn with_ready(mut self, ready: Option<Readiness>) -> Agent {
        self.set_ready(ready);
        self
    }

    /// [`with_ready`](Self::with_ready) on an agent already made.
    pub fn set_ready(&mut self, ready: Option<Readiness>) {
        self.ready = ready;
    }

    /// Consults `gate` before every model turn.
    /// Counts tool calls in `metrics` (the daemon's).
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Agent {
        self.metrics = metrics;
        self
    }

    /// Every step goes to `recorder` too (the run's transcript).
    pub fn with_recorder(mut self, recorder: Option<Arc<dyn StepRecorder>>) -> Agent {
        self.recorder = recorder;
        self
    }

    pub fn with_gate(mut self, gate: Arc<dyn StepGate>) -> Agent {
        self.gate = Some(gate);
        self
    }

    /// Condenses the transcript when a request passes `settings.at_tokens`.
    pub fn with_condensing(mut self, settings: condense::CondenseSettings) -> Agent {
        self.condense = Some(settings);
        self
    }

    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Asks the model for step `step`'s answer, streaming it to the
    /// recorder as it comes.
    async fn ask(&self, step: u32, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        match &self.recorder {
            Some(recorder) => {
                let sink = StepStream {
                    recorder: recorder.as_ref(),
                    step,
                };
                self.model.stream(None, request, &sink).await
            }
            None => self.model.chat(request).await,
        }
    }

    fn record_turn(&self, step: u32, response: &ChatResponse, took: Duration) {
        if let Some(recorder) = &self.recorder {
            let cost = UsageReport::new(self.prices.clone()).cost_of(&response.model, response.usage);
            recorder.model_turn(&ModelTurn {
                step,
                model: &response.model,
                text: &response.text,
                tool_calls: &response.tool_calls,
                usage: response.usage,
                cost,
                took,
            });
        }
    }

    async fn call_tool(&self, call: &ToolCall) -> ToolResult {
        if !self.tools.contains(&call.name) {
            return error_result(
                call,
                format!(
                    "Unknown tool `{}`. Available tools: {}.",
                    call.name,
                    self.tools
                        .specs()
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        let arguments: Map<String, Value> = match serde_json::from_str::<Value>(if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        }) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                return error_result(call, format!("The arguments must be a JSON object, not {other}. Call the tool again with an object."))
            }
            Err(e) => {
                return error_result(
                    call,
                    format!("The arguments are not valid JSON ({e}). Call the tool again with a JSON object that matches its schema."),
                )
            }
        };
        let missing = self.tools.missing_required(&call.name, &arguments);
        if !missing.is_empty() {
            return error_result(
                call,
                format!(
                    "Missing required argument(s): {}. Call the tool again with them.",
                    missing.join(", ")
                ),
            );
        }
        let output = self.tools.call(&call.name, arguments).await;
        ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: clip_result(&output.text, self.limits.max_tool_result_bytes),
            is_error: output.is_error,
        }
    }
}

/// What to do with an answer the model could not finish.
enum Unusable {
    No,
    /// Asked again (the conversation says why, or the answer gets more room).
    Retry,
    Stop(StopReason),
}

struct Run {
    /// Output tokens the next request asks for: more after a cut answer.
    output_room: u32,
    /// Unusable answers in a row (cut, malformed calls).
    unusable: u32,
    /// A text answer cut at the output limit, continued in the next turns.
    partial: String,
    messages: Vec<Message>,
    usage: UsageReport,
    steps: u32,
    tool_calls: u32,
    failures: HashMap<(String, String), u32>,
    /// Messages before this index have been condensed.
    condensed_upto: usize,
    /// Token counts of `messages`, by index (for the condensing check).
    message_tokens: Vec<u64>,
}

impl Run {
    fn new(start: steps::Start, prices: BTreeMap<String, Price>, output_room: u32) -> Run {
        Run {
            messages: start.messages,
            usage: UsageReport::new(prices),
            steps: start.steps,
            tool_calls: start.tool_calls,
            failures: HashMap::new(),
            condensed_upto: 0,
            message_tokens: Vec::new(),
            output_room,
            unusable: 0,
            partial: String::new(),
        }
    }

    /// Reads why the model stopped, and prepares what to ask next when its
    /// answer cannot be used as it is:
    /// - a tool call the provider could not parse: the model is told what
    ///   was wrong and asked again;
    /// - an answer cut at the output limit: asked again with twice the room
    ///   (up to 8 times the configured room; the router caps it at the
    ///   model's own), and a cut text is kept and continued;
    /// - a refusal: the run stops, saying so.
    fn unusable_answer(&mut self, response: &ChatResponse, configured_room: u32) -> Unusable {
        match &response.finish {
            FinishReason::Complete => Unusable::No,
            FinishReason::Refused(why) => Unusable::Stop(StopReason::Refused(why.clone())),
            FinishReason::MalformedToolCall(what) if response.tool_calls.is_empty() => {
                self.unusable += 1;
                if !response.text.trim().is_empty() {
                    self.messages.push(response.to_message());
                }
                self.messages.push(Message::User(format!(
                    "[forgehand: your last tool call could not be read ({what}). Call the tool again, with its arguments as one JSON object that matches the tool's schema.]"
                )));
                tracing::warn!(
                    step = self.steps,
                    "the model's tool call could not be parsed ({what}); asking again"
                );
                Unusable::Retry
            }
            FinishReason::OutputLimit if response.tool_calls.is_empty() => {
                self.unusable += 1;
                self.output_room = self
                    .output_room
                    .saturating_mul(2)
                    .min(configured_room.saturating_mul(8));
                if !response.text.trim().is_empty() {
                    self.partial.push_str(&response.text);
                    self.messages.push(response.to_message());
                    self.messages.push(Message::User(
                        "[forgehand: your answer was cut at the output limit. Continue exactly where it stopped, without repeating anything.]".into(),
                    ));
                }
                tracing::warn!(
                    step = self.steps,
                    output_room = self.output_room,
                    "the model's answer was cut at its output limit; asking again with more room"
                );
                Unusable::Retry
            }
            // Cut or malformed, but with calls to run: they are run (a cut
            // call's arguments fail to parse and the model is told).
            _ => Unusable::No,
        }
    }

    /// Condenses old steps when the next request would pass the budget.
    fn condense(
        &mut self,
        system: &str,
        tools: &[crate::llm::ToolSpec],
        settings: condense::CondenseSettings,
    ) {
        use crate::llm::tokens::{count_message, count_text, count_tools};
        // Messages only grow at the end between condensations: count each once.
        while self.message_tokens.len() < self.messages.len() {
            let next = count_message(&self.messages[self.message_tokens.len()]);
            self.message_tokens.push(next);
        }
        let tokens = count_text(system) + self.message_tokens.iter().sum::<u64>() + count_tools(tools);
        if tokens <= settings.at_tokens {
            return;
        }
        if let Some(done) = condense::condense(
            &mut self.messages,
            self.condensed_upto,
            settings.keep_recent_steps,
        ) {
            tracing::info!(
                step = self.steps,
                tokens,
                budget = settings.at_tokens,
                results = done.results,
                arguments = done.arguments,
                "condensed the transcript's older steps"
            );
            self.condensed_upto = done.upto;
            self.message_tokens.clear();
        }
    }

    fn finish(self, answer: Option<String>, stop: StopReason) -> AgentOutcome {
        match &stop {
            StopReason::Answered => {
                tracing::info!(steps = self.steps, tool_calls = self.tool_calls, "agent finished")
            }
            other => tracing::warn!(steps = self.steps, tool_calls = self.tool_calls, "agent {other}"),
        }
        AgentOutcome {
            answer,
            stop,
            steps: self.steps,
            tool_calls: self.tool_calls,
            usage: self.usage,
            messages: self.messages,
        }
    }
}

fn error_result(call: &ToolCall, content: String) -> ToolResult {
    ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error: true,
    }
}

/// Arguments in a form where key order and spacing do not matter.
fn canonical_arguments(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| arguments.trim().to_owned())
}

/// Cuts `text` to `limit` bytes (on a character boundary) with a marker.
pub fn clip_result(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... forgehand: result cut at {limit} of {} bytes; ask for a smaller part (e.g. view_range, head, grep) ...]",
        &text[..end],
        text.len()
    )
}
