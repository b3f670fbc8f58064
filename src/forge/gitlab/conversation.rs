//! Who forgehand is on GitLab, what was said lately in a project's
//! conversations (to find the mentions of it), and its award emoji.

use super::wire::{NotePosition, User};
use super::{project, GitLab, Rest};
use crate::forge::{
    parse_time, Comment, CommentPlace, ForgeError, ForgeKind, ItemKind, ItemRef, RecentComments, RepoComment,
};
use http::Method;
use serde::Deserialize;
use serde_json::{json, Value};

/// A project event (`GET /projects/:id/events`); only comments are asked for.
#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    note: Option<EventNote>,
}

#[derive(Deserialize)]
struct EventNote {
    id: u64,
    body: String,
    author: User,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    system: bool,
    #[serde(default)]
    noteable_type: Option<String>,
    #[serde(default)]
    noteable_iid: Option<u64>,
    /// `DiffNote` for a comment on a line of a merge request's diff.
    #[serde(default, rename = "type")]
    note_type: Option<String>,
    #[serde(default)]
    position: Option<NotePosition>,
}

impl GitLab {
    /// The token's user (`GET /user`).
    pub(super) async fn ask_identity(&self) -> Result<String, ForgeError> {
        let user: User = self
            .one(Rest::get("user".into()), "read who the token is")
            .await?;
        Ok(user.username)
    }

    /// The comments written in `repo` at or after `since`, oldest first,
    /// from the project's events (a comment's edits make no event: an
    /// edited comment is not listed again).
    pub(super) async fn list_recent_comments(
        &self,
        repo: &str,
        since: &str,
    ) -> Result<RecentComments, ForgeError> {
        let from = parse_time(Some(since)).ok_or_else(|| ForgeError::Decode {
            forge: "gitlab",
            what: "list the project's comments".into(),
            message: format!("{since:?} is not a time"),
        })?;
        // `after` is a day, and excludes it: the day before `since`.
        let day_before = (from - chrono::Duration::days(1)).format("%Y-%m-%d").to_string();
        let events: Vec<Event> = self
            .all(
                Rest::get(format!("{}/events", project(repo)))
                    .with("action", "commented")
                    .with("after", day_before)
                    .with("sort", "asc"),
                "list the project's comments",
            )
            .await?;
        let mut newest: Option<String> = None;
        let mut comments = Vec::new();
        for note in events.into_iter().filter_map(|e| e.note) {
            let created = note.created_at.clone().unwrap_or_default();
            if note.system || parse_time(Some(&created)).is_none_or(|at| at < from) {
                continue;
            }
            let kind = match note.noteable_type.as_deref() {
                Some("Issue") => ItemKind::Issue,
                Some("MergeRequest") => ItemKind::Change,
                _ => continue,
            };
            let Some(number) = note.noteable_iid else {
                continue;
            };
            newest = newest.max(Some(created.clone()));
            comments.push(RepoComment {
                item: ItemRef {
                    forge: ForgeKind::GitLab,
                    repo: repo.to_owned(),
                    kind,
                    number,
                },
                comment: Comment {
                    id: note.id,
                    author: note.author.username,
                    body: note.body,
                    place: match (note.note_type.as_deref(), note.position) {
                        (Some("DiffNote"), position) => CommentPlace::Line {
                            path: position
                                .as_ref()
                                .and_then(|p| p.new_path.clone().or(p.old_path.clone()))
                                .unwrap_or_default(),
                            line: position.and_then(|p| p.new_line.or(p.old_line)),
                        },
                        _ => CommentPlace::Thread,
                    },
                    created_at: created,
                },
            });
        }
        Ok(RecentComments {
            comments,
            next_since: newest,
        })
    }

    /// Awards the emoji `name` to `comment` (a note), or to the item.
    pub(super) async fn award(
        &self,
        item: &ItemRef,
        comment: Option<&Comment>,
        name: &str,
    ) -> Result<(), ForgeError> {
        let path = match comment {
            Some(note) => format!("{}/notes/{}/award_emoji", Self::item_path(item), note.id),
            None => format!("{}/award_emoji", Self::item_path(item)),
        };
        match self
            .one::<Value>(
                Rest::send(Method::POST, path, json!({ "name": name })),
                "award an emoji",
            )
            .await
        {
            Ok(_) => Ok(()),
            // GitLab refuses an emoji the user has awarded already.
            Err(ForgeError::Api {
                status: 400 | 404,
                message,
                ..
            }) if message.contains("already") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Who awarded `thumbsup` to note `id` ("List an issue note's emoji reactions").
    pub(super) async fn thumbs_up_on(&self, item: &ItemRef, id: u64) -> Result<Vec<String>, ForgeError> {
        #[derive(Deserialize)]
        struct Award {
            name: String,
            user: User,
        }
        let path = format!("{}/notes/{id}/award_emoji", Self::item_path(item));
        let awards: Vec<Award> = self
            .all(Rest::get(path), "read the award emoji of a comment")
            .await?;
        Ok(awards
            .into_iter()
            .filter(|a| a.name == "thumbsup")
            .map(|a| a.user.username)
            .collect())
    }
}
