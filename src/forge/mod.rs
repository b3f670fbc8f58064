//! Forges: GitHub (octocrab) and GitLab (the gitlab crate) behind traits
//! split by capability ([`Intake`], [`Thread`], [`Delivery`], [`Checks`],
//! [`Reviews`]; [`Forge`] is all of them), so intake, claiming, reporting
//! and delivery are written once and tested against fakes.

mod capabilities;
mod checks;
pub mod github;
pub mod gitlab;
pub mod history;
mod http_util;
mod mention;
pub mod retry;
mod reviews;

pub use capabilities::{Checks, Delivery, Forge, Intake, Opener, Reviews, Thread};
pub use checks::{ci_line, ci_state, Check, CheckId, CheckState, CiState};
pub use mention::mentions;
pub use reviews::ReviewThread;
use std::fmt;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ForgeKind {
    GitHub,
    GitLab,
    /// No forge: a local repository run through the pipeline by
    /// `forgehand eval`.
    Local,
}

impl ForgeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "github",
            ForgeKind::GitLab => "gitlab",
            ForgeKind::Local => "local",
        }
    }

    pub fn parse(text: &str) -> Option<ForgeKind> {
        match text {
            "github" => Some(ForgeKind::GitHub),
            "gitlab" => Some(ForgeKind::GitLab),
            "local" => Some(ForgeKind::Local),
            _ => None,
        }
    }

    /// What the forge calls a change request, in its own words.
    pub fn change_noun(self) -> &'static str {
        match self {
            ForgeKind::GitHub => "pull request",
            ForgeKind::GitLab => "merge request",
            ForgeKind::Local => "change",
        }
    }
}

/// GitLab's name for a project role's access level (10 Guest ... 50 Owner).
pub fn gitlab_role(level: u32) -> &'static str {
    match level {
        0..=14 => "Guest",
        15..=24 => "Reporter",
        25..=34 => "Developer",
        35..=44 => "Maintainer",
        _ => "Owner",
    }
}

/// An issue, or a change request (GitHub pull request, GitLab merge request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ItemKind {
    Issue,
    Change,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::Issue => "issue",
            ItemKind::Change => "change",
        }
    }

    pub fn parse(text: &str) -> Option<ItemKind> {
        match text {
            "issue" => Some(ItemKind::Issue),
            "change" => Some(ItemKind::Change),
            _ => None,
        }
    }
}

/// Names one issue or PR/MR on one forge.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemRef {
    pub forge: ForgeKind,
    /// `owner/name` (GitHub) or the project's full path (GitLab).
    pub repo: String,
    pub kind: ItemKind,
    /// The issue/PR number (GitHub) or IID (GitLab).
    pub number: u64,
}

#[cfg(test)]
impl ItemRef {
    /// Issue `number` of the GitHub repository `repo`, for tests.
    pub fn github_issue(repo: &str, number: u64) -> ItemRef {
        ItemRef {
            forge: ForgeKind::GitHub,
            repo: repo.into(),
            kind: ItemKind::Issue,
            number,
        }
    }
}

impl ItemRef {
    /// The journal key: stable across restarts, one per item. The key is
    /// as case-sensitive as `repo`, while the forges are not: make items
    /// with the repository spelled as configured ([`watched_spelling`]).
    pub fn key(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.forge.as_str(),
            self.repo,
            self.kind.as_str(),
            self.number
        )
    }

    pub fn parse_key(key: &str) -> Option<ItemRef> {
        let mut parts = key.splitn(2, ':');
        let forge = ForgeKind::parse(parts.next()?)?;
        let rest = parts.next()?;
        let (rest, number) = rest.rsplit_once(':')?;
        let (repo, kind) = rest.rsplit_once(':')?;
        Some(ItemRef {
            forge,
            repo: repo.to_owned(),
            kind: ItemKind::parse(kind)?,
            number: number.parse().ok()?,
        })
    }

    /// A name usable in container names and branch names: `github-acme-api-issue-12`.
    pub fn slug(&self) -> String {
        let repo: String = self
            .repo
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        let kind = match self.kind {
            ItemKind::Issue => "issue",
            ItemKind::Change => match self.forge {
                ForgeKind::GitHub => "pr",
                ForgeKind::GitLab => "mr",
                ForgeKind::Local => "change",
            },
        };
        format!("{}-{repo}-{kind}-{}", self.forge.as_str(), self.number)
    }
}

