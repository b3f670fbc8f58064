//! Intake: which labelled items become tasks. Polls are cheap (see the
//! forges); an item is taken only when the person who applied the trigger
//! label (or, on a PR/MR without a label event, its author) may trigger
//! tasks. Anyone else is ignored with a log line, and no model is called.
//!
//! Nothing labelled is ever lost: an item stays pending until its check
//! gives an answer (accepted, or refused), a failed check is tried again at
//! the next poll and then with growing waits, and the point from which a
//! forge lists changes (GitLab's `updated_after`) never passes an item whose
//! check has not answered. An answered item costs nothing more until it
//! changes (a claim changes its labels; a new label or edit changes it too).

use crate::config::LabelsConfig;
// The forge as intake sees it (this module's own `Intake` is the poller).
use crate::forge::Intake as ForgeIntake;
use crate::forge::{parse_time, watched_spelling, ForgeError, ForgeKind, Item, ItemKind, ItemRef, Poll};
use crate::webhooks::RepoName;
use futures_util::stream::{self, StreamExt};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// Watched repositories are listed again after this long.
const REPOSITORY_REFRESH: Duration = Duration::from_secs(600);
/// Checks of one repository's items run this many at a time, so one slow
/// item (a forge retrying a failing request) does not hold up the others.
const CHECKS_AT_ONCE: usize = 4;
/// After the second failed check of an item, waits start here and double.
const FIRST_CHECK_WAIT: Duration = Duration::from_secs(30);
const LONGEST_CHECK_WAIT: Duration = Duration::from_secs(15 * 60);
/// Repository ids looked up for deliveries, remembered at most (a group's
/// webhook may name many projects forgehand does not watch).
const REMEMBERED_IDS: usize = 4096;

pub struct Intake {
    labels: LabelsConfig,
    /// Comments as triggers (`triggers.mentions`, `triggers.reviews`),
    /// with the journal that keeps which were heard.
    mentions: Option<(super::mentions::Mentions, std::sync::Arc<crate::journal::Journal>)>,
    repos: HashMap<ForgeKind, (Instant, Vec<String>)>,
    /// No requests to a forge before this (rate limit).
    paused_until: HashMap<ForgeKind, Instant>,
    /// How each forge's last poll went (for `/readyz`).
    answered: HashMap<ForgeKind, Result<(), String>>,
    watched: HashMap<(ForgeKind, String), Watched>,
    /// Repository paths by the forge's id (`None`: no such repository),
    /// as looked up, and when.
    paths_by_id: HashMap<(ForgeKind, u64), (Instant, Option<String>)>,
}

/// Whether a delivery's repository is watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watch {
    /// Watched, under this name: the spelling the config (or the forge's
    /// listing) gives it, which every key is made with.
    Watched(String),
    NotWatched,
    /// The forge did not answer (or is rate limited); the next poll sees
    /// whatever the delivery was about.
    CannotTell,
}

/// One repository as the intake knows it.
#[derive(Default)]
struct Watched {
    /// Items with the trigger label, by key.
    items: BTreeMap<String, Pending>,
    /// Where the forge's next listing starts (the `since` of `poll_labelled`):
    /// no item updated before it is waiting for an answer.
    since: Option<String>,
}

struct Pending {
    item: Item,
    check: Check,
}

enum Check {
    /// To be checked at or after `at`; `failures` checks failed so far.
    Due { at: Instant, failures: u32 },
    /// Refused (who applied the label); looked at again when the item changes.
    Refused { by: String },
    /// Handed to the scheduler, whose claim changes the item's labels.
    Accepted,
}

/// What a check found.
enum Verdict {
    Accept,
    Refuse { by: String, why: String },
}

impl Intake {
    pub fn new(labels: LabelsConfig) -> Intake {
        Intake {
            labels,
            mentions: None,
            repos: HashMap::new(),
            paused_until: HashMap::new(),
            answered: HashMap::new(),
            watched: HashMap::new(),
            paths_by_id: HashMap::new(),
        }
    }

    /// Mentions of forgehand and reviews of its changes start tasks too;
    /// `journal` keeps which comments were heard.
    pub fn with_comments(
        mut self,
        listening: super::mentions::Listening,
        journal: std::sync::Arc<crate::journal::Journal>,
    ) -> Intake {
        self.mentions = Some((super::mentions::Mentions::new(listening), journal));
        self
    }

