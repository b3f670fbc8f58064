//! One task, from claim to draft PR/MR: the state machine that the daemon
//! (and `forgehand once`) runs for a labelled issue or PR/MR. Every step with
//! an effect outside the daemon is journalled as soon as it is done and is
//! safe to repeat, so a task killed at any point is resumed, never doubled.

pub mod board;
mod change;
mod claim;
mod context;
mod deliver;
mod error;
mod plan;
mod prepare;
pub mod progress;
pub mod request;
pub mod sanitize;
mod snapshot;
mod verify;
pub mod workspace;

use crate::agent::tools::{CommandExecutor, ServerTools, ToolRegistry};
use crate::agent::{Agent, AgentOutcome, ChatModel, StepGate, StopReason};
use crate::config::{Config, Secrets};
use crate::forge::{retry, ChangeInfo, Forge, ForgeError, ForgeKind, Item, ItemKind, ItemRef, TextEdits};
use crate::git::Credentials;
use crate::journal::{Journal, Phase, TaskRecord};
use crate::llm::usage::UsageReport;
use crate::llm::Message;
use crate::mcp::{McpClient, SandboxedServer};
use crate::prompts::Prompts;
use crate::sandbox::{Sandbox, SandboxBackend, SandboxSpec};
use async_trait::async_trait;
use error::{disposition, Disposition, TaskError, Whom};
use progress::{Progress, Step};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use workspace::{Collected, Workspace};

/// What every task needs, shared by all of them.
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
    pub ideas_pacer: Arc<crate::planning::ideas::Pacer>,
    /// This process's hold on the state folder, for as long as tasks run.
    pub state_owner: Arc<crate::ownership::StateOwner>,
    /// The tasks in flight, as the status page shows them.
    pub board: Arc<board::Board>,
}

/// How a task ended (for the daemon's bookkeeping and `once`'s exit code).
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEnd {
    /// Pushed, with a draft PR/MR (or the existing one updated).
    Delivered {
        url: String,
    },
    /// The model finished without changing anything; its answer was posted.
    NoChanges,
    Failed {
        reason: String,
    },
    /// A maintainer removed the processing label.
    Stopped,
    /// The daemon is shutting down; the task resumes at the next start.
    Interrupted,
    /// Nothing to do (closed, or the label was gone by the time of the claim).
    Skipped {
        reason: String,
    },
    /// The forge, the git remote or the Docker engine did not answer even
    /// after retries. The task stays in the journal (the attempt is given
    /// back) and the daemon starts it again later; it resumes where it was.
    Deferred {
        reason: String,
    },
}

impl TaskEnd {
    /// The outcome's name in metrics and on the status page.
    pub fn outcome(&self) -> &'static str {
        match self {
            TaskEnd::Delivered { .. } => "delivered",
            TaskEnd::NoChanges => "no_changes",
            TaskEnd::Failed { .. } => "failed",
            TaskEnd::Stopped => "stopped",
            TaskEnd::Interrupted => "interrupted",
            TaskEnd::Skipped { .. } => "skipped",
            TaskEnd::Deferred { .. } => "deferred",
        }
    }
}

/// Runs (or resumes) the task for `item`.
pub async fn run(
    env: &TaskEnv,
    forge: Arc<dyn Forge>,
    item: ItemRef,
    shutdown: CancellationToken,
) -> TaskEnd {
    let key = item.key();
    let record = match env.journal.begin(&key) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(task = %item, "cannot journal the task, not starting it: {e}");
            return TaskEnd::Failed {
                reason: e.to_string(),
            };
        }
    };
    let mut task = TaskRun {
        env,
        forge,
        item: item.clone(),
        key: key.clone(),
        progress: Progress::new(&item),
        comment_id: record.comment_id,
        usage: None,
        shutdown,
        sandbox: None,
        finish_summary: None,
    };
    tracing::info!(task = %item, attempt = record.attempts, phase = record.phase.as_str(), "task started");
    let started = std::time::Instant::now();
    crate::metrics::global().task_started(item.forge.as_str());
    env.board.set(
        &key,
        board::LiveTask {
            name: item.to_string(),
            web_url: String::new(),
            status: "Claiming".into(),
            started: std::time::SystemTime::now(),
            tokens: 0,
            cost: 0.0,
        },
    );
    let result = if record.attempts > env.config.scheduling.max_task_attempts {
        Err(TaskError::Other(format!(
            "the task was interrupted {} times (daemon.max_task_attempts); not starting it again",
            record.attempts - 1
        )))
    } else {
        // Every log line of the run names the task and its attempt.
        let span = tracing::info_span!("task", key = %task.key, attempt = record.attempts);
        task.execute(&record).instrument(span).await
    };
    let end = match result {
        Ok(end) => end,
        Err(err) => {
            let away = !task.shutdown.is_cancelled() && task.is_outage(&err).await;
            let who = task.forge.who_may_trigger();
            let whom = Whom {
                may_trigger: &who,
                sandbox_operator: env.backend.operator_advice(),
            };
            match disposition(&err, away, &whom) {
                Disposition::Interrupted => {
                    tracing::info!(task = %item, "interrupted by shutdown; it resumes at the next start");
                    task.progress
                        .note("Paused: forgehand is restarting; the task resumes when it is back");
                    task.report().await;
                    TaskEnd::Interrupted
                }
                Disposition::Stopped(reason) => task.stopped(&reason).await,
                Disposition::HandedOver(message) => {
                    tracing::warn!(task = %item, "{message}; stopping, the replica holding the task goes on");
                    TaskEnd::Interrupted
                }
                Disposition::Deferred => task.defer(&err).await,
                Disposition::Failed { advice } => task.fail(&err, &advice).await,
            }
        }
    };
    task.remove_sandbox().await;
    if !matches!(end, TaskEnd::Interrupted | TaskEnd::Deferred { .. }) {
        let dir = task.work_dir();
        if dir.exists() {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(task = %item, "cannot remove the work folder {}: {e}", dir.display());
            }
        }
    }
    tracing::info!(task = %item, "task ended: {end:?}");
    crate::metrics::global().task_ended(end.outcome(), started.elapsed());
    env.board.remove(&item.key());
    end
}

