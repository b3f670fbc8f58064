//! The agent's session over the task's sandbox: the system prompt, the
//! tools and the MCP servers behind them, opened by the change phase and
//! kept for the rounds after it (tests' fix rounds, checks' fix rounds).

use crate::agent::{Agent, AgentOutcome};
use crate::llm::Message;
use crate::mcp::SandboxedServer;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use std::sync::Arc;
use tokio_util::task::AbortOnDropHandle;

/// The agent's session over the sandbox: its system prompt, its tools and
/// the servers behind them.
pub(in crate::task) struct Session {
    pub(in crate::task) agent: Agent,
    pub(in crate::task) system: String,
    pub(in crate::task) servers: Vec<Arc<SandboxedServer>>,
    /// Whether the paused label suspends the run (it goes on from its last
    /// checkpoint later) rather than holding it in place: only while steps
    /// are checkpointed.
    pub(in crate::task) suspendable: Arc<std::sync::atomic::AtomicBool>,
    /// Edits the comment as the model updates the plan's checklist.
    pub(in crate::task) _checklist_updates: Option<AbortOnDropHandle<()>>,
}

impl Session {
    /// Goes on with `messages` (the conversation so far and what is asked
    /// now); the run's usage grows, and a stopped run stops the task.
    pub async fn resume(
        &self,
        run: &mut TaskRun<'_>,
        messages: Vec<Message>,
    ) -> Result<AgentOutcome, TaskError> {
        self.resume_from(run, crate::agent::Start::new(messages)).await
    }

    /// Goes on from `start` (a checkpoint's conversation and steps).
    pub async fn resume_from(
        &self,
        run: &mut TaskRun<'_>,
        start: crate::agent::Start,
    ) -> Result<AgentOutcome, TaskError> {
        let outcome = self.agent.run_from(&self.system, start).await;
        run.add_usage(&outcome.usage);
        run.check_halt(&outcome)?;
        Ok(outcome)
    }

    /// Ends the servers' sessions.
    pub async fn close(self) {
        for server in self.servers {
            server.shutdown().await;
        }
    }
}
