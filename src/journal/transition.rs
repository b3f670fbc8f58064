//! A task's steps from one state to the next. Each [`Transition`] is one
//! write of the task's row (and of its wait, when it ends the run
//! waiting), in one transaction: a killed daemon finds the task before
//! the step or after it, never half-way. This is the one writer of where
//! a task stands; where a run resumes is read back from it once
//! (`task::state::resume`).

use super::{now, CheckWait, Journal, JournalError, Phase, PlanWait, WaitKind};
use rusqlite::{params, Connection};

/// One step of a task's state.
#[derive(Debug, Clone, Copy)]
pub enum Transition<'a> {
    /// Claimed on the forge; the work goes on on `branch`.
    Claimed { branch: &'a str },
    /// The agent works in a sandbox.
    Working,
    /// The task's branch is pushed.
    Pushed,
    /// The PR/MR is open at `url`.
    Delivered { url: &'a str },
    /// The run ends waiting on the pushed commit's checks, holding nothing.
    AwaitingChecks(&'a CheckWait),
    /// The run ends waiting for a writer's answer to its plan (`None`: the
    /// wait kept as it is), holding nothing.
    AwaitingApproval(Option<&'a PlanWait>),
    /// The run ends suspended by the paused label at a step's checkpoint.
    Paused,
    /// The run was put off because something outside was away: it goes on
    /// later, and the run is not counted against `max_task_attempts`.
    Deferred,
    /// The task ended (done, failed or stopped) with a one-line outcome;
    /// what it kept to resume (waits, phase records, planning calls) goes.
    Ended { phase: Phase, outcome: &'a str },
}

impl<'a> Transition<'a> {
    /// The task ended so, with a one-line outcome.
    pub fn ended(phase: Phase, outcome: &'a str) -> Transition<'a> {
        Transition::Ended { phase, outcome }
    }

    /// The state's name, as logs and the progress comment use it.
    pub fn name(&self) -> &'static str {
        match self {
            Transition::Claimed { .. } => "claimed",
            Transition::Working => "working",
            Transition::Pushed => "pushed",
            Transition::Delivered { .. } => "delivered",
            Transition::AwaitingChecks(_) => "awaiting checks",
            Transition::AwaitingApproval(_) => "awaiting approval",
            Transition::Paused => "paused",
            Transition::Deferred => "deferred",
            Transition::Ended { phase, .. } => phase.as_str(),
        }
    }
}

impl Journal {
    /// Task `key` takes the step `to`, in one transaction.
    pub fn transition(&self, key: &str, to: Transition<'_>) -> Result<(), JournalError> {
        tracing::debug!(task = %key, to = to.name(), "journalled");
        self.with(|db| {
            let tx = db.unchecked_transaction()?;
            write(&tx, key, to)?;
            tx.commit()
        })
    }

    /// A run that ended waiting, or put off, was not interrupted: its
    /// attempt is not counted against `scheduling.max_task_attempts`.
    pub(super) fn give_back_attempt_in(db: &Connection, key: &str) -> rusqlite::Result<()> {
        db.execute(
            "UPDATE tasks SET attempts = MAX(attempts - 1, 0), updated_at = ?2 WHERE key = ?1",
            params![key, now()],
        )
        .map(drop)
    }
}

fn write(db: &Connection, key: &str, to: Transition<'_>) -> rusqlite::Result<()> {
    let set = |sql: &str, value: &str| {
        db.execute(
            &format!("UPDATE tasks SET {sql}, updated_at = ?3 WHERE key = ?1"),
            params![key, value, now()],
        )
        .map(drop)
    };
    match to {
        Transition::Claimed { branch } => set("branch = ?2", branch),
        Transition::Working => set("phase = ?2", Phase::Working.as_str()),
        Transition::Pushed => set("phase = ?2", Phase::Pushed.as_str()),
        Transition::Delivered { url } => set("change_url = ?2, phase = 'delivered'", url),
        Transition::AwaitingChecks(wait) => {
            Journal::write_check_wait(db, key, wait)?;
            Journal::give_back_attempt_in(db, key)
        }
        Transition::AwaitingApproval(wait) => {
            if let Some(wait) = wait {
                Journal::write_plan_wait(db, key, wait)?;
            }
            Journal::give_back_attempt_in(db, key)
        }
        Transition::Paused => {
            Journal::put_wait(db, key, WaitKind::Paused, "", true)?;
            Journal::give_back_attempt_in(db, key)
        }
        Transition::Deferred => Journal::give_back_attempt_in(db, key),
        Transition::Ended { phase, outcome } => {
            db.execute(
                "UPDATE tasks SET phase = ?2, outcome = ?3, container_id = NULL, updated_at = ?4 WHERE key = ?1",
                params![key, phase.as_str(), outcome, now()],
            )?;
            Journal::forget_waits_in(db, key)?;
            Journal::forget_records_in(db, key)?;
            db.execute("DELETE FROM plan_calls WHERE task_key = ?1", params![key])
                .map(drop)
        }
    }
}