struct TaskRun<'a> {
    env: &'a TaskEnv,
    forge: Arc<dyn Forge>,
    item: ItemRef,
    key: String,
    progress: Progress,
    comment_id: Option<u64>,
    usage: Option<UsageReport>,
    shutdown: CancellationToken,
    /// The sandbox to remove when the task ends, however it ends; the
    /// phases that use it get it from the one that made it.
    sandbox: Option<Arc<dyn Sandbox>>,
    /// The model's answer when it changed nothing.
    finish_summary: Option<String>,
}

/// Whose text of the thread the model may see.
pub(super) struct Thread {
    pub author: Heard,
    /// Each comment with whether its author may trigger tasks.
    pub comments: Vec<(crate::forge::Comment, bool)>,
}

/// Whether the item's own title and body reach the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    /// The author may trigger tasks.
    Member,
    /// An outsider's text, vouched for by the maintainer who labelled it
    /// (unchanged since the label).
    Vouched { by: String },
    /// Withheld, with the reason for the progress comment.
    Withheld { why: String },
}

/// Where the work goes: the branch, what it is based on, and the PR/MR when
/// the task is one.
struct Target {
    branch: String,
    base: String,
    /// The repository's default branch: settings and instructions are read
    /// from it alone (a PR's author chooses the branch it targets).
    default_branch: String,
    change: Option<ChangeInfo>,
    clone_url: String,
}