    /// One poll of one forge: the items that may start now (labelled, or
    /// asked for by a mention).
    pub async fn poll(&mut self, forge: &dyn ForgeIntake) -> Vec<ItemRef> {
        let kind = forge.kind();
        if self.paused(kind) {
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
            // A check that was rate limited pauses the rest of this poll too.
            if self.paused(kind) {
                break;
            }
            accepted.extend(self.poll_repository(forge, &repo).await);
        }
        accepted
    }

    /// Whether the repository a delivery names is watched, and its watched
    /// spelling: a payload may spell it in another case, or name a GitLab
    /// project by id alone (looked up once, then remembered for as long as
    /// the list of watched repositories). Only a watched repository is
    /// polled, so a delivery cannot widen what is read.
    pub async fn watched(&mut self, forge: &dyn ForgeIntake, named: &RepoName) -> Watch {
        let kind = forge.kind();
        if self.paused(kind) {
            return Watch::CannotTell;
        }
        let path = match named {
            RepoName::Path(path) => path.clone(),
            RepoName::ProjectId { id, .. } => match self.path_by_id(forge, *id).await {
                Ok(Some(path)) => path,
                Ok(None) => return Watch::NotWatched,
                Err(e) => {
                    self.note_error(kind, &e);
                    return Watch::CannotTell;
                }
            },
        };
        match self.repositories(forge).await {
            Ok(repos) => match watched_spelling(&repos, &path) {
                Some(spelling) => Watch::Watched(spelling.to_owned()),
                None => Watch::NotWatched,
            },
            Err(e) => {
                self.note_error(kind, &e);
                Watch::CannotTell
            }
        }
    }

    /// One watched repository (spelled as [`Intake::watched`] gives it)
    /// polled now, for a webhook's doorbell: its labelled items and new
    /// mentions.
    pub async fn poll_one(&mut self, forge: &dyn ForgeIntake, repo: &str) -> Vec<ItemRef> {
        if self.paused(forge.kind()) {
            return Vec::new();
        }
        self.poll_repository(forge, repo).await
    }

    /// The path of the repository with id `id`, asked of the forge once.
    async fn path_by_id(&mut self, forge: &dyn ForgeIntake, id: u64) -> Result<Option<String>, ForgeError> {
        let kind = forge.kind();
        if let Some((at, path)) = self.paths_by_id.get(&(kind, id)) {
            if at.elapsed() < REPOSITORY_REFRESH {
                return Ok(path.clone());
            }
        }
        let path = forge.repository_by_id(id).await?;
        if self.paths_by_id.len() >= REMEMBERED_IDS {
            self.paths_by_id.clear();
        }
        self.paths_by_id
            .insert((kind, id), (Instant::now(), path.clone()));
        Ok(path)
    }

    fn paused(&self, kind: ForgeKind) -> bool {
        self.paused_until.get(&kind).is_some_and(|t| *t > Instant::now())
    }

    /// `repo`'s labelled items (listed since the last listing, each checked
    /// once per change) and its new mentions: the items that may start.
    async fn poll_repository(&mut self, forge: &dyn ForgeIntake, repo: &str) -> Vec<ItemRef> {
        let kind = forge.kind();
        let since = self
            .watched
            .get(&(kind, repo.to_owned()))
            .and_then(|w| w.since.clone());
        let listed = match forge
            .poll_labelled(repo, &self.labels.trigger, since.as_deref())
            .await
        {
            Ok(poll) => poll,
            Err(e) => {
                self.note_error(kind, &e);
                return Vec::new();
            }
        };
        let trigger = self.labels.trigger.clone();
        let watched = self.watched.entry((kind, repo.to_owned())).or_default();
        let newest_listed = match &listed {
            Poll::Unchanged => watched.since.clone(),
            Poll::All(items) | Poll::UpdatedSince(items) => safe_since(items, watched.since.as_deref()),
        };
        match listed {
            Poll::Unchanged => {}
            Poll::All(items) => watched.replace_all(items, &trigger),
            Poll::UpdatedSince(items) => {
                for item in items {
                    watched.update(item, &trigger);
                }
            }
        }
        let now = Instant::now();
        let due: Vec<Item> = watched
            .items
            .values()
            .filter(|p| matches!(p.check, Check::Due { at, .. } if at <= now))
            .map(|p| p.item.clone())
            .collect();
        let labels = &self.labels;
        let verdicts: Vec<(Item, Result<Verdict, ForgeError>)> = stream::iter(due)
            .map(|item| async move {
                let verdict = check(forge, labels, &item).await;
                (item, verdict)
            })
            .buffer_unordered(CHECKS_AT_ONCE)
            .collect()
            .await;
        let mut accepted = Vec::new();
        let mut errors = Vec::new();
        for (item, verdict) in verdicts {
            match verdict {
                Ok(verdict) => {
                    if self.answer(forge, &item, verdict).await {
                        accepted.push(item.reference);
                    }
                }
                Err(e) => {
                    self.check_failed(&item, &e);
                    errors.push(e);
                }
            }
        }
        if let Some(watched) = self.watched.get_mut(&(kind, repo.to_owned())) {
            watched.since = watched.next_since(newest_listed);
        }
        for e in errors {
            self.note_error(kind, &e);
        }
        accepted.extend(self.poll_mentions(forge, repo).await);
        accepted
    }

