//! What a task runs with: the daemon's shared parts, and the task's own books.

use crate::agent::ChatModel;
use crate::config::{Config, Secrets};
use crate::journal::Journal;
use crate::prompts::Prompts;
use crate::sandbox::SandboxBackend;
use crate::task::report::board;
use crate::task::workbench::start_sandbox::SandboxHints;
use std::sync::Arc;

/// What every task needs, shared by all of them.
#[derive(Clone)]
pub struct TaskEnv {
    pub config: Arc<Config>,
    pub secrets: Arc<Secrets>,
    pub backend: Arc<dyn SandboxBackend>,
    pub model: Arc<dyn ChatModel>,
    pub prompts: Arc<Prompts>,
    pub journal: Arc<Journal>,
    /// Print each progress update on stderr (`forgehand once`).
    pub echo_progress: bool,
    /// Spaces the idea-option calls of every task (one key, one limit).
    pub ideas_pacer: Arc<crate::ideas::Pacer>,
    /// This process's hold on the state folder, for as long as tasks run.
    pub state_owner: Arc<crate::ownership::StateOwner>,
    /// The tasks in flight, as the status page shows them.
    pub board: Arc<board::Board>,
    /// The runs in flight, for their live transcript pages.
    pub live: Arc<crate::transcript::LiveRuns>,
    /// The daemon's metrics.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// What each repository's last task ran its sandbox with.
    pub sandbox_hints: Arc<SandboxHints>,
}

/// A task's own books: its spending and its run's transcript.
pub(super) struct Accounts {
    pub spend: Arc<crate::budget::Spend>,
    pub transcript: Option<Arc<crate::transcript::Transcript>>,
}
