//! What the watchers of waiting tasks share: of the waits the journal
//! holds, those whose task is not running now and whose forge is
//! configured, each with its item and forge.

use crate::forge::{Forge, ForgeKind, ItemRef};
use crate::journal::JournalError;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// A waiting task the watcher may look at now.
pub(super) struct Idle<'f, W> {
    pub key: String,
    pub item: ItemRef,
    pub forge: &'f Arc<dyn Forge>,
    pub wait: W,
}

/// Waits as the journal reads them: `(task key, wait)`.
pub(super) type Waits<W> = Result<Vec<(String, W)>, JournalError>;

/// The waits (`(task key, wait)`, as the journal read them: `what` names
/// them in the log when it could not) of tasks that are not running and
/// whose forge is configured.
pub(super) fn idle<'f, W>(
    (waits, what): (Waits<W>, &str),
    forges: &'f BTreeMap<ForgeKind, Arc<dyn Forge>>,
    active: &HashSet<String>,
) -> Vec<Idle<'f, W>> {
    let waits = match waits {
        Ok(waits) => waits,
        Err(e) => {
            tracing::error!("cannot read {what}: {e}");
            return Vec::new();
        }
    };
    waits
        .into_iter()
        .filter(|(key, _)| !active.contains(key))
        .filter_map(|(key, wait)| {
            let item = ItemRef::parse_key(&key)?;
            let forge = forges.get(&item.forge)?;
            Some(Idle {
                key,
                item,
                forge,
                wait,
            })
        })
        .collect()
}
