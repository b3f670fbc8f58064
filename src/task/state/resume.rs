//! Where a run starts: decided once, when the run begins, from what the
//! task kept (its journal row, its phase records, its waits), and handed
//! to the phases that go on from it. No phase reads the records of an
//! earlier run itself: each takes its part of [`Kept`] from the run.

use crate::journal::{AgentCheckpoint, CheckWait, Journal, Phase, PlanWait, TaskRecord};
use crate::task::state::error::TaskError;
use crate::task::state::phase_records::{PlannedRecord, PreparedRecord, PushedRecord, PushingRecord};
use crate::task::state::records::TaskRecords;

/// The step a run starts at.
pub(in crate::task) enum ResumePoint {
    /// Before the push: from the claim, with what earlier runs kept for
    /// the phases on the way (none for a new task).
    Work(Kept),
    /// A plan posted for a writer's approval: the answer is looked at
    /// first, then the work goes on from the plan (or a new one).
    AwaitingApproval(PlanWait, Kept),
    /// Pushed before a restart: the PR/MR is opened or found.
    Pushed { summary: String },
    /// The PR/MR opened and its checks waited on: what they said is
    /// looked at (a fix round, the outcome, or the wait again).
    FollowingChecks(CheckWait),
}

/// What earlier runs of the task kept for the phases before the push.
/// Each phase takes its own part.
#[derive(Default)]
pub(in crate::task) struct Kept {
    /// Where the last run was prepared (its changes are logged).
    pub prepared: Option<PreparedRecord>,
    /// The plan made before, followed when made on the same ground for
    /// the same request.
    pub planned: Option<PlannedRecord>,
    /// A push that began: delivery goes on when the remote has its commit.
    pub pushing: Option<PushingRecord>,
    /// The agent's last step boundary, resumed when still usable.
    pub checkpoint: Option<AgentCheckpoint>,
}

/// Reads where the task's run starts: the journal's phase and waits,
/// then its records (the journal's, or the store the replicas share:
/// where a replica that took the task over finds them).
pub(in crate::task) fn resume_point(
    journal: &Journal,
    records: &TaskRecords,
    record: &TaskRecord,
) -> Result<ResumePoint, TaskError> {
    let key = &record.key;
    let pushed = records.read::<PushedRecord>();
    if record.phase >= Phase::Pushed || pushed.is_some() {
        if let Some(wait) = journal.check_wait(key)? {
            return Ok(ResumePoint::FollowingChecks(wait));
        }
        // A journal of an earlier version kept the push's summary as the
        // task's outcome.
        let summary = match pushed {
            Some(pushed) => pushed.summary,
            None => record.outcome.clone().unwrap_or_default(),
        };
        return Ok(ResumePoint::Pushed { summary });
    }
    let kept = Kept {
        prepared: records.read::<PreparedRecord>(),
        planned: records.read::<PlannedRecord>(),
        pushing: records.read::<PushingRecord>(),
        checkpoint: records.read::<AgentCheckpoint>(),
    };
    Ok(match journal.plan_wait(key)? {
        Some(wait) => ResumePoint::AwaitingApproval(wait, kept),
        None => ResumePoint::Work(kept),
    })
}
