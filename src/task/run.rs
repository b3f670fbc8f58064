//! What the phases of one task share: the item, the sink the task's
//! events go to (events.rs), the model use so far, the sandbox to remove
//! when the task ends, and the shutdown signal. Each phase gets this and
//! its own settings; nothing here knows the whole configuration.

use crate::agent::{AgentOutcome, StopReason};
use crate::config::Secrets;
use crate::forge::{retry, Forge, ForgeError, ItemRef, Thread};
use crate::journal::Journal;
use crate::llm::usage::UsageReport;
use crate::metrics::Metrics;
use crate::sandbox::Sandbox;
use crate::task::report::board::Board;
use crate::task::report::events::{EventSink, Flush, Subscriber, TaskEvent};
use crate::task::report::progress::{self, Step};
use crate::task::report::subscribers::{ProgressComment, StatusLine, TaskMetrics, TranscriptNotes};
use crate::task::state::error::TaskError;
use crate::task::workbench::workspace_handle::CheckedOut;
use crate::transcript::Transcript;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

pub(super) struct TaskRun<'a> {
    pub forge: Arc<dyn Forge>,
    pub item: ItemRef,
    /// The journal's key of the task.
    pub key: String,
    pub journal: &'a Journal,
    pub secrets: &'a Secrets,
    pub shutdown: CancellationToken,
    /// Where the run's events go; its lines begin with the attempt's label
    /// (`Attempt 2/3`) when it is one of several attempts (best of N).
    events: EventSink,
    /// The progress comment (also one of the sink's subscribers), for its
    /// id and what the phases read back from it.
    comment: Arc<ProgressComment>,
    usage: Option<UsageReport>,
    /// The sandbox to remove when the task ends, however it ends; the
    /// phases that use it get it from the phase that made it.
    sandbox: Mutex<Option<Arc<dyn Sandbox>>>,
    /// The work tree's files being written, for the task's end to wait
    /// for before it removes the work folder.
    checkout: Mutex<Option<CheckedOut>>,
    /// An attempt's run beside the task's own: its sandbox is not the one
    /// the journal keeps.
    beside: bool,
    /// The plan a writer approved (`triggers.plan_approval`): followed
    /// without a new debate.
    pub approved_plan: Option<crate::task::phases::task_plan::TaskPlan>,
    /// Changes a writer asked for to the last plan, as a section of the
    /// planning request.
    pub plan_changes: Option<String>,
    /// Where the phases' records are kept (the journal, or the store the
    /// replicas share).
    pub records: crate::task::state::records::TaskRecords,
    /// What earlier runs kept for the phases before the push, read once
    /// where the run starts (`state::resume`); each phase takes its part.
    pub kept: crate::task::state::resume::Kept,
}

/// Where a run reports, and what it may read and write, besides the forge.
pub(super) struct Reporting<'a> {
    pub journal: &'a Journal,
    pub secrets: &'a Arc<Secrets>,
    pub metrics: &'a Arc<Metrics>,
    pub board: &'a Arc<Board>,
    /// Print each progress update on stderr (`forgehand once`).
    pub echo: bool,
    /// The run's transcript, if it has one.
    pub transcript: Option<Arc<Transcript>>,
    /// Where the task's records are kept.
    pub records: crate::task::state::records::TaskRecords,
}

impl Reporting<'_> {
    /// The sink of `item`'s events and its progress comment (`id` once
    /// posted), the comment being one of the sink's subscribers.
    fn sink(
        &self,
        forge: Arc<dyn Thread>,
        item: &ItemRef,
        id: Option<u64>,
    ) -> (EventSink, Arc<ProgressComment>) {
        let comment = Arc::new(ProgressComment::new(
            forge,
            item.clone(),
            self.secrets.clone(),
            id,
        ));
        let mut subscribers: Vec<Arc<dyn Subscriber>> = Vec::new();
        if let Some(transcript) = &self.transcript {
            subscribers.push(Arc::new(TranscriptNotes(transcript.clone())));
        }
        subscribers.push(Arc::new(TaskMetrics::new(self.metrics.clone(), item)));
        subscribers.push(Arc::new(StatusLine::new(self.board.clone(), item, self.echo)));
        subscribers.push(comment.clone());
        (EventSink::new(item.to_string(), subscribers), comment)
    }
}

