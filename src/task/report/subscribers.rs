//! The views of a task's events (events.rs): the progress comment on the
//! forge, the task's line on the status board (and the console of
//! `forgehand once`), the metrics, and the run's transcript.

use crate::config::Secrets;
use crate::forge::{ItemRef, Thread};
use crate::metrics::Metrics;
use crate::task::report::board::{Board, LiveTask};
use crate::task::report::events::{Flush, FlushError, Subscriber, TaskEvent};
use crate::task::report::progress::{history_line, Progress, Step, CLAIMED};
use crate::transcript::Transcript;
use async_trait::async_trait;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The one progress comment of the task: its state, and its id once it is
/// posted. A flush edits it on the forge, scrubbed of every secret.
pub(in crate::task) struct ProgressComment {
    forge: Arc<dyn Thread>,
    item: ItemRef,
    secrets: Arc<Secrets>,
    progress: Mutex<Progress>,
    id: Mutex<Option<u64>>,
}

impl ProgressComment {
    pub fn new(forge: Arc<dyn Thread>, item: ItemRef, secrets: Arc<Secrets>, id: Option<u64>) -> Self {
        ProgressComment {
            progress: Mutex::new(Progress::new(&item)),
            forge,
            item,
            secrets,
            id: Mutex::new(id),
        }
    }

    pub fn id(&self) -> Option<u64> {
        *locked(&self.id)
    }

    /// From now on the comment is `id`.
    pub fn set_id(&self, id: u64) {
        *locked(&self.id) = Some(id);
    }

    /// The comment as the forge shows it.
    pub fn body(&self) -> String {
        self.secrets.scrub(&locked(&self.progress).render())
    }

    /// What a later run of the task goes on from.
    pub fn kept(&self) -> crate::task::report::progress::KeptProgress {
        locked(&self.progress).kept()
    }

    /// Goes on from an earlier run's comment.
    pub fn restore(&self, kept: crate::task::report::progress::KeptProgress) {
        locked(&self.progress).restore(kept);
    }

    /// The final plan's collapsed section, if planned.
    pub fn plan_details(&self) -> Option<String> {
        locked(&self.progress).plan_details().map(str::to_owned)
    }
}

#[async_trait]
impl Subscriber for ProgressComment {
    fn on(&self, event: &TaskEvent, at: SystemTime) {
        let mut progress = locked(&self.progress);
        match event {
            TaskEvent::Step { step, text } => progress.at(*step, text.clone(), at),
            TaskEvent::Status(text) => progress.status_now(text.clone(), at),
            TaskEvent::Note { line, .. } => progress.note(line.clone(), at),
            TaskEvent::Finished {
                all_done,
                phase,
                outcome,
            } => progress.finish(*all_done, phase.clone(), outcome.clone(), at),
            TaskEvent::Branch(branch) => progress.set_branch(branch),
            TaskEvent::Plan(steps) => progress.set_plan(steps.clone()),
            TaskEvent::PlanDetails { made, plan } => progress.set_plan_details(made, plan),
            TaskEvent::Checks(line) => progress.set_ci(line.clone()),
            _ => {}
        }
    }

    async fn flush(&self, _why: Flush) -> Result<(), FlushError> {
        let Some(id) = self.id() else { return Ok(()) };
        let body = self.body();
        self.forge.edit_comment(&self.item, id, &body).await?;
        Ok(())
    }
}

/// The task's line on the status board, and on stderr for `forgehand
/// once`: its status is the comment's last history line.
pub(in crate::task) struct StatusLine {
    board: Arc<Board>,
    key: String,
    name: String,
    /// Print each report on stderr.
    echo: bool,
    shown: Mutex<Shown>,
}

/// What the next report shows.
struct Shown {
    status: String,
    tokens: u64,
    cost: f64,
}

impl StatusLine {
    pub fn new(board: Arc<Board>, item: &ItemRef, echo: bool) -> StatusLine {
        StatusLine {
            board,
            key: item.key(),
            name: item.to_string(),
            echo,
            shown: Mutex::new(Shown {
                status: CLAIMED.to_owned(),
                tokens: 0,
                cost: 0.0,
            }),
        }
    }
}