/// The name among `watched` that names the same repository as `name`.
/// GitHub's `owner/name` and GitLab's project paths name a repository in
/// any ASCII case, so a payload or an address may spell a watched
/// repository otherwise than the config does; keys are made with the
/// watched spelling, so one item never has two.
pub fn watched_spelling<'a>(watched: &'a [String], name: &str) -> Option<&'a str> {
    watched
        .iter()
        .find(|w| w.as_str() == name)
        .or_else(|| watched.iter().find(|w| w.eq_ignore_ascii_case(name)))
        .map(String::as_str)
}

impl fmt::Display for ItemRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sigil = match (self.forge, self.kind) {
            (ForgeKind::GitLab, ItemKind::Change) => '!',
            _ => '#',
        };
        write!(f, "{}{sigil}{}", self.repo, self.number)
    }
}

/// An issue or PR/MR as read from the forge.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub reference: ItemRef,
    pub title: String,
    pub body: String,
    pub author: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub web_url: String,
    /// The forge's `updated_at`, as it wrote it: any change to the item
    /// (text, labels, comments) changes it.
    pub updated_at: String,
}

impl Item {
    pub fn has_label(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l == label)
    }
}

/// An issue forgehand opens itself (a scheduled automation's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewIssue {
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
}

/// A moment as the forges report it (RFC 3339), in UTC.
pub type Timestamp = chrono::DateTime<chrono::Utc>;

/// Reads a forge timestamp; `None` when absent or unreadable.
pub fn parse_time(text: Option<&str>) -> Option<Timestamp> {
    chrono::DateTime::parse_from_rfc3339(text?.trim())
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// A label event: who applied the label, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelApplied {
    pub by: String,
    pub at: Option<Timestamp>,
    /// The user's numeric id, for their noreply commit address.
    pub by_id: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comment {
    /// Unique among the comments of its `place` (GitHub numbers issue
    /// comments, reviews and review comments separately).
    pub id: u64,
    pub author: String,
    pub body: String,
    pub place: CommentPlace,
    /// When it was written (ISO 8601, as the forge gives it; empty when not
    /// given), to merge the places in thread order.
    pub created_at: String,
}

impl Comment {
    /// The comment's id unique on its forge (`acme/app:thread:12`), as the
    /// journal hears it: ids of a pull request's review comments and of
    /// conversation comments are counted apart on GitHub.
    pub fn heard_id(&self, repo: &str) -> String {
        let place = match self.place {
            CommentPlace::Thread => "thread",
            CommentPlace::Review => "review",
            CommentPlace::Line { .. } => "line",
        };
        format!("{repo}:{place}:{}", self.id)
    }
}

/// Where a comment was left.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CommentPlace {
    /// The item's conversation.
    #[default]
    Thread,
    /// A review's own text (GitHub's review body).
    Review,
    /// A line of the change's diff (a review comment, a GitLab diff note).
    Line { path: String, line: Option<u64> },
}

/// A comment of a repository's, with the item it is on.
#[derive(Debug, Clone, PartialEq)]
pub struct RepoComment {
    pub item: ItemRef,
    pub comment: Comment,
}

/// A repository's recent comments, oldest first, and where the next
/// listing starts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecentComments {
    pub comments: Vec<RepoComment>,
    /// The `since` of the next listing: the newest instant this one saw
    /// (`None`: nothing new, keep the last one).
    pub next_since: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RepoInfo {
    /// HTTPS clone address (no credentials in it).
    pub clone_url: String,
    pub default_branch: String,
}

