//! The forge of an evaluation: one issue (the instance's problem statement)
//! in one local repository, kept in memory. Its labels, comments and draft
//! change behave as a forge's would, so the task runs its whole pipeline;
//! nothing leaves the machine but the model calls.

use crate::forge::{
    ChangeInfo, Check, Checks, Comment, CommentPlace, Delivery, ForgeError, ForgeKind, Intake, Item, ItemRef,
    LabelApplied, Poll, RecentComments, RepoInfo, ReviewThread, Reviews, TextEdits, Thread,
};
use crate::git::Credentials;
use async_trait::async_trait;
use std::sync::Mutex;

/// Who "wrote" the issue and applied the label: the operator, by running eval.
const OPERATOR: &str = "forgehand-eval";
const FORGE: &str = "local";

pub struct LocalForge {
    item: ItemRef,
    title: String,
    body: String,
    /// The bare origin the task clones from and pushes to.
    origin: String,
    default_branch: String,
    labels: Mutex<Vec<String>>,
    comments: Mutex<Vec<Comment>>,
    change: Mutex<Option<ChangeInfo>>,
}

impl LocalForge {
    /// The issue `item`, its text `problem`, labelled `trigger`, in the
    /// repository at `origin` whose default branch is `default_branch`.
    pub fn new(
        item: ItemRef,
        problem: &str,
        trigger: &str,
        origin: &str,
        default_branch: &str,
    ) -> LocalForge {
        LocalForge {
            title: title_of(problem),
            body: problem.to_owned(),
            item,
            origin: origin.to_owned(),
            default_branch: default_branch.to_owned(),
            labels: Mutex::new(vec![trigger.to_owned()]),
            comments: Mutex::default(),
            change: Mutex::default(),
        }
    }

    /// The comments written on the issue (the progress comment), in order.
    pub fn comments_written(&self) -> Vec<String> {
        lock(&self.comments).iter().map(|c| c.body.clone()).collect()
    }

