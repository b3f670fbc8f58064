//! The loop itself, one step at a time: before each model turn the caps
//! and the gate; the turn; then the tool calls it asked for, in order; then
//! the checkpoint, from which a run killed later starts again.

use super::{canonical_arguments, error_result, Agent, AgentOutcome, Run, StopReason, Unusable};
use crate::llm::{ChatRequest, ChatResponse, FinishReason, LlmError, Message, ToolCall, ToolResult};
use std::time::Duration;
// tokio's clock, so the limit and the timeouts it drives agree (and tests can pause it).
use tokio::time::Instant;

/// Where a run starts: the conversation so far, and the steps and tool
/// calls already made (none for a new run; a checkpoint's for a resumed one).
#[derive(Debug, Clone, Default)]
pub struct Start {
    pub messages: Vec<Message>,
    pub steps: u32,
    pub tool_calls: u32,
}

impl Start {
    /// A new run from `messages` (normally one user message).
    pub fn new(messages: Vec<Message>) -> Start {
        Start {
            messages,
            steps: 0,
            tool_calls: 0,
        }
    }
}

/// A step boundary: the run as it stands after step `step`'s tool calls
/// ran, which a resumed run can start from.
pub struct StepPoint<'a> {
    pub step: u32,
    pub tool_calls: u32,
    /// The whole conversation, the step's results last.
    pub messages: &'a [Message],
    /// The calls the step ran (what they may have changed).
    pub calls: &'a [ToolCall],
}

/// Told at every step boundary (after the step's tool calls ran). The run
/// waits for it: what it keeps is what a resumed run starts from.
#[async_trait::async_trait]
pub trait Checkpointer: Send + Sync {
    async fn step_done(&self, point: &StepPoint<'_>);
}

impl Run {
    /// Ends the run before `calls`, the last answer's, ran: each is
    /// answered as not run, saying why. A later round goes on from this
    /// conversation (a rebase, a fix for the CI), and every provider
    /// refuses a call left without its result before the next turn.
    fn finish_unrun(mut self, calls: &[ToolCall], stop: StopReason) -> AgentOutcome {
        let why = format!("Not run: the run {stop}.");
        let results = calls.iter().map(|call| error_result(call, why.clone())).collect();
        self.messages.push(Message::ToolResults(results));
        self.finish(None, stop)
    }
}

/// What came of one model turn.
enum Answer {
    Usable(ChatResponse),
    /// Asked again at the next step (a cut answer, a call that could not be read).
    Retry,
    Stop(StopReason),
    /// The budget allows no further full turn: the run ends with a summary.
    WrapUp(String),
}

impl Agent {
    /// Runs the loop from `messages` (normally one user message) to an
    /// answer or a cap.
    pub async fn run(&self, system: &str, messages: Vec<Message>) -> AgentOutcome {
        self.run_from(system, Start::new(messages)).await
    }

    /// Runs the loop from `start` (a new run, or a checkpoint's
    /// conversation) to an answer or a cap. The step cap counts the steps
    /// `start` already made.
    pub async fn run_from(&self, system: &str, start: Start) -> AgentOutcome {
        let started = Instant::now();
        let mut run = Run::new(start, self.prices.clone(), self.limits.max_output_tokens);
        loop {
            let (remaining, told) = match self.open_step(&mut run, system, started).await {
                Ok(open) => open,
                Err(stop) => return run.finish(None, stop),
            };
            let response = match self.answer_step(&mut run, system, remaining, told).await {
                Answer::Usable(response) => response,
                Answer::Retry => continue,
                Answer::Stop(stop) => return run.finish(None, stop),
                Answer::WrapUp(reason) => return self.wrap_up(run, system, reason).await,
            };
            run.messages.push(response.to_message());
            if response.tool_calls.is_empty() {
                let answer = std::mem::take(&mut run.partial) + &response.text;
                return run.finish(Some(answer), StopReason::Answered);
            }
            let used = run.usage.total().input_tokens + run.usage.total().output_tokens;
            if used > self.limits.token_budget {
                let limit = self.limits.token_budget;
                return run.finish_unrun(&response.tool_calls, StopReason::TokenBudget { used, limit });
            }
            if let Err(stop) = self.wait_ready(started).await {
                return run.finish_unrun(&response.tool_calls, stop);
            }
            let stop = self.run_tools(&mut run, &response.tool_calls).await;
            crate::kill_point::reached(crate::kill_point::TOOLS_RAN);
            if let Some(checkpointer) = &self.checkpointer {
                checkpointer
                    .step_done(&StepPoint {
                        step: run.steps,
                        tool_calls: run.tool_calls,
                        messages: &run.messages,
                        calls: &response.tool_calls,
                    })
                    .await;
            }
            if let Some(stop) = stop {
                return run.finish(None, stop);
            }
        }
    }

