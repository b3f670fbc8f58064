//! One task, from claim to draft PR/MR: what the daemon (and `forgehand
//! once`) runs for a labelled issue or PR/MR. The run is a pipeline of
//! phases, each a function from the previous phase's output to its own,
//! given only the settings it needs:
//!
//! ```text
//! claim    -> Claimed    the label swap, the progress comment, the target, the thread
//! prepare  -> Prepared   the clone, the repository's settings, the sandbox, the conversation
//! plan     -> Planned    the synthesised request and the debated plan
//! change   -> Changed    the agent's run in the sandbox
//! verify   -> Verified   the repository's tests, with fix rounds
//! push     -> Pushed     the commits taken out of the sandbox and pushed
//! deliver  -> TaskEnd    the draft PR/MR, the review threads answered,
//!                        the checks followed, the summary, the labels
//! ```
//!
//! Every phase's effect outside the daemon is journalled as soon as it is
//! done and is safe to repeat, so a task killed at any point is resumed,
//! never doubled. Where a run starts is decided in one place
//! (`state::resume`), from what the task kept: the work from the claim
//! (with the records earlier runs kept for the phases on the way: the
//! ground, the plan, a push that began, the agent's last step), a plan
//! waiting for approval, a push to deliver, or checks to follow. What
//! happens is told to one sink (`report::events`): the comment, the
//! board, the metrics and the transcript follow it. The folders:
//! `phases/` (the steps), `handoff.rs` (what each hands the next),
//! `workbench/` (the sandbox, the work tree, the agent's session),
//! `report/` (the events and their subscribers), `state/` (what a task
//! keeps between runs).

mod env;
mod handoff;
mod item_ref;
mod needs;
mod phases;
mod report;
mod run;
mod state;
mod workbench;

// The runner below drives every phase and reports through `report`.
use phases::{
    approval, attempts, ci, ci_round, claim, deliver, gate, plan, prepare, push, review, thread_images,
};
use report::{ending, events};
use state::resume::{self, ResumePoint};
use state::{checkpoint, records};

pub use phases::request;
pub use report::{board, progress};

pub use checkpoint::sweep as sweep_checkpoints;
use env::Accounts;
pub use env::TaskEnv;
pub use phases::approval::answer as answer_to_plan;
pub use phases::attempts::sandbox_owners;
pub use phases::ci::look_and_keep as look_at_checks;
pub use phases::gate::pause_is_over;
pub use request::Heard;
pub use state::action::{Action, Change, Wait, Why};
pub use state::end::TaskEnd;
pub use workbench::start_sandbox::SandboxHints;

use crate::forge::{Checks, Forge, ItemRef};
use crate::journal::TaskRecord;
use claim::Claim;
use events::TaskEvent;
use handoff::Claimed;
use needs::{claim_needs, plan_needs, prepare_needs, push_needs, recorded, work_dir};
use push::Pushed;
use run::{Reporting, TaskRun};
use state::error::TaskError;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Runs (or resumes) the task for `item`.
pub async fn run(
    env: &TaskEnv,
    forge: Arc<dyn Forge>,
    item: ItemRef,
    shutdown: CancellationToken,
) -> TaskEnd {
    let key = item.key();
    let (env, spend) = &budgeted(env, &item);
    let transcript = crate::transcript::Transcript::begin(
        env.journal.clone(),
        env.secrets.clone(),
        &key,
        Some(env.live.clone()),
    );
    let accounts = Accounts {
        spend: spend.clone(),
        transcript: transcript.clone(),
    };
    let record = match env.journal.begin(&key) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(task = %item, "cannot journal the task, not starting it: {e}");
            return TaskEnd::Failed {
                reason: e.to_string(),
            };
        }
    };
    // Whatever started the run, it no longer waits for its label or a time.
    if let Err(e) = env.journal.runs_again(&key) {
        tracing::warn!(task = %item, "cannot journal that the task runs again: {e}");
    }
    // The mentions that asked for this task are answered by it.
    if let Err(e) = env.journal.mentions_answered(&key) {
        tracing::warn!(task = %item, "cannot journal the mentions answered: {e}");
    }
    let reporting = Reporting {
        journal: &env.journal,
        secrets: &env.secrets,
        metrics: &env.metrics,
        board: &env.board,
        echo: env.echo_progress,
        transcript: transcript.clone(),
        records: records::TaskRecords::for_task(&env.config, &item, env.journal.clone(), forge.clone()),
    };
    let mut run = TaskRun::new(reporting, forge, item.clone(), record.comment_id, shutdown);
    run.restore_progress();
    tracing::info!(task = %item, attempt = record.attempts, phase = record.phase.as_str(), "task started");
    let started = std::time::Instant::now();
    run.emit(TaskEvent::Began);
    let result = if record.attempts > env.config.scheduling.max_task_attempts {
        Err(TaskError::Other(format!(
            "the task was interrupted {} times (daemon.max_task_attempts); not starting it again",
            record.attempts - 1
        )))
    } else {
        // Every log line of the run names the task and its attempt.
        let span = tracing::info_span!("task", key = %key, attempt = record.attempts);
        execute(&mut run, env, &accounts, &record).instrument(span).await
    };
    let end = match result {
        Ok(end) => end,
        Err(err) => ending::settle(&mut run, env, &err).await,
    };
    tidy(&mut run, env, &end).await;
    tracing::info!(task = %item, "task ended: {end:?}");
    run.emit(TaskEvent::Ended {
        outcome: end.outcome(),
        detail: end.detail(),
        took: started.elapsed(),
    });
    end
}

