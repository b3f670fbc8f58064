//! What forgehand does on a forge, split by capability: each phase asks
//! for the trait it uses (`&dyn Checks` to follow CI, `&dyn Intake` to
//! poll), and [`Forge`] is all of them, for whoever holds the whole forge
//! (`Arc<dyn Forge>` coerces to any one of them).

use super::{
    ChangeInfo, Check, Comment, ForgeError, ForgeKind, Item, ItemRef, LabelApplied, NewIssue, Poll,
    RecentComments, RepoInfo, ReviewThread, TextEdits,
};
use crate::git::Credentials;
use async_trait::async_trait;

/// Finding work and who may ask for it: the watched repositories, the
/// labelled items and mentions, the account forgehand acts as, and the
/// reaction that says "seen".
#[async_trait]
pub trait Intake: Send + Sync {
    /// Which forge this is (items and journal keys name it).
    fn kind(&self) -> ForgeKind;

    /// The repositories to poll: the configured ones, plus all visible ones when configured so.
    async fn watched_repositories(&self) -> Result<Vec<String>, ForgeError>;

    /// The path of the repository with the forge's numeric id `id`
    /// (GitLab's project id, which some webhook payloads give instead of
    /// the path); `None` when there is none, or the forge names
    /// repositories by path alone.
    async fn repository_by_id(&self, id: u64) -> Result<Option<String>, ForgeError> {
        let _ = id;
        Ok(None)
    }

    /// Open issues and PRs/MRs of `repo` carrying `label`, or what changed
    /// at or after `since` (the newest `updated_at` the caller has fully
    /// handled; a forge may ignore it and answer `All` or `Unchanged`).
    async fn poll_labelled(&self, repo: &str, label: &str, since: Option<&str>) -> Result<Poll, ForgeError>;

    async fn item(&self, item: &ItemRef) -> Result<Item, ForgeError>;

    /// Who last applied `label` to the item and when, if anyone did.
    async fn label_applied(&self, item: &ItemRef, label: &str) -> Result<Option<LabelApplied>, ForgeError>;

    /// When the item's title or body was last edited (GitHub: GraphQL
    /// `lastEditedAt` and `renamed` events; GitLab: the system notes it
    /// writes for every title and description change).
    async fn text_edited_at(&self, item: &ItemRef) -> Result<TextEdits, ForgeError>;

    /// The account forgehand acts as, as people mention it: GitHub's
    /// `login` (an App's is `<slug>[bot]`), GitLab's `username`.
    async fn identity(&self) -> Result<String, ForgeError>;

    /// The numeric id of the user `login` (GitHub's `login`, GitLab's
    /// `username`), for their noreply address; `None` when there is no
    /// such user, or the forge has no ids.
    async fn user_id(&self, login: &str) -> Result<Option<u64>, ForgeError> {
        let _ = login;
        Ok(None)
    }

    /// Comments on the repository's issues and PRs/MRs (review and diff
    /// comments included) written or edited at or after `since` (an RFC
    /// 3339 instant), oldest first. A comment may come again in a later
    /// listing; callers keep what they heard.
    async fn recent_comments(&self, repo: &str, since: &str) -> Result<RecentComments, ForgeError>;

    /// Says "seen, on it": the `eyes` reaction (GitHub) or award emoji
    /// (GitLab) on `comment`, or on the item itself when `None`. Placing it
    /// twice is fine.
    async fn acknowledge(&self, item: &ItemRef, comment: Option<&Comment>) -> Result<(), ForgeError>;

    /// Whether `user` has write access (GitHub) / the configured access level (GitLab).
    async fn may_trigger(&self, repo: &str, user: &str) -> Result<bool, ForgeError>;

    /// Who may trigger tasks, in the forge's own words, for messages
    /// ("people with write access", "members with the Developer role or higher").
    fn who_may_trigger(&self) -> String;

    /// The PR/MR behind a change item.
    async fn change(&self, item: &ItemRef) -> Result<ChangeInfo, ForgeError>;
}

/// An item's conversation: its comments and reviews, forgehand's own
/// comment, its labels, the reactions on a comment, and where the
/// thread's uploads live.
#[async_trait]
pub trait Thread: Send + Sync {
    /// The item's comments, oldest first (on GitLab, diff notes included).
    async fn comments(&self, item: &ItemRef) -> Result<Vec<Comment>, ForgeError>;

    /// A change's review texts not among `comments`, oldest first: on
    /// GitHub the review bodies and the inline review comments. None on a
    /// forge whose comments hold them already.
    async fn reviews(&self, item: &ItemRef) -> Result<Vec<Comment>, ForgeError> {
        let _ = item;
        Ok(Vec::new())
    }

    async fn create_comment(&self, item: &ItemRef, body: &str) -> Result<u64, ForgeError>;

    async fn edit_comment(&self, item: &ItemRef, id: u64, body: &str) -> Result<(), ForgeError>;

    /// Adds and removes labels in one go where the forge allows it.
    async fn edit_labels(&self, item: &ItemRef, add: &[&str], remove: &[&str]) -> Result<(), ForgeError>;

