//! A CI fix round after the task waited on its checks: a new sandbox on
//! the pushed branch (set up, or its setup's snapshot restored), the
//! agent's session opened again, and the model going on from the
//! journalled conversation with the failed checks' logs.

use crate::agent::{AgentOutcome, StepRecorder, StopReason};
use crate::forge::Check;
use crate::journal::CheckWait;
use crate::task::handoff::Bench;
use crate::task::handoff::Claimed;
use crate::task::needs::{change_needs, ci_needs, prepare_needs, recorded};
use crate::task::phases::change;
use crate::task::phases::ci::{self, CiReport};
use crate::task::phases::prepare;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::{Accounts, TaskEnv};
use std::sync::Arc;

/// Runs fix round `round` for the checks `failed` of `wait`'s commit:
/// `None` when its commit's checks are waited on, else the report.
pub(in crate::task) async fn fix(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    accounts: &Accounts,
    claimed: &Claimed,
    (wait, failed, round): (CheckWait, Vec<Check>, u32),
) -> Result<Option<CiReport>, TaskError> {
    let reading = recorded(env, accounts, "reading the thread");
    let mut prepared = prepare::prepare(run, &prepare_needs(&reading, &run.item), claimed).await?;
    // The repository's own money caps hold for the round as for the change.
    let caps = prepared.repo.settings.budget;
    accounts
        .spend
        .lower_to(caps.task_usd, caps.daily_usd, caps.monthly_usd);
    if let Some(egress) = prepared.sandbox.sandbox.egress() {
        run.emit(crate::task::report::events::TaskEvent::Egress(egress));
    }
    let recorder = accounts.transcript.clone().map(|t| t as Arc<dyn StepRecorder>);
    let session = change::reopen(run, &change_needs(env, recorder), &mut prepared).await?;
    let mut bench = Bench {
        prepared,
        session,
        outcome: conversation_so_far(&wait),
    };
    let pushed = ci::fix_round(
        run,
        &ci_needs(env),
        claimed,
        &mut bench,
        &wait.sha,
        &failed,
        round,
    )
    .await;
    let Bench { session, outcome, .. } = bench;
    session.close().await;
    let pushed = pushed?.map(|sha| (sha, outcome.messages));
    ci::after_round(run, wait, &failed, round, pushed).await
}

/// The agent's outcome as the journal keeps it between rounds: its
/// conversation.
fn conversation_so_far(wait: &CheckWait) -> AgentOutcome {
    AgentOutcome {
        answer: None,
        stop: StopReason::Answered,
        steps: 0,
        tool_calls: 0,
        usage: Default::default(),
        messages: wait.conversation.clone(),
    }
}