/// `forgehand once`'s wait for a task's checks: looked at every
/// `delivery.ci_poll` until they end (journalled for the task's next run)
/// or `shutdown`.
pub async fn wait_for_checks(
    env: &TaskEnv,
    forge: &dyn Checks,
    item: &ItemRef,
    shutdown: &CancellationToken,
) {
    let (key, ci) = (item.key(), &env.config.delivery.ci);
    loop {
        let wait = match env.journal.check_wait(&key) {
            Ok(Some(wait)) if wait.seen.is_none() => wait,
            Ok(_) => return,
            Err(e) => {
                tracing::error!(task = %item, "cannot read the task's wait on its checks: {e}");
                return;
            }
        };
        if ci::look_and_keep(&env.journal, forge, item, wait, ci).await {
            return;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(ci.poll) => {}
        }
    }
}

/// `forgehand once`'s wait while the task is paused: its labels read every
/// `scheduling.poll_interval` until the paused label (or the processing
/// label) is gone, or `shutdown`.
pub async fn wait_until_unpaused(
    env: &TaskEnv,
    forge: &dyn crate::forge::Intake,
    item: &ItemRef,
    shutdown: &CancellationToken,
) {
    let labels = &env.config.labels;
    loop {
        match forge.item(item).await {
            Ok(found) if gate::pause_is_over(&found, labels) => return,
            Ok(_) => {}
            Err(e) => tracing::warn!(task = %item, "cannot read the labels now: {e}"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(env.config.scheduling.poll_interval) => {}
        }
    }
}

/// What a run leaves behind, removed: its sandbox always; its work folder
/// unless the task resumes later (interrupted, deferred or paused). A task waiting
/// on its checks keeps only its journal: its phase records and its wait.
async fn tidy(run: &mut TaskRun<'_>, env: &TaskEnv, end: &TaskEnd) {
    run.remove_sandbox().await;
    run.checkout_settled().await;
    if !matches!(
        end,
        TaskEnd::Interrupted | TaskEnd::Deferred { .. } | TaskEnd::Paused
    ) {
        checkpoint::Store::for_task(&env.config, &run.item, run.records.clone()).forget();
        match end {
            TaskEnd::AwaitingChecks => run.keep_progress(),
            _ => run.records.forget_all(),
        }
        let dir = work_dir(&env.config, &run.item);
        if dir.exists() {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(task = %run.item, "cannot remove the work folder {}: {e}", dir.display());
            }
        }
    }
}

/// The task's own environment: its model checks every call against the
/// budgets (`spend`).
fn budgeted(env: &TaskEnv, item: &ItemRef) -> (TaskEnv, Arc<crate::budget::Spend>) {
    let spend = Arc::new(crate::budget::Spend::new(
        crate::budget::Caps::from(&env.config.budget),
        env.journal.clone(),
        env.metrics.clone(),
        &item.repo,
        crate::llm::router::price_table(&env.config.llm),
    ));
    let model = Arc::new(crate::budget::Budgeted::new(env.model.clone(), spend.clone()));
    (TaskEnv { model, ..env.clone() }, spend)
}

/// The task's phases in order, from where the run starts
/// (`state::resume`, read once): a task pushed before a restart goes
/// straight on to delivery, one waiting on its checks to what they said.
async fn execute(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    accounts: &Accounts,
    record: &TaskRecord,
) -> Result<TaskEnd, TaskError> {
    let config = &env.config;
    let point = match resume::resume_point(run.journal, &run.records, record)? {
        ResumePoint::AwaitingApproval(wait, kept) => match approval::resume(run, env, wait).await? {
            Some(end) => return Ok(end),
            None => ResumePoint::Work(kept),
        },
        point => point,
    };
    let claimed = match claim::claim(run, &claim_needs(config), record).await? {
        Claim::Claimed(claimed) => claimed,
        Claim::Ended(end) => return Ok(end),
    };
    if let (Some(url), Some(transcript)) = (&config.daemon.public_url, &accounts.transcript) {
        run.note(format!("Transcript of this run: {url}/tasks/{}", transcript.id()));
    }
    match point {
        // Started again on its wait for checks (they ended, or the daemon
        // started again while they ran).
        ResumePoint::FollowingChecks(wait) => follow_on(run, env, accounts, &claimed, wait).await,
        ResumePoint::Pushed { summary } => {
            tracing::info!(task = %run.item, "already pushed before a restart; opening or finding the PR/MR");
            run.report().await;
            deliver_and_follow(run, env, &claimed, &summary, None).await
        }
        ResumePoint::Work(kept) | ResumePoint::AwaitingApproval(_, kept) => {
            run.kept = kept;
            if let Some(end) = approval::gate(run, env, accounts, &claimed).await? {
                return Ok(end);
            }
            change_and_deliver(run, env, accounts, &claimed).await
        }
    }
}

