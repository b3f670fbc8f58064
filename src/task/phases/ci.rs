//! The phase after the PR/MR is open: following the forge's checks on the
//! pushed commit. Waiting is a state, not a sleep: the task journals what
//! it waits on ([`CheckWait`]) and its run ends, holding no slot and no
//! sandbox; the daemon's watcher ([`look`]) starts it again when the
//! checks end. A failed check is re-run once where the forge can (one that
//! then passes is flaky, not fixed); one that still fails has its log cut
//! to its useful tail, secrets masked, and given to the model in a new
//! sandbox on the pushed branch, going on from the journalled
//! conversation, for up to `delivery.ci_fix_rounds` rounds. Checks that
//! never start, or never end, are said plainly after `delivery.ci_wait` /
//! `ci_timeout` instead of being waited on forever.

use crate::config::CiConfig;
use crate::forge::{ci_line, ci_state, Check, CheckId, CheckState, Checks, CiState, ForgeError};
use crate::journal::{CheckWait, ChecksSeen, Transition};
use crate::llm::Message;
use crate::task::handoff::Bench;
use crate::task::handoff::Claimed;
use crate::task::phases::push;
use crate::task::phases::request::{self, FailedCheck};
use crate::task::report::events::TaskEvent;
use crate::task::report::progress::Step;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use std::time::Duration;

/// What following the checks needs besides the run.
pub(in crate::task) struct Needs<'a> {
    pub ci: &'a CiConfig,
    pub push: push::Needs<'a>,
}

/// What became of the checks, for the comment's outcome.
#[derive(Debug, PartialEq)]
pub(in crate::task) enum CiReport {
    /// Not followed, and why.
    NotFollowed(String),
    Green {
        line: String,
        flaky: Vec<String>,
        rounds: u32,
    },
    StillFailing {
        line: String,
        failing: Vec<String>,
        rounds: u32,
        why: String,
    },
    /// Nothing started within `ci_wait`.
    NeverStarted { line: String, waited: Duration },
    /// Started but not ended within `ci_timeout`.
    StillRunning { line: String, waited: Duration },
    /// Ended except checks that wait for a person.
    WaitingForAPerson { line: String },
}

impl CiReport {
    /// The report as the comment's CI section.
    pub(in crate::task) fn section(&self) -> String {
        match self {
            CiReport::NotFollowed(why) => why.clone(),
            CiReport::Green { line, flaky, rounds } => {
                let mut out = format!("Green: {line}.");
                if *rounds > 0 {
                    out.push_str(&format!(" Fixed in {rounds} round(s) after failing checks."));
                }
                if !flaky.is_empty() {
                    out.push_str(&format!(
                        " Flaky (failed, then passed when re-run; not a fix): {}.",
                        flaky.join(", ")
                    ));
                }
                out
            }
            CiReport::StillFailing {
                line,
                failing,
                rounds,
                why,
            } => format!(
                "Still failing after {rounds} fix round(s): {}. {why} The checks: {line}.",
                failing.join(", ")
            ),
            CiReport::NeverStarted { line, waited } => format!(
                "No check started within {} (delivery.ci_wait): {line}. A workflow may wait for a maintainer's approval, the pipeline may be blocked, or no runner is free; forgehand stopped waiting.",
                humantime::format_duration(*waited)
            ),
            CiReport::StillRunning { line, waited } => format!(
                "Checks still running after {} (delivery.ci_timeout): {line}. forgehand stopped waiting.",
                humantime::format_duration(*waited)
            ),
            CiReport::WaitingForAPerson { line } => {
                format!("Waiting for a person: {line}. Nothing failed.")
            }
        }
    }
}

/// Where following the checks stands after a step.
#[derive(Debug)]
pub(in crate::task) enum Following {
    /// It ended: the report for the comment.
    Report(CiReport),
    /// The task waits on a commit's checks (journalled); its run ends here.
    Waiting,
    /// The checks failed and a fix round is due: the model, in a new
    /// sandbox, is given the failed checks' logs.
    FixRound {
        wait: CheckWait,
        failed: Vec<Check>,
        round: u32,
    },
}

