//! A forge whose writes are fenced by a task's claim: before each comment,
//! label change, PR/MR or push, the claim is checked (still renewed here,
//! still this replica's on the API server), and a write whose claim is gone
//! does not happen. Reads pass straight through.

use super::lease::{Claim, Fenced};
use crate::forge::{
    ChangeInfo, Check, Checks, Comment, Delivery, Forge, ForgeError, ForgeKind, Intake, Item, ItemRef,
    LabelApplied, NewIssue, Opener, Poll, RecentComments, RepoInfo, ReviewThread, Reviews, TextEdits, Thread,
};
use crate::git::Credentials;
use async_trait::async_trait;
use std::sync::Arc;

pub struct FencedForge {
    inner: Arc<dyn Forge>,
    claim: Arc<Claim>,
}

impl FencedForge {
    pub fn new(inner: Arc<dyn Forge>, claim: Arc<Claim>) -> FencedForge {
        FencedForge { inner, claim }
    }

    async fn fence(&self, write: &str) -> Result<(), ForgeError> {
        match self.claim.fence().await {
            Ok(()) => Ok(()),
            // The API server did not answer, but the claim was renewed
            // recently enough that nobody can have taken it over yet.
            Err(Fenced::Unknown { name, detail }) => {
                tracing::debug!(lease = %name, "cannot re-read the claim before {write} ({detail}); it is still valid here");
                Ok(())
            }
            Err(fenced) => {
                tracing::warn!(write, "{fenced}; the write is abandoned");
                Err(ForgeError::Fenced {
                    forge: self.inner.kind().as_str(),
                    message: format!("{write} abandoned: {fenced}"),
                })
            }
        }
    }
}

#[async_trait]
impl Opener for FencedForge {
    async fn open_issue(&self, repo: &str, issue: &NewIssue) -> Result<Item, ForgeError> {
        self.fence("opening an issue").await?;
        self.inner.open_issue(repo, issue).await
    }

    async fn find_open_issue(&self, repo: &str, marker: &str) -> Result<Option<Item>, ForgeError> {
        self.inner.find_open_issue(repo, marker).await
    }
}

#[async_trait]
impl Intake for FencedForge {
    fn kind(&self) -> ForgeKind {
        self.inner.kind()
    }

    async fn watched_repositories(&self) -> Result<Vec<String>, ForgeError> {
        self.inner.watched_repositories().await
    }

    async fn repository_by_id(&self, id: u64) -> Result<Option<String>, ForgeError> {
        self.inner.repository_by_id(id).await
    }

    async fn poll_labelled(&self, repo: &str, label: &str, since: Option<&str>) -> Result<Poll, ForgeError> {
        self.inner.poll_labelled(repo, label, since).await
    }

    async fn item(&self, item: &ItemRef) -> Result<Item, ForgeError> {
        self.inner.item(item).await
    }

    async fn label_applied(&self, item: &ItemRef, label: &str) -> Result<Option<LabelApplied>, ForgeError> {
        self.inner.label_applied(item, label).await
    }

    async fn text_edited_at(&self, item: &ItemRef) -> Result<TextEdits, ForgeError> {
        self.inner.text_edited_at(item).await
    }

    async fn may_trigger(&self, repo: &str, user: &str) -> Result<bool, ForgeError> {
        self.inner.may_trigger(repo, user).await
    }

    fn who_may_trigger(&self) -> String {
        self.inner.who_may_trigger()
    }

    async fn identity(&self) -> Result<String, ForgeError> {
        self.inner.identity().await
    }

    async fn user_id(&self, login: &str) -> Result<Option<u64>, ForgeError> {
        self.inner.user_id(login).await
    }

    async fn recent_comments(&self, repo: &str, since: &str) -> Result<RecentComments, ForgeError> {
        self.inner.recent_comments(repo, since).await
    }

    async fn acknowledge(&self, item: &ItemRef, comment: Option<&Comment>) -> Result<(), ForgeError> {
        self.fence("a reaction").await?;
        self.inner.acknowledge(item, comment).await
    }

    async fn change(&self, item: &ItemRef) -> Result<ChangeInfo, ForgeError> {
        self.inner.change(item).await
    }
}

#[async_trait]
impl Thread for FencedForge {
    fn upload_site(&self, repo: &str) -> Option<crate::thread_images::UploadSite> {
        self.inner.upload_site(repo)
    }

    async fn comments(&self, item: &ItemRef) -> Result<Vec<Comment>, ForgeError> {
        self.inner.comments(item).await
    }

    async fn thumbs_up(&self, item: &ItemRef, comment_id: u64) -> Result<Vec<String>, ForgeError> {
        self.inner.thumbs_up(item, comment_id).await
    }