/// From the clone to the delivered change (or the answer, when nothing
/// changed).
async fn change_and_deliver(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    accounts: &Accounts,
    claimed: &Claimed,
) -> Result<TaskEnd, TaskError> {
    match make_change(run, env, accounts, claimed).await? {
        Pushed::Branch { summary, bench } => {
            let end = deliver_and_follow(run, env, claimed, &summary, Some(&bench)).await;
            bench.session.close().await;
            end
        }
        // Pushed by the run before a restart: its sandbox is gone.
        Pushed::Earlier { summary } => deliver_and_follow(run, env, claimed, &summary, None).await,
        Pushed::Nothing { answer } => {
            let (answer, answers) = review::split_summary(&answer);
            let unpushed = review::Pushed {
                branch: &claimed.target.branch,
                commit: None,
                any: false,
            };
            if let Some(line) = review::answer(run, &claimed.thread.review, &answers, &unpushed).await {
                run.note(line);
            }
            deliver::no_changes(run, &env.config.labels, &answer).await
        }
    }
}

/// The draft PR/MR, then its checks waited on (the run ends holding
/// nothing until they end), or the outcome when there are none to follow.
async fn deliver_and_follow(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    claimed: &Claimed,
    summary: &str,
    bench: Option<&crate::task::handoff::Bench>,
) -> Result<TaskEnd, TaskError> {
    // The summary's lines for the review threads go to the threads.
    let (summary, answers) = review::split_summary(summary);
    let change = deliver::open_change(run, claimed, &summary).await?;
    let commit = match &bench {
        Some(bench) => bench.prepared.workspace.with(|ws| ws.pushed_head()).await?,
        None => None,
    };
    let pushed = review::Pushed {
        branch: &claimed.target.branch,
        commit: commit.map(|sha| sha.to_string()),
        any: true,
    };
    if let Some(line) = review::answer(run, &claimed.thread.review, &answers, &pushed).await {
        run.note(line);
    }
    match ci::begin(run, claimed, bench, &summary).await? {
        Some(report) => finish_with_checks(run, env, &change, &summary, report).await,
        None => Ok(TaskEnd::AwaitingChecks),
    }
}

/// A task started again on its wait for checks: the next step from what
/// they said (a fix round in a new sandbox when one is due), then the
/// outcome, or the wait again.
async fn follow_on(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    accounts: &Accounts,
    claimed: &Claimed,
    wait: crate::journal::CheckWait,
) -> Result<TaskEnd, TaskError> {
    let summary = wait.summary.clone();
    let report = match ci::go_on(run, &env.config.delivery.ci, wait).await? {
        ci::Following::Report(report) => Some(report),
        ci::Following::Waiting => None,
        ci::Following::FixRound { wait, failed, round } => {
            ci_round::fix(run, env, accounts, claimed, (wait, failed, round)).await?
        }
    };
    let Some(report) = report else {
        return Ok(TaskEnd::AwaitingChecks);
    };
    // The PR/MR opened before the wait, found again.
    let change = deliver::open_change(run, claimed, &summary).await?;
    finish_with_checks(run, env, &change, &summary, report).await
}

/// The outcome, with what became of the checks.
async fn finish_with_checks(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    change: &crate::forge::ChangeInfo,
    summary: &str,
    report: ci::CiReport,
) -> Result<TaskEnd, TaskError> {
    tracing::info!(task = %run.item, "checks: {report:?}");
    deliver::finish(run, &env.config.labels, change, summary, Some(&report.section())).await
}

/// From the clone to the pushed branch.
async fn make_change(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    accounts: &Accounts,
    claimed: &Claimed,
) -> Result<Pushed, TaskError> {
    let reading = recorded(env, accounts, "reading the thread");
    let prepared = prepare::prepare(run, &prepare_needs(&reading, &run.item), claimed).await?;
    if let Some(pushed) =
        push::pushed_before_a_restart(run, &push_needs(&env.config), &prepared.workspace).await?
    {
        return Ok(pushed);
    }
    if let Some(egress) = prepared.sandbox.sandbox.egress() {
        run.emit(TaskEvent::Egress(egress));
    }
    let caps = prepared.repo.settings.budget;
    accounts
        .spend
        .lower_to(caps.task_usd, caps.daily_usd, caps.monthly_usd);
    let images = thread_images::gather(
        run,
        &env.config.agent.images,
        &env.config.delivery.branch_prefix,
        claimed,
    )
    .await;
    let planning = recorded(env, accounts, "planning");
    let planned = plan::plan(run, &plan_needs(&planning), claimed, prepared, images).await?;
    let verified = attempts::change_and_verify(run, env, accounts, claimed, planned).await?;
    let mut needs = push_needs(&env.config);
    // Once pushed, a restart goes on to delivery: the run's steps are not resumed.
    needs.checkpoints = Some(checkpoint::Store::for_task(
        &env.config,
        &run.item,
        run.records.clone(),
    ));
    push::push(run, &needs, claimed, verified).await
}

#[cfg(test)]
mod tests;
