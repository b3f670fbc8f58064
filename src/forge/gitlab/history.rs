//! Issues closed by merged merge requests, read from GitLab's REST API: the
//! closed issues updated since a day, the merge requests that closed each
//! (`issues/:iid/closed_by`), the merged one's base commit and its diffs.

use super::{project, GitLab, Rest};
use crate::forge::history::{ChangedFile, ClosedByChange, FileStatus, History};
use crate::forge::{parse_time, ForgeError, Timestamp};
use async_trait::async_trait;
use serde::Deserialize;

#[derive(Deserialize)]
struct ClosedIssue {
    iid: u64,
    title: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    closed_at: Option<String>,
}

#[derive(Deserialize)]
struct ClosingRequest {
    iid: u64,
    state: String,
}

#[derive(Deserialize)]
struct MergeRequest {
    #[serde(default)]
    diff_refs: Option<DiffRefs>,
}

#[derive(Deserialize)]
struct DiffRefs {
    base_sha: String,
}

#[derive(Deserialize)]
struct Diff {
    old_path: String,
    new_path: String,
    #[serde(default)]
    diff: String,
    #[serde(default)]
    new_file: bool,
    #[serde(default)]
    renamed_file: bool,
    #[serde(default)]
    deleted_file: bool,
}

impl GitLab {
    /// The merged merge request that closed `issue`, with its base commit.
    async fn closing_request(&self, repo: &str, issue: u64) -> Result<Option<(u64, String)>, ForgeError> {
        let closing: Vec<ClosingRequest> = self
            .all(
                Rest::get(format!("{}/issues/{issue}/closed_by", project(repo))),
                "list the merge requests that closed an issue",
            )
            .await?;
        let Some(merged) = closing.into_iter().find(|m| m.state == "merged") else {
            return Ok(None);
        };
        let request: MergeRequest = self
            .one(
                Rest::get(format!("{}/merge_requests/{}", project(repo), merged.iid)),
                "read a merge request",
            )
            .await?;
        Ok(request.diff_refs.map(|refs| (merged.iid, refs.base_sha)))
    }

    async fn request_files(&self, repo: &str, iid: u64) -> Result<Vec<ChangedFile>, ForgeError> {
        let diffs: Vec<Diff> = self
            .all(
                Rest::get(format!("{}/merge_requests/{iid}/diffs", project(repo))),
                "list a merge request's diffs",
            )
            .await?;
        Ok(diffs
            .into_iter()
            .map(|d| ChangedFile {
                status: if d.new_file {
                    FileStatus::Added
                } else if d.deleted_file {
                    FileStatus::Removed
                } else if d.renamed_file {
                    FileStatus::Renamed
                } else {
                    FileStatus::Modified
                },
                old_path: (d.old_path != d.new_path).then_some(d.old_path),
                path: d.new_path,
                // A binary file's diff is empty.
                hunks: (!d.diff.trim().is_empty()).then_some(d.diff),
            })
            .collect())
    }
}

#[async_trait]
impl History for GitLab {
    async fn closed_by_changes(
        &self,
        repo: &str,
        since: Timestamp,
    ) -> Result<Vec<ClosedByChange>, ForgeError> {
        let stamp = since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let issues: Vec<ClosedIssue> = self
            .all(
                Rest::get(format!("{}/issues", project(repo)))
                    .with("state", "closed")
                    .with("updated_after", &stamp),
                "list closed issues",
            )
            .await?;
        let mut found = Vec::new();
        for issue in issues {
            let Some(closed_at) = parse_time(issue.closed_at.as_deref()).filter(|at| *at >= since) else {
                continue;
            };
            let Some((change, base_sha)) = self.closing_request(repo, issue.iid).await? else {
                continue;
            };
            found.push(ClosedByChange {
                issue: issue.iid,
                title: issue.title,
                body: issue.description.unwrap_or_default(),
                closed_at,
                change,
                base_sha,
                files: self.request_files(repo, change).await?,
            });
        }
        found.sort_by_key(|c| c.closed_at);
        Ok(found)
    }
}