    /// The people who gave thread comment `comment_id` on `item` a thumbs-up
    /// (GitHub's `+1` reaction, GitLab's `thumbsup` award emoji), by login.
    async fn thumbs_up(&self, item: &ItemRef, comment_id: u64) -> Result<Vec<String>, ForgeError>;

    /// Where files uploaded to `repo`'s threads live: the only place the
    /// thread's images are downloaded from (`agent.images`); `None`: none.
    fn upload_site(&self, repo: &str) -> Option<crate::thread_images::UploadSite> {
        let _ = repo;
        None
    }
}

/// Getting a change onto the forge: git credentials, the repository, and
/// the draft PR/MR; pushes are writes too, announced and time-bounded.
#[async_trait]
pub trait Delivery: Send + Sync {
    /// Credentials for git over HTTPS (fresh: App tokens expire).
    async fn git_credentials(&self) -> Result<Credentials, ForgeError>;

    /// Called right before the task branch is pushed: a git push is a
    /// write to the forge too (see the cluster's fencing).
    async fn before_push(&self, item: &ItemRef) -> Result<(), ForgeError> {
        let _ = item;
        Ok(())
    }

    /// When writes to the forge must have finished (a replica's claim on
    /// the task runs out then); `None`: no such limit.
    fn write_deadline(&self) -> Option<std::time::Instant> {
        None
    }

    async fn repository(&self, repo: &str) -> Result<RepoInfo, ForgeError>;

    /// The open PR/MR from `source_branch` in `repo`, if one exists.
    async fn find_open_change(
        &self,
        repo: &str,
        source_branch: &str,
    ) -> Result<Option<ChangeInfo>, ForgeError>;

    async fn create_draft_change(
        &self,
        repo: &str,
        source_branch: &str,
        target_branch: &str,
        title: &str,
        body: &str,
    ) -> Result<ChangeInfo, ForgeError>;

    /// Opens a change ready for review, where the forge does not support
    /// drafts ([`ForgeError::is_drafts_unsupported`]). Only GitHub refuses
    /// drafts (GitLab supports them everywhere): the others say so.
    async fn create_ready_change(
        &self,
        repo: &str,
        source_branch: &str,
        target_branch: &str,
        title: &str,
        body: &str,
    ) -> Result<ChangeInfo, ForgeError> {
        let _ = (repo, source_branch, target_branch, title, body);
        Err(ForgeError::Setup {
            forge: "forge",
            message: "this forge opens drafts only".into(),
        })
    }
}

/// The checks (CI) on a pushed commit: reading them and their logs, and
/// running a failed one again.
#[async_trait]
pub trait Checks: Send + Sync {
    /// Whether the forge runs checks at all (a local repository has no
    /// CI: its changes are not followed).
    fn has_ci(&self) -> bool {
        true
    }

    /// The checks on commit `sha` (GitHub: check runs and commit statuses;
    /// GitLab: the jobs of the commit's newest pipeline).
    async fn checks(&self, repo: &str, sha: &str) -> Result<Vec<Check>, ForgeError>;

    /// A check's log, whole (a job's log; another App's check run output);
    /// `None` when the check has none.
    async fn check_log(&self, repo: &str, check: &Check) -> Result<Option<String>, ForgeError>;

    /// Runs a failed check again, where the forge can (a job); `false`
    /// when it cannot.
    async fn rerun_check(&self, repo: &str, check: &Check) -> Result<bool, ForgeError>;
}

/// A change's review threads: reading them, answering in them, resolving
/// them.
#[async_trait]
pub trait Reviews: Send + Sync {
    /// A change's review threads, resolved ones included (GitHub: the
    /// pull request's review threads; GitLab: the merge request's
    /// resolvable discussions).
    async fn review_threads(&self, item: &ItemRef) -> Result<Vec<ReviewThread>, ForgeError>;

    /// Answers in `thread`, below its last comment.
    async fn reply_in_thread(
        &self,
        item: &ItemRef,
        thread: &ReviewThread,
        body: &str,
    ) -> Result<(), ForgeError>;

    /// Marks `thread` resolved; `false` when the forge does not let
    /// forgehand (a permission it lacks).
    async fn resolve_thread(&self, item: &ItemRef, thread: &ReviewThread) -> Result<bool, ForgeError>;
}

/// Opening issues of forgehand's own (a scheduled automation's) and
/// finding the one still open. A forge without issues says so.
#[async_trait]
pub trait Opener: Send + Sync {
    /// Opens an issue in `repo` as forgehand's account, with its labels.
    async fn open_issue(&self, repo: &str, issue: &NewIssue) -> Result<Item, ForgeError> {
        let _ = (repo, issue);
        Err(ForgeError::Setup {
            forge: "forge",
            message: "this forge does not open issues".into(),
        })
    }

    /// The newest open issue of `repo` that forgehand's account opened and
    /// whose body holds `marker`; `None` when there is none.
    async fn find_open_issue(&self, repo: &str, marker: &str) -> Result<Option<Item>, ForgeError> {
        let _ = (repo, marker);
        Ok(None)
    }
}

/// Everything forgehand does on a forge, besides git: every capability.
pub trait Forge: Intake + Thread + Delivery + Checks + Reviews + Opener {}

impl<T: Intake + Thread + Delivery + Checks + Reviews + Opener> Forge for T {}
