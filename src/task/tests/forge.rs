//! A forge held in memory: one repository whose git remote is a bare
//! repository on disk, items with labels and comments, members who may
//! trigger tasks, and the draft changes a task opens.

use crate::forge::{
    ChangeInfo, Check, Checks, Comment, CommentPlace, Delivery, ForgeError, ForgeKind, Intake, Item, ItemRef,
    LabelApplied, Poll, RepoInfo, ReviewThread, Reviews, TextEdits, Thread,
};
use crate::git::Credentials;
use async_trait::async_trait;
use std::collections::HashSet;
use std::sync::Mutex;

#[derive(Default)]
pub struct State {
    pub items: Vec<Item>,
    /// Each comment with the key of its item.
    pub comments: Vec<(String, Comment)>,
    pub changes: Vec<ChangeInfo>,
    pub members: HashSet<String>,
    /// Every write, in order, for assertions.
    pub writes: Vec<String>,
    /// The checks of each commit.
    pub checks: std::collections::HashMap<String, Vec<Check>>,
    /// Each check's log, by the check's name.
    pub logs: std::collections::HashMap<String, String>,
    /// The checks of any other commit.
    pub default_checks: Vec<Check>,
    /// Each change's review threads, by the item's key.
    pub threads: std::collections::HashMap<String, Vec<ReviewThread>>,
}

pub struct MemoryForge {
    pub clone_url: String,
    pub state: Mutex<State>,
}

impl MemoryForge {
    pub fn new(clone_url: String) -> MemoryForge {
        MemoryForge {
            clone_url,
            state: Mutex::default(),
        }
    }

    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens an issue by `author` carrying `labels`.
    pub fn open_issue(&self, number: u64, author: &str, title: &str, body: &str, labels: &[&str]) -> ItemRef {
        let reference = ItemRef {
            forge: ForgeKind::GitHub,
            repo: "acme/app".into(),
            kind: crate::forge::ItemKind::Issue,
            number,
        };
        self.state().items.push(Item {
            reference: reference.clone(),
            title: title.into(),
            body: body.into(),
            author: author.into(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            open: true,
            web_url: format!("https://forge.test/acme/app/issues/{number}"),
            updated_at: "2026-01-01T00:00:00Z".into(),
        });
        reference
    }

    pub fn comment(&self, item: &ItemRef, author: &str, body: &str) {
        let mut state = self.state();
        let id = state.comments.len() as u64 + 1;
        state.comments.push((
            item.key(),
            Comment {
                id,
                author: author.into(),
                body: body.into(),
                place: CommentPlace::default(),
                created_at: format!("2026-01-01T00:00:{id:02}Z"),
            },
        ));
    }

    pub fn labels(&self, item: &ItemRef) -> Vec<String> {
        self.state()
            .items
            .iter()
            .find(|i| i.reference == *item)
            .map(|i| i.labels.clone())
            .unwrap_or_default()
    }

    /// The body of the comment carrying forgehand's progress marker.
    pub fn progress_comment(&self, item: &ItemRef) -> Option<String> {
        let marker = crate::task::report::progress::marker(item);
        self.state()
            .comments
            .iter()
            .find(|(key, c)| *key == item.key() && c.body.contains(&marker))
            .map(|(_, c)| c.body.clone())
    }
}

fn not_found(what: &str) -> ForgeError {
    ForgeError::NotFound {
        forge: "github",
        what: what.into(),
    }
}

impl crate::forge::Opener for MemoryForge {}

#[async_trait]
impl Intake for MemoryForge {
    fn kind(&self) -> ForgeKind {
        ForgeKind::GitHub
    }

    async fn watched_repositories(&self) -> Result<Vec<String>, ForgeError> {
        Ok(vec!["acme/app".into()])
    }

    async fn poll_labelled(
        &self,
        _repo: &str,
        label: &str,
        _since: Option<&str>,
    ) -> Result<Poll, ForgeError> {
        Ok(Poll::All(
            self.state()
                .items
                .iter()
                .filter(|i| i.open && i.has_label(label))
                .cloned()
                .collect(),
        ))
    }

    async fn item(&self, item: &ItemRef) -> Result<Item, ForgeError> {
        self.state()
            .items
            .iter()
            .find(|i| i.reference == *item)
            .cloned()
            .ok_or_else(|| not_found("the item"))
    }

    async fn label_applied(&self, _item: &ItemRef, _label: &str) -> Result<Option<LabelApplied>, ForgeError> {
        Ok(None)
    }

    async fn text_edited_at(&self, _item: &ItemRef) -> Result<TextEdits, ForgeError> {
        Ok(TextEdits::Never)
    }

    async fn may_trigger(&self, _repo: &str, user: &str) -> Result<bool, ForgeError> {
        Ok(self.state().members.contains(user))
    }

    fn who_may_trigger(&self) -> String {
        "the members".into()
    }

    async fn identity(&self) -> Result<String, ForgeError> {
        Ok("forgehand-bot".into())
    }

    async fn recent_comments(
        &self,
        _repo: &str,
        since: &str,
    ) -> Result<crate::forge::RecentComments, ForgeError> {
        let state = self.state();
        let comments: Vec<crate::forge::RepoComment> = state
            .comments
            .iter()
            .filter(|(_, c)| c.created_at.as_str() >= since)
            .filter_map(|(key, c)| {
                Some(crate::forge::RepoComment {
                    item: ItemRef::parse_key(key)?,
                    comment: c.clone(),
                })
            })
            .collect();
        let next_since = comments.iter().map(|c| c.comment.created_at.clone()).max();
        Ok(crate::forge::RecentComments { comments, next_since })
    }

