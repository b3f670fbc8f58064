//! Webhook deliveries from GitHub and GitLab (`daemon.webhooks`). A
//! delivery is only a doorbell: once its signature (GitHub) or token
//! (GitLab) checks out, it names a repository and what changed there, and
//! the daemon polls that repository at once. What forgehand does is always
//! read from the forge's API, never from the payload, so a forged or stale
//! payload can at most cause a poll. Polling goes on beside it, as the
//! safety net for deliveries that never arrive.

mod github;
mod gitlab;

use crate::config::Secret;
use crate::forge::ForgeKind;
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// Delivery ids remembered, so a redelivery rings once.
const REMEMBERED: usize = 4096;

/// What a delivery asks the daemon to look at again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doorbell {
    pub forge: ForgeKind,
    pub repo: RepoName,
    pub topic: Topic,
}

/// A repository as a delivery names it: not yet checked against the
/// watched ones, nor spelled as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepoName {
    /// `owner/name` (GitHub) or `group/project` (GitLab), as the payload spells it.
    Path(String),
    /// A GitLab project by its id, from a payload that names no path (the
    /// older Job Hook: `project_id` and a display `project_name` only).
    ProjectId { id: u64, display: String },
}

impl std::fmt::Display for RepoName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RepoName::Path(path) => f.write_str(path),
            RepoName::ProjectId { id, display } if display.is_empty() => write!(f, "project {id}"),
            RepoName::ProjectId { id, display } => write!(f, "project {id} ({display})"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// Labels, comments, reviews: the repository's items are polled.
    Items,
    /// Checks, statuses, pipelines: running tasks that wait on CI look again.
    Checks,
}

/// What came of a delivery, and the HTTP answer it gets. Every authentic
/// delivery is answered 2xx, useful or not: GitLab switches a webhook off
/// after repeated failures, which would silence the useful ones too.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// Rings the doorbell (202).
    Accepted(Doorbell),
    /// A delivery id heard before (200, nothing done).
    Duplicate,
    /// Authentic, but about nothing forgehand acts on (204), e.g. `ping`.
    Ignored(String),
    /// Not signed with the configured secret (401).
    Refused(String),
    /// Authentic but unreadable (200, nothing done, a warning logged).
    Malformed(String),
}

/// Every outcome a delivery can have, as logs and
/// `forgehand_webhook_deliveries_total` name them; `too_large` is the
/// HTTP listener's (a body over its limit is never read).
pub const OUTCOMES: [&str; 6] = [
    "accepted",
    "duplicate",
    "ignored",
    "malformed",
    "refused",
    "too_large",
];

impl Received {
    /// The outcome's name in logs and metrics.
    pub fn outcome(&self) -> &'static str {
        match self {
            Received::Accepted(_) => "accepted",
            Received::Duplicate => "duplicate",
            Received::Ignored(_) => "ignored",
            Received::Refused(_) => "refused",
            Received::Malformed(_) => "malformed",
        }
    }
}

/// The two forges' secrets: `FORGEHAND_GITHUB_WEBHOOK_SECRET` (the
/// webhook's HMAC secret) and `FORGEHAND_GITLAB_WEBHOOK_SECRET` (the
/// webhook's secret token).
#[derive(Clone, Default)]
pub struct WebhookSecrets {
    pub github: Option<Secret>,
    pub gitlab: Option<Secret>,
}

/// Checks deliveries and remembers their ids.
pub struct Receiver {
    secrets: WebhookSecrets,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl Seen {
    /// `true` when `id` is new (and now remembered).
    fn first_time(&mut self, id: &str) -> bool {
        if !self.ids.insert(id.to_owned()) {
            return false;
        }
        self.order.push_back(id.to_owned());
        if self.order.len() > REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
        true
    }
}

/// A delivery as the HTTP listener received it.
pub struct Delivery<'a> {
    /// A header's value by (case-insensitive) name.
    pub header: &'a dyn Fn(&str) -> Option<String>,
    pub body: &'a [u8],
}

impl Receiver {
    pub fn new(secrets: WebhookSecrets) -> Receiver {
        Receiver {
            secrets,
            seen: Mutex::new(Seen::default()),
        }
    }

