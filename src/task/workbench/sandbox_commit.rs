//! Committing, inside the sandbox, what the model left uncommitted: before
//! the repository's test command runs (so only the model's work is taken)
//! and again before the push; and setting aside what the tests wrote, so
//! nothing they leave (`__pycache__`, coverage data, build output) is
//! committed afterwards.

use crate::config::DeliveryConfig;
use crate::forge::ItemRef;
use crate::sandbox::command::shell_quote;
use crate::sandbox::Sandbox;
use std::time::Duration;

/// The message of forgehand's commit of the model's leftovers.
pub(in crate::task) fn message(item: &ItemRef) -> String {
    format!("forgehand: commit changes left uncommitted for {item}")
}

/// Commits what the model left uncommitted inside the sandbox; else why
/// it could not (the host then commits from the whole project).
pub(in crate::task) async fn commit(
    sandbox: &dyn Sandbox,
    delivery: &DeliveryConfig,
    message: &str,
) -> Option<String> {
    let committed = sandbox
        .exec(
            &format!(
                "git add -A && (git diff --cached --quiet || git -c user.name={} -c user.email={} commit -q -m {})",
                shell_quote(&delivery.author_name),
                shell_quote(&delivery.author_email),
                shell_quote(message)
            ),
            Some(Duration::from_secs(300)),
        )
        .await;
    // Only the exit code is said: the sandbox's own words never reach the PR.
    match &committed {
        Ok(out) if out.success() => None,
        Ok(out) => Some(match out.exit_code {
            Some(127) => "git is not installed in the sandbox".to_owned(),
            Some(code) => format!(
                "`git commit` in the sandbox failed (exit code {code}; a hook, a lock or a broken index)"
            ),
            None => "`git commit` in the sandbox did not end in time".to_owned(),
        }),
        Err(e) => Some(format!("git could not be run in the sandbox ({e})")),
    }
}

/// Sets aside what the test command changed or wrote in the work tree
/// (ignored files stay where they are: they are never committed), in a
/// stash the push never takes. Whether it could.
pub(in crate::task) async fn set_aside_test_output(sandbox: &dyn Sandbox, delivery: &DeliveryConfig) -> bool {
    let command = format!(
        "test -z \"$(git status --porcelain)\" || git -c user.name={} -c user.email={} stash push -q --include-untracked -m 'forgehand: what the test command left'",
        shell_quote(&delivery.author_name),
        shell_quote(&delivery.author_email),
    );
    match sandbox.exec(&command, Some(Duration::from_secs(300))).await {
        Ok(out) if out.success() => true,
        Ok(out) => {
            tracing::warn!(code = ?out.exit_code, "could not set aside what the test command left in the sandbox");
            false
        }
        Err(e) => {
            tracing::warn!("could not set aside what the test command left in the sandbox: {e}");
            false
        }
    }
}
