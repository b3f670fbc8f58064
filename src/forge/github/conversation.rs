//! Who forgehand is on GitHub, what was said lately in a repository's
//! conversations (to find the mentions of it), and its reactions.

use super::wire::{AppInfo, IssueComment, ReviewComment, User};
use super::{Auth, GitHub, FORGE};
use crate::forge::retry::Repeat;
use crate::forge::ForgeKind;
use crate::forge::{Comment, CommentPlace, ForgeError, ItemKind, ItemRef, RecentComments, RepoComment};
use http::Method;
use serde_json::{json, Value};

impl GitHub {
    /// The token's user (`GET /user`), or the App's bot (`GET /app`:
    /// `<slug>[bot]`, the login GitHub shows on what the App writes).
    pub(super) async fn ask_identity(&self) -> Result<String, ForgeError> {
        match &self.auth {
            Auth::Token(_) => Ok(self.get::<User>("/user", "read who the token is").await?.login),
            Auth::App(app) => {
                let info: AppInfo = app
                    .get("/app", None::<&()>)
                    .await
                    .map_err(|e| ForgeError::Network {
                        forge: FORGE,
                        what: "read who the App is".into(),
                        message: crate::redact::urls_in(&e.to_string()),
                    })?;
                Ok(format!("{}[bot]", info.slug))
            }
        }
    }

    /// The numeric id of the user `login` (`GET /users/{login}`); `None`
    /// when GitHub knows no such user.
    pub(super) async fn ask_user_id(&self, login: &str) -> Result<Option<u64>, ForgeError> {
        let path = format!("/users/{}", crate::forge::http_util::encode(login));
        match self.get::<User>(&path, "look up a user").await {
            Ok(user) => Ok(user.id),
            Err(ForgeError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The conversation comments and the review comments of `repo` updated
    /// at or after `since`, oldest first.
    pub(super) async fn list_recent_comments(
        &self,
        repo: &str,
        since: &str,
    ) -> Result<RecentComments, ForgeError> {
        let base = Self::repo_path(repo)?;
        let window = format!(
            "since={}&sort=updated&direction=asc&per_page=100",
            super::encode(since)
        );
        let (thread, _) = self
            .get_all::<IssueComment>(
                &format!("{base}/issues/comments?{window}"),
                "list the repository's comments",
            )
            .await?;
        let (lines, _) = self
            .get_all::<ReviewComment>(
                &format!("{base}/pulls/comments?{window}"),
                "list the repository's review comments",
            )
            .await?;
        let mut newest: Option<String> = None;
        let mut comments = Vec::new();
        for c in thread {
            let Some(number) = c.issue_url.as_deref().and_then(last_number) else {
                continue;
            };
            let kind = match c.html_url.as_deref() {
                Some(url) if url.contains("/pull/") => ItemKind::Change,
                _ => ItemKind::Issue,
            };
            newest = newest.max(c.updated_at.clone());
            comments.push((
                c.updated_at.clone().unwrap_or_default(),
                RepoComment {
                    item: item_ref(repo, kind, number),
                    comment: Comment {
                        id: c.id,
                        author: c.user.login,
                        body: c.body.unwrap_or_default(),
                        place: CommentPlace::Thread,
                        created_at: c.created_at.unwrap_or_default(),
                    },
                },
            ));
        }
        for c in lines {
            let (Some(number), Some(user)) = (c.pull_request_url.as_deref().and_then(last_number), c.user)
            else {
                continue;
            };
            newest = newest.max(c.updated_at.clone());
            comments.push((
                c.updated_at.clone().unwrap_or_default(),
                RepoComment {
                    item: item_ref(repo, ItemKind::Change, number),
                    comment: Comment {
                        id: c.id,
                        author: user.login,
                        body: c.body.unwrap_or_default(),
                        place: CommentPlace::Line {
                            path: c.path.unwrap_or_default(),
                            line: c.line.or(c.original_line),
                        },
                        created_at: c.created_at.unwrap_or_default(),
                    },
                },
            ));
        }
        // Stable: each list is in order already; the two are merged by time.
        comments.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(RecentComments {
            comments: comments.into_iter().map(|(_, c)| c).collect(),
            next_since: newest,
        })
    }

    /// Puts the reaction `content` on `comment`, or on the item. A review's
    /// own text takes no reaction on GitHub: nothing is done for it.
    pub(super) async fn react(
        &self,
        item: &ItemRef,
        comment: Option<&Comment>,
        content: &str,
    ) -> Result<(), ForgeError> {
        let base = Self::repo_path(&item.repo)?;
        let path = match comment.map(|c| (&c.place, c.id)) {
            None => format!("{base}/issues/{}/reactions", item.number),
            Some((CommentPlace::Thread, id)) => format!("{base}/issues/comments/{id}/reactions"),
            Some((CommentPlace::Line { .. }, id)) => format!("{base}/pulls/comments/{id}/reactions"),
            Some((CommentPlace::Review, _)) => return Ok(()),
        };
        // GitHub answers 200 with the reaction that was there already.
        let _: Value = self
            .write(
                Method::POST,
                &path,
                &json!({ "content": content }),
                "add a reaction",
                Repeat::Safe,
            )
            .await?;
        Ok(())
    }

    /// Who reacted `+1` to issue comment `id` (the `content` filter is
    /// GitHub's own: "List reactions for an issue comment").
    pub(super) async fn thumbs_up_on(&self, item: &ItemRef, id: u64) -> Result<Vec<String>, ForgeError> {
        #[derive(serde::Deserialize)]
        struct Reaction {
            user: Option<User>,
        }
        let path = format!(
            "{}/issues/comments/{id}/reactions?content=%2B1&per_page=100",
            Self::repo_path(&item.repo)?
        );
        let (reactions, _) = self
            .get_all::<Reaction>(&path, "read the reactions to a comment")
            .await?;
        Ok(reactions
            .into_iter()
            .filter_map(|r| r.user.map(|u| u.login))
            .collect())
    }
}

/// The number at the end of an API address (`…/issues/12`).
fn last_number(url: &str) -> Option<u64> {
    url.rsplit('/').next()?.parse().ok()
}

fn item_ref(repo: &str, kind: ItemKind, number: u64) -> ItemRef {
    ItemRef {
        forge: ForgeKind::GitHub,
        repo: repo.to_owned(),
        kind,
        number,
    }
}
