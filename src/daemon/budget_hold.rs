//! New items held back by the money caps: when a repository's or the
//! daemon's spend for the day or month has reached its cap (or would pass
//! it with one more task's cap), the item waits, unclaimed, until the
//! period turns, and its thread says so once. Nothing is lost: the item
//! keeps its trigger and starts when the day or month turns.

use crate::budget::{self, OverCap, Period};
use crate::config::BudgetConfig;
use crate::forge::{ItemRef, Thread};
use crate::journal::Journal;
use crate::task::{Action, Wait, Why};
use std::collections::HashMap;
use std::time::Duration;

/// The items told they wait, with the moment they were told they start.
#[derive(Default)]
pub struct BudgetHolds {
    told: HashMap<String, chrono::DateTime<chrono::Utc>>,
}

impl BudgetHolds {
    /// The requeue until the period turns, if a cap holds `item` back
    /// (telling its thread the first time, per period).
    pub async fn hold(
        &mut self,
        config: &BudgetConfig,
        journal: &Journal,
        forge: &dyn Thread,
        item: &ItemRef,
    ) -> Option<Action> {
        if !config.any() {
            return None;
        }
        let now = Period::now();
        let over = match budget::waits(config, journal, &item.repo, now) {
            Ok(over) => over?,
            Err(e) => {
                tracing::warn!(task = %item, "cannot read the spend ledger; not holding the task back: {e}");
                return None;
            }
        };
        let turns = over.turns?;
        let wait = (turns - now.0).to_std().unwrap_or_default() + Duration::from_secs(1);
        tracing::info!(task = %item, "waiting {} s for the budget: {over}", wait.as_secs());
        if self.told.get(&item.key()) != Some(&turns) {
            match forge.create_comment(item, &message(&over)).await {
                Ok(_) => {
                    self.told.insert(item.key(), turns);
                }
                Err(e) => tracing::warn!(task = %item, "cannot say that the task waits for the budget: {e}"),
            }
        }
        Some(Action::RequeueAfter(Wait::Exactly(wait), Why::Budget))
    }

    /// The item started (or is gone): a later hold is told again.
    pub fn started(&mut self, key: &str) {
        self.told.remove(key);
    }
}

fn message(over: &OverCap) -> String {
    let when = over
        .turns
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default();
    format!(
        "⏸️ forgehand will start this at {when}: {over} (US dollars at the model catalogue's prices). \
Nothing needs to be done; the label stays and the task starts on its own then."
    )
}
