//! Plans waiting for approval (`triggers.plan_approval`): at each poll,
//! each waiting plan's comment is read for a writer's answer (a 👍, a
//! comment `@login go`, a change request) or its timeout; an answer is
//! journalled and its task started again: the watcher of
//! [`Change::PlanAnswer`](crate::task::Change::PlanAnswer). A waiting task
//! holds no slot, no sandbox and no model call; this costs a few forge
//! reads per plan.

use super::waiting::{idle, Idle};
use crate::forge::{Forge, ForgeKind, ItemRef};
use crate::journal::Journal;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The tasks whose plan was answered (or timed out) since the last look.
pub(super) async fn answered(
    forges: &BTreeMap<ForgeKind, Arc<dyn Forge>>,
    journal: &Journal,
    active: &HashSet<String>,
) -> Vec<ItemRef> {
    let waits = (journal.unanswered_plan_waits(), "the plans waiting for approval");
    let mut ready = Vec::new();
    for Idle {
        key,
        item,
        forge,
        mut wait,
    } in idle(waits, forges, active)
    {
        match crate::task::answer_to_plan(forge.as_ref(), &item, &wait).await {
            Ok(Some(answer)) => {
                wait.answer = Some(answer);
                match journal.save_plan_wait(&key, &wait) {
                    Ok(()) => ready.push(item),
                    Err(e) => tracing::error!(task = %item, "cannot journal the answer to the plan: {e}"),
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(task = %item, "cannot look for an answer to the plan now: {e}"),
        }
    }
    ready
}