impl<'a> TaskRun<'a> {
    pub fn new(
        reporting: Reporting<'a>,
        forge: Arc<dyn Forge>,
        item: ItemRef,
        comment_id: Option<u64>,
        shutdown: CancellationToken,
    ) -> TaskRun<'a> {
        let (events, comment) = reporting.sink(forge.clone(), &item, comment_id);
        TaskRun {
            forge,
            key: item.key(),
            item,
            journal: reporting.journal,
            secrets: reporting.secrets,
            shutdown,
            events,
            comment,
            usage: None,
            sandbox: Mutex::default(),
            checkout: Mutex::default(),
            beside: false,
            approved_plan: None,
            plan_changes: None,
            records: reporting.records,
            kept: Default::default(),
        }
    }

    /// A run of its own for one of several attempts at the change: the
    /// same item, comment and progress, its lines begun with `label`, its
    /// own sandbox and model use (see [`TaskRun::absorb`]).
    pub fn attempt(&self, label: String) -> TaskRun<'a> {
        TaskRun {
            forge: self.forge.clone(),
            item: self.item.clone(),
            key: self.key.clone(),
            journal: self.journal,
            secrets: self.secrets,
            shutdown: self.shutdown.clone(),
            events: self.events.labelled(Some(label)),
            comment: self.comment.clone(),
            usage: None,
            sandbox: Mutex::default(),
            checkout: Mutex::default(),
            beside: true,
            approved_plan: None,
            plan_changes: None,
            records: self.records.clone(),
            // An attempt beside the task's run starts afresh.
            kept: Default::default(),
        }
    }

    /// What this run's progress lines begin with from now on.
    pub fn set_label(&mut self, label: Option<String>) {
        self.events = self.events.labelled(label);
    }

    /// Takes an attempt's model use into this run's.
    pub fn absorb(&mut self, attempt: &TaskRun<'_>) {
        if let Some(usage) = &attempt.usage {
            self.add_usage(usage);
        }
    }

    /// From now on the task's sandbox is `attempt`'s (removed when the task
    /// ends); this run's own is removed now.
    pub async fn take_sandbox_of(&mut self, attempt: &TaskRun<'_>) {
        let theirs = attempt.sandbox.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(sandbox) = theirs {
            self.remove_sandbox().await;
            if let Err(e) = self.journal.set_container(&self.key, Some(sandbox.id())) {
                tracing::warn!(task = %self.item, "cannot journal the sandbox kept: {e}");
            }
            *self.sandbox.lock().unwrap_or_else(|p| p.into_inner()) = Some(sandbox);
        }
    }

    /// Tells the task's subscribers of `event`.
    pub fn emit(&self, event: TaskEvent) {
        self.events.emit(event);
    }

    /// The task's sink without this run's label, for what reports while
    /// the agent runs: a pause or the plan is the whole task's.
    pub fn task_events(&self) -> EventSink {
        self.events.labelled(None)
    }

    /// Moves the checklist to `step`; the step that ended is measured.
    pub fn at(&self, step: Step, text: impl Into<String>) {
        self.emit(TaskEvent::Step {
            step,
            text: text.into(),
        });
    }

    /// Ends the comment with `outcome`.
    pub fn finish(&self, all_done: bool, phase: &str, outcome: String) {
        self.emit(TaskEvent::Finished {
            all_done,
            phase: phase.to_owned(),
            outcome,
        });
    }

    pub fn note(&self, line: impl Into<String>) {
        self.emit(TaskEvent::Note {
            line: line.into(),
            transcript: None,
        });
    }

    /// Says what happens now without moving the checklist.
    pub fn status_now(&self, text: impl Into<String>) {
        self.emit(TaskEvent::Status(text.into()));
    }

    pub fn comment_id(&self) -> Option<u64> {
        self.comment.id()
    }

    /// Keeps the comment as this run leaves it, for the task's next run
    /// (this one ends waiting).
    pub fn keep_progress(&self) {
        if let Err(e) = self.records.keep(&self.comment.kept()) {
            tracing::warn!(task = %self.item, "cannot journal the progress comment for the next run: {e}");
        }
    }

    /// Goes on from the comment an earlier run that ended waiting left.
    pub fn restore_progress(&self) {
        if let Some(kept) = self.records.read::<crate::task::report::progress::KeptProgress>() {
            self.comment.restore(kept);
        }
    }

    /// The final plan's section of the comment, if planned.
    pub fn plan_details(&self) -> Option<String> {
        self.comment.plan_details()
    }

    /// Edits the progress comment and the status board (with this run's
    /// model use); a failure is logged, never fatal.
    pub async fn report(&self) {
        let (tokens, cost) = match &self.usage {
            Some(u) => (u.total().total(), u.estimated_cost().0),
            None => (0, 0.0),
        };
        self.emit(TaskEvent::Spent { tokens, cost });
        self.events.flush(Flush::Report).await;
    }

    /// Shows the item's page on the status board.
    pub fn show_web_url(&self, url: &str) {
        self.emit(TaskEvent::WebUrl(url.to_owned()));
    }

    /// The progress comment: the journalled one, else one carrying this
    /// task's marker (posted before a restart), else `None`.
    pub async fn locate_comment(&self) -> Result<Option<u64>, TaskError> {
        if let Some(id) = self.comment_id() {
            return Ok(Some(id));
        }
        let found = self.locate_comment_on_forge().await?;
        if let Some(id) = found {
            tracing::info!(task = %self.item, comment = id, "continuing the existing progress comment");
        }
        Ok(found)
    }

    /// Posts the progress comment. A failure that may have posted it anyway
    /// (a 5xx, a lost answer) is followed by a look for its marker, so a
    /// flaky forge never gets two.
    pub async fn post_comment(&self) -> Result<u64, TaskError> {
        let body = self.comment.body();
        Ok(retry::find_or_create(
            "post the progress comment",
            || self.locate_comment_on_forge(),
            || self.forge.create_comment(&self.item, &body),
        )
        .await?)
    }

    /// The comment carrying this task's marker on the forge, if any.
    async fn locate_comment_on_forge(&self) -> Result<Option<u64>, ForgeError> {
        let marker = progress::marker(&self.item);
        let existing = self.forge.comments(&self.item).await?;
        Ok(existing
            .iter()
            .rev()
            .find(|c| c.body.contains(&marker))
            .map(|c| c.id))
    }

    /// From now on the progress comment is `id` (journalled).
    pub fn use_comment(&mut self, id: u64) -> Result<(), TaskError> {
        self.comment.set_id(id);
        self.journal.set_comment(&self.key, id)?;
        Ok(())
    }

    /// Makes sure there is a progress comment (used when failing early).
    pub async fn ensure_comment(&mut self) -> Result<(), TaskError> {
        let id = match self.locate_comment().await? {
            Some(id) => id,
            None => self.post_comment().await?,
        };
        self.use_comment(id)
    }

    /// Adds model use (a planning call, a classification, an agent run)
    /// to the task's report.
    pub fn add_usage(&mut self, usage: &UsageReport) {
        match &mut self.usage {
            Some(total) => total.merge(usage),
            None => self.usage = Some(usage.clone()),
        }
    }

    /// The tokens and estimated cost so far, as a line of the comment.
    pub fn usage_line(&self) -> String {
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

    /// A run stopped by the gate ends the task here.
    pub fn check_halt(&self, outcome: &AgentOutcome) -> Result<(), TaskError> {
        match &outcome.stop {
            StopReason::Halted(_) if self.shutdown.is_cancelled() => Err(TaskError::Shutdown),
            StopReason::Halted(reason) => Err(TaskError::Stopped(reason.clone())),
            StopReason::Suspended(_) if self.shutdown.is_cancelled() => Err(TaskError::Shutdown),
            StopReason::Suspended(_) => Err(TaskError::Paused),
            _ => Ok(()),
        }
    }

    /// Registers `sandbox` for removal when the task ends, however it ends.
    pub fn adopt_sandbox(&self, sandbox: &Arc<dyn Sandbox>) -> Result<(), TaskError> {
        *self.sandbox.lock().unwrap_or_else(|p| p.into_inner()) = Some(sandbox.clone());
        self.emit(TaskEvent::SandboxStarted);
        // An attempt's sandbox is its own; the journal keeps the task's.
        if !self.beside {
            self.journal.set_container(&self.key, Some(sandbox.id()))?;
        }
        Ok(())
    }

    /// Remembers the work tree's checkout, however the task ends.
    pub fn adopt_checkout(&self, checkout: CheckedOut) {
        *self.checkout.lock().unwrap_or_else(|p| p.into_inner()) = Some(checkout);
    }

    /// Waits until nothing writes into the work folder any more.
    pub async fn checkout_settled(&self) {
        let adopted = self.checkout.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(checkout) = adopted {
            let _ = checkout.await;
        }
    }

    pub async fn remove_sandbox(&mut self) {
        let adopted = self.sandbox.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(sandbox) = adopted {
            self.emit(TaskEvent::SandboxRemoved);
            if let Err(e) = sandbox.remove().await {
                tracing::warn!(task = %self.item, "cannot remove the sandbox: {e}");
            }
            if self.beside {
                return;
            }
            if let Err(e) = self.journal.set_container(&self.key, None) {
                tracing::warn!(task = %self.item, "cannot journal the sandbox removal: {e}");
            }
        }
    }
}
