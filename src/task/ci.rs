//! The phase after the PR/MR is open: following the forge's checks on the
//! pushed commit. A failed check is re-run once where the forge can (one
//! that then passes is flaky, not fixed); one that still fails has its log
//! cut to its useful tail, secrets masked, and given to the model in the
//! same sandbox and branch, for up to `delivery.ci_fix_rounds` rounds.
//! Checks that never start, or never end, are said plainly after
//! `delivery.ci_wait` / `ci_timeout` instead of being waited on forever.

use super::claim::Claimed;
use super::error::TaskError;
use super::events::TaskEvent;
use super::progress::Step;
use super::push::{self, Bench};
use super::request::{self, FailedCheck};
use super::run::TaskRun;
use crate::config::CiConfig;
use crate::forge::{ci_line, ci_state, Check, CheckId, CheckState, Checks, CiState};
use crate::llm::Message;
use crate::webhooks::{ChecksBell, ChecksListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What following the checks needs besides the run.
pub(super) struct Needs<'a> {
    pub ci: &'a CiConfig,
    pub bell: &'a ChecksBell,
    pub push: push::Needs<'a>,
}

/// What became of the checks, for the comment's outcome.
#[derive(Debug, PartialEq)]
pub(super) enum CiReport {
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
    pub(super) fn section(&self) -> String {
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

/// How one wait for the checks of a commit ended.
enum Watched {
    Ended(Vec<Check>),
    NeverStarted(Vec<Check>),
    StillRunning(Vec<Check>),
}

/// Follows the checks of what was pushed; `bench` is the sandbox and
/// session of the change (`None` after a restart, when they are gone).
pub(super) async fn follow(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    bench: Option<&mut Bench>,
) -> Result<CiReport, TaskError> {
    let Some(bench) = bench else {
        return Ok(CiReport::NotFollowed(
            "Not followed: forgehand restarted after the push, and the sandbox of the change is gone.".into(),
        ));
    };
    let mut sha = match pushed_with_ci(run, claimed, bench).await? {
        Ok(sha) => sha,
        Err(report) => return Ok(report),
    };
    let mut listener = needs.bell.listen(run.item.forge, &run.item.repo);
    let mut rounds = 0;
    let mut flaky = Vec::new();
    let mut rerun_done = false;
    loop {
        let checks = match ended(run, needs, &sha.to_string(), &mut listener).await? {
            Ok(checks) => checks,
            Err(gave_up) => return Ok(gave_up),
        };
        let line = ci_line(&checks);
        match ci_state(&checks) {
            CiState::Failed => {}
            CiState::Blocked => return Ok(CiReport::WaitingForAPerson { line }),
            _ => return Ok(CiReport::Green { line, flaky, rounds }),
        }
        let failed: Vec<Check> = checks
            .into_iter()
            .filter(|c| c.state == CheckState::Failed)
            .collect();
        if !rerun_done {
            rerun_done = true;
            let (passed, now_green) =
                rerun_once(run, needs, &sha.to_string(), &failed, &mut listener).await?;
            flaky.extend(passed);
            if now_green {
                continue;
            }
        }
        let failing: Vec<String> = failed.iter().map(|c| c.name.clone()).collect();
        if rounds >= needs.ci.fix_rounds {
            return Ok(CiReport::StillFailing {
                line,
                failing,
                rounds,
                why: no_rounds_left(needs.ci.fix_rounds),
            });
        }
        rounds += 1;
        match fix_round(run, needs, claimed, bench, &sha.to_string(), &failed, rounds).await? {
            Some(pushed) => sha = pushed,
            None => {
                return Ok(CiReport::StillFailing {
                    line,
                    failing,
                    rounds,
                    why: "The model's last round changed nothing.".into(),
                })
            }
        }
    }
}

/// The checks of `sha` once they all ended, or the report of a wait that
/// gave up (nothing started within `ci_wait`, or not ended within
/// `ci_timeout`).
async fn ended(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    sha: &str,
    listener: &mut ChecksListener,
) -> Result<Result<Vec<Check>, CiReport>, TaskError> {
    Ok(match watch(run, needs, sha, listener).await? {
        Watched::Ended(checks) => Ok(checks),
        Watched::NeverStarted(checks) => Err(CiReport::NeverStarted {
            line: ci_line(&checks),
            waited: needs.ci.wait,
        }),
        Watched::StillRunning(checks) => Err(CiReport::StillRunning {
            line: ci_line(&checks),
            waited: needs.ci.timeout,
        }),
    })
}

/// Why no fix round is left, for a report of checks still failing.
fn no_rounds_left(fix_rounds: u32) -> String {
    match fix_rounds {
        0 => "Fix rounds are off (delivery.ci_fix_rounds: 0).".to_owned(),
        n => format!("The {n} fix round(s) of delivery.ci_fix_rounds are used up."),
    }
}

/// Runs the failed checks again once, where the forge can: the names
/// that passed this time (flaky), and whether nothing fails any more.
async fn rerun_once(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    sha: &str,
    failed: &[Check],
    listener: &mut ChecksListener,
) -> Result<(Vec<String>, bool), TaskError> {
    let rerun = rerun_failed(run, failed).await?;
    if rerun.is_empty() {
        return Ok((Vec::new(), false));
    }
    let again = match watch(run, needs, sha, listener).await? {
        Watched::Ended(checks) | Watched::NeverStarted(checks) | Watched::StillRunning(checks) => checks,
    };
    Ok((passed_now(&rerun, &again), ci_state(&again) != CiState::Failed))
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

/// Waits until the commit's checks end, or for `ci_wait` / `ci_timeout`.
async fn watch(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    sha: &str,
    listener: &mut ChecksListener,
) -> Result<Watched, TaskError> {
    let short: String = sha.chars().take(8).collect();
    run.at(Step::Ci, format!("Following the checks on {short}"));
    run.report().await;
    let started = Instant::now();
    let mut shown = String::new();
    let forge: Arc<dyn Checks> = run.forge.clone();
    loop {
        let checks = match forge.checks(&run.item.repo, sha).await {
            Ok(checks) => Some(checks),
            // A forge away for a moment: asked again at the next poll.
            Err(e) if e.is_retryable() => {
                tracing::warn!(task = %run.item, "cannot read the checks now: {e}");
                None
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(checks) = checks {
            let line = ci_line(&checks);
            if line != shown {
                run.emit(TaskEvent::Checks(line.clone()));
                run.report().await;
                shown = line;
            }
            let waited = started.elapsed();
            let started_any = checks.iter().any(|c| c.state != CheckState::Queued);
            match ci_state(&checks) {
                CiState::Passed | CiState::Failed | CiState::Blocked => return Ok(Watched::Ended(checks)),
                _ if !started_any && waited >= needs.ci.wait => return Ok(Watched::NeverStarted(checks)),
                _ if waited >= needs.ci.timeout => return Ok(Watched::StillRunning(checks)),
                _ => {}
            }
        }
        tokio::select! {
            _ = run.shutdown.cancelled() => return Err(TaskError::Shutdown),
            _ = listener.rung() => {}
            _ = tokio::time::sleep(needs.ci.poll) => {}
        }
    }
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
async fn fix_round(
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
    let masked = run.secrets.mask(&super::ci_log::clean(log));
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
    super::ci_log::useful_tail(&masked.text)
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
