//! Issues forgehand opens itself (a scheduled automation's): `POST
//! /projects/:id/issues` with its labels, and the open issues forgehand's
//! account opened (`author_username=`), searched for a marker line.

use super::{project, GitLab, Issue, Rest};
use crate::forge::{ForgeError, Intake, Item, ItemKind, NewIssue, Opener};
use async_trait::async_trait;
use http::Method;
use serde_json::json;

#[async_trait]
impl Opener for GitLab {
    async fn open_issue(&self, repo: &str, issue: &NewIssue) -> Result<Item, ForgeError> {
        // issues.md, "New issue": `labels` is a comma-separated list.
        let body = json!({
            "title": issue.title,
            "description": issue.body,
            "labels": issue.labels.join(","),
        });
        let rest = Rest::send(Method::POST, format!("{}/issues", project(repo)), body);
        let opened: Issue = self.one(rest, "open an issue").await?;
        Ok(opened.into_item(repo, ItemKind::Issue))
    }

    async fn find_open_issue(&self, repo: &str, marker: &str) -> Result<Option<Item>, ForgeError> {
        let username = self.identity().await?;
        let rest = Rest::get(format!("{}/issues", project(repo)))
            .with("state", "opened")
            .with("author_username", username)
            .with("order_by", "created_at")
            .with("sort", "desc");
        let issues: Vec<Issue> = self.all(rest, "list the issues forgehand opened").await?;
        Ok(issues
            .into_iter()
            .filter(|i| i.description.as_deref().is_some_and(|d| d.contains(marker)))
            .map(|i| i.into_item(repo, ItemKind::Issue))
            .next())
    }
}