/// A pull request or merge request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeInfo {
    pub number: u64,
    pub web_url: String,
    pub source_branch: String,
    pub target_branch: String,
    /// False when the source branch lives in a fork (forgehand cannot push there).
    pub same_repo: bool,
    pub open: bool,
}

/// When an item's title or body was last edited, as far as the forge can say.
#[derive(Debug, Clone, PartialEq)]
pub enum TextEdits {
    /// The forge records no edit since the item was opened.
    Never,
    /// The last edit of the title or body.
    LastAt(Timestamp),
    /// The forge gave no answer that can be trusted (the reason); callers
    /// treat the text as possibly edited at any time (fail closed).
    Unknown(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Poll {
    /// Nothing changed since the last poll (GitHub answered 304).
    Unchanged,
    /// Every open item that carries the label (`since` was not used).
    All(Vec<Item>),
    /// Every item, labelled or not, open or not, updated at or after
    /// `since` (GitLab's `updated_after`): what lost the label or was
    /// closed shows up here too.
    UpdatedSince(Vec<Item>),
}

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error("{forge}: authentication failed ({status}): {message}; check the token (GITHUB_TOKEN / GITLAB_TOKEN) and its scopes")]
    Auth {
        forge: &'static str,
        status: u16,
        message: String,
    },
    #[error("{forge}: not found: {what}")]
    NotFound { forge: &'static str, what: String },
    #[error("{forge}: rate limited; waiting {} s before the next request", retry_after.as_secs())]
    RateLimited {
        forge: &'static str,
        retry_after: Duration,
    },
    #[error("{forge}: cannot reach {what}: {message}")]
    Network {
        forge: &'static str,
        what: String,
        message: String,
    },
    #[error("{forge}: {what} failed with HTTP {status}: {message}")]
    Api {
        forge: &'static str,
        what: String,
        status: u16,
        message: String,
    },
    #[error("{forge}: unexpected answer to {what}: {message}")]
    Decode {
        forge: &'static str,
        what: String,
        message: String,
    },
    #[error("{forge}: {message}")]
    Setup { forge: &'static str, message: String },
    /// This daemon no longer holds the task's claim: the write did not
    /// happen, and must not.
    #[error("{forge}: not written: {message}")]
    Fenced { forge: &'static str, message: String },
}

impl ForgeError {
    /// The HTTP status behind the error for metrics (0: none, e.g. a network failure).
    pub fn status(&self) -> u16 {
        match self {
            ForgeError::Auth { status, .. } | ForgeError::Api { status, .. } => *status,
            ForgeError::NotFound { .. } => 404,
            ForgeError::RateLimited { .. } => 429,
            ForgeError::Network { .. }
            | ForgeError::Decode { .. }
            | ForgeError::Setup { .. }
            | ForgeError::Fenced { .. } => 0,
        }
    }

    /// GitHub's refusal of a draft pull request (private repositories of
    /// accounts on GitHub Free): `422 Draft pull requests are not
    /// supported in this repository.`
    pub fn is_drafts_unsupported(&self) -> bool {
        matches!(self, ForgeError::Api { status: 422, message, .. }
            if message.contains("Draft pull requests are not supported"))
    }

    /// Worth trying again later: the forge was unreachable, busy or rate limited.
    pub fn is_retryable(&self) -> bool {
        match self {
            ForgeError::RateLimited { .. } | ForgeError::Network { .. } => true,
            ForgeError::Api { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// The forge refused a creation because what it would make exists
    /// already (GitHub's 422 "... already exists", GitLab's 409): made
    /// meanwhile by someone else, or by a request whose answer was lost.
    pub fn is_conflict(&self) -> bool {
        match self {
            ForgeError::Api { status: 409, .. } => true,
            ForgeError::Api {
                status: 422, message, ..
            } => message.contains("already exists"),
            _ => false,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ForgeError::RateLimited { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }
}

/// The capability traits, unnamed: `use crate::forge::prelude::*;` lets a
/// caller call any forge method without its names clashing with the
/// caller's own (a `Thread` of its own, say).
pub mod prelude {
    pub use super::{Checks as _, Delivery as _, Intake as _, Opener as _, Reviews as _, Thread as _};
}

/// A poisoned lock only means another request panicked; the cache it guards is still usable.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Parses an issue or PR/MR address as a user pastes it:
/// `https://github.com/o/r/issues/5`, `.../pull/5`,
/// `https://gitlab.example.com/g/p/-/issues/5`, `.../-/merge_requests/5`.
pub fn parse_item_url(url: &str) -> Option<ItemRef> {
    let parsed = url::Url::parse(url.trim()).ok()?;
    let segments: Vec<&str> = parsed.path_segments()?.filter(|s| !s.is_empty()).collect();
    if let Some(dash) = segments.iter().position(|s| *s == "-") {
        let repo = segments[..dash].join("/");
        let kind = match *segments.get(dash + 1)? {
            "issues" => ItemKind::Issue,
            "merge_requests" => ItemKind::Change,
            _ => return None,
        };
        let number = segments.get(dash + 2)?.parse().ok()?;
        if repo.contains('/') {
            return Some(ItemRef {
                forge: ForgeKind::GitLab,
                repo,
                kind,
                number,
            });
        }
        return None;
    }
    if segments.len() == 4 {
        let kind = match segments[2] {
            "issues" => ItemKind::Issue,
            "pull" => ItemKind::Change,
            _ => return None,
        };
        return Some(ItemRef {
            forge: ForgeKind::GitHub,
            repo: format!("{}/{}", segments[0], segments[1]),
            kind,
            number: segments[3].parse().ok()?,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_slugs_are_container_safe() {
        let item = ItemRef {
            forge: ForgeKind::GitLab,
            repo: "Group/Sub.Group/app".into(),
            kind: ItemKind::Change,
            number: 7,
        };
        assert_eq!(ItemRef::parse_key(&item.key()), Some(item.clone()));
        assert_eq!(item.slug(), "gitlab-group-sub-group-app-mr-7");
        assert_eq!(item.to_string(), "Group/Sub.Group/app!7");
    }

    #[test]
    fn a_repository_is_spelled_as_watched_whatever_the_case_given() {
        let watched = vec!["acme/widgets".to_owned(), "Group/Sub/App".to_owned()];
        assert_eq!(watched_spelling(&watched, "ACME/Widgets"), Some("acme/widgets"));
        assert_eq!(watched_spelling(&watched, "group/sub/app"), Some("Group/Sub/App"));
        assert_eq!(watched_spelling(&watched, "acme/widgets"), Some("acme/widgets"));
        assert_eq!(watched_spelling(&watched, "acme/widget"), None);
        // An exact spelling wins over another case of it.
        let both = vec!["Acme/App".to_owned(), "acme/app".to_owned()];
        assert_eq!(watched_spelling(&both, "acme/app"), Some("acme/app"));
    }

    #[test]
    fn item_addresses_parse_for_both_forges() {
        let gh = parse_item_url("https://github.com/acme/api/pull/12").unwrap();
        assert_eq!(
            (gh.forge, gh.repo.as_str(), gh.kind, gh.number),
            (ForgeKind::GitHub, "acme/api", ItemKind::Change, 12)
        );
        let gl = parse_item_url("https://git.example.com/a/b/c/-/issues/3").unwrap();
        assert_eq!(
            (gl.forge, gl.repo.as_str(), gl.kind, gl.number),
            (ForgeKind::GitLab, "a/b/c", ItemKind::Issue, 3)
        );
        assert!(parse_item_url("https://github.com/acme/api").is_none());
        assert!(parse_item_url("not a url").is_none());
    }
}