impl TaskRun<'_> {
    pub(super) fn labels(&self) -> &crate::config::LabelsConfig {
        &self.env.config.labels
    }

    pub(super) fn work_dir(&self) -> PathBuf {
        self.env
            .config
            .daemon
            .state_dir
            .join("work")
            .join(self.item.slug())
    }

    /// Edits the progress comment; a failure is logged, never fatal.
    pub(super) async fn report(&self) {
        let (tokens, cost) = match &self.usage {
            Some(u) => (u.total().total(), u.estimated_cost().0),
            None => (0, 0.0),
        };
        self.env.board.update(&self.key, |line| {
            line.status = self.progress.status().to_owned();
            line.tokens = tokens;
            line.cost = cost;
        });
        if self.env.echo_progress {
            eprintln!("[{}] {}", self.item, self.progress.status());
        }
        let Some(id) = self.comment_id else { return };
        let body = self.env.secrets.scrub(&self.progress.render());
        if let Err(e) = self.forge.edit_comment(&self.item, id, &body).await {
            tracing::warn!(task = %self.item, "cannot update the progress comment: {e}");
        }
    }

    /// Whether `err` comes from something outside being away. A sandbox
    /// error of any kind counts when the engine does not answer a ping
    /// (a copy cut off by an engine restart reads as a broken pipe).
    async fn is_outage(&self, err: &TaskError) -> bool {
        err.is_outage() || (matches!(err, TaskError::Sandbox(_)) && self.env.backend.ping().await.is_err())
    }

    /// Leaves the task for later: the progress comment says why (if the
    /// forge takes the edit), the journal keeps it unfinished.
    async fn defer(&mut self, err: &TaskError) -> TaskEnd {
        let reason = self.env.secrets.scrub(&err.to_string());
        tracing::warn!(task = %self.item, "deferred, will be tried again: {reason}");
        self.progress
            .note(format!("Waiting: {reason}; forgehand tries again shortly"));
        self.report().await;
        if let Err(e) = self.env.journal.give_back_attempt(&self.key) {
            tracing::warn!(task = %self.item, "cannot journal the deferral: {e}");
        }
        TaskEnd::Deferred { reason }
    }

    pub(super) async fn fail(&mut self, err: &TaskError, advice: &str) -> TaskEnd {
        let reason = self.env.secrets.scrub(&err.to_string());
        tracing::error!(task = %self.item, "task failed: {reason}");
        let mut text = format!(
            "**Failed.** {reason}\n\n**What you can do:** {}\n{}",
            advice,
            self.usage_line()
        );
        if let TaskError::TestsFailed { section, .. } = err {
            text.push_str(&format!("\n{}\n", self.env.secrets.scrub(section)));
        }
        if let TaskError::SetupFailed(failed) = err {
            if !failed.tail.trim().is_empty() {
                text.push_str(&format!(
                    "\n<details><summary>The end of the setup's output</summary>\n\n{}\n\n</details>\n",
                    verify::fenced(&self.env.secrets.scrub(&failed.tail))
                ));
            }
        }
        if self.comment_id.is_none() {
            // Failed before the claim finished: post the failure as the progress comment.
            if let Err(e) = self.ensure_comment().await {
                tracing::warn!(task = %self.item, "cannot post the failure comment: {e}");
            }
        }
        self.progress.finish(false, "Failed", text);
        self.report().await;
        let labels = self.labels().clone();
        if let Err(e) = self
            .forge
            .edit_labels(
                &self.item,
                &[labels.failed.as_str()],
                &[labels.processing.as_str()],
            )
            .await
        {
            tracing::warn!(task = %self.item, "cannot set the failed label: {e}");
        }
        if let Err(e) = self.env.journal.finish(&self.key, Phase::Failed, &reason) {
            tracing::error!(task = %self.item, "cannot journal the failure: {e}");
        }
        TaskEnd::Failed { reason }
    }

    pub(super) async fn stopped(&mut self, reason: &str) -> TaskEnd {
        tracing::info!(task = %self.item, "task stopped: {reason}");
        let text = format!(
            "**Stopped.** {reason}. Nothing was pushed.\n{}",
            self.usage_line()
        );
        self.progress.finish(false, "Stopped", text);
        self.report().await;
        let labels = self.labels().clone();
        if let Err(e) = self
            .forge
            .edit_labels(&self.item, &[], &[labels.paused.as_str()])
            .await
        {
            tracing::warn!(task = %self.item, "cannot clear the paused label: {e}");
        }
        if let Err(e) = self.env.journal.finish(&self.key, Phase::Stopped, reason) {
            tracing::error!(task = %self.item, "cannot journal the stop: {e}");
        }
        TaskEnd::Stopped
    }

    pub(super) fn usage_line(&self) -> String {
        match &self.usage {
            Some(usage) => {
                let total = usage.total();
                let (cost, _) = usage.estimated_cost();
                format!(
                    "\nTokens: {} input + {} output, estimated cost ${cost:.4}.\n",
                    total.input_tokens, total.output_tokens
                )
            }
            None => String::new(),
        }
    }

    /// Adds model use outside the agent loop (classification, ideas,
    /// planning) to the task's report.
    pub(super) fn merge_usage(&mut self, usage: &UsageReport) {
        match &mut self.usage {
            Some(total) => total.merge(usage),
            None => self.usage = Some(usage.clone()),
        }
    }

    pub(super) async fn remove_sandbox(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            crate::metrics::global().sandbox_removed();
            if let Err(e) = sandbox.remove().await {
                tracing::warn!(task = %self.item, "cannot remove the sandbox: {e}");
            }
            if let Err(e) = self.env.journal.set_container(&self.key, None) {
                tracing::warn!(task = %self.item, "cannot journal the sandbox removal: {e}");
            }
        }
    }
}

/// `#12` for GitHub and GitLab issues (both link it); `!12` for a GitLab MR.
fn issue_ref(item: &ItemRef) -> String {
    match (item.forge, item.kind) {
        (ForgeKind::GitLab, ItemKind::Change) => format!("!{}", item.number),
        _ => format!("#{}", item.number),
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The task's host-side git work ([`Workspace`]), held by the task and
/// used from async code: each operation runs on a blocking thread, under
/// the handle's lock, so the async threads never wait on git.
struct WorkspaceHandle {
    inner: Arc<std::sync::Mutex<Workspace>>,
    checkout: PathBuf,
    git_dir: PathBuf,
    branch: String,
}

impl WorkspaceHandle {
    fn new(ws: Workspace) -> WorkspaceHandle {
        WorkspaceHandle {
            checkout: ws.checkout_dir(),
            git_dir: ws.git_dir(),
            branch: ws.branch.clone(),
            inner: Arc::new(std::sync::Mutex::new(ws)),
        }
    }

    /// Runs `f` on the workspace off the async threads.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Workspace) -> T + Send + 'static,
    ) -> Result<T, TaskError> {
        let inner = self.inner.clone();
        blocking(move || f(&mut inner.lock().unwrap_or_else(|p| p.into_inner()))).await
    }

    /// The trusted clone's working tree (read, never run).
    fn checkout_dir(&self) -> &std::path::Path {
        &self.checkout
    }

    /// Its git folder (copied into the sandbox when the remote moved).
    fn git_dir(&self) -> &std::path::Path {
        &self.git_dir
    }

    /// The task branch.
    fn branch(&self) -> &str {
        &self.branch
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, TaskError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TaskError::Other(format!("a background job failed: {e}")))
}