/// After the PR/MR opened: the pushed commit's checks are waited on (the
/// run ends and the task holds nothing while they run), or why not.
/// `bench` is the sandbox and session of the change (`None` after a
/// restart, when they are gone).
pub(in crate::task) async fn begin(
    run: &mut TaskRun<'_>,
    claimed: &Claimed,
    bench: Option<&Bench>,
    summary: &str,
) -> Result<Option<CiReport>, TaskError> {
    let Some(bench) = bench else {
        return Ok(Some(CiReport::NotFollowed(
            "Not followed: forgehand restarted after the push, and the sandbox of the change is gone.".into(),
        )));
    };
    let sha = match pushed_with_ci(run, claimed, bench).await? {
        Ok(sha) => sha,
        Err(report) => return Ok(Some(report)),
    };
    let wait = CheckWait::on(
        sha.to_string(),
        0,
        summary.to_owned(),
        bench.outcome.messages.clone(),
    );
    wait_on(run, wait).await?;
    Ok(None)
}

/// Journals `wait` and says on the comment whose checks are followed. The
/// run that ends waiting was not interrupted: its attempt is given back.
async fn wait_on(run: &mut TaskRun<'_>, wait: CheckWait) -> Result<(), TaskError> {
    let short: String = wait.sha.chars().take(8).collect();
    run.at(Step::Ci, format!("Following the checks on {short}"));
    run.journal
        .transition(&run.key, Transition::AwaitingChecks(&wait))?;
    run.report().await;
    tracing::info!(task = %run.item, sha = %wait.sha, round = wait.round, "waiting on the checks; the task holds no slot and no sandbox until they end");
    Ok(())
}

/// A run started again on its wait for checks: the next step from what
/// they said. A wait nobody has seen end yet (the daemon started again,
/// or `forgehand once`) is looked at once first.
pub(in crate::task) async fn go_on(
    run: &mut TaskRun<'_>,
    ci: &CiConfig,
    mut wait: CheckWait,
) -> Result<Following, TaskError> {
    if wait.seen.is_none() && !look(run.forge.as_ref(), &run.item.repo, &mut wait, ci).await? {
        run.journal
            .transition(&run.key, Transition::AwaitingChecks(&wait))?;
        return Ok(Following::Waiting);
    }
    let checks = match wait.seen.take() {
        Some(ChecksSeen::Ended(checks)) => checks,
        Some(ChecksSeen::NeverStarted(checks)) => {
            return Ok(Following::Report(CiReport::NeverStarted {
                line: ci_line(&checks),
                waited: ci.wait,
            }))
        }
        Some(ChecksSeen::StillRunning(checks)) => {
            return Ok(Following::Report(CiReport::StillRunning {
                line: ci_line(&checks),
                waited: ci.timeout,
            }))
        }
        // Seen above; a wait is never journalled as ended without it.
        None => return Ok(Following::Waiting),
    };
    let line = ci_line(&checks);
    run.emit(TaskEvent::Checks(line.clone()));
    // The checks re-run for this wait that pass now were flaky.
    let rerun = std::mem::take(&mut wait.rerun);
    wait.flaky.extend(passed_now(&rerun, &checks));
    match ci_state(&checks) {
        CiState::Failed => {}
        CiState::Blocked => return Ok(Following::Report(CiReport::WaitingForAPerson { line })),
        _ => {
            return Ok(Following::Report(CiReport::Green {
                line,
                flaky: wait.flaky,
                rounds: wait.round,
            }))
        }
    }
    let failed: Vec<Check> = checks
        .into_iter()
        .filter(|c| c.state == CheckState::Failed)
        .collect();
    if !wait.rerun_done {
        wait.rerun_done = true;
        wait.rerun = rerun_failed(run, &failed).await?;
        if !wait.rerun.is_empty() {
            wait_on(run, wait.restarted()).await?;
            return Ok(Following::Waiting);
        }
    }
    if wait.round >= ci.fix_rounds {
        return Ok(Following::Report(CiReport::StillFailing {
            line,
            failing: failed.iter().map(|c| c.name.clone()).collect(),
            rounds: wait.round,
            why: no_rounds_left(ci.fix_rounds),
        }));
    }
    let round = wait.round + 1;
    Ok(Following::FixRound { wait, failed, round })
}

