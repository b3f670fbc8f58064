//! Issues forgehand opens itself (a scheduled automation's): `POST
//! /repos/{owner}/{repo}/issues` with its labels, and the open issues
//! forgehand's account opened (`creator=`), searched for a marker line.

use super::{GitHub, Issue};
use crate::forge::http_util::encode;
use crate::forge::retry::Repeat;
use crate::forge::{ForgeError, Intake, Item, NewIssue, Opener};
use async_trait::async_trait;
use http::Method;
use serde_json::json;

#[async_trait]
impl Opener for GitHub {
    async fn open_issue(&self, repo: &str, issue: &NewIssue) -> Result<Item, ForgeError> {
        let path = format!("{}/issues", Self::repo_path(repo)?);
        let request = json!({
            "title": issue.title,
            "body": issue.body,
            "labels": issue.labels,
        });
        let opened: Issue = self
            .write(Method::POST, &path, &request, "open an issue", Repeat::Once)
            .await?;
        Ok(opened.into_item(repo))
    }

    async fn find_open_issue(&self, repo: &str, marker: &str) -> Result<Option<Item>, ForgeError> {
        let login = self.identity().await?;
        let path = format!(
            "{}/issues?state=open&creator={}&sort=created&direction=desc&per_page=100",
            Self::repo_path(repo)?,
            encode(&login)
        );
        let (issues, _) = self
            .get_all::<Issue>(&path, "list the issues forgehand opened")
            .await?;
        Ok(issues
            .into_iter()
            .filter(|i| i.pull_request.is_none() && i.body.as_deref().is_some_and(|b| b.contains(marker)))
            .map(|i| i.into_item(repo))
            .next())
    }
}
