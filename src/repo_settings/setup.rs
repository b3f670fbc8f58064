//! Running a repository's setup commands in a sandbox, in order, within
//! its `setup_timeout` in all: what a task does before the agent starts,
//! and what `forgehand eval` does before the tests that score it.

use super::RepoSettings;
use crate::sandbox::{Sandbox, SandboxError};
use std::time::{Duration, Instant};

/// Characters of a failed command's output that are kept (its end).
pub const TAIL_CHARS: usize = 3000;

/// A setup command that failed (or timed out), with the end of its output.
#[derive(Debug)]
pub struct SetupFailed {
    pub command: String,
    pub outcome: String,
    pub tail: String,
    pub timed_out: bool,
}

impl SetupFailed {
    /// The outcome's name in metrics.
    pub fn metric_outcome(&self) -> &'static str {
        if self.timed_out {
            "timed_out"
        } else {
            "failed"
        }
    }
}

impl std::fmt::Display for SetupFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the repository's setup failed: `{}` {}",
            self.command, self.outcome
        )
    }
}

/// Runs `settings.setup` in `sandbox`; how long it took, or the command
/// that failed.
pub async fn run(
    sandbox: &dyn Sandbox,
    settings: &RepoSettings,
) -> Result<Result<Duration, SetupFailed>, SandboxError> {
    let started = Instant::now();
    for command in &settings.setup {
        let left = settings.setup_timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Ok(Err(SetupFailed {
                command: command.clone(),
                outcome: format!(
                    "was not started: setup had used its {} (setup_timeout)",
                    humantime::format_duration(settings.setup_timeout)
                ),
                tail: String::new(),
                timed_out: true,
            }));
        }
        tracing::info!(command = %command, "running setup");
        let output = sandbox
            .exec(
                &format!("{{ {command}\n}} 2>&1"),
                Some(left.max(Duration::from_secs(1))),
            )
            .await?;
        if !output.success() {
            let outcome = if output.timed_out {
                format!(
                    "did not finish within the setup's {} (setup_timeout)",
                    humantime::format_duration(settings.setup_timeout)
                )
            } else {
                format!("exited with code {}", output.exit_code.unwrap_or(-1))
            };
            return Ok(Err(SetupFailed {
                command: command.clone(),
                outcome,
                tail: tail(&output.stdout, TAIL_CHARS),
                timed_out: output.timed_out,
            }));
        }
    }
    Ok(Ok(started.elapsed()))
}

/// The last `max` characters of `text`, from a line start when one is near.
pub fn tail(text: &str, max: usize) -> String {
    let text = text.trim_end();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let start = text.char_indices().rev().nth(max - 1).map_or(0, |(i, _)| i);
    let cut = &text[start..];
    let from_line = cut.find('\n').filter(|i| *i < 200).map_or(cut, |i| &cut[i + 1..]);
    format!("[… earlier output left out]\n{from_line}")
}

#[cfg(test)]
mod tests {
    use super::tail;

    #[test]
    fn tails_keep_the_end_from_a_line_start() {
        assert_eq!(tail("short\n", 100), "short");
        let long = (0..100)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let kept = tail(&long, 30);
        assert!(kept.starts_with("[… earlier output left out]\nline"), "{kept}");
        assert!(kept.ends_with("line 99"));
        assert!(kept.len() < 80);
    }
}
