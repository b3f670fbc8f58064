//! Tasks waiting on their pushed commit's checks: every `delivery.ci_poll`
//! (at once when a webhook says a repository's checks changed), each
//! waiting task's checks are read; a wait that ended (or gave up after
//! `delivery.ci_wait` / `ci_timeout`) is journalled and its task started
//! again: the watcher of
//! [`Change::ChecksEnded`](crate::task::Change::ChecksEnded). A waiting
//! task holds no slot, no sandbox and no model call; this costs a forge
//! read per waiting task and look (two on GitHub: check runs and commit
//! statuses; answered from the cache, a 304, while nothing changed).

use super::waiting::{idle, Idle};
use crate::config::CiConfig;
use crate::forge::{ForgeKind, ItemRef};
use crate::journal::Journal;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The tasks whose checks ended since the last look.
pub(super) async fn ended(
    forges: &BTreeMap<ForgeKind, Arc<dyn crate::forge::Forge>>,
    journal: &Journal,
    active: &HashSet<String>,
    ci: &CiConfig,
) -> Vec<ItemRef> {
    let waits = (journal.open_check_waits(), "the tasks waiting on checks");
    let mut ready = Vec::new();
    for Idle {
        key,
        item,
        forge,
        mut wait,
    } in idle(waits, forges, active)
    {
        let shown = wait.shown.clone();
        match crate::task::look_at_checks(forge.as_ref(), &item.repo, &mut wait, ci).await {
            Ok(true) => match journal.save_check_wait(&key, &wait) {
                Ok(()) => {
                    tracing::info!(task = %item, checks = %wait.shown, "the checks ended; starting the task again");
                    ready.push(item);
                }
                Err(e) => tracing::error!(task = %item, "cannot journal the end of the checks: {e}"),
            },
            Ok(false) => {
                if wait.shown != shown {
                    tracing::info!(task = %item, checks = %wait.shown, "checks");
                    if let Err(e) = journal.save_check_wait(&key, &wait) {
                        tracing::warn!(task = %item, "cannot journal the checks seen: {e}");
                    }
                }
            }
            Err(e) => tracing::warn!(task = %item, "cannot read the checks now: {e}"),
        }
    }
    ready
}
