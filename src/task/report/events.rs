//! What happens in a task, told once: the phases emit [`TaskEvent`]s to
//! the run's [`EventSink`], and each subscriber (subscribers.rs) keeps its
//! own view of them: the progress comment, the status board line (and the
//! console of `forgehand once`), the metrics, the run's transcript. No
//! phase writes to any of those itself.
//!
//! The phases emit through [`TaskRun`](crate::task::run::TaskRun): the frequent
//! calls stay its methods (`at`, `note`, `status_now`, `finish`, `report`),
//! so a phase reads as before; the rarer events are given whole to
//! `run.emit(TaskEvent::..)`. A flush ([`EventSink::flush`]) is where the
//! comment is edited: it is async and can fail, so it is the sink's own
//! call rather than an event.
//!
//! Every event is delivered to every subscriber in the order they were
//! given, with the moment it was emitted, so the comment's history and the
//! board's status line carry the same time.

use crate::agent::plan::PlanStep;
use crate::forge::ForgeError;
use crate::sandbox::egress::Egress;
use crate::task::report::progress::Step;
use crate::transcript::Entry;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Something that happened in a task, in the task's words.
#[derive(Debug, Clone)]
pub(in crate::task) enum TaskEvent {
    /// The task was taken up (it shows on the status board from now on).
    Began,
    /// The checklist moved to `step`; `text` says what happens now.
    Step { step: Step, text: String },
    /// What happens now, without moving the checklist.
    Status(String),
    /// A line of the comment's history; `transcript` is what the run's
    /// transcript says of the same moment, if anything.
    Note {
        line: String,
        transcript: Option<String>,
    },
    /// Said on the run's transcript only.
    TranscriptNote(String),
    /// An image of the thread (or one refused), for the transcript.
    Image(Entry),
    /// The task's comment ends with `outcome`.
    Finished {
        all_done: bool,
        phase: String,
        outcome: String,
    },
    /// The branch the task pushes to.
    Branch(String),
    /// The plan's checklist, as the model keeps it current.
    Plan(Vec<PlanStep>),
    /// The final plan, with who made it and how (`made`).
    PlanDetails { made: String, plan: String },
    /// The pushed commit's checks, one line.
    Checks(String),
    /// The model use of the reporting run so far.
    Spent { tokens: u64, cost: f64 },
    /// The item's page on the forge.
    WebUrl(String),
    /// A sandbox was started for the task (or one of its attempts).
    SandboxStarted,
    /// A sandbox of the task was removed.
    SandboxRemoved,
    /// A sandbox's network, whose decisions the transcript follows.
    Egress(Arc<Egress>),
    /// A repository's own step (setup, tests, snapshot) ended so.
    RepositoryStep {
        step: &'static str,
        outcome: &'static str,
    },
    /// The task ended: `outcome` as the metrics name it, after `took`.
    Ended {
        outcome: &'static str,
        detail: String,
        took: Duration,
    },
}

/// Why the subscribers are flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::task) enum Flush {
    /// A phase reports: every subscriber shows what it keeps.
    Report,
    /// The agent's run changed the comment between two steps (a pause,
    /// its plan): only the forge's comment follows that closely; the board
    /// and the console show the phase's next report.
    Live,
}

/// Why a subscriber could not write out what it keeps.
#[derive(Debug, thiserror::Error)]
pub(in crate::task) enum FlushError {
    #[error("cannot update the progress comment: {0}")]
    Comment(#[from] ForgeError),
}

/// One view of the task's events.
#[async_trait]
pub(in crate::task) trait Subscriber: Send + Sync {
    /// Takes in `event`, emitted at `at`. Never blocks on the network.
    fn on(&self, event: &TaskEvent, at: SystemTime);

    /// Writes out what it keeps, where that is remote (the forge).
    async fn flush(&self, _why: Flush) -> Result<(), FlushError> {
        Ok(())
    }
}

/// The subscribers of one task, and what this run's lines begin with.
/// Cloned for each attempt of best of N: the clones share the subscribers.
#[derive(Clone)]
pub(in crate::task) struct EventSink {
    subscribers: Arc<[Arc<dyn Subscriber>]>,
    /// `Attempt 2/3`: what the lines of one of several attempts begin with.
    label: Option<String>,
    /// The task, for the log.
    task: Arc<str>,
}

impl EventSink {
    pub fn new(task: impl Into<Arc<str>>, subscribers: Vec<Arc<dyn Subscriber>>) -> EventSink {
        EventSink {
            subscribers: subscribers.into(),
            label: None,
            task: task.into(),
        }
    }

    /// The same subscribers, this sink's lines begun with `label`.
    pub fn labelled(&self, label: Option<String>) -> EventSink {
        EventSink {
            label,
            ..self.clone()
        }
    }

    /// Delivers `event` to every subscriber, in order.
    pub fn emit(&self, event: TaskEvent) {
        let event = self.label(event);
        let at = SystemTime::now();
        for subscriber in self.subscribers.iter() {
            subscriber.on(&event, at);
        }
    }

    /// Flushes every subscriber, in order; a failure is logged and the
    /// others are flushed all the same.
    pub async fn flush(&self, why: Flush) {
        for subscriber in self.subscribers.iter() {
            if let Err(e) = subscriber.flush(why).await {
                tracing::warn!(task = %self.task, "{e}");
            }
        }
    }

    /// `event` with this sink's label before each line it adds.
    fn label(&self, event: TaskEvent) -> TaskEvent {
        let Some(label) = &self.label else {
            return event;
        };
        let labelled = |line: String| format!("{label}: {line}");
        match event {
            TaskEvent::Step { step, text } => TaskEvent::Step {
                step,
                text: labelled(text),
            },
            TaskEvent::Status(text) => TaskEvent::Status(labelled(text)),
            TaskEvent::Note { line, transcript } => TaskEvent::Note {
                line: labelled(line),
                transcript,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests;
