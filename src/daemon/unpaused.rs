//! Tasks suspended by the paused label: at each poll, each one's labels
//! are read, and one whose paused label is gone is started again (from its
//! last step's checkpoint): the watcher of
//! [`Change::Unpaused`](crate::task::Change::Unpaused). One whose
//! processing label was removed is started too: its run says it stopped.
//! A suspended task holds no slot and no sandbox; this costs one forge
//! read per suspended task and poll.

use super::waiting::{idle, Idle};
use crate::config::LabelsConfig;
use crate::forge::{Forge, ForgeKind, ItemRef};
use crate::journal::Journal;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The suspended tasks whose paused label is gone.
pub(super) async fn unpaused(
    forges: &BTreeMap<ForgeKind, Arc<dyn Forge>>,
    journal: &Journal,
    active: &HashSet<String>,
    labels: &LabelsConfig,
) -> Vec<ItemRef> {
    let keys = journal
        .paused_tasks()
        .map(|keys| keys.into_iter().map(|key| (key, ())).collect());
    let mut ready = Vec::new();
    for Idle { item, forge, .. } in idle((keys, "the paused tasks"), forges, active) {
        match forge.item(&item).await {
            Ok(found) if crate::task::pause_is_over(&found, labels) => {
                tracing::info!(task = %item, "the paused label is gone; going on from the last step");
                ready.push(item);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(task = %item, "cannot read the paused task's labels now: {e}"),
        }
    }
    ready
}
