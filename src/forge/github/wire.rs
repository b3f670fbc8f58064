//! GitHub's REST answers as forgehand reads them: only the fields it uses,
//! and how they become the forge's own types.

use crate::forge::{ChangeInfo, ForgeKind, Item, ItemKind, ItemRef};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
pub(super) struct User {
    pub login: String,
    #[serde(default)]
    pub id: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct Label {
    pub name: String,
}

#[derive(Deserialize)]
pub(super) struct Issue {
    pub number: u64,
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    pub user: User,
    #[serde(default)]
    pub labels: Vec<Label>,
    pub state: String,
    pub html_url: String,
    #[serde(default)]
    pub updated_at: String,
    #[serde(default)]
    pub pull_request: Option<Value>,
}

impl Issue {
    pub(super) fn into_item(self, repo: &str) -> Item {
        Item {
            reference: ItemRef {
                forge: ForgeKind::GitHub,
                repo: repo.to_owned(),
                kind: if self.pull_request.is_some() {
                    ItemKind::Change
                } else {
                    ItemKind::Issue
                },
                number: self.number,
            },
            title: self.title,
            body: self.body.unwrap_or_default(),
            author: self.user.login,
            labels: self.labels.into_iter().map(|l| l.name).collect(),
            updated_at: self.updated_at,
            open: self.state == "open",
            web_url: self.html_url,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct IssueComment {
    pub id: u64,
    pub user: User,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    /// `…/issues/N#issuecomment-ID` or `…/pull/N#issuecomment-ID`.
    #[serde(default)]
    pub html_url: Option<String>,
    /// `…/repos/OWNER/NAME/issues/N`.
    #[serde(default)]
    pub issue_url: Option<String>,
}

/// An inline comment of a pull request review (`pulls/N/comments`).
#[derive(Deserialize)]
pub(super) struct ReviewComment {
    pub id: u64,
    pub user: Option<User>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub original_line: Option<u64>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    /// `…/repos/OWNER/NAME/pulls/N`.
    #[serde(default)]
    pub pull_request_url: Option<String>,
}

/// A pull request review (`pulls/N/reviews`).
#[derive(Deserialize)]
pub(super) struct Review {
    pub id: u64,
    pub user: Option<User>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub submitted_at: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct IssueEvent {
    pub event: String,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub actor: Option<User>,
    #[serde(default)]
    pub label: Option<Label>,
    /// The commit that closed the issue (a `closed` event's).
    #[serde(default)]
    pub commit_id: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct Permission {
    pub permission: String,
}

#[derive(Deserialize)]
pub(super) struct Repository {
    pub full_name: String,
    pub clone_url: String,
    pub default_branch: String,
}

#[derive(Deserialize)]
pub(super) struct InstallationRepositories {
    pub repositories: Vec<Repository>,
}

#[derive(Deserialize)]
pub(super) struct PullRef {
    #[serde(rename = "ref")]
    pub name: String,
    #[serde(default)]
    pub repo: Option<RepoName>,
}

#[derive(Deserialize)]
pub(super) struct RepoName {
    pub full_name: String,
}

#[derive(Deserialize)]
pub(super) struct Pull {
    pub number: u64,
    pub html_url: String,
    pub state: String,
    pub head: PullRef,
    pub base: PullRef,
}

impl Pull {
    pub(super) fn into_change(self, repo: &str) -> ChangeInfo {
        ChangeInfo {
            number: self.number,
            web_url: self.html_url,
            same_repo: self
                .head
                .repo
                .as_ref()
                .is_some_and(|r| r.full_name.eq_ignore_ascii_case(repo)),
            source_branch: self.head.name,
            target_branch: self.base.name,
            open: self.state == "open",
        }
    }
}

/// Who an App is (`GET /app`).
#[derive(Deserialize)]
pub(super) struct AppInfo {
    pub slug: String,
}