    /// Checks one delivery to `/webhooks/<forge>`; authentic ones are
    /// rung once per delivery id.
    pub fn receive(&self, forge: ForgeKind, delivery: &Delivery<'_>) -> Received {
        let checked = match forge {
            ForgeKind::GitHub => github::check(self.secrets.github.as_ref(), delivery),
            ForgeKind::GitLab => gitlab::check(self.secrets.gitlab.as_ref(), delivery),
            ForgeKind::Local => {
                return Received::Refused("no forge sends webhooks for a local repository".into())
            }
        };
        let (id, doorbell) = match checked {
            Ok(Some(found)) => found,
            Ok(None) => return Received::Ignored((delivery.header)(event_header(forge)).unwrap_or_default()),
            Err(refused) => return refused,
        };
        if let Some(id) = id {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if !seen.first_time(&id) {
                return Received::Duplicate;
            }
        }
        Received::Accepted(doorbell)
    }
}

/// The header that names a delivery's event.
fn event_header(forge: ForgeKind) -> &'static str {
    match forge {
        ForgeKind::GitHub => "x-github-event",
        ForgeKind::GitLab => "x-gitlab-event",
        ForgeKind::Local => "x-forgehand-event",
    }
}

/// Equal in time independent of where the first difference is.
fn same_secret(given: &[u8], secret: &[u8]) -> bool {
    given.len() == secret.len() && given.iter().zip(secret).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The string at `path` (object keys) in a JSON payload.
fn text_at<'v>(payload: &'v serde_json::Value, path: &[&str]) -> Option<&'v str> {
    path.iter()
        .try_fold(payload, |value, key| value.get(*key))
        .and_then(|v| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_id_rings_once_and_old_ids_are_forgotten() {
        let mut seen = Seen::default();
        assert!(seen.first_time("a"));
        assert!(!seen.first_time("a"));
        for i in 0..REMEMBERED {
            assert!(seen.first_time(&i.to_string()));
        }
        assert!(seen.first_time("a"), "forgotten after {REMEMBERED} others");
        assert!(seen.ids.len() <= REMEMBERED);
    }

    fn gitlab_delivery(receiver: &Receiver, token: &str, event: &str, uuid: &str) -> Received {
        let body = br#"{"object_kind":"note","project":{"path_with_namespace":"group/app"}}"#;
        let header = |name: &str| match name {
            "x-gitlab-token" => Some(token.to_owned()),
            "x-gitlab-event" => Some(event.to_owned()),
            "x-gitlab-event-uuid" => Some(uuid.to_owned()),
            _ => None,
        };
        receiver.receive(
            ForgeKind::GitLab,
            &Delivery {
                header: &header,
                body,
            },
        )
    }

    #[test]
    fn gitlab_deliveries_carry_the_secret_token_and_ring_once() {
        let receiver = Receiver::new(WebhookSecrets {
            github: None,
            gitlab: Some(Secret::new("gl-hook-token")),
        });
        assert_eq!(
            gitlab_delivery(&receiver, "gl-hook-token", "Note Hook", "u1"),
            Received::Accepted(Doorbell {
                forge: ForgeKind::GitLab,
                repo: RepoName::Path("group/app".into()),
                topic: Topic::Items,
            })
        );
        assert_eq!(
            gitlab_delivery(&receiver, "gl-hook-token", "Note Hook", "u1"),
            Received::Duplicate
        );
        assert!(matches!(
            gitlab_delivery(&receiver, "gl-hook-tokem", "Note Hook", "u2"),
            Received::Refused(_)
        ));
        assert!(matches!(
            gitlab_delivery(&receiver, "gl-hook-token", "Push Hook", "u3"),
            Received::Ignored(_)
        ));
        assert!(matches!(
            gitlab_delivery(&receiver, "gl-hook-token", "Pipeline Hook", "u4"),
            Received::Accepted(Doorbell {
                topic: Topic::Checks,
                ..
            })
        ));
        // Without a secret configured nothing is taken.
        let open = Receiver::new(WebhookSecrets::default());
        assert!(matches!(
            gitlab_delivery(&open, "", "Note Hook", "u5"),
            Received::Refused(_)
        ));
    }
}
