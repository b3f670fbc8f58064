//! The one watcher of the tasks that wait holding nothing (the journal's
//! waits, [`crate::journal::WaitFor`]): it reads the open waits together
//! and turns what the forge says now into their end, and the task is
//! started again:
//! - on checks, every `delivery.ci_poll` (at once when a webhook says a
//!   repository's checks changed): the commit's checks are read; a wait
//!   that ended (or gave up after `delivery.ci_wait` / `ci_timeout`) is
//!   journalled ([`Change::ChecksEnded`](crate::task::Change::ChecksEnded));
//!   two reads on GitHub (check runs and commit statuses), answered from
//!   the cache, a 304, while nothing changed;
//! - on a plan's approval, at each poll: the plan's comment is read for a
//!   writer's answer (a 👍, a comment `@login go`, a change request) or
//!   its timeout, and the answer journalled
//!   ([`Change::PlanAnswer`](crate::task::Change::PlanAnswer));
//! - on the paused label, at each poll: the item's labels are read; one
//!   whose paused label (or processing label) is gone starts again from
//!   its last step's checkpoint
//!   ([`Change::Unpaused`](crate::task::Change::Unpaused)).
//!
//! A waiting task that is running now (its wait just ended) or whose forge
//! is not configured is left alone.

use super::scheduler::StartReason;
use crate::config::Config;
use crate::forge::{Forge, ForgeKind, Intake, ItemRef};
use crate::journal::{Journal, PlanWait, WaitFor, WaitKind};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The tasks of the given kinds of wait whose wait is over, each with why
/// it starts again.
pub(super) async fn ended(
    forges: &BTreeMap<ForgeKind, Arc<dyn Forge>>,
    journal: &Journal,
    active: &HashSet<String>,
    kinds: &[WaitKind],
    config: &Config,
) -> Vec<(ItemRef, StartReason)> {
    let waits = match journal.open_waits(kinds) {
        Ok(waits) => waits,
        Err(e) => {
            tracing::error!("cannot read the tasks that wait: {e}");
            return Vec::new();
        }
    };
    let mut ready = Vec::new();
    for (key, wait) in waits.into_iter().filter(|(key, _)| !active.contains(key)) {
        let Some(item) = ItemRef::parse_key(&key) else {
            continue;
        };
        let Some(forge) = forges.get(&item.forge) else {
            continue;
        };
        let over = match wait {
            WaitFor::Checks(wait) => {
                let ci = &config.delivery.ci;
                crate::task::look_at_checks(journal, forge.as_ref(), &item, wait, ci)
                    .await
                    .then_some(StartReason::ChecksEnded)
            }
            WaitFor::Approval(wait) => answered(journal, forge.as_ref(), &item, wait)
                .await
                .then_some(StartReason::PlanAnswered),
            WaitFor::Paused => unpaused(forge.as_ref(), &item, config)
                .await
                .then_some(StartReason::Unpaused),
            // The scheduler's requeue times these itself.
            WaitFor::Later(_) => None,
        };
        ready.extend(over.map(|why| (item, why)));
    }
    ready
}

/// Whether a writer answered the plan (or it timed out): the answer journalled.
async fn answered(journal: &Journal, forge: &dyn Forge, item: &ItemRef, mut wait: PlanWait) -> bool {
    match crate::task::answer_to_plan(forge, item, &wait).await {
        Ok(Some(answer)) => {
            wait.answer = Some(answer);
            match journal.save_plan_wait(&item.key(), &wait) {
                Ok(()) => true,
                Err(e) => {
                    tracing::error!(task = %item, "cannot journal the answer to the plan: {e}");
                    false
                }
            }
        }
        Ok(None) => false,
        Err(e) => {
            tracing::warn!(task = %item, "cannot look for an answer to the plan now: {e}");
            false
        }
    }
}

/// Whether the suspended task's paused label is gone.
async fn unpaused(forge: &dyn Intake, item: &ItemRef, config: &Config) -> bool {
    match forge.item(item).await {
        Ok(found) if crate::task::pause_is_over(&found, &config.labels) => {
            tracing::info!(task = %item, "the paused label is gone; going on from the last step");
            true
        }
        Ok(_) => false,
        Err(e) => {
            tracing::warn!(task = %item, "cannot read the paused task's labels now: {e}");
            false
        }
    }
}