    /// Records a check's answer; `true` when the item may start. An
    /// accepted label is acknowledged on the item (an `eyes` reaction).
    async fn answer(&mut self, forge: &dyn ForgeIntake, item: &Item, verdict: Verdict) -> bool {
        let key = item.reference.key();
        let watched = self
            .watched
            .entry((forge.kind(), item.reference.repo.clone()))
            .or_default();
        let Some(pending) = watched.items.get_mut(&key) else {
            return false;
        };
        match verdict {
            Verdict::Accept => {
                tracing::info!(task = %item.reference, "trigger label accepted");
                pending.check = Check::Accepted;
                if let Err(e) = forge.acknowledge(&item.reference, None).await {
                    tracing::warn!(task = %item.reference, "cannot acknowledge the label: {e}");
                }
                true
            }
            Verdict::Refuse { by, why } => {
                let already = matches!(&pending.check, Check::Refused { by: before } if *before == by);
                if !already {
                    tracing::warn!(
                        task = %item.reference,
                        by = %by,
                        "ignored: the \"{}\" label was applied by @{by}, and {why}; no task is started",
                        self.labels.trigger
                    );
                }
                pending.check = Check::Refused { by };
                false
            }
        }
    }

    /// A check that could not answer: the item stays pending, and waits longer each time.
    fn check_failed(&mut self, item: &Item, e: &ForgeError) {
        let key = item.reference.key();
        let Some(pending) = self
            .watched
            .get_mut(&(item.reference.forge, item.reference.repo.clone()))
            .and_then(|w| w.items.get_mut(&key))
        else {
            return;
        };
        let failures = match pending.check {
            Check::Due { failures, .. } => failures + 1,
            Check::Refused { .. } | Check::Accepted => 1,
        };
        let wait = check_wait(failures);
        tracing::warn!(
            task = %item.reference,
            failures,
            "could not check who applied the label ({e}); it stays pending and is checked again in {} s",
            wait.as_secs()
        );
        pending.check = Check::Due {
            at: Instant::now() + wait,
            failures,
        };
    }

    /// The items `repo`'s new mentions of forgehand ask for.
    async fn poll_mentions(&mut self, forge: &dyn ForgeIntake, repo: &str) -> Vec<ItemRef> {
        let Some((mentions, journal)) = self.mentions.as_mut() else {
            return Vec::new();
        };
        match mentions.poll(forge, repo, journal).await {
            Ok(items) => items,
            Err(super::mentions::MentionError::Forge(e)) => {
                self.note_error(forge.kind(), &e);
                Vec::new()
            }
            Err(super::mentions::MentionError::Journal(e)) => {
                tracing::error!(repo, "cannot journal the mentions heard: {e}");
                Vec::new()
            }
        }
    }

    async fn repositories(&mut self, forge: &dyn ForgeIntake) -> Result<Vec<String>, ForgeError> {
        let kind = forge.kind();
        if let Some((at, repos)) = self.repos.get(&kind) {
            if at.elapsed() < REPOSITORY_REFRESH {
                return Ok(repos.clone());
            }
        }
        let mut repos = forge.watched_repositories().await?;
        // One repository configured twice, in two spellings, is polled once.
        let mut seen = std::collections::HashSet::new();
        repos.retain(|r| seen.insert(r.to_ascii_lowercase()));
        self.repos.insert(kind, (Instant::now(), repos.clone()));
        Ok(repos)
    }

    /// How each forge's last poll went: `Err` holds its last error.
    pub fn answered(&self) -> Vec<(ForgeKind, Result<(), String>)> {
        let mut out: Vec<_> = self.answered.iter().map(|(k, r)| (*k, r.clone())).collect();
        out.sort_by_key(|(k, _)| *k);
        out
    }

