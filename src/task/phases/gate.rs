//! The label gate the agent passes before every model turn: while the
//! paused label is on it suspends the run (the task ends paused, holding
//! no slot and no sandbox, and goes on from its last step's checkpoint
//! when the label is removed; where steps are not checkpointed it holds
//! the run in place), saying so on the progress comment, and it stops the
//! run when the processing label is removed or the daemon shuts down.
//! Between steps it hands the agent the mentions heard meanwhile
//! (steer.rs).

use crate::agent::{Halt, StepGate};
use crate::config::LabelsConfig;
use crate::forge::{Intake, ItemRef};
use crate::task::report::events::{EventSink, Flush, TaskEvent};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Whether a task suspended by its paused label may go on: the label is
/// gone (or the processing label is, and its run will say it stopped).
pub fn pause_is_over(item: &crate::forge::Item, labels: &LabelsConfig) -> bool {
    !item.has_label(&labels.paused) || !item.has_label(&labels.processing)
}

/// Pauses the agent while the paused label is on, stops it when the
/// processing label is removed or the daemon shuts down.
pub(in crate::task) struct LabelGate {
    /// Whether a pause suspends the run rather than holding it (set while
    /// its steps are checkpointed).
    pub suspendable: Arc<std::sync::atomic::AtomicBool>,
    pub forge: Arc<dyn Intake>,
    pub item: ItemRef,
    pub labels: LabelsConfig,
    pub shutdown: CancellationToken,
    pub poll: Duration,
    /// The task's events (when it has a progress comment), to say
    /// "paused" on the issue.
    pub progress: Option<EventSink>,
    /// Mentions heard while the run works, told to the agent.
    pub steering: Option<crate::task::phases::steer::Steering>,
}

impl LabelGate {
    /// Puts `status` on the progress comment; a failure is only logged.
    async fn announce(&self, status: String) {
        if let Some(progress) = &self.progress {
            progress.emit(TaskEvent::Status(status));
            progress.flush(Flush::Live).await;
        }
    }
}

#[async_trait]
impl StepGate for LabelGate {
    async fn heard(&self) -> Vec<String> {
        match &self.steering {
            Some(steering) => steering.heard().await,
            None => Vec::new(),
        }
    }

    async fn read(&self) {
        if let Some(steering) = &self.steering {
            steering.read().await;
        }
    }

    async fn before_step(&self, _step: u32) -> Option<Halt> {
        let mut paused_logged = false;
        loop {
            if self.shutdown.is_cancelled() {
                return Some(Halt::Stop("forgehand is shutting down".into()));
            }
            match self.forge.item(&self.item).await {
                Ok(item) => {
                    if !item.has_label(&self.labels.processing) {
                        return Some(Halt::Stop(format!(
                            "the label \"{}\" was removed",
                            self.labels.processing
                        )));
                    }
                    if !item.has_label(&self.labels.paused) {
                        if paused_logged {
                            tracing::info!(task = %self.item, "resumed");
                            self.announce("Working again: the pause label was removed".into())
                                .await;
                        }
                        return None;
                    }
                    if self.suspendable.load(std::sync::atomic::Ordering::SeqCst) {
                        tracing::info!(task = %self.item, "paused by the \"{}\" label; the run goes on from its last step when it is removed", self.labels.paused);
                        self.announce(format!(
                            "Paused before the next model turn; remove the \"{}\" label to continue (meanwhile the task holds no sandbox; it goes on from its last step)",
                            self.labels.paused
                        ))
                        .await;
                        return Some(Halt::Suspend(format!(
                            "the label \"{}\" is on",
                            self.labels.paused
                        )));
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