    /// Before a model turn: the caps, then the gate (pause, stop) and what
    /// people said meanwhile. The time left, and whether anything was said.
    async fn open_step(
        &self,
        run: &mut Run,
        system: &str,
        started: Instant,
    ) -> Result<(Duration, bool), StopReason> {
        if run.steps >= self.limits.max_steps {
            return Err(StopReason::MaxSteps {
                limit: self.limits.max_steps,
            });
        }
        let Some(remaining) = self.limits.wall_clock.checked_sub(started.elapsed()) else {
            return Err(self.wall_clock());
        };
        let mut told = false;
        if let Some(gate) = &self.gate {
            match gate.before_step(run.steps + 1).await {
                Some(super::Halt::Stop(reason)) => return Err(StopReason::Halted(reason)),
                Some(super::Halt::Suspend(reason)) => return Err(StopReason::Suspended(reason)),
                None => {}
            }
            for said in gate.heard().await {
                if let Some(recorder) = &self.recorder {
                    recorder.heard(run.steps + 1, &said);
                }
                run.messages.push(Message::User(said));
                told = true;
            }
        }
        run.steps += 1;
        if let Some(settings) = self.condense {
            run.condense(system, self.tools.specs(), settings);
        }
        Ok((remaining, told))
    }

    /// One model turn, read: usable, to be asked again, or the end.
    async fn answer_step(&self, run: &mut Run, system: &str, remaining: Duration, told: bool) -> Answer {
        let request = ChatRequest {
            model: String::new(),
            system: system.to_owned(),
            messages: run.messages.clone(),
            tools: self.tools.specs().to_vec(),
            max_output_tokens: run.output_room,
            temperature: self.limits.temperature,
            reasoning_effort: None,
            // The transcript grows at its end: each step reads the
            // previous ones from the provider's prompt cache.
            cache_system: true,
            json_output: false,
        };
        let asked = Instant::now();
        let response = match tokio::time::timeout(remaining, self.ask(run.steps, &request)).await {
            Err(_) => return Answer::Stop(self.wall_clock()),
            Ok(Err(LlmError::Budget(reason))) => return Answer::WrapUp(reason),
            Ok(Err(err)) => return Answer::Stop(StopReason::Model(err.to_string())),
            Ok(Ok(response)) => response,
        };
        run.usage.add(&response.model, response.usage);
        self.record_turn(run.steps, &response, asked.elapsed());
        if let (true, Some(gate)) = (told, &self.gate) {
            gate.read().await;
        }
        match run.unusable_answer(&response, self.limits.max_output_tokens) {
            Unusable::No => {
                run.unusable = 0;
                Answer::Usable(response)
            }
            Unusable::Retry if run.unusable >= self.limits.max_repeated_failures => {
                Answer::Stop(match response.finish {
                    FinishReason::OutputLimit => StopReason::OutputLimit { times: run.unusable },
                    _ => StopReason::RepeatedFailure {
                        tool: "a tool call the provider could not parse".into(),
                        times: run.unusable,
                    },
                })
            }
            Unusable::Retry => Answer::Retry,
            Unusable::Stop(stop) => Answer::Stop(stop),
        }
    }

    /// Waits, before the first tool runs, for the sandbox to be prepared.
    async fn wait_ready(&self, started: Instant) -> Result<(), StopReason> {
        let Some(ready) = &self.ready else {
            return Ok(());
        };
        let remaining = self.limits.wall_clock.saturating_sub(started.elapsed());
        match tokio::time::timeout(remaining, ready.clone()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(StopReason::NotReady(reason)),
            Err(_) => Err(self.wall_clock()),
        }
    }

    /// Runs the step's tool calls in order and appends their results; a
    /// call past the per-turn cap, or after a stop, is answered unrun.
    async fn run_tools(&self, run: &mut Run, calls: &[ToolCall]) -> Option<StopReason> {
        let mut results = Vec::with_capacity(calls.len());
        let mut stop = None;
        for (index, call) in calls.iter().enumerate() {
            if index >= self.limits.max_tool_calls_per_step || stop.is_some() {
                let why = match &stop {
                    Some(_) => "Not run: the task was stopped.".to_owned(),
                    None => format!(
                        "Not run: at most {} tool calls are run per turn. Make fewer calls at a time.",
                        self.limits.max_tool_calls_per_step
                    ),
                };
                results.push(error_result(call, why));
                continue;
            }
            run.tool_calls += 1;
            let started = Instant::now();
            if let Some(recorder) = &self.recorder {
                recorder.tool_started(run.steps, call);
            }
            let mut result = self.call_tool(call).await;
            if let Some(recorder) = &self.recorder {
                recorder.tool_ran(run.steps, call, &result, started.elapsed());
            }
            // Names the model made up would make the label set unbounded.
            let tool = match self.tools.contains(&call.name) {
                true => call.name.as_str(),
                false => "unknown",
            };
            self.metrics.tool_call(tool, !result.is_error);
            if result.is_error {
                stop = self.count_failure(run, call, &mut result);
            }
            results.push(result);
        }
        run.messages.push(Message::ToolResults(results));
        stop
    }

    /// Counts a failed call: the same call failing again is pointed out to
    /// the model, and stops the run at `agent.max_repeated_failures`.
    fn count_failure(&self, run: &mut Run, call: &ToolCall, result: &mut ToolResult) -> Option<StopReason> {
        let key = (call.name.clone(), canonical_arguments(&call.arguments));
        let times = run.failures.entry(key).or_insert(0);
        *times += 1;
        let limit = self.limits.max_repeated_failures;
        if *times >= limit {
            return Some(StopReason::RepeatedFailure {
                tool: call.name.clone(),
                times: *times,
            });
        }
        if *times > 1 {
            result.content.push_str(&format!(
                "\n\n[forgehand: this exact call has now failed {times} times. Do something different; after {limit} identical failures the task is stopped.]"
            ));
        }
        None
    }

    fn wall_clock(&self) -> StopReason {
        StopReason::WallClock {
            limit: self.limits.wall_clock,
        }
    }
}
