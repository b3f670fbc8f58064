//! A merge request's review threads: its resolvable discussions (diff
//! notes and threads started on the change), replied to and resolved.

use super::wire::Note;
use super::{GitLab, Rest};
use crate::forge::{Comment, CommentPlace, ForgeError, ItemRef, ReviewThread};
use http::Method;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
struct Discussion {
    id: String,
    #[serde(default)]
    individual_note: bool,
    notes: Vec<ThreadNote>,
}

#[derive(Deserialize)]
struct ThreadNote {
    #[serde(flatten)]
    note: Note,
    #[serde(default)]
    resolvable: bool,
    #[serde(default)]
    resolved: bool,
}

impl GitLab {
    pub(super) async fn list_review_threads(&self, item: &ItemRef) -> Result<Vec<ReviewThread>, ForgeError> {
        let discussions: Vec<Discussion> = self
            .all(
                Rest::get(format!("{}/discussions", Self::item_path(item))),
                "read the merge request's discussions",
            )
            .await?;
        Ok(discussions.into_iter().filter_map(into_thread).collect())
    }

    pub(super) async fn reply_to(
        &self,
        item: &ItemRef,
        thread: &ReviewThread,
        body: &str,
    ) -> Result<(), ForgeError> {
        let path = format!("{}/discussions/{}/notes", Self::item_path(item), thread.id);
        let _: Value = self
            .one(
                Rest::send(Method::POST, path, json!({ "body": body })),
                "reply in a discussion",
            )
            .await?;
        Ok(())
    }

    pub(super) async fn resolve(&self, item: &ItemRef, thread: &ReviewThread) -> Result<bool, ForgeError> {
        let path = format!("{}/discussions/{}", Self::item_path(item), thread.id);
        match self
            .one::<Value>(
                Rest::send(Method::PUT, path, json!({ "resolved": true })),
                "resolve a discussion",
            )
            .await
        {
            Ok(_) => Ok(true),
            // Resolving needs the Developer role on the project (or the
            // merge request's authorship).
            Err(ForgeError::Api {
                status: 403, message, ..
            }) => {
                tracing::warn!(thread = %thread.id, "GitLab did not resolve the discussion: {message}");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

/// A discussion as a review thread: only resolvable ones are (a lone
/// comment on the change is conversation, not review).
fn into_thread(discussion: Discussion) -> Option<ReviewThread> {
    let first = discussion.notes.first()?;
    if discussion.individual_note || !first.resolvable || first.note.system {
        return None;
    }
    let resolved = discussion
        .notes
        .iter()
        .filter(|n| n.resolvable)
        .all(|n| n.resolved);
    let comments = discussion
        .notes
        .into_iter()
        .filter(|n| !n.note.system)
        .map(|n| {
            let note = n.note;
            Comment {
                id: note.id,
                author: note.author.username,
                body: note.body,
                place: match note.position {
                    Some(p) => CommentPlace::Line {
                        path: p.new_path.or(p.old_path).unwrap_or_default(),
                        line: p.new_line.or(p.old_line),
                    },
                    None => CommentPlace::Thread,
                },
                created_at: note.created_at.unwrap_or_default(),
            }
        })
        .collect();
    Some(ReviewThread {
        id: discussion.id,
        resolved,
        comments,
    })
}
