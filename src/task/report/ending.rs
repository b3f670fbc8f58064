//! How a run that did not deliver ends on the forge and in the journal:
//! failed (with advice), stopped by a maintainer, handed over to the
//! replica holding its claim, deferred until what was away is back, or
//! paused for a restart. A run that ended in an error is decided once,
//! here, straight into its ending (the scheduler reads its next step from
//! that, see [`crate::task::Action`]).

use crate::config::LabelsConfig;
use crate::forge::ForgeError;
use crate::journal::{Phase, Transition};
use crate::sanitize::fenced;
use crate::task::run::TaskRun;
use crate::task::state::error::{advice, TaskError, Whom};
use crate::task::{TaskEnd, TaskEnv};

/// What becomes of a run that ended in `err`: the one decision, from the
/// error and whether something outside (a forge, the git remote, the
/// sandbox engine) does not answer right now, acted on.
pub(in crate::task) async fn settle(run: &mut TaskRun<'_>, env: &TaskEnv, err: &TaskError) -> TaskEnd {
    let labels = &env.config.labels;
    match err {
        TaskError::Shutdown => interrupted(run).await,
        TaskError::Stopped(reason) => stopped(run, labels, reason).await,
        TaskError::Paused => paused(run).await,
        TaskError::Forge(ForgeError::Fenced { message, .. }) => {
            tracing::warn!(task = %run.item, "{message}; stopping, the replica holding the task goes on");
            TaskEnd::Interrupted
        }
        _ if !run.shutdown.is_cancelled() && is_outage(env, err).await => deferred(run, err).await,
        _ => {
            let who = run.forge.who_may_trigger();
            let whom = Whom {
                may_trigger: &who,
                sandbox_operator: env.backend.operator_advice(),
            };
            failed(run, labels, err, &advice(err, &whom)).await
        }
    }
}

/// Whether `err` comes from something outside being away. A sandbox error
/// of any kind counts when the engine does not answer a ping (a copy cut
/// off by an engine restart reads as a broken pipe).
async fn is_outage(env: &TaskEnv, err: &TaskError) -> bool {
    err.is_outage() || (matches!(err, TaskError::Sandbox(_)) && env.backend.ping().await.is_err())
}

async fn failed(run: &mut TaskRun<'_>, labels: &LabelsConfig, err: &TaskError, advice: &str) -> TaskEnd {
    let reason = run.secrets.scrub(&err.to_string());
    tracing::error!(task = %run.item, "task failed: {reason}");
    let mut text = format!(
        "**Failed.** {reason}\n\n**What you can do:** {advice}\n{}",
        run.usage_line()
    );
    if let TaskError::TestsFailed { section, .. } = err {
        text.push_str(&format!("\n{}\n", run.secrets.scrub(section)));
    }
    if let TaskError::SetupFailed(failed) = err {
        if !failed.tail.trim().is_empty() {
            text.push_str(&format!(
                "\n<details><summary>The end of the setup's output</summary>\n\n{}\n\n</details>\n",
                fenced(&run.secrets.scrub(&failed.tail))
            ));
        }
    }
    if run.comment_id().is_none() {
        // Failed before the claim finished: post the failure as the progress comment.
        if let Err(e) = run.ensure_comment().await {
            tracing::warn!(task = %run.item, "cannot post the failure comment: {e}");
        }
    }
    run.finish(false, "Failed", text);
    run.report().await;
    if let Err(e) = run
        .forge
        .edit_labels(
            &run.item,
            &[labels.failed.as_str()],
            &[labels.processing.as_str()],
        )
        .await
    {
        tracing::warn!(task = %run.item, "cannot set the failed label: {e}");
    }
    if let Err(e) = run
        .journal
        .transition(&run.key, Transition::ended(Phase::Failed, &reason))
    {
        tracing::error!(task = %run.item, "cannot journal the failure: {e}");
    }
    TaskEnd::Failed { reason }
}

async fn stopped(run: &mut TaskRun<'_>, labels: &LabelsConfig, reason: &str) -> TaskEnd {
    tracing::info!(task = %run.item, "task stopped: {reason}");
    let text = format!("**Stopped.** {reason}. Nothing was pushed.\n{}", run.usage_line());
    run.finish(false, "Stopped", text);
    run.report().await;
    if let Err(e) = run
        .forge
        .edit_labels(&run.item, &[], &[labels.paused.as_str()])
        .await
    {
        tracing::warn!(task = %run.item, "cannot clear the paused label: {e}");
    }
    if let Err(e) = run
        .journal
        .transition(&run.key, Transition::ended(Phase::Stopped, reason))
    {
        tracing::error!(task = %run.item, "cannot journal the stop: {e}");
    }
    TaskEnd::Stopped
}

/// Leaves the task for later: the progress comment says why (if the forge
/// takes the edit), the journal keeps it unfinished.
async fn deferred(run: &mut TaskRun<'_>, err: &TaskError) -> TaskEnd {
    let reason = run.secrets.scrub(&err.to_string());
    tracing::warn!(task = %run.item, "deferred, will be tried again: {reason}");
    run.note(format!("Waiting: {reason}; forgehand tries again shortly"));
    run.report().await;
    if let Err(e) = run.journal.transition(&run.key, Transition::Deferred) {
        tracing::warn!(task = %run.item, "cannot journal the deferral: {e}");
    }
    TaskEnd::Deferred { reason }
}

/// The daemon is stopping: the task resumes at the next start.
/// Suspended by the paused label at a step's checkpoint: the daemon starts
/// it again when the label goes.
async fn paused(run: &mut TaskRun<'_>) -> TaskEnd {
    tracing::info!(task = %run.item, "paused; the sandbox goes, and the run goes on from its last step when the label is removed");
    if let Err(e) = run.journal.transition(&run.key, Transition::Paused) {
        tracing::error!(task = %run.item, "cannot journal the pause: {e}");
    }
    run.report().await;
    TaskEnd::Paused
}

async fn interrupted(run: &mut TaskRun<'_>) -> TaskEnd {
    tracing::info!(task = %run.item, "interrupted by shutdown; it resumes at the next start");
    run.note("Paused: forgehand is restarting; the task resumes when it is back");
    run.report().await;
    TaskEnd::Interrupted
}