    fn note_error(&mut self, kind: ForgeKind, e: &ForgeError) {
        self.answered.insert(kind, Err(e.to_string()));
        if let Some(wait) = e.retry_after() {
            tracing::warn!(forge = kind.as_str(), "{e}");
            self.paused_until.insert(kind, Instant::now() + wait);
        } else {
            tracing::warn!(forge = kind.as_str(), "poll failed: {e}");
        }
    }
}

impl Watched {
    /// A complete list of the labelled items: anything else is no longer labelled.
    fn replace_all(&mut self, items: Vec<Item>, trigger: &str) {
        self.items
            .retain(|key, _| items.iter().any(|i| i.reference.key() == *key));
        for item in items {
            self.update(item, trigger);
        }
    }

    /// An item as listed now: kept, refreshed (checked again if it changed),
    /// or forgotten when it is closed or lost the label.
    fn update(&mut self, item: Item, trigger: &str) {
        let key = item.reference.key();
        if !item.open || !item.has_label(trigger) {
            self.items.remove(&key);
            return;
        }
        match self.items.get_mut(&key) {
            Some(pending) if pending.item.updated_at == item.updated_at => {}
            Some(pending) => {
                // It changed: an answered item is looked at again, a failing
                // one keeps its count but need not wait.
                let failures = match pending.check {
                    Check::Due { failures, .. } => failures,
                    Check::Refused { .. } | Check::Accepted => 0,
                };
                pending.item = item;
                pending.check = Check::Due {
                    at: Instant::now(),
                    failures,
                };
            }
            None => {
                self.items.insert(
                    key,
                    Pending {
                        item,
                        check: Check::Due {
                            at: Instant::now(),
                            failures: 0,
                        },
                    },
                );
            }
        }
    }

    /// Where the next listing starts: where this one's items allow
    /// (`listed`, see [`safe_since`]), but never past an item whose check
    /// has not answered.
    fn next_since(&self, listed: Option<String>) -> Option<String> {
        match (self.oldest_unanswered(), listed) {
            (Some(waiting), Some(listed)) if compare_times(&waiting, &listed) == Ordering::Less => {
                Some(waiting)
            }
            (_, listed) => listed,
        }
    }

    /// The oldest `updated_at` among items whose check has not answered.
    fn oldest_unanswered(&self) -> Option<String> {
        self.items
            .values()
            .filter(|p| matches!(p.check, Check::Due { .. }))
            .map(|p| p.item.updated_at.clone())
            .min_by(|a, b| compare_times(a, b))
    }
}

/// Where the next listing may start after `items` were listed from `since`.
/// GitLab lists issues, then merge requests, in two requests; each list's
/// newest update is a safe start for that list (anything updated after the
/// request is newer), so the older of the two is. An empty merge request
/// list adds no bound (a merge request updated after the issue request is
/// newer than every issue listed); an empty issue list does (an issue
/// updated between the two requests may be older than a listed merge
/// request), so then the start stays where it was.
fn safe_since(items: &[Item], since: Option<&str>) -> Option<String> {
    let newest = |kind: ItemKind| {
        items
            .iter()
            .filter(|i| i.reference.kind == kind)
            .map(|i| i.updated_at.as_str())
            .max_by(|a, b| compare_times(a, b))
    };
    let issues = newest(ItemKind::Issue).or(since)?;
    Some(
        match newest(ItemKind::Change) {
            Some(changes) if compare_times(changes, issues) == Ordering::Less => changes,
            _ => issues,
        }
        .to_owned(),
    )
}

/// Forge times compared as times (formats differ between GitLab versions),
/// as text when one does not parse.
fn compare_times(a: &str, b: &str) -> Ordering {
    match (parse_time(Some(a)), parse_time(Some(b))) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.cmp(b),
    }
}

/// The wait before checking an item again after `failures` failed checks:
/// the next poll after the first, then 30 s doubling up to 15 minutes.
fn check_wait(failures: u32) -> Duration {
    if failures <= 1 {
        return Duration::ZERO;
    }
    FIRST_CHECK_WAIT
        .saturating_mul(1 << (failures - 2).min(16))
        .min(LONGEST_CHECK_WAIT)
}

