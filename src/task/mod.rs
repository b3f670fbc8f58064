//! One task, from claim to draft PR/MR: the state machine that the daemon
//! (and `forgehand once`) runs for a labelled issue or PR/MR. Every step with
//! an effect outside the daemon is journalled as soon as it is done and is
//! safe to repeat, so a task killed at any point is resumed, never doubled.

pub mod progress;
pub mod request;
pub mod sanitize;
pub mod workspace;

use crate::agent::prompts::Prompts;
use crate::agent::tools::{CommandExecutor, ServerTools, ToolRegistry};
use crate::agent::{Agent, AgentOutcome, ChatModel, StepGate, StopReason};
use crate::config::{Config, Secrets};
use crate::daemon::journal::{Journal, JournalError, Phase, TaskRecord};
use crate::forge::{ChangeInfo, Forge, ForgeError, ForgeKind, Item, ItemKind, ItemRef};
use crate::git::Credentials;
use crate::llm::usage::UsageReport;
use crate::llm::Message;
use crate::mcp::{McpClient, SandboxedServer};
use crate::sandbox::{Sandbox, SandboxBackend, SandboxError, SandboxSpec};
use async_trait::async_trait;
use progress::{Progress, Step};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use workspace::{Collected, DeliveryError, Workspace};

/// What every task needs, shared by all of them.
pub struct TaskEnv {
    pub config: Arc<Config>,
    pub secrets: Arc<Secrets>,
    pub backend: Arc<dyn SandboxBackend>,
    pub model: Arc<dyn ChatModel>,
    pub prompts: Prompts,
    pub journal: Arc<Journal>,
    /// Print each progress update on stderr (`forgehand once`).
    pub echo_progress: bool,
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
}

#[derive(Debug, thiserror::Error)]
enum TaskError {
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("{0}")]
    Other(String),
    /// Not a failure: the daemon is stopping.
    #[error("interrupted by shutdown")]
    Shutdown,
    #[error("stopped: {0}")]
    Stopped(String),
}

impl From<crate::git::GitError> for TaskError {
    fn from(e: crate::git::GitError) -> Self {
        TaskError::Delivery(DeliveryError::Git(e))
    }
}

/// What the maintainer can do about a failure, by its kind.
fn advice(err: &TaskError) -> &'static str {
    match err {
        TaskError::Forge(ForgeError::Auth { .. }) | TaskError::Delivery(DeliveryError::Git(crate::git::GitError::Auth { .. })) => {
            "Check that forgehand's token may read and write this repository, then add the trigger label again."
        }
        TaskError::Delivery(DeliveryError::Protected { .. }) => {
            "Make that change by hand, or let an operator allow it (delivery.allow_protected_paths), then add the trigger label again."
        }
        TaskError::Sandbox(_) => "An operator should check the Docker engine (`forgehand doctor`); then add the trigger label again.",
        _ => "Add the trigger label again to retry; if it fails the same way, give more detail in a comment or ask an operator to look at the daemon's log.",
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
        key,
        progress: Progress::new(&item),
        comment_id: record.comment_id,
        usage: None,
        shutdown,
        sandbox: None,
        finish_summary: None,
    };
    tracing::info!(task = %item, attempt = record.attempts, phase = record.phase.as_str(), "task started");
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
        Err(TaskError::Shutdown) => {
            tracing::info!(task = %item, "interrupted by shutdown; it resumes at the next start");
            task.progress
                .note("Paused: forgehand is restarting; the task resumes when it is back");
            task.report().await;
            TaskEnd::Interrupted
        }
        Err(TaskError::Stopped(reason)) => task.stopped(&reason).await,
        Err(err) => task.fail(&err).await,
    };
    task.remove_sandbox().await;
    if !matches!(end, TaskEnd::Interrupted) {
        let dir = task.work_dir();
        if dir.exists() {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(task = %item, "cannot remove the work folder {}: {e}", dir.display());
            }
        }
    }
    tracing::info!(task = %item, "task ended: {end:?}");
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
    sandbox: Option<Arc<dyn Sandbox>>,
    /// The model's answer when it changed nothing.
    finish_summary: Option<String>,
}

