//! How a task's run can end in error: the errors, which of them mean that
//! something outside is away, and the advice a failure gives the
//! maintainer. What becomes of the task then is decided and done in one
//! place, [`crate::task::report::ending::settle`].

use crate::forge::ForgeError;
use crate::git::workspace::DeliveryError;
use crate::journal::JournalError;
use crate::sandbox::SandboxError;

#[derive(Debug, thiserror::Error)]
pub(in crate::task) enum TaskError {
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("{0}")]
    Other(String),
    /// Not a failure: the daemon is stopping.
    #[error("interrupted by shutdown")]
    Shutdown,
    #[error("stopped: {0}")]
    Stopped(String),
    /// Not a failure: the paused label is on; the run goes on from its
    /// last step when it is removed.
    #[error("paused by its label")]
    Paused,
    /// Nothing of the request may be shown to a model.
    #[error("nothing of the request can be shown to the model ({0})")]
    NothingHeard(String),
    /// The repository's `.forgehand.yaml` cannot be used.
    #[error("{0}")]
    Settings(#[from] crate::repo_settings::SettingsError),
    #[error("{0}")]
    SetupFailed(crate::repo_settings::setup::SetupFailed),
    /// The tests still fail and `delivery.require_passing_tests` is set.
    #[error("the tests still fail ({reason}); delivery.require_passing_tests keeps the change from review")]
    TestsFailed { reason: String, section: String },
}

impl TaskError {
    /// Something outside forgehand is away for now (a forge's 5xx or rate
    /// limit, an unreachable remote or Docker engine): worth trying the task
    /// again later rather than failing it.
    pub(in crate::task) fn is_outage(&self) -> bool {
        match self {
            TaskError::Forge(e) => e.is_retryable(),
            TaskError::Sandbox(e) => e.is_retryable(),
            TaskError::Delivery(DeliveryError::Git(e)) => e.is_retryable(),
            _ => false,
        }
    }
}

impl From<crate::git::GitError> for TaskError {
    fn from(e: crate::git::GitError) -> Self {
        TaskError::Delivery(DeliveryError::Git(e))
    }
}

/// What the maintainer can do about a failure, by its kind.
pub(in crate::task) fn advice(err: &TaskError, who: &Whom<'_>) -> String {
    match err {
        TaskError::Forge(ForgeError::Auth { .. }) | TaskError::Delivery(DeliveryError::Git(crate::git::GitError::Auth { .. })) => {
            "Check that forgehand's token may read and write this repository, then add the trigger label again."
        }
        TaskError::Delivery(DeliveryError::Protected { .. }) => {
            "Make that change by hand, or let an operator allow it (delivery.allow_protected_paths), then add the trigger label again."
        }
        TaskError::Delivery(DeliveryError::Refused { .. }) => {
            "Make that change by hand, or give forgehand's token the permission named above, then add the trigger label again."
        }
        TaskError::Sandbox(_) => who.sandbox_operator,
        TaskError::Settings(_) => {
            "Fix `.forgehand.yaml` on the default branch as said above (no model was called), then add the trigger label again."
        }
        TaskError::SetupFailed(_) => {
            "Fix the setup commands in `.forgehand.yaml` on the default branch (or what they need); the end of the setup's output is below. No model was called. An operator can let tasks go on without a working setup (repositories.on_setup_failure: continue). Then add the trigger label again."
        }
        TaskError::TestsFailed { .. } => {
            "The change is on its branch; fix the tests there or ask again with more detail, then add the trigger label again. An operator can deliver failing changes as drafts (delivery.require_passing_tests: false)."
        }
        TaskError::NothingHeard(_) => {
            return format!("A maintainer can restate the request in a comment of their own (forgehand reads comments from {}), then add the trigger label again.", who.may_trigger);
        }
        _ => "Add the trigger label again to retry; if it fails the same way, give more detail in a comment or ask an operator to look at the daemon's log.",
    }
    .to_owned()
}

/// Who can act on a failure, in the words of this forge and sandbox backend.
pub(in crate::task) struct Whom<'a> {
    /// Whose comments forgehand reads ("maintainers and admins").
    pub may_trigger: &'a str,
    /// What the backend asks of an operator on a sandbox error.
    pub sandbox_operator: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_gets_the_advice_of_its_kind() {
        let who = &Whom {
            may_trigger: "maintainers",
            sandbox_operator: "Ask the cluster's operator.",
        };
        let other = advice(&TaskError::Other("boom".into()), who);
        assert!(other.contains("trigger label"), "{other}");
        let engine = TaskError::Sandbox(SandboxError::NotStarted {
            sandbox: "p".into(),
            detail: "d".into(),
        });
        assert_eq!(advice(&engine, who), "Ask the cluster's operator.");
        let unheard = advice(&TaskError::NothingHeard("x".into()), who);
        assert!(unheard.contains("maintainers"), "{unheard}");
    }

    #[test]
    fn only_what_is_away_is_an_outage() {
        assert!(!TaskError::Other("boom".into()).is_outage());
        assert!(!TaskError::Shutdown.is_outage());
        let busy = TaskError::Forge(ForgeError::Api {
            forge: "github",
            what: "an issue".into(),
            status: 503,
            message: "later".into(),
        });
        assert!(busy.is_outage());
    }
}