/// Whether the person behind the trigger label may start a task.
async fn check(forge: &dyn ForgeIntake, labels: &LabelsConfig, item: &Item) -> Result<Verdict, ForgeError> {
    let mut who = forge
        .label_applied(&item.reference, &labels.trigger)
        .await?
        .map(|applied| applied.by);
    if who.is_none() && item.reference.kind == ItemKind::Change {
        who = Some(item.author.clone());
    }
    let Some(who) = who else {
        return Ok(Verdict::Refuse {
            by: "nobody".into(),
            why: "no label event names who applied the label".into(),
        });
    };
    if forge.may_trigger(&item.reference.repo, &who).await? {
        return Ok(Verdict::Accept);
    }
    Ok(Verdict::Refuse {
        why: format!("only {} may trigger tasks", forge.who_may_trigger()),
        by: who,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(kind: ItemKind, number: u64, updated_at: &str) -> Item {
        Item {
            reference: ItemRef {
                forge: ForgeKind::GitLab,
                repo: "g/p".into(),
                kind,
                number,
            },
            title: "t".into(),
            body: String::new(),
            author: "a".into(),
            labels: vec!["go".into()],
            open: true,
            web_url: String::new(),
            updated_at: updated_at.into(),
        }
    }

    #[test]
    fn the_next_listing_starts_where_nothing_can_have_been_missed() {
        let items = [
            item(ItemKind::Issue, 1, "2026-01-01T10:00:05.000Z"),
            item(ItemKind::Issue, 2, "2026-01-01T10:00:01.000Z"),
            item(ItemKind::Change, 3, "2026-01-01T10:00:03.000Z"),
        ];
        assert_eq!(
            safe_since(&items, None).as_deref(),
            Some("2026-01-01T10:00:03.000Z")
        );
        // No merge request listed: the issues' newest is safe.
        assert_eq!(
            safe_since(&items[..2], None).as_deref(),
            Some("2026-01-01T10:00:05.000Z")
        );
        // No issue listed: the start stays where it was (none yet: none).
        assert_eq!(safe_since(&items[2..], None), None);
        assert_eq!(
            safe_since(&items[2..], Some("2026-01-01T09:00:00Z")).as_deref(),
            Some("2026-01-01T09:00:00Z")
        );
        // Compared as times, not text.
        let mixed = [
            item(ItemKind::Issue, 1, "2026-01-01T10:00:00+02:00"),
            item(ItemKind::Change, 2, "2026-01-01T09:00:00Z"),
        ];
        assert_eq!(
            safe_since(&mixed, None).as_deref(),
            Some("2026-01-01T10:00:00+02:00")
        );
    }

    #[test]
    fn an_unanswered_item_holds_the_start_back_and_a_change_rechecks_a_refusal() {
        let mut watched = Watched::default();
        watched.replace_all(
            vec![
                item(ItemKind::Issue, 1, "2026-01-01T10:00:05Z"),
                item(ItemKind::Issue, 2, "2026-01-01T10:00:01Z"),
            ],
            "go",
        );
        assert_eq!(
            watched.oldest_unanswered().as_deref(),
            Some("2026-01-01T10:00:01Z")
        );
        // Never past an unanswered item, never past what the listing allows.
        assert_eq!(
            watched.next_since(Some("2026-01-01T10:00:05Z".into())).as_deref(),
            Some("2026-01-01T10:00:01Z")
        );
        assert_eq!(
            watched.next_since(Some("2026-01-01T09:00:00Z".into())).as_deref(),
            Some("2026-01-01T09:00:00Z")
        );
        assert_eq!(watched.next_since(None), None);
        let key2 = item(ItemKind::Issue, 2, "").reference.key();
        watched.items.get_mut(&key2).unwrap().check = Check::Refused { by: "x".into() };
        assert_eq!(
            watched.oldest_unanswered().as_deref(),
            Some("2026-01-01T10:00:05Z")
        );
        // Listed again unchanged: still refused; changed: due again.
        watched.update(item(ItemKind::Issue, 2, "2026-01-01T10:00:01Z"), "go");
        assert!(matches!(watched.items[&key2].check, Check::Refused { .. }));
        watched.update(item(ItemKind::Issue, 2, "2026-01-01T10:00:09Z"), "go");
        assert!(matches!(
            watched.items[&key2].check,
            Check::Due { failures: 0, .. }
        ));
        // Losing the label or closing forgets it.
        let mut unlabelled = item(ItemKind::Issue, 2, "2026-01-01T10:00:10Z");
        unlabelled.labels.clear();
        watched.update(unlabelled, "go");
        assert!(!watched.items.contains_key(&key2));
        watched.replace_all(vec![], "go");
        assert!(watched.items.is_empty());
    }

    #[test]
    fn failed_checks_wait_longer_each_time() {
        assert_eq!(check_wait(1), Duration::ZERO);
        assert_eq!(check_wait(2), Duration::from_secs(30));
        assert_eq!(check_wait(3), Duration::from_secs(60));
        assert_eq!(check_wait(40), LONGEST_CHECK_WAIT);
    }
}