/// After a fix round: its commit's checks waited on, or, when the model
/// changed nothing, the report that says so.
pub(in crate::task) async fn after_round(
    run: &mut TaskRun<'_>,
    mut wait: CheckWait,
    failed: &[Check],
    round: u32,
    pushed: Option<(git2::Oid, Vec<Message>)>,
) -> Result<Option<CiReport>, TaskError> {
    let Some((sha, conversation)) = pushed else {
        return Ok(Some(CiReport::StillFailing {
            line: ci_line(failed),
            failing: failed.iter().map(|c| c.name.clone()).collect(),
            rounds: round,
            why: "The model's last round changed nothing.".into(),
        }));
    };
    wait.sha = sha.to_string();
    wait.round = round;
    wait.conversation = conversation;
    wait_on(run, wait.restarted()).await?;
    Ok(None)
}

/// One look at the checks a task waits on: whether the wait ended (then
/// `wait.seen` says how: they all ended, none started within `ci.wait`,
/// or they did not end within `ci.timeout`).
pub async fn look(
    forge: &dyn Checks,
    repo: &str,
    wait: &mut CheckWait,
    ci: &CiConfig,
) -> Result<bool, ForgeError> {
    let checks = forge.checks(repo, &wait.sha).await?;
    wait.shown = ci_line(&checks);
    let started_any = checks.iter().any(|c| c.state != CheckState::Queued);
    let waited = wait.waited();
    wait.seen = match ci_state(&checks) {
        CiState::Passed | CiState::Failed | CiState::Blocked => Some(ChecksSeen::Ended(checks)),
        _ if !started_any && waited >= ci.wait => Some(ChecksSeen::NeverStarted(checks)),
        _ if waited >= ci.timeout => Some(ChecksSeen::StillRunning(checks)),
        _ => None,
    };
    Ok(wait.seen.is_some())
}

/// A watcher's look at `item`'s checks (the daemon's, or `forgehand
/// once`'s): whether they ended, with the wait journalled for the task's
/// next run. A new line of the checks is logged and kept; a forge or a
/// journal that does not answer is logged, and the next look tries again.
pub async fn look_and_keep(
    journal: &crate::journal::Journal,
    forge: &dyn Checks,
    item: &crate::forge::ItemRef,
    mut wait: CheckWait,
    ci: &CiConfig,
) -> bool {
    let shown = wait.shown.clone();
    let ended = match look(forge, &item.repo, &mut wait, ci).await {
        Ok(ended) => ended,
        Err(e) => {
            tracing::warn!(task = %item, "cannot read the checks now: {e}");
            return false;
        }
    };
    if !ended && wait.shown == shown {
        return false;
    }
    if let Err(e) = journal.save_check_wait(&item.key(), &wait) {
        tracing::error!(task = %item, "cannot journal the checks seen: {e}");
        return false;
    }
    match ended {
        true => {
            tracing::info!(task = %item, checks = %wait.shown, "the checks ended; starting the task again")
        }
        false => tracing::info!(task = %item, checks = %wait.shown, "checks"),
    }
    ended
}

/// Why no fix round is left, for a report of checks still failing.
fn no_rounds_left(fix_rounds: u32) -> String {
    match fix_rounds {
        0 => "Fix rounds are off (delivery.ci_fix_rounds: 0).".to_owned(),
        n => format!("The {n} fix round(s) of delivery.ci_fix_rounds are used up."),
    }
}

/// The pushed commit, when the repository has CI to follow; else why
/// nothing is followed.
async fn pushed_with_ci(
    run: &TaskRun<'_>,
    claimed: &Claimed,
    bench: &Bench,
) -> Result<Result<git2::Oid, CiReport>, TaskError> {
    let forge: &dyn Checks = run.forge.as_ref();
    if !forge.has_ci() {
        return Ok(Err(CiReport::NotFollowed(
            "Not followed: this repository has no forge, so no checks run.".into(),
        )));
    }
    let base = claimed.target.base.clone();
    let workspace = &bench.prepared.workspace;
    let (base_head, configured) = workspace.with(move |ws| ws.base_ci(&base)).await??;
    let Some(sha) = workspace.with(|ws| ws.pushed_head()).await? else {
        return Ok(Err(CiReport::NotFollowed(
            "Not followed: nothing was pushed.".into(),
        )));
    };
    if !configured
        && forge
            .checks(&run.item.repo, &base_head.to_string())
            .await?
            .is_empty()
    {
        return Ok(Err(CiReport::NotFollowed(format!(
            "No CI seen in this repository (no workflow files or .gitlab-ci.yml, and no checks on `{}`'s last commit); not waited for.",
            claimed.target.base
        ))));
    }
    Ok(Ok(sha))
}

