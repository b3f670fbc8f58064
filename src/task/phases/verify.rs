//! The fifth phase, verifying: when the repository names a `test`
//! command, it runs in the sandbox after the model says it is done; a
//! failure goes back to the model (the end of the output) for up to
//! `agent.test_fix_rounds` more rounds. The result joins the summary, so
//! it reaches the PR/MR body and the progress comment, and survives a
//! restart with it.

use crate::agent::{AgentOutcome, StopReason};
use crate::llm::Message;
use crate::prompts::Prompts;
use crate::repo_settings::setup::{tail, TAIL_CHARS};
use crate::sandbox::command::shell_quote;
use crate::sandbox::Sandbox;
use crate::task::handoff::Changed;
use crate::task::handoff::{TestReport, Verified};
use crate::task::report::events::TaskEvent;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::workbench::session::Session;
use std::time::Duration;

/// What verifying needs besides the run.
pub(in crate::task) struct Needs<'a> {
    /// `agent.test_fix_rounds`.
    pub fix_rounds: u32,
    /// Who commits the model's leftovers before the tests run.
    pub delivery: &'a crate::config::DeliveryConfig,
    pub prompts: &'a Prompts,
}

/// Runs the tests and, while they fail and rounds are left, hands the
/// failure back to the model; each fix round's outcome replaces the last.
pub(in crate::task) async fn verify(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    changed: Changed,
) -> Result<Verified, TaskError> {
    let Changed {
        prepared,
        session,
        mut outcome,
    } = changed;
    let tests = match prepared.repo.settings.test.clone() {
        Some(command) => {
            let test = Test {
                command: &command,
                timeout: prepared.repo.settings.test_timeout,
                sandbox: prepared.sandbox.sandbox.as_ref(),
            };
            let base = prepared.workspace.with(|ws| ws.base).await?.to_string();
            if outcome.stop != StopReason::Answered || !changed_since(test.sandbox, &base).await {
                None
            } else {
                Some(test_and_fix(run, needs, &session, &mut outcome, &test).await?)
            }
        }
        None => None,
    };
    Ok(Verified {
        prepared,
        session,
        outcome,
        tests,
    })
}

/// The repository's test command, where it runs.
struct Test<'a> {
    command: &'a str,
    timeout: Duration,
    sandbox: &'a dyn Sandbox,
}

async fn test_and_fix(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    session: &Session,
    outcome: &mut AgentOutcome,
    test: &Test<'_>,
) -> Result<TestReport, TaskError> {
    let (command, rounds) = (test.command, needs.fix_rounds);
    let mut fix_rounds = 0;
    loop {
        run.status_now(format!("Testing the change: `{command}`"));
        run.report().await;
        let report = run_tests(run, test, (fix_rounds, needs.delivery)).await?;
        if report.passed || fix_rounds >= rounds {
            run.note(report.note());
            return Ok(report);
        }
        fix_rounds += 1;
        run.note(format!(
            "Tests: `{command}` {}; the model fixes it (round {fix_rounds} of {rounds})",
            report.outcome
        ));
        let message = crate::prompts::fill(
            &needs.prompts.agent.test_failure,
            &[
                ("command", command),
                ("outcome", &report.outcome),
                ("output", &report.tail),
                ("rounds_left", &(rounds - fix_rounds).to_string()),
            ],
        );
        let mut messages = outcome.messages.clone();
        messages.push(Message::User(message));
        let next = session.resume(run, messages).await?;
        let answered = next.stop == StopReason::Answered;
        if let (Some(answer), true) = (&next.answer, answered) {
            if !answer.trim().is_empty() {
                outcome.answer = Some(answer.clone());
            }
        }
        outcome.messages = next.messages;
        outcome.stop = next.stop;
        if !answered {
            // The round ran out of budget: test what it left, once more.
            fix_rounds = rounds;
        }
    }
}

/// One run of the tests, measured and reported. What the model left
/// uncommitted is committed first, and what the tests leave is set aside
/// after: only the model's work is delivered.
async fn run_tests(
    run: &TaskRun<'_>,
    test: &Test<'_>,
    (fix_rounds, delivery): (u32, &crate::config::DeliveryConfig),
) -> Result<TestReport, TaskError> {
    let message = crate::task::workbench::sandbox_commit::message(&run.item);
    if let Some(why) = crate::task::workbench::sandbox_commit::commit(test.sandbox, delivery, &message).await
    {
        tracing::info!(task = %run.item, "the model's leftovers stay uncommitted before the tests: {why}");
    }
    let output = test
        .sandbox
        .exec(&format!("{{ {}\n}} 2>&1", test.command), Some(test.timeout))
        .await?;
    crate::task::workbench::sandbox_commit::set_aside_test_output(test.sandbox, delivery).await;
    let passed = output.success();
    let report = TestReport {
        command: test.command.to_owned(),
        passed,
        outcome: if output.timed_out {
            format!(
                "did not finish within {} (test_timeout)",
                humantime::format_duration(test.timeout)
            )
        } else {
            format!("exited with code {}", output.exit_code.unwrap_or(-1))
        },
        tail: run.secrets.scrub(&tail(&output.stdout, TAIL_CHARS)),
        fix_rounds,
        took: output.duration,
    };
    run.emit(TaskEvent::RepositoryStep {
        step: "test",
        outcome: match (passed, output.timed_out) {
            (true, _) => "passed",
            (false, true) => "timed_out",
            (false, false) => "failed",
        },
    });
    tracing::info!(task = %run.item, passed, rounds = fix_rounds, "tests ran: {}", report.outcome);
    Ok(report)
}

/// Whether the sandbox's project differs from where the branch started.
async fn changed_since(sandbox: &dyn Sandbox, base: &str) -> bool {
    let check = format!(
        "test -n \"$(git status --porcelain 2>/dev/null)\" || test \"$(git rev-parse HEAD 2>/dev/null)\" != {}",
        shell_quote(base)
    );
    sandbox
        .exec(&check, Some(Duration::from_secs(60)))
        .await
        .map(|o| o.success())
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_report_says_so_with_the_output() {
        let report = TestReport {
            command: "pytest -q".into(),
            passed: false,
            outcome: "exited with code 1".into(),
            tail: "E assert 1 == 2".into(),
            fix_rounds: 2,
            took: Duration::from_secs(3),
        };
        let section = report.section();
        assert!(section.contains("**`pytest -q` fails**") && section.contains("E assert 1 == 2"));
        assert!(report.note().contains("after 2 fix round(s)"));
    }
}