    fn check_item(&self, item: &ItemRef) -> Result<(), ForgeError> {
        if item == &self.item {
            Ok(())
        } else {
            Err(not_found(format!(
                "{item}: this evaluation has only {}",
                self.item
            )))
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn not_found(what: String) -> ForgeError {
    ForgeError::NotFound { forge: FORGE, what }
}

/// The first line of a problem statement, cut to a title's length.
fn title_of(problem: &str) -> String {
    let line = problem
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("(no title)");
    let mut title: String = line.chars().take(100).collect();
    if line.chars().count() > 100 {
        title.push('…');
    }
    title
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A local repository has no issues to open.
impl crate::forge::Opener for LocalForge {}

#[async_trait]
impl Intake for LocalForge {
    fn kind(&self) -> ForgeKind {
        ForgeKind::Local
    }

    async fn watched_repositories(&self) -> Result<Vec<String>, ForgeError> {
        Ok(vec![self.item.repo.clone()])
    }

    async fn poll_labelled(
        &self,
        _repo: &str,
        _label: &str,
        _since: Option<&str>,
    ) -> Result<Poll, ForgeError> {
        Ok(Poll::All(vec![self.item(&self.item).await?]))
    }

    async fn item(&self, item: &ItemRef) -> Result<Item, ForgeError> {
        self.check_item(item)?;
        Ok(Item {
            reference: self.item.clone(),
            title: self.title.clone(),
            body: self.body.clone(),
            author: OPERATOR.to_owned(),
            labels: lock(&self.labels).clone(),
            open: true,
            web_url: String::new(),
            updated_at: now(),
        })
    }

    async fn label_applied(&self, item: &ItemRef, _label: &str) -> Result<Option<LabelApplied>, ForgeError> {
        self.check_item(item)?;
        Ok(Some(LabelApplied {
            by: OPERATOR.to_owned(),
            at: None,
            by_id: None,
        }))
    }

    async fn text_edited_at(&self, _item: &ItemRef) -> Result<TextEdits, ForgeError> {
        Ok(TextEdits::Never)
    }

    async fn identity(&self) -> Result<String, ForgeError> {
        Ok("forgehand".to_owned())
    }

    async fn recent_comments(&self, _repo: &str, _since: &str) -> Result<RecentComments, ForgeError> {
        Ok(RecentComments {
            comments: Vec::new(),
            next_since: None,
        })
    }

    async fn acknowledge(&self, _item: &ItemRef, _comment: Option<&Comment>) -> Result<(), ForgeError> {
        Ok(())
    }

    async fn may_trigger(&self, _repo: &str, user: &str) -> Result<bool, ForgeError> {
        Ok(user == OPERATOR)
    }

    fn who_may_trigger(&self) -> String {
        "the operator running the evaluation".to_owned()
    }

    async fn change(&self, item: &ItemRef) -> Result<ChangeInfo, ForgeError> {
        Err(not_found(format!("{item}: an evaluation's items are issues")))
    }
}

#[async_trait]
impl Thread for LocalForge {
    /// Nobody reacts in a local evaluation.
    async fn thumbs_up(&self, item: &ItemRef, _comment_id: u64) -> Result<Vec<String>, ForgeError> {
        self.check_item(item)?;
        Ok(Vec::new())
    }

    async fn comments(&self, item: &ItemRef) -> Result<Vec<Comment>, ForgeError> {
        self.check_item(item)?;
        Ok(lock(&self.comments).clone())
    }

    async fn create_comment(&self, item: &ItemRef, body: &str) -> Result<u64, ForgeError> {
        self.check_item(item)?;
        let mut comments = lock(&self.comments);
        let id = comments.len() as u64 + 1;
        comments.push(Comment {
            id,
            author: "forgehand".to_owned(),
            body: body.to_owned(),
            place: CommentPlace::Thread,
            created_at: now(),
        });
        Ok(id)
    }

    async fn edit_comment(&self, item: &ItemRef, id: u64, body: &str) -> Result<(), ForgeError> {
        self.check_item(item)?;
        let mut comments = lock(&self.comments);
        let comment = comments
            .iter_mut()
            .find(|c| c.id == id)
            .ok_or_else(|| not_found(format!("comment {id}")))?;
        comment.body = body.to_owned();
        Ok(())
    }

    async fn edit_labels(&self, item: &ItemRef, add: &[&str], remove: &[&str]) -> Result<(), ForgeError> {
        self.check_item(item)?;
        let mut labels = lock(&self.labels);
        labels.retain(|l| !remove.contains(&l.as_str()));
        for label in add {
            if !labels.iter().any(|l| l == label) {
                labels.push((*label).to_owned());
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Delivery for LocalForge {
    async fn git_credentials(&self) -> Result<Credentials, ForgeError> {
        // A local path needs none; nothing is ever sent.
        Ok(Credentials {
            username: String::new(),
            token: crate::config::Secret::new(String::new()),
        })
    }

    async fn repository(&self, _repo: &str) -> Result<RepoInfo, ForgeError> {
        Ok(RepoInfo {
            clone_url: self.origin.clone(),
            default_branch: self.default_branch.clone(),
        })
    }

    async fn find_open_change(
        &self,
        _repo: &str,
        source_branch: &str,
    ) -> Result<Option<ChangeInfo>, ForgeError> {
        Ok(lock(&self.change)
            .clone()
            .filter(|c| c.source_branch == source_branch))
    }

    async fn create_draft_change(
        &self,
        _repo: &str,
        source_branch: &str,
        target_branch: &str,
        _title: &str,
        _body: &str,
    ) -> Result<ChangeInfo, ForgeError> {
        let change = ChangeInfo {
            number: 1,
            web_url: format!("{}#{source_branch}", self.origin),
            source_branch: source_branch.to_owned(),
            target_branch: target_branch.to_owned(),
            same_repo: true,
            open: true,
        };
        *lock(&self.change) = Some(change.clone());
        Ok(change)
    }
}

#[async_trait]
impl Checks for LocalForge {
    fn has_ci(&self) -> bool {
        false
    }

    async fn checks(&self, _repo: &str, _sha: &str) -> Result<Vec<Check>, ForgeError> {
        Ok(Vec::new())
    }

    async fn check_log(&self, _repo: &str, _check: &Check) -> Result<Option<String>, ForgeError> {
        Ok(None)
    }

    async fn rerun_check(&self, _repo: &str, _check: &Check) -> Result<bool, ForgeError> {
        Ok(false)
    }
}

#[async_trait]
impl Reviews for LocalForge {
    async fn review_threads(&self, _item: &ItemRef) -> Result<Vec<ReviewThread>, ForgeError> {
        Ok(Vec::new())
    }

    async fn reply_in_thread(
        &self,
        item: &ItemRef,
        _thread: &ReviewThread,
        _body: &str,
    ) -> Result<(), ForgeError> {
        Err(not_found(format!("{item}: an evaluation has no review threads")))
    }

    async fn resolve_thread(&self, _item: &ItemRef, _thread: &ReviewThread) -> Result<bool, ForgeError> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::ItemKind;

    fn item() -> ItemRef {
        ItemRef {
            forge: ForgeKind::Local,
            repo: "eval/x".into(),
            kind: ItemKind::Issue,
            number: 1,
        }
    }

    #[tokio::test]
    async fn labels_comments_and_the_draft_change_behave_as_on_a_forge() {
        let forge = LocalForge::new(
            item(),
            "\n  Fix the sum\nIt adds wrong.",
            "coding agent",
            "/o.git",
            "base",
        );
        let issue = forge.item(&item()).await.unwrap();
        assert_eq!(issue.title, "Fix the sum");
        assert!(issue.has_label("coding agent"));
        assert!(forge.may_trigger("eval/x", &issue.author).await.unwrap());
        forge
            .edit_labels(&item(), &["processing"], &["coding agent"])
            .await
            .unwrap();
        assert_eq!(forge.item(&item()).await.unwrap().labels, vec!["processing"]);
        let id = forge.create_comment(&item(), "one").await.unwrap();
        forge.edit_comment(&item(), id, "two").await.unwrap();
        assert_eq!(forge.comments_written(), vec!["two"]);
        assert!(forge.find_open_change("eval/x", "b").await.unwrap().is_none());
        forge
            .create_draft_change("eval/x", "b", "base", "t", "")
            .await
            .unwrap();
        assert!(forge.find_open_change("eval/x", "b").await.unwrap().is_some());
        let other = ItemRef { number: 2, ..item() };
        assert!(forge.item(&other).await.is_err());
        assert!(!forge.has_ci());
    }
}
