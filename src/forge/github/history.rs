//! Issues closed by merged pull requests, read from GitHub's REST API: the
//! closed issues since a day, each issue's `closed` event (whose commit is
//! the merge), the pull requests that commit belongs to, and the files the
//! merged one changed.

use super::wire::IssueEvent;
use super::GitHub;
use crate::forge::history::{ChangedFile, ClosedByChange, FileStatus, History};
use crate::forge::{parse_time, ForgeError, Timestamp};
use async_trait::async_trait;
use serde::Deserialize;

#[derive(Deserialize)]
struct ClosedIssue {
    number: u64,
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    closed_at: Option<String>,
    #[serde(default)]
    pull_request: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct CommitPull {
    number: u64,
    #[serde(default)]
    merged_at: Option<String>,
    base: PullBase,
}

#[derive(Deserialize)]
struct PullBase {
    sha: String,
}

#[derive(Deserialize)]
struct PullFile {
    filename: String,
    status: String,
    #[serde(default)]
    patch: Option<String>,
    #[serde(default)]
    previous_filename: Option<String>,
}

impl GitHub {
    /// The merged pull request whose merge commit closed `issue`, if any.
    async fn closing_pull(&self, repo: &str, issue: u64) -> Result<Option<CommitPull>, ForgeError> {
        let events = self
            .events(&crate::forge::ItemRef {
                forge: crate::forge::ForgeKind::GitHub,
                repo: repo.to_owned(),
                kind: crate::forge::ItemKind::Issue,
                number: issue,
            })
            .await?;
        let Some(commit) = events
            .iter()
            .rev()
            .filter(|e| e.event == "closed")
            .find_map(|e: &IssueEvent| e.commit_id.clone())
        else {
            return Ok(None);
        };
        let path = format!("{}/commits/{commit}/pulls", Self::repo_path(repo)?);
        let pulls: Vec<CommitPull> = self.get(&path, "list the pull requests of a commit").await?;
        Ok(pulls.into_iter().find(|p| p.merged_at.is_some()))
    }

    async fn pull_files(&self, repo: &str, number: u64) -> Result<Vec<ChangedFile>, ForgeError> {
        let path = format!("{}/pulls/{number}/files?per_page=100", Self::repo_path(repo)?);
        let (files, _) = self
            .get_all::<PullFile>(&path, "list a pull request's files")
            .await?;
        Ok(files
            .into_iter()
            .map(|f| ChangedFile {
                status: match f.status.as_str() {
                    "added" => FileStatus::Added,
                    "removed" => FileStatus::Removed,
                    "renamed" => FileStatus::Renamed,
                    _ => FileStatus::Modified,
                },
                path: f.filename,
                old_path: f.previous_filename,
                hunks: f.patch,
            })
            .collect())
    }
}

#[async_trait]
impl History for GitHub {
    async fn closed_by_changes(
        &self,
        repo: &str,
        since: Timestamp,
    ) -> Result<Vec<ClosedByChange>, ForgeError> {
        // `since` is the last update: every issue closed since then was updated since then.
        let stamp = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let path = format!(
            "{}/issues?state=closed&since={stamp}&per_page=100&sort=created&direction=asc",
            Self::repo_path(repo)?
        );
        let (issues, _) = self.get_all::<ClosedIssue>(&path, "list closed issues").await?;
        let mut found = Vec::new();
        for issue in issues.into_iter().filter(|i| i.pull_request.is_none()) {
            let Some(closed_at) = parse_time(issue.closed_at.as_deref()).filter(|at| *at >= since) else {
                continue;
            };
            let Some(pull) = self.closing_pull(repo, issue.number).await? else {
                continue;
            };
            found.push(ClosedByChange {
                issue: issue.number,
                title: issue.title,
                body: issue.body.unwrap_or_default(),
                closed_at,
                change: pull.number,
                base_sha: pull.base.sha,
                files: self.pull_files(repo, pull.number).await?,
            });
        }
        found.sort_by_key(|c| c.closed_at);
        Ok(found)
    }
}