#[async_trait]
impl Subscriber for StatusLine {
    fn on(&self, event: &TaskEvent, at: SystemTime) {
        let mut shown = locked(&self.shown);
        match event {
            TaskEvent::Step { text, .. } | TaskEvent::Status(text) => shown.status = history_line(at, text),
            TaskEvent::Note { line, .. } => shown.status = history_line(at, line),
            TaskEvent::Finished { phase, .. } => shown.status = history_line(at, phase),
            TaskEvent::Spent { tokens, cost } => (shown.tokens, shown.cost) = (*tokens, *cost),
            TaskEvent::WebUrl(url) => self.board.update(&self.key, |line| line.web_url = url.clone()),
            TaskEvent::Began => self.board.set(
                &self.key,
                LiveTask {
                    name: self.name.clone(),
                    web_url: String::new(),
                    status: "Claiming".into(),
                    started: at,
                    tokens: 0,
                    cost: 0.0,
                },
            ),
            TaskEvent::Ended { .. } => self.board.remove(&self.key),
            _ => {}
        }
    }

    async fn flush(&self, why: Flush) -> Result<(), FlushError> {
        if why != Flush::Report {
            return Ok(());
        }
        let shown = locked(&self.shown);
        if self.echo {
            eprintln!("[{}] {}", self.name, shown.status);
        }
        self.board.update(&self.key, |line| {
            line.status = shown.status.clone();
            line.tokens = shown.tokens;
            line.cost = shown.cost;
        });
        Ok(())
    }
}

/// The task's metrics: how long each step took, the task's start and end,
/// its sandboxes, the repository's own steps.
pub(in crate::task) struct TaskMetrics {
    metrics: Arc<Metrics>,
    forge: &'static str,
    clock: Mutex<StepClock>,
}

/// The step under way (its index in the checklist) and since when.
struct StepClock {
    done: usize,
    started: Instant,
}

impl StepClock {
    /// Ends the step under way: it and how long it took; the clock starts
    /// anew.
    fn end_step(&mut self) -> Option<(Step, std::time::Duration)> {
        let ended = Step::nth(self.done).map(|step| (step, self.started.elapsed()));
        self.started = Instant::now();
        ended
    }
}

impl TaskMetrics {
    pub fn new(metrics: Arc<Metrics>, item: &ItemRef) -> TaskMetrics {
        TaskMetrics {
            metrics,
            forge: item.forge.as_str(),
            clock: Mutex::new(StepClock {
                done: 0,
                started: Instant::now(),
            }),
        }
    }

    /// The step that ended at `event`, if one did.
    fn ended(&self, event: &TaskEvent) -> Option<(Step, std::time::Duration)> {
        let mut clock = locked(&self.clock);
        match event {
            TaskEvent::Step { step, .. } => {
                let index = step.index();
                let ended = if index != clock.done {
                    clock.end_step()
                } else {
                    None
                };
                clock.done = index;
                ended
            }
            TaskEvent::Finished { all_done, .. } => {
                let ended = clock.end_step();
                if *all_done {
                    clock.done = Step::ALL.len();
                }
                ended
            }
            _ => None,
        }
    }
}

impl Subscriber for TaskMetrics {
    fn on(&self, event: &TaskEvent, _at: SystemTime) {
        if let Some((step, took)) = self.ended(event) {
            self.metrics.phase_took(step.as_str(), took);
        }
        match event {
            TaskEvent::Began => self.metrics.task_started(self.forge),
            TaskEvent::SandboxStarted => self.metrics.sandbox_started(),
            TaskEvent::SandboxRemoved => self.metrics.sandbox_removed(),
            TaskEvent::RepositoryStep { step, outcome } => self.metrics.repository_step(step, outcome),
            TaskEvent::Ended { outcome, took, .. } => self.metrics.task_ended(outcome, *took),
            _ => {}
        }
    }
}

/// The run's transcript: the notes meant for it, the thread's images, the
/// sandbox's network, and the run's end.
pub(in crate::task) struct TranscriptNotes(pub Arc<Transcript>);

impl Subscriber for TranscriptNotes {
    fn on(&self, event: &TaskEvent, _at: SystemTime) {
        let transcript = &self.0;
        match event {
            TaskEvent::Note {
                transcript: Some(text),
                ..
            }
            | TaskEvent::TranscriptNote(text) => transcript.note(text.clone()),
            TaskEvent::Image(entry) => transcript.image(entry.clone()),
            TaskEvent::Egress(egress) => transcript.follow_egress(egress),
            TaskEvent::Ended { outcome, detail, .. } => transcript.end(outcome, detail),
            _ => {}
        }
    }
}
