//! What the scheduler does with a task next, as kube-runtime's `reconcile
//! -> Action`: nothing (it ended), go on at the next start (it was
//! suspended), start it again after a wait, or start it again when
//! something changes. A task's ending is read here, in one place; the
//! daemon's reasons to put off a task it could not start (a budget's cap,
//! a claim the replicas could not settle) are the same requeue.

use crate::task::TaskEnd;
use std::time::Duration;

/// The scheduler's next step for one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The task ended; nothing waits for it.
    Done,
    /// The run stopped short of its end (the daemon stops, or another
    /// replica holds the task now): it goes on from the journal at the next
    /// start, or with the replica that holds it.
    Suspended,
    /// Start it again after a wait.
    RequeueAfter(Wait, Why),
    /// Start it again when a change outside is seen; until then it holds
    /// no slot, no sandbox and no claim.
    WaitFor(Change),
}

/// How long a requeued task waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// From the poll interval, doubling with each requeue in a row (up to a
    /// ceiling), so a long outage is not hammered.
    Growing,
    /// This long exactly (a budget's period turns then).
    Exactly(Duration),
}

/// Why a task is requeued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A forge, a git remote or the Docker engine did not answer.
    Outage,
    /// The replicas' claim could not be settled (the API server or the
    /// forge did not answer).
    ClaimLater,
    /// A money cap is reached until its period turns.
    Budget,
}

/// A change outside that starts a waiting task again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A writer's answer to the plan posted for approval (or its timeout).
    PlanAnswer,
    /// The end of the pushed commit's checks (or of the wait for them).
    ChecksEnded,
    /// The paused label removed (or the processing label).
    Unpaused,
}

impl TaskEnd {
    /// What the scheduler does after a run that ended so.
    pub fn action(&self) -> Action {
        match self {
            TaskEnd::Delivered { .. }
            | TaskEnd::NoChanges
            | TaskEnd::Failed { .. }
            | TaskEnd::Stopped
            | TaskEnd::Skipped { .. } => Action::Done,
            TaskEnd::Interrupted => Action::Suspended,
            TaskEnd::Deferred { .. } => Action::RequeueAfter(Wait::Growing, Why::Outage),
            TaskEnd::AwaitingApproval => Action::WaitFor(Change::PlanAnswer),
            TaskEnd::AwaitingChecks => Action::WaitFor(Change::ChecksEnded),
            TaskEnd::Paused => Action::WaitFor(Change::Unpaused),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ending_has_one_action() {
        let reason = || "r".to_owned();
        let done = [
            TaskEnd::Delivered { url: reason() },
            TaskEnd::NoChanges,
            TaskEnd::Failed { reason: reason() },
            TaskEnd::Stopped,
            TaskEnd::Skipped { reason: reason() },
        ];
        for end in done {
            assert_eq!(end.action(), Action::Done, "{end:?}");
        }
        assert_eq!(TaskEnd::Interrupted.action(), Action::Suspended);
        assert_eq!(
            TaskEnd::Deferred { reason: reason() }.action(),
            Action::RequeueAfter(Wait::Growing, Why::Outage)
        );
        assert_eq!(
            TaskEnd::AwaitingApproval.action(),
            Action::WaitFor(Change::PlanAnswer)
        );
        assert_eq!(
            TaskEnd::AwaitingChecks.action(),
            Action::WaitFor(Change::ChecksEnded)
        );
        assert_eq!(TaskEnd::Paused.action(), Action::WaitFor(Change::Unpaused));
    }
}
