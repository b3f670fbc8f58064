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
        item, forge, wait, ..
    } in idle(waits, forges, active)
    {
        if crate::task::look_at_checks(journal, forge.as_ref(), &item, wait, ci).await {
            ready.push(item);
        }
    }
    ready
}