    async fn reviews(&self, item: &ItemRef) -> Result<Vec<Comment>, ForgeError> {
        self.inner.reviews(item).await
    }

    async fn create_comment(&self, item: &ItemRef, body: &str) -> Result<u64, ForgeError> {
        self.fence("a new comment").await?;
        self.inner.create_comment(item, body).await
    }

    async fn edit_comment(&self, item: &ItemRef, id: u64, body: &str) -> Result<(), ForgeError> {
        self.fence("a comment edit").await?;
        self.inner.edit_comment(item, id, body).await
    }

    async fn edit_labels(&self, item: &ItemRef, add: &[&str], remove: &[&str]) -> Result<(), ForgeError> {
        self.fence("a label change").await?;
        self.inner.edit_labels(item, add, remove).await
    }
}

#[async_trait]
impl Delivery for FencedForge {
    async fn git_credentials(&self) -> Result<Credentials, ForgeError> {
        self.inner.git_credentials().await
    }

    /// A push cannot be taken back, so the claim is renewed right before it
    /// (a compare-and-swap on the Lease, which fails once another replica
    /// holds it), giving the push the claim's whole validity; an API server
    /// that does not answer in time stops the push rather than letting it
    /// through.
    async fn before_push(&self, item: &ItemRef) -> Result<(), ForgeError> {
        let refused = |why: String| {
            tracing::warn!("the push is abandoned: {why}");
            ForgeError::Fenced {
                forge: self.inner.kind().as_str(),
                message: format!("the push abandoned: {why}"),
            }
        };
        loop {
            let deadline = self.claim.valid_until();
            match tokio::time::timeout_at(deadline, self.claim.renew()).await {
                Ok(Ok(())) => break,
                Ok(Err(err)) if err.is_retryable() && tokio::time::Instant::now() < deadline => {
                    tracing::debug!(error = %err, "cannot renew the claim before the push; trying again");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Ok(Err(err)) => return Err(refused(format!("the claim could not be renewed ({err})"))),
                Err(_) => return Err(refused("the claim ran out before it could be renewed".into())),
            }
        }
        self.inner.before_push(item).await
    }

    fn write_deadline(&self) -> Option<std::time::Instant> {
        // A claim known lost (taken over, its Lease gone) ends now, whatever
        // its last renew promised.
        if self.claim.lost().is_cancelled() {
            return Some(std::time::Instant::now());
        }
        Some(self.claim.valid_until().into_std())
    }

    async fn repository(&self, repo: &str) -> Result<RepoInfo, ForgeError> {
        self.inner.repository(repo).await
    }

    async fn find_open_change(
        &self,
        repo: &str,
        source_branch: &str,
    ) -> Result<Option<ChangeInfo>, ForgeError> {
        self.inner.find_open_change(repo, source_branch).await
    }

    async fn create_draft_change(
        &self,
        repo: &str,
        source_branch: &str,
        target_branch: &str,
        title: &str,
        body: &str,
    ) -> Result<ChangeInfo, ForgeError> {
        self.fence("the PR/MR").await?;
        self.inner
            .create_draft_change(repo, source_branch, target_branch, title, body)
            .await
    }

    async fn create_ready_change(
        &self,
        repo: &str,
        source_branch: &str,
        target_branch: &str,
        title: &str,
        body: &str,
    ) -> Result<ChangeInfo, ForgeError> {
        self.fence("the PR/MR").await?;
        self.inner
            .create_ready_change(repo, source_branch, target_branch, title, body)
            .await
    }
}

#[async_trait]
impl Checks for FencedForge {
    async fn checks(&self, repo: &str, sha: &str) -> Result<Vec<Check>, ForgeError> {
        self.inner.checks(repo, sha).await
    }

    async fn check_log(&self, repo: &str, check: &Check) -> Result<Option<String>, ForgeError> {
        self.inner.check_log(repo, check).await
    }

    async fn rerun_check(&self, repo: &str, check: &Check) -> Result<bool, ForgeError> {
        self.fence("re-running a check").await?;
        self.inner.rerun_check(repo, check).await
    }
}

#[async_trait]
impl Reviews for FencedForge {
    async fn review_threads(&self, item: &ItemRef) -> Result<Vec<ReviewThread>, ForgeError> {
        self.inner.review_threads(item).await
    }

    async fn reply_in_thread(
        &self,
        item: &ItemRef,
        thread: &ReviewThread,
        body: &str,
    ) -> Result<(), ForgeError> {
        self.fence("replying in a review thread").await?;
        self.inner.reply_in_thread(item, thread, body).await
    }

    async fn resolve_thread(&self, item: &ItemRef, thread: &ReviewThread) -> Result<bool, ForgeError> {
        self.fence("resolving a review thread").await?;
        self.inner.resolve_thread(item, thread).await
    }
}