/// Whether the item's author may be heard, and each comment with the same.
type Thread = (bool, Vec<(crate::forge::Comment, bool)>);

/// Where the work goes: the branch, what it is based on, and the PR/MR when
/// the task is one.
struct Target {
    branch: String,
    base: String,
    change: Option<ChangeInfo>,
    clone_url: String,
}

impl TaskRun<'_> {
    fn labels(&self) -> &crate::config::LabelsConfig {
        &self.env.config.labels
    }

    fn work_dir(&self) -> PathBuf {
        self.env
            .config
            .daemon
            .state_dir
            .join("work")
            .join(self.item.slug())
    }

    async fn execute(&mut self, record: &TaskRecord) -> Result<TaskEnd, TaskError> {
        // Claim: idempotent label swap, then read back.
        let labels = self.labels().clone();
        self.forge
            .edit_labels(
                &self.item,
                &[labels.processing.as_str()],
                &[
                    labels.trigger.as_str(),
                    labels.done.as_str(),
                    labels.failed.as_str(),
                ],
            )
            .await?;
        let item = self.forge.item(&self.item).await?;
        if !item.open {
            self.forge
                .edit_labels(&self.item, &[], &[labels.processing.as_str()])
                .await?;
            self.env
                .journal
                .finish(&self.key, Phase::Stopped, "closed before work began")?;
            return Ok(TaskEnd::Skipped {
                reason: "the item is closed".into(),
            });
        }
        if !item.has_label(&labels.processing) {
            return Err(TaskError::Other(format!(
                "the label \"{}\" did not stick after claiming; check that it exists and the token may set labels",
                labels.processing
            )));
        }
        // Independent reads and the comment at once: each is a forge round trip.
        let (comment, target, thread) =
            tokio::join!(self.locate_comment(), self.target(&item), self.thread(&item));
        let comment = match comment? {
            Some(id) => id,
            None => {
                self.progress.at(Step::Claim, "Claimed");
                let body = self.env.secrets.scrub(&self.progress.render());
                self.forge.create_comment(&self.item, &body).await?
            }
        };
        self.comment_id = Some(comment);
        self.env.journal.set_comment(&self.key, comment)?;
        let target = target?;
        self.env.journal.set_branch(&self.key, &target.branch)?;
        self.progress.set_branch(&target.branch);
        self.progress.at(Step::Workspace, "Preparing the workspace");

        let summary = if record.phase >= Phase::Pushed {
            tracing::info!(task = %self.item, "already pushed before a restart; opening or finding the PR/MR");
            self.report().await;
            record.outcome.clone().unwrap_or_default()
        } else {
            match self.work(&item, &target, thread?).await? {
                Some(summary) => summary,
                None => return self.no_changes().await,
            }
        };
        self.deliver(&item, &target, &summary).await
    }

    /// The progress comment: the journalled one, else one carrying this
    /// task's marker (posted before a restart), else `None`.
    async fn locate_comment(&self) -> Result<Option<u64>, TaskError> {
        if let Some(id) = self.comment_id {
            return Ok(Some(id));
        }
        let marker = progress::marker(&self.item);
        let existing = self.forge.comments(&self.item).await?;
        let found = existing
            .iter()
            .rev()
            .find(|c| c.body.contains(&marker))
            .map(|c| c.id);
        if let Some(id) = found {
            tracing::info!(task = %self.item, comment = id, "continuing the existing progress comment");
        }
        Ok(found)
    }

    /// Makes sure there is a progress comment (used when failing early).
    async fn ensure_comment(&mut self) -> Result<(), TaskError> {
        let id = match self.locate_comment().await? {
            Some(id) => id,
            None => {
                let body = self.env.secrets.scrub(&self.progress.render());
                self.forge.create_comment(&self.item, &body).await?
            }
        };
        self.comment_id = Some(id);
        self.env.journal.set_comment(&self.key, id)?;
        Ok(())
    }

    /// Edits the progress comment; a failure is logged, never fatal.
    async fn report(&self) {
        if self.env.echo_progress {
            eprintln!("[{}] {}", self.item, self.progress.status());
        }
        let Some(id) = self.comment_id else { return };
        let body = self.env.secrets.scrub(&self.progress.render());
        if let Err(e) = self.forge.edit_comment(&self.item, id, &body).await {
            tracing::warn!(task = %self.item, "cannot update the progress comment: {e}");
        }
    }

    async fn target(&self, item: &Item) -> Result<Target, TaskError> {
        let repo = self.forge.repository(&self.item.repo).await?;
        match self.item.kind {
            ItemKind::Issue => Ok(Target {
                branch: format!(
                    "{}issue-{}",
                    self.env.config.delivery.branch_prefix, item.reference.number
                ),
                base: repo.default_branch,
                change: None,
                clone_url: repo.clone_url,
            }),
            ItemKind::Change => {
                let change = self.forge.change(&self.item).await?;
                if !change.same_repo {
                    return Err(TaskError::Other(
                        "this pull/merge request comes from a fork; forgehand can only push to branches of the repository itself".into(),
                    ));
                }
                Ok(Target {
                    branch: change.source_branch.clone(),
                    base: change.target_branch.clone(),
                    change: Some(change),
                    clone_url: repo.clone_url,
                })
            }
        }
    }

    /// Workspace, sandbox, agent, push. `None`: the model changed nothing.
    async fn work(
        &mut self,
        item: &Item,
        target: &Target,
        thread: Thread,
    ) -> Result<Option<String>, TaskError> {
        let config = &self.env.config;
        let credentials = self.forge.git_credentials().await?;
        let mut ws = {
            let (root, url, base, branch, creds) = (
                self.work_dir(),
                target.clone_url.clone(),
                target.base.clone(),
                target.branch.clone(),
                credentials.clone(),
            );
            let author = (
                config.delivery.author_name.clone(),
                config.delivery.author_email.clone(),
            );
            // For a PR/MR task the branch exists remotely and is checked out from there.
            let clone_branch = if target.change.is_some() {
                branch.clone()
            } else {
                base
            };
            let clone = blocking(move || {
                Workspace::prepare(
                    &root,
                    &url,
                    &clone_branch,
                    &branch,
                    &creds,
                    (&author.0, &author.1),
                )
            });
            // The comment says what happens while the clone runs.
            let (cloned, ()) = tokio::join!(clone, self.report());
            cloned??
        };
        let image = crate::images::image_for_repository(&config.images, &self.item.repo, &ws.checkout_dir());
        let spec = SandboxSpec {
            task_id: self.item.slug(),
            forge: self.item.forge.as_str().to_owned(),
            repository: self.item.repo.clone(),
            image: image.clone(),
        };
        self.progress.note(format!("Sandbox from image `{image}`"));
        let sandbox: Arc<dyn Sandbox> =
            Arc::from(self.env.backend.prepare(&spec, Some(&ws.checkout_dir())).await?);
        self.env.journal.set_container(&self.key, Some(sandbox.id()))?;
        self.env.journal.set_phase(&self.key, Phase::Working)?;
        self.sandbox = Some(sandbox.clone());

        let (tools, editor_enabled, servers) = self.tools(sandbox.clone()).await?;
        let setting = request::Setting {
            branch: &target.branch,
            base: &target.base,
            project_dir: sandbox.project_dir(),
        };
        let request_text = request::build(item, thread.0, &thread.1, &setting);
        let system = self.env.prompts.system_prompt(editor_enabled);
        self.progress
            .at(Step::Change, "Working: the model is making the change");
        let gate = Arc::new(LabelGate {
            forge: self.forge.clone(),
            item: self.item.clone(),
            labels: self.labels().clone(),
            shutdown: self.shutdown.clone(),
            poll: config.scheduling.poll_interval,
            comment: self
                .comment_id
                .map(|id| (id, std::sync::Mutex::new(self.progress.clone()))),
            secrets: self.env.secrets.clone(),
        });
        let mut agent_limits = config.agent.limits.clone();
        agent_limits.max_output_tokens = config.llm.max_output_tokens;
        let agent = Agent::new(
            self.env.model.clone(),
            tools,
            agent_limits,
            config.llm.prices.clone(),
        )
        .with_gate(gate);
        self.report().await;
        let mut outcome = agent.run(&system, vec![Message::User(request_text)]).await;
        self.add_usage(&outcome);
        self.check_halt(&outcome)?;

        let protected = if config.delivery.allow_protected_paths {
            Vec::new()
        } else {
            config.delivery.protected_paths.clone()
        };
        let mut summary = outcome.answer.clone().unwrap_or_default();
        let mut round = 0;
        loop {
            round += 1;
            let (back, collected) = self.collect(ws, sandbox.as_ref(), round, &protected).await?;
            ws = back;
            let collected = collected?;
            let Some(collected) = collected else {
                if round == 1 {
                    if let StopReason::Answered = outcome.stop {
                        self.progress.note("The model finished without changing any file");
                        self.finish_summary = Some(summary.clone());
                        for s in servers {
                            s.shutdown().await;
                        }
                        return Ok(None);
                    }
                    return Err(TaskError::Other(format!(
                        "the model made no change and {}",
                        outcome.stop
                    )));
                }
                return Err(TaskError::Other(
                    "after the rebase the branch holds no change any more".into(),
                ));
            };
            if !collected.other_branches.is_empty() {
                self.progress.note(format!(
                    "Not pushed: other branches the model changed ({})",
                    collected.other_branches.join(", ")
                ));
            }
            self.progress.at(
                Step::Push,
                format!("Pushing {} commit(s) to `{}`", collected.commits, target.branch),
            );
            self.report().await;
            let (back, pushed) = {
                let creds = credentials.clone();
                on_workspace(ws, move |ws| ws.push(&creds)).await?
            };
            ws = back;
            match pushed {
                Ok(()) => {
                    self.progress.note(format!(
                        "Pushed `{}` ({} files changed)",
                        target.branch,
                        collected.files.len()
                    ));
                    break;
                }
                Err(crate::git::GitError::Rejected { reason, .. })
                    if round < config.delivery.max_push_attempts =>
                {
                    tracing::info!(task = %self.item, "push rejected ({reason}); asking the model to rebase");
                    self.progress.note(format!(
                        "Push rejected ({reason}); rebasing onto the new remote branch"
                    ));
                    self.report().await;
                    let (back, upstream_ref) =
                        self.deliver_upstream(ws, sandbox.as_ref(), &credentials).await?;
                    ws = back;
                    let mut messages = outcome.messages.clone();
                    messages.push(Message::User(request::rebase_request(
                        &target.branch,
                        &upstream_ref,
                    )));
                    outcome = agent.run(&system, messages).await;
                    self.add_usage(&outcome);
                    self.check_halt(&outcome)?;
                    if let Some(answer) = &outcome.answer {
                        if summary.trim().is_empty() {
                            summary = answer.clone();
                        }
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        for s in servers {
            s.shutdown().await;
        }
        if summary.trim().is_empty() {
            summary = format!("The run ended: {}.", outcome.stop);
        } else if outcome.stop != StopReason::Answered {
            summary.push_str(&format!("\n\n(The run ended early: {}.)", outcome.stop));
        }
        self.env.journal.set_phase(&self.key, Phase::Pushed)?;
        self.env.journal.set_summary(&self.key, &summary)?;
        Ok(Some(summary))
    }

    fn add_usage(&mut self, outcome: &AgentOutcome) {
        match &mut self.usage {
            None => self.usage = Some(outcome.usage.clone()),
            Some(total) => {
                for (model, u) in outcome.usage.per_model() {
                    total.add(model, *u);
                }
            }
        }
    }

    fn check_halt(&self, outcome: &AgentOutcome) -> Result<(), TaskError> {
        match &outcome.stop {
            StopReason::Halted(_) if self.shutdown.is_cancelled() => Err(TaskError::Shutdown),
            StopReason::Halted(reason) => Err(TaskError::Stopped(reason.clone())),
            _ => Ok(()),
        }
    }

    /// The editor, the command executor and the configured MCP servers.
    async fn tools(
        &mut self,
        sandbox: Arc<dyn Sandbox>,
    ) -> Result<(ToolRegistry, bool, Vec<Arc<SandboxedServer>>), TaskError> {
        let config = &self.env.config;
        let mut editor: Option<Arc<dyn McpClient>> = None;
        let mut started = Vec::new();
        if config.text_editor_mcp.enabled {
            match crate::mcp::text_editor::start(sandbox.clone(), &config.text_editor_mcp).await {
                Ok(server) => {
                    let server = Arc::new(server);
                    started.push(server.clone());
                    editor = Some(server);
                }
                Err(e) => {
                    // Seed §12.1.1: log, go on without the editor, and say so on the issue.
                    tracing::error!(task = %self.item, "text editor unavailable: {e}");
                    self.progress.note(format!(
                        "The text editor could not start ({e}); working with the command executor only"
                    ));
                }
            }
        }
        let mut servers = Vec::new();
        for server in &config.mcp_servers {
            match SandboxedServer::start(
                server.name.clone(),
                sandbox.clone(),
                server.command.clone(),
                Duration::from_secs(30),
                config.text_editor_mcp.call_timeout,
                1,
            )
            .await
            {
                Ok(s) => {
                    let s = Arc::new(s);
                    started.push(s.clone());
                    servers.push(ServerTools {
                        client: s,
                        allowed_tools: server.allowed_tools.clone(),
                        excluded_tools: server.excluded_tools.clone(),
                    });
                }
                Err(e) => {
                    tracing::error!(task = %self.item, server = %server.name, "MCP server unavailable: {e}");
                    self.progress
                        .note(format!("MCP server `{}` could not start: {e}", server.name));
                }
            }
        }
        let executor: Arc<dyn CommandExecutor> = Arc::new(sandbox);
        let editor_enabled = editor.is_some();
        let registry = ToolRegistry::build(editor, Some(executor), servers)
            .await
            .map_err(|e| TaskError::Other(format!("cannot list the tools: {e}")))?;
        Ok((registry, editor_enabled, started))
    }

    /// The item's thread with each author's right to be heard.
    async fn thread(&self, item: &Item) -> Result<Thread, TaskError> {
        let mut trusted: HashMap<String, bool> = HashMap::new();
        let check = |user: String| {
            let forge = self.forge.clone();
            let repo = self.item.repo.clone();
            async move { (user.clone(), forge.may_trigger(&repo, &user).await) }
        };
        let (author, allowed) = check(item.author.clone()).await;
        let author_trusted = allowed?;
        trusted.insert(author, author_trusted);
        let comments = self.forge.comments(&self.item).await?;
        let mut out = Vec::with_capacity(comments.len());
        for c in comments {
            let ok = match trusted.get(&c.author) {
                Some(ok) => *ok,
                None => {
                    let (user, allowed) = check(c.author.clone()).await;
                    let ok = allowed?;
                    trusted.insert(user, ok);
                    ok
                }
            };
            out.push((c, ok));
        }
        Ok((author_trusted, out))
    }

    /// Commits leftovers in the sandbox, copies the repository out and takes the result.
    async fn collect(
        &self,
        ws: Workspace,
        sandbox: &dyn Sandbox,
        round: u32,
        protected: &[String],
    ) -> Result<(Workspace, Result<Option<Collected>, TaskError>), TaskError> {
        let message = format!("forgehand: commit changes left uncommitted for {}", self.item);
        let project = sandbox.project_dir().to_owned();
        let out_dir = match ws.fresh_out_dir(round) {
            Ok(dir) => dir,
            Err(e) => return Ok((ws, Err(e.into()))),
        };
        // Commit inside the sandbox when it has git, then only .git needs to come out.
        let committed = sandbox
            .exec(
                &format!(
                    "git add -A && (git diff --cached --quiet || git -c user.name={} -c user.email={} commit -q -m {})",
                    shell_quote(&self.env.config.delivery.author_name),
                    shell_quote(&self.env.config.delivery.author_email),
                    shell_quote(&message)
                ),
                Some(Duration::from_secs(300)),
            )
            .await
            .map(|o| o.success())
            .unwrap_or(false);
        if committed {
            if let Err(e) = sandbox
                .copy_out(&format!("{project}/.git"), &out_dir.join(".git"))
                .await
            {
                return Ok((ws, Err(e.into())));
            }
        } else {
            tracing::info!(task = %self.item, "git did not run in the sandbox; copying the whole project out");
            if let Err(e) = sandbox.copy_out(&project, &out_dir).await {
                return Ok((ws, Err(e.into())));
            }
        }
        let author = (
            self.env.config.delivery.author_name.clone(),
            self.env.config.delivery.author_email.clone(),
        );
        let protected = protected.to_vec();
        let (ws, collected) = on_workspace(ws, move |ws| {
            ws.collect(&out_dir, !committed, &message, (&author.0, &author.1), &protected)
        })
        .await?;
        Ok((ws, collected.map_err(TaskError::from)))
    }

    /// Puts the moved upstream branch into the sandbox as `origin/<branch>`.
    async fn deliver_upstream(
        &self,
        ws: Workspace,
        sandbox: &dyn Sandbox,
        credentials: &Credentials,
    ) -> Result<(Workspace, String), TaskError> {
        let creds = credentials.clone();
        let (ws, fetched) = on_workspace(ws, move |ws| ws.fetch_upstream(&creds)).await?;
        fetched?;
        let workspace_dir = &self.env.config.sandbox.workspace_dir;
        let upstream_dir = format!("{}/upstream.git", workspace_dir.trim_end_matches('/'));
        sandbox.copy_in(&ws.git_dir(), &upstream_dir).await?;
        let upstream_ref = format!("origin/{}", ws.branch);
        let fetched = sandbox
            .exec(
                &format!(
                    "git fetch -q {} {}",
                    shell_quote(&upstream_dir),
                    shell_quote(&format!(
                        "+refs/remotes/origin/{b}:refs/remotes/origin/{b}",
                        b = ws.branch
                    ))
                ),
                Some(Duration::from_secs(300)),
            )
            .await?;
        if !fetched.success() {
            return Err(TaskError::Other(format!(
                "cannot bring the new upstream into the sandbox: {}",
                fetched.stderr.trim()
            )));
        }
        Ok((ws, upstream_ref))
    }

    async fn deliver(&mut self, item: &Item, target: &Target, summary: &str) -> Result<TaskEnd, TaskError> {
        let change = match &target.change {
            Some(change) => change.clone(),
            None => {
                self.progress.at(Step::Review, "Opening the draft for review");
                let existing = self
                    .forge
                    .find_open_change(&self.item.repo, &target.branch)
                    .await?;
                match existing {
                    Some(found) => {
                        tracing::info!(task = %self.item, url = %found.web_url, "the PR/MR already exists");
                        found
                    }
                    None => {
                        let title = sanitize::for_model(&item.title);
                        let title = format!("{} ({})", title.trim(), issue_ref(&self.item));
                        let body = self.env.secrets.scrub(&format!(
                            "{}\n\nCloses {}\n\n---\nMade by forgehand for {}.",
                            summary.trim(),
                            issue_ref(&self.item),
                            item.web_url
                        ));
                        self.forge
                            .create_draft_change(&self.item.repo, &target.branch, &target.base, &title, &body)
                            .await?
                    }
                }
            }
        };
        self.env.journal.set_change(&self.key, &change.web_url)?;
        self.env.journal.set_phase(&self.key, Phase::Delivered)?;
        let noun = match self.item.forge {
            ForgeKind::GitHub => "pull request",
            ForgeKind::GitLab => "merge request",
        };
        let mut outcome = format!("**Done.** Draft {noun}: {}\n", change.web_url);
        if !summary.trim().is_empty() {
            outcome.push_str(&format!("\n**Summary**\n\n{}\n", summary.trim()));
        }
        outcome.push_str(&self.usage_line());
        self.progress.finish(true, "Done", outcome);
        self.report().await;
        let labels = self.labels().clone();
        self.forge
            .edit_labels(&self.item, &[labels.done.as_str()], &[labels.processing.as_str()])
            .await?;
        self.env.journal.finish(&self.key, Phase::Done, &change.web_url)?;
        Ok(TaskEnd::Delivered { url: change.web_url })
    }

    async fn no_changes(&mut self) -> Result<TaskEnd, TaskError> {
        let answer = self.finish_summary.take().unwrap_or_default();
        let mut outcome = "**Done without changes.** The model did not change any file.\n".to_owned();
        if !answer.trim().is_empty() {
            outcome.push_str(&format!("\n**Answer**\n\n{}\n", answer.trim()));
        }
        outcome.push_str(&self.usage_line());
        self.progress.finish(false, "Done (no changes)", outcome);
        self.report().await;
        let labels = self.labels().clone();
        self.forge
            .edit_labels(&self.item, &[labels.done.as_str()], &[labels.processing.as_str()])
            .await?;
        self.env.journal.finish(&self.key, Phase::Done, "no changes")?;
        Ok(TaskEnd::NoChanges)
    }

    async fn fail(&mut self, err: &TaskError) -> TaskEnd {
        let reason = self.env.secrets.scrub(&err.to_string());
        tracing::error!(task = %self.item, "task failed: {reason}");
        let text = format!(
            "**Failed.** {reason}\n\n**What you can do:** {}\n{}",
            advice(err),
            self.usage_line()
        );
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

    async fn stopped(&mut self, reason: &str) -> TaskEnd {
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

    fn usage_line(&self) -> String {
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

    async fn remove_sandbox(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
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

/// Runs blocking git work on the workspace off the async threads and hands the workspace back.
async fn on_workspace<T: Send + 'static>(
    mut ws: Workspace,
    f: impl FnOnce(&mut Workspace) -> T + Send + 'static,
) -> Result<(Workspace, T), TaskError> {
    blocking(move || {
        let out = f(&mut ws);
        (ws, out)
    })
    .await
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, TaskError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TaskError::Other(format!("a background job failed: {e}")))
}

/// Pauses the agent while the paused label is on, stops it when the
/// processing label is removed or the daemon shuts down.
struct LabelGate {
    forge: Arc<dyn Forge>,
    item: ItemRef,
    labels: crate::config::LabelsConfig,
    shutdown: CancellationToken,
    poll: Duration,
    /// The progress comment and a copy of its state, to say "paused" on the issue.
    comment: Option<(u64, std::sync::Mutex<Progress>)>,
    secrets: Arc<Secrets>,
}

impl LabelGate {
    /// Puts `status` on the progress comment; a failure is only logged.
    async fn announce(&self, status: String) {
        let Some((id, progress)) = &self.comment else {
            return;
        };
        let body = {
            let mut progress = progress.lock().unwrap_or_else(|p| p.into_inner());
            progress.status_now(status);
            self.secrets.scrub(&progress.render())
        };
        if let Err(e) = self.forge.edit_comment(&self.item, *id, &body).await {
            tracing::warn!(task = %self.item, "cannot update the progress comment: {e}");
        }
    }
}

#[async_trait]
impl StepGate for LabelGate {
    async fn before_step(&self, _step: u32) -> Option<String> {
        let mut paused_logged = false;
        loop {
            if self.shutdown.is_cancelled() {
                return Some("forgehand is shutting down".into());
            }
            match self.forge.item(&self.item).await {
                Ok(item) => {
                    if !item.has_label(&self.labels.processing) {
                        return Some(format!("the label \"{}\" was removed", self.labels.processing));
                    }
                    if !item.has_label(&self.labels.paused) {
                        if paused_logged {
                            tracing::info!(task = %self.item, "resumed");
                            self.announce("Working again: the pause label was removed".into())
                                .await;
                        }
                        return None;
                    }
                    if !paused_logged {
                        tracing::info!(task = %self.item, "paused by the \"{}\" label", self.labels.paused);
                        self.announce(format!(
                            "Paused before the next model turn; remove the \"{}\" label to continue",
                            self.labels.paused
                        ))
                        .await;
                        paused_logged = true;
                    }
                }
                Err(e) => {
                    tracing::warn!(task = %self.item, "cannot read the labels: {e}");
                    if !paused_logged {
                        return None;
                    }
                }
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => {}
                _ = tokio::time::sleep(self.poll) => {}
            }
        }
    }
}
