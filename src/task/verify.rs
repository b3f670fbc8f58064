//! Tests before delivery: when the repository names a `test` command, it
//! runs in the sandbox after the model says it is done; a failure goes back
//! to the model (the end of the output) for up to `agent.test_fix_rounds`
//! more rounds. The result joins the summary, so it reaches the PR/MR body
//! and the progress comment, and survives a restart with it.

use super::prepare::{tail, TAIL_CHARS};
use super::*;
use crate::repo_settings::RepoSettings;

/// How the repository's tests ended on the change.
#[derive(Debug, Clone)]
pub(super) struct TestReport {
    pub command: String,
    pub passed: bool,
    /// `exited with code 1`, `did not finish within 10m`.
    pub outcome: String,
    pub tail: String,
    pub fix_rounds: u32,
    pub took: Duration,
}

impl TestReport {
    /// The section of the summary (and so of the PR/MR body).
    pub fn section(&self) -> String {
        if self.passed {
            let rounds = match self.fix_rounds {
                0 => String::new(),
                n => format!(", after {n} fix round(s)"),
            };
            return format!(
                "### Tests\n\n`{}` passed in the sandbox ({:.1} s{rounds}).",
                self.command,
                self.took.as_secs_f64()
            );
        }
        format!(
            "### Tests\n\n**`{}` fails**: it {} (after {} fix round(s)). Review before merging. The end of its output:\n\n{}",
            self.command,
            self.outcome,
            self.fix_rounds,
            fenced(&self.tail)
        )
    }

    fn note(&self) -> String {
        if self.passed {
            format!(
                "Tests: `{}` passed ({:.1} s)",
                self.command,
                self.took.as_secs_f64()
            )
        } else {
            format!(
                "Tests: `{}` {} after {} fix round(s)",
                self.command, self.outcome, self.fix_rounds
            )
        }
    }
}

/// `text` in a code fence longer than any backtick run inside it.
pub(super) fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}\n{}\n{fence}", text.trim_end())
}

impl TaskRun<'_> {
    /// Runs the tests and, while they fail and rounds are left, hands the
    /// failure back to the model. `outcome` is the agent's latest run and is
    /// replaced by each fix round's. `None`: no test command, or nothing to test.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn verify(
        &mut self,
        agent: &Agent,
        system: &str,
        outcome: &mut AgentOutcome,
        sandbox: &dyn Sandbox,
        settings: &RepoSettings,
        base: &str,
        live: &Arc<std::sync::Mutex<Progress>>,
    ) -> Result<Option<TestReport>, TaskError> {
        let Some(command) = settings.test.clone() else {
            return Ok(None);
        };
        if outcome.stop != StopReason::Answered || !self.changed(sandbox, base).await {
            return Ok(None);
        }
        let rounds = self.env.config.agent.test_fix_rounds;
        let mut fix_rounds = 0;
        loop {
            self.progress
                .status_now(format!("Testing the change: `{command}`"));
            self.report().await;
            let output = sandbox
                .exec(&format!("{{ {command}\n}} 2>&1"), Some(settings.test_timeout))
                .await?;
            let passed = output.success();
            let report = TestReport {
                command: command.clone(),
                passed,
                outcome: if output.timed_out {
                    format!(
                        "did not finish within {} (test_timeout)",
                        humantime::format_duration(settings.test_timeout)
                    )
                } else {
                    format!("exited with code {}", output.exit_code.unwrap_or(-1))
                },
                tail: self.env.secrets.scrub(&tail(&output.stdout, TAIL_CHARS)),
                fix_rounds,
                took: output.duration,
            };
            crate::metrics::global().repository_step(
                "test",
                match (passed, output.timed_out) {
                    (true, _) => "passed",
                    (false, true) => "timed_out",
                    (false, false) => "failed",
                },
            );
            tracing::info!(task = %self.item, passed, rounds = fix_rounds, "tests ran: {}", report.outcome);
            if passed || fix_rounds >= rounds {
                self.progress.note(report.note());
                return Ok(Some(report));
            }
            fix_rounds += 1;
            self.progress.note(format!(
                "Tests: `{command}` {}; the model fixes it (round {fix_rounds} of {rounds})",
                report.outcome
            ));
            let message = crate::prompts::fill(
                &self.env.prompts.agent.test_failure,
                &[
                    ("command", &command),
                    ("outcome", &report.outcome),
                    ("output", &report.tail),
                    ("rounds_left", &(rounds - fix_rounds).to_string()),
                ],
            );
            let mut messages = outcome.messages.clone();
            messages.push(Message::User(message));
            *live.lock().unwrap_or_else(|p| p.into_inner()) = self.progress.clone();
            let next = agent.run(system, messages).await;
            self.progress = live.lock().unwrap_or_else(|p| p.into_inner()).clone();
            self.add_usage(&next);
            self.check_halt(&next)?;
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

    /// Whether the sandbox's project differs from where the branch started.
    async fn changed(&self, sandbox: &dyn Sandbox, base: &str) -> bool {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_the_backticks_inside() {
        assert_eq!(fenced("plain"), "```\nplain\n```");
        assert_eq!(fenced("a ```` b"), "`````\na ```` b\n`````");
    }

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
