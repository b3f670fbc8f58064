//! How a task ended.

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
    /// The plan waits for a writer's approval (`triggers.plan_approval`):
    /// no sandbox, no run; the daemon starts it again when one answers.
    AwaitingApproval,
    /// The PR/MR is open and its checks have not ended: no sandbox, no
    /// run; the daemon's watcher starts it again when they end (to fix a
    /// failure in a new sandbox, or to say how they ended).
    AwaitingChecks,
    /// The paused label is on: no sandbox, no run; the daemon starts it
    /// again from its last step when the label is removed.
    Paused,
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
            TaskEnd::AwaitingApproval => "awaiting_approval",
            TaskEnd::AwaitingChecks => "awaiting_checks",
            TaskEnd::Paused => "paused",
        }
    }

    /// The change's address, or the reason it ended so; empty when neither.
    pub fn detail(&self) -> String {
        match self {
            TaskEnd::Delivered { url } => url.clone(),
            TaskEnd::Failed { reason } | TaskEnd::Skipped { reason } | TaskEnd::Deferred { reason } => {
                reason.clone()
            }
            TaskEnd::NoChanges
            | TaskEnd::Stopped
            | TaskEnd::Interrupted
            | TaskEnd::AwaitingApproval
            | TaskEnd::AwaitingChecks
            | TaskEnd::Paused => String::new(),
        }
    }
}