/// Re-runs the failed checks the forge can re-run; their names.
async fn rerun_failed(run: &mut TaskRun<'_>, failed: &[Check]) -> Result<Vec<String>, TaskError> {
    let mut rerun = Vec::new();
    let forge: &dyn Checks = run.forge.as_ref();
    for check in failed.iter().filter(|c| matches!(c.id, CheckId::Job(_))) {
        if forge.rerun_check(&run.item.repo, check).await? {
            rerun.push(check.name.clone());
        }
    }
    if !rerun.is_empty() {
        run.note(format!(
            "Checks failed; re-running {} once to tell a flaky failure from a real one",
            rerun.join(", ")
        ));
    }
    Ok(rerun)
}

/// Of the checks `rerun`, those that passed on their re-run.
fn passed_now(rerun: &[String], again: &[Check]) -> Vec<String> {
    rerun
        .iter()
        .filter(|name| {
            again
                .iter()
                .any(|c| c.name == **name && c.state == CheckState::Passed)
        })
        .cloned()
        .collect()
}

/// One fix round: the failed checks' logs to the model, its fix pushed.
/// The pushed commit, or `None` when the model changed nothing.
pub(in crate::task) async fn fix_round(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    bench: &mut Bench,
    sha: &str,
    failed: &[Check],
    round: u32,
) -> Result<Option<git2::Oid>, TaskError> {
    let names: Vec<&str> = failed.iter().map(|c| c.name.as_str()).collect();
    run.at(
        Step::Change,
        format!(
            "CI round {round} of {}: {} failed; the model reads the logs",
            needs.ci.fix_rounds,
            names.join(", ")
        ),
    );
    run.report().await;
    let mut logs = Vec::new();
    let forge: &dyn Checks = run.forge.as_ref();
    for check in failed {
        let log = match forge.check_log(&run.item.repo, check).await {
            Ok(log) => log.map(|text| masked_log(run, &check.name, &text)),
            Err(e) => {
                tracing::warn!(task = %run.item, check = %check.name, "cannot read the check's log: {e}");
                None
            }
        };
        logs.push(FailedCheck {
            name: check.name.clone(),
            url: check.url.clone(),
            log,
        });
    }
    let mut messages = bench.outcome.messages.clone();
    messages.push(Message::User(request::ci_fix_request(
        &claimed.target.branch,
        sha,
        &logs,
    )));
    bench.outcome = bench.session.resume(run, messages).await?;
    push::push_again(run, &needs.push, claimed, bench).await
}

/// The useful part of a check's log, its secrets masked over the whole
/// log before it is cut. What was masked is said (by rule, never the
/// value) in the comment and the daemon's log: a job that prints
/// credentials leaks them wherever its log is read.
fn masked_log(run: &TaskRun<'_>, check: &str, log: &str) -> String {
    let masked = run.secrets.mask(&crate::task::report::ci_log::clean(log));
    if !masked.rules.is_empty() {
        let rules = masked
            .rules
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        tracing::warn!(task = %run.item, check, rules, "a check's log holds credentials; masked before the model reads it");
        run.note(format!(
            "The log of check `{check}` holds what looks like credentials ({rules}); forgehand masked them before the model read it. Whoever owns them may want to rotate them."
        ));
    }
    crate::task::report::ci_log::useful_tail(&masked.text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_says_what_became_of_the_checks() {
        let green = CiReport::Green {
            line: "3 passed".into(),
            flaky: vec!["e2e".into()],
            rounds: 1,
        };
        let text = green.section();
        assert!(text.contains("Green: 3 passed."), "{text}");
        assert!(text.contains("Fixed in 1 round(s)"));
        assert!(text.contains("Flaky (failed, then passed when re-run; not a fix): e2e."));
        let never = CiReport::NeverStarted {
            line: "no checks".into(),
            waited: Duration::from_secs(600),
        };
        assert!(never.section().contains("No check started within 10m"));
        let check = |name: &str, state| Check {
            id: CheckId::Job(1),
            name: name.into(),
            state,
            url: String::new(),
        };
        assert_eq!(
            passed_now(
                &["a".into(), "b".into()],
                &[check("a", CheckState::Passed), check("b", CheckState::Failed)]
            ),
            vec!["a".to_owned()]
        );
    }
}