    async fn acknowledge(&self, item: &ItemRef, comment: Option<&Comment>) -> Result<(), ForgeError> {
        let on = comment.map_or_else(|| "the item".to_owned(), |c| format!("comment {}", c.id));
        self.state().writes.push(format!("eyes on {on} of {item}"));
        Ok(())
    }

    async fn change(&self, _item: &ItemRef) -> Result<ChangeInfo, ForgeError> {
        Err(not_found("the change"))
    }
}

#[async_trait]
impl Thread for MemoryForge {
    async fn thumbs_up(&self, _item: &ItemRef, _comment_id: u64) -> Result<Vec<String>, ForgeError> {
        Ok(Vec::new())
    }

    async fn comments(&self, item: &ItemRef) -> Result<Vec<Comment>, ForgeError> {
        Ok(self
            .state()
            .comments
            .iter()
            .filter(|(key, _)| *key == item.key())
            .map(|(_, c)| c.clone())
            .collect())
    }

    async fn create_comment(&self, item: &ItemRef, body: &str) -> Result<u64, ForgeError> {
        self.comment(item, "forgehand-bot", body);
        let mut state = self.state();
        state.writes.push(format!("comment on {item}"));
        Ok(state.comments.len() as u64)
    }

    async fn edit_comment(&self, item: &ItemRef, id: u64, body: &str) -> Result<(), ForgeError> {
        let mut state = self.state();
        let found = state
            .comments
            .iter_mut()
            .find(|(key, c)| *key == item.key() && c.id == id)
            .ok_or_else(|| not_found("the comment"))?;
        found.1.body = body.into();
        Ok(())
    }

    async fn edit_labels(&self, item: &ItemRef, add: &[&str], remove: &[&str]) -> Result<(), ForgeError> {
        let mut state = self.state();
        state
            .writes
            .push(format!("labels of {item}: +{add:?} -{remove:?}"));
        let found = state
            .items
            .iter_mut()
            .find(|i| i.reference == *item)
            .ok_or_else(|| not_found("the item"))?;
        found.labels.retain(|l| !remove.contains(&l.as_str()));
        for label in add {
            if !found.has_label(label) {
                found.labels.push((*label).to_owned());
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Delivery for MemoryForge {
    async fn git_credentials(&self) -> Result<Credentials, ForgeError> {
        Ok(Credentials {
            username: "x-access-token".into(),
            token: crate::config::Secret::new("forge-token-never-shown"),
        })
    }

    async fn repository(&self, _repo: &str) -> Result<RepoInfo, ForgeError> {
        Ok(RepoInfo {
            clone_url: self.clone_url.clone(),
            default_branch: "main".into(),
        })
    }

    async fn find_open_change(
        &self,
        _repo: &str,
        source_branch: &str,
    ) -> Result<Option<ChangeInfo>, ForgeError> {
        Ok(self
            .state()
            .changes
            .iter()
            .find(|c| c.open && c.source_branch == source_branch)
            .cloned())
    }

    async fn create_draft_change(
        &self,
        _repo: &str,
        source_branch: &str,
        target_branch: &str,
        title: &str,
        _body: &str,
    ) -> Result<ChangeInfo, ForgeError> {
        let mut state = self.state();
        let number = 100 + state.changes.len() as u64;
        let change = ChangeInfo {
            number,
            web_url: format!("https://forge.test/acme/app/pull/{number}"),
            source_branch: source_branch.into(),
            target_branch: target_branch.into(),
            same_repo: true,
            open: true,
        };
        state.writes.push(format!("draft {title}"));
        state.changes.push(change.clone());
        Ok(change)
    }
}

#[async_trait]
impl Checks for MemoryForge {
    async fn checks(&self, _repo: &str, sha: &str) -> Result<Vec<Check>, ForgeError> {
        let state = self.state();
        Ok(state.checks.get(sha).unwrap_or(&state.default_checks).clone())
    }

    async fn check_log(&self, _repo: &str, check: &Check) -> Result<Option<String>, ForgeError> {
        Ok(self.state().logs.get(&check.name).cloned())
    }

    async fn rerun_check(&self, _repo: &str, _check: &Check) -> Result<bool, ForgeError> {
        Ok(false)
    }
}

#[async_trait]
impl Reviews for MemoryForge {
    async fn review_threads(&self, item: &ItemRef) -> Result<Vec<ReviewThread>, ForgeError> {
        Ok(self.state().threads.get(&item.key()).cloned().unwrap_or_default())
    }

    async fn reply_in_thread(
        &self,
        item: &ItemRef,
        thread: &ReviewThread,
        body: &str,
    ) -> Result<(), ForgeError> {
        let mut state = self.state();
        state.writes.push(format!("reply {}", thread.id));
        let threads = state.threads.entry(item.key()).or_default();
        let Some(found) = threads.iter_mut().find(|t| t.id == thread.id) else {
            return Err(not_found("review thread"));
        };
        let id = found.comments.len() as u64 + 1000;
        found.comments.push(Comment {
            id,
            author: "forgehand-bot".into(),
            body: body.into(),
            place: CommentPlace::default(),
            created_at: String::new(),
        });
        Ok(())
    }

    async fn resolve_thread(&self, item: &ItemRef, thread: &ReviewThread) -> Result<bool, ForgeError> {
        let mut state = self.state();
        state.writes.push(format!("resolve {}", thread.id));
        let threads = state.threads.entry(item.key()).or_default();
        match threads.iter_mut().find(|t| t.id == thread.id) {
            Some(found) => {
                found.resolved = true;
                Ok(true)
            }
            None => Err(not_found("review thread")),
        }
    }
}
