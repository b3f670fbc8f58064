//! GitLab's REST answers as forgehand reads them: only the fields it uses,
//! and how they become the forge's own types.

use crate::forge::{parse_time, ChangeInfo, ForgeKind, Item, ItemKind, ItemRef, TextEdits, Timestamp};
use serde::Deserialize;

#[derive(Deserialize)]
pub(super) struct User {
    pub id: u64,
    pub username: String,
}

#[derive(Deserialize)]
pub(super) struct Issue {
    pub iid: u64,
    pub title: String,
    #[serde(default)]
    pub description: Option<String>,
    pub author: User,
    #[serde(default)]
    pub labels: Vec<String>,
    pub state: String,
    pub web_url: String,
    pub updated_at: String,
}

impl Issue {
    pub(super) fn into_item(self, repo: &str, kind: ItemKind) -> Item {
        Item {
            reference: ItemRef {
                forge: ForgeKind::GitLab,
                repo: repo.to_owned(),
                kind,
                number: self.iid,
            },
            title: self.title,
            body: self.description.unwrap_or_default(),
            author: self.author.username,
            labels: self.labels,
            open: self.state == "opened",
            web_url: self.web_url,
            updated_at: self.updated_at,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Note {
    pub id: u64,
    pub author: User,
    pub body: String,
    #[serde(default)]
    pub system: bool,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Where a diff note sits in the change.
    #[serde(default)]
    pub position: Option<NotePosition>,
}

#[derive(Deserialize)]
pub(super) struct NotePosition {
    #[serde(default)]
    pub new_path: Option<String>,
    #[serde(default)]
    pub old_path: Option<String>,
    #[serde(default)]
    pub new_line: Option<u64>,
    #[serde(default)]
    pub old_line: Option<u64>,
}

/// How the system notes GitLab writes for a change of the text begin
/// (`SystemNotes::IssuablesService`): the description, the title, and a
/// task list item ticked in the description (older and newer wording).
pub(super) const TEXT_EDIT_NOTES: [&str; 4] = [
    "changed the description",
    "changed title from ",
    "marked the task ",
    "marked the checklist item ",
];

/// The last edit of an item's text, from its notes: GitLab's REST issue and
/// merge request have no edit time, but every title or description change
/// leaves a system note (updated in place when GitLab folds quick edits
/// together, so its `updated_at` counts too).
pub(super) fn text_edits(notes: &[Note]) -> TextEdits {
    let mut last: Option<Timestamp> = None;
    for note in notes.iter().filter(|n| n.system) {
        if !TEXT_EDIT_NOTES.iter().any(|p| note.body.starts_with(p)) {
            continue;
        }
        for stamp in [&note.created_at, &note.updated_at] {
            let Some(text) = stamp else { continue };
            match parse_time(Some(text)) {
                Some(at) => last = last.max(Some(at)),
                None => {
                    return TextEdits::Unknown(format!(
                        "GitLab's note {} has the time {text:?}, which does not parse",
                        note.id
                    ))
                }
            }
        }
        if note.created_at.is_none() && note.updated_at.is_none() {
            return TextEdits::Unknown(format!("GitLab's note {} has no time", note.id));
        }
    }
    match last {
        Some(at) => TextEdits::LastAt(at),
        None => TextEdits::Never,
    }
}

#[derive(Deserialize)]
pub(super) struct LabelEvent {
    #[serde(default)]
    pub user: Option<User>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub label: Option<LabelName>,
    pub action: String,
}

#[derive(Deserialize)]
pub(super) struct LabelName {
    pub name: String,
}

#[derive(Deserialize)]
pub(super) struct Member {
    pub access_level: u32,
}

#[derive(Deserialize)]
pub(super) struct Project {
    pub path_with_namespace: String,
    pub http_url_to_repo: String,
    #[serde(default)]
    pub default_branch: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct MergeRequest {
    pub iid: u64,
    pub web_url: String,
    pub state: String,
    pub source_branch: String,
    pub target_branch: String,
    pub source_project_id: u64,
    pub target_project_id: u64,
}

impl MergeRequest {
    pub(super) fn into_change(self) -> ChangeInfo {
        ChangeInfo {
            number: self.iid,
            web_url: self.web_url,
            same_repo: self.source_project_id == self.target_project_id,
            source_branch: self.source_branch,
            target_branch: self.target_branch,
            open: self.state == "opened",
        }
    }
}
