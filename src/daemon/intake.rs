//! Intake: which labelled items become tasks. Polls are cheap (see the
//! forges); an item is taken only when the person who applied the trigger
//! label (or, on a PR/MR without a label event, its author) may trigger
//! tasks. Anyone else is ignored with a log line, and no model is called.

use crate::config::LabelsConfig;
use crate::forge::{Forge, ForgeKind, Item, ItemKind, ItemRef, Poll};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::time::Instant;

/// Watched repositories are listed again after this long.
const REPOSITORY_REFRESH: Duration = Duration::from_secs(600);

pub struct Intake {
    labels: LabelsConfig,
    repos: HashMap<ForgeKind, (Instant, Vec<String>)>,
    /// No requests to a forge before this (rate limit).
    paused_until: HashMap<ForgeKind, Instant>,
    /// How each forge's last poll went (for `/readyz`).
    answered: HashMap<ForgeKind, Result<(), String>>,
    /// Items last seen with the trigger label, per repository; kept across
    /// unchanged polls so a full queue never loses one.
    pending: HashMap<(ForgeKind, String), Vec<Item>>,
    /// (item key, who applied the label) already refused, to log once.
    refused: HashSet<(String, String)>,
}

impl Intake {
    pub fn new(labels: LabelsConfig) -> Intake {
        Intake {
            labels,
            repos: HashMap::new(),
            paused_until: HashMap::new(),
            answered: HashMap::new(),
            pending: HashMap::new(),
            refused: HashSet::new(),
        }
    }

    /// One poll of one forge: the items that may start now.
    pub async fn poll(&mut self, forge: &dyn Forge) -> Vec<ItemRef> {
        let kind = forge.kind();
        if self.paused_until.get(&kind).is_some_and(|t| *t > Instant::now()) {
            return Vec::new();
        }
        self.answered.insert(kind, Ok(()));
        let repos = match self.repositories(forge).await {
            Ok(r) => r,
            Err(e) => {
                self.note_error(kind, &e);
                return Vec::new();
            }
        };
        let mut accepted = Vec::new();
        for repo in repos {
            let mut changed = true;
            match forge.poll_labelled(&repo, &self.labels.trigger).await {
                Ok(Poll::Unchanged) => changed = false,
                Ok(Poll::Items(items)) => {
                    // Refusals of items that are no longer labelled are forgotten,
                    // so a daemon running for months keeps only current ones.
                    let prefix = format!("{}:{repo}:", kind.as_str());
                    self.refused.retain(|(key, _)| {
                        !key.starts_with(&prefix) || items.iter().any(|i| i.reference.key() == *key)
                    });
                    self.pending.insert((kind, repo.clone()), items);
                }
                Err(e) => {
                    self.note_error(kind, &e);
                    if e.retry_after().is_some() {
                        break;
                    }
                    continue;
                }
            }
            let items = self
                .pending
                .get(&(kind, repo.clone()))
                .cloned()
                .unwrap_or_default();
            for item in items {
                if !item.open || !item.has_label(&self.labels.trigger) {
                    continue;
                }
                // A refused item is looked at again only when something changed.
                if !changed && self.refused.iter().any(|(key, _)| *key == item.reference.key()) {
                    continue;
                }
                match self.allowed(forge, &item).await {
                    Ok(true) => accepted.push(item.reference.clone()),
                    Ok(false) => {}
                    Err(e) => self.note_error(kind, &e),
                }
            }
            // Accepted items are claimed (their label changes), so they are not kept.
            if let Some(items) = self.pending.get_mut(&(kind, repo)) {
                items.retain(|i| !accepted.contains(&i.reference));
            }
        }
        accepted
    }

    async fn repositories(&mut self, forge: &dyn Forge) -> Result<Vec<String>, crate::forge::ForgeError> {
        let kind = forge.kind();
        if let Some((at, repos)) = self.repos.get(&kind) {
            if at.elapsed() < REPOSITORY_REFRESH {
                return Ok(repos.clone());
            }
        }
        let repos = forge.watched_repositories().await?;
        self.repos.insert(kind, (Instant::now(), repos.clone()));
        Ok(repos)
    }

    async fn allowed(&mut self, forge: &dyn Forge, item: &Item) -> Result<bool, crate::forge::ForgeError> {
        let mut who = forge
            .label_applied(&item.reference, &self.labels.trigger)
            .await?
            .map(|applied| applied.by);
        if who.is_none() && item.reference.kind == ItemKind::Change {
            who = Some(item.author.clone());
        }
        let Some(who) = who else {
            self.refuse(item, "nobody", "no label event names who applied the label");
            return Ok(false);
        };
        if forge.may_trigger(&item.reference.repo, &who).await? {
            tracing::info!(task = %item.reference, by = %who, "trigger label accepted");
            return Ok(true);
        }
        self.refuse(
            item,
            &who,
            "they lack write access (GitHub) / the required access level (GitLab)",
        );
        Ok(false)
    }

    fn refuse(&mut self, item: &Item, who: &str, why: &str) {
        if self.refused.insert((item.reference.key(), who.to_owned())) {
            tracing::warn!(
                task = %item.reference,
                by = %who,
                "ignored: the \"{}\" label was applied by @{who}, and {why}; no task is started",
                self.labels.trigger
            );
        }
    }

    /// How each forge's last poll went: `Err` holds its last error.
    pub fn answered(&self) -> Vec<(ForgeKind, Result<(), String>)> {
        let mut out: Vec<_> = self.answered.iter().map(|(k, r)| (*k, r.clone())).collect();
        out.sort_by_key(|(k, _)| *k);
        out
    }

    fn note_error(&mut self, kind: ForgeKind, e: &crate::forge::ForgeError) {
        self.answered.insert(kind, Err(e.to_string()));
        if let Some(wait) = e.retry_after() {
            tracing::warn!(forge = kind.as_str(), "{e}");
            self.paused_until.insert(kind, Instant::now() + wait);
        } else {
            tracing::warn!(forge = kind.as_str(), "poll failed: {e}");
        }
    }
}
