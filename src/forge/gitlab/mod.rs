//! GitLab (gitlab.com or self-managed) through the gitlab crate: its async
//! client, authentication, error decoding and pagination, with one small
//! endpoint type for the REST calls forgehand makes. After the first poll of
//! a project, polling asks only for what changed at or after the newest
//! update the intake has fully handled (`updated_after`).

use super::retry::{self, Repeat};
use super::{
    lock, parse_time, ChangeInfo, Check, Checks, Comment, CommentPlace, Delivery, ForgeError, ForgeKind,
    Intake, Item, ItemKind, ItemRef, LabelApplied, Poll, RecentComments, RepoInfo, ReviewThread, Reviews,
    TextEdits, Thread,
};
use crate::config::{GitLabConfig, Secret, Secrets};
use crate::git::Credentials;
use async_trait::async_trait;
use gitlab::api::{self, ApiError, AsyncQuery, Endpoint, Pageable, Pagination, QueryParams};
use gitlab::{AsyncGitlab, GitlabBuilder, RestError};
use http::Method;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod checks;
mod conversation;
mod history;
mod opening;
mod reviews;
mod wire;

use wire::*;

const FORGE: &str = "gitlab";

pub struct GitLab {
    client: AsyncGitlab,
    token: Secret,
    config: GitLabConfig,
    user_ids: Mutex<HashMap<String, u64>>,
    /// Where each call is counted.
    metrics: Arc<crate::metrics::Metrics>,
    /// The account forgehand acts as, once asked.
    identity: tokio::sync::OnceCell<String>,
}

/// One REST call: method, path under /api/v4, query and JSON body.
struct Rest {
    method: Method,
    path: String,
    query: Vec<(&'static str, String)>,
    body: Option<Value>,
}

impl Rest {
    fn get(path: String) -> Rest {
        Rest {
            method: Method::GET,
            path,
            query: Vec::new(),
            body: None,
        }
    }

    fn send(method: Method, path: String, body: Value) -> Rest {
        Rest {
            method,
            path,
            query: Vec::new(),
            body: Some(body),
        }
    }

    fn repeat(method: &Method) -> Repeat {
        if *method == Method::POST {
            Repeat::Once
        } else {
            Repeat::Safe
        }
    }

    fn with(mut self, key: &'static str, value: impl Into<String>) -> Rest {
        self.query.push((key, value.into()));
        self
    }
}

impl Endpoint for Rest {
    fn method(&self) -> Method {
        self.method.clone()
    }

    fn endpoint(&self) -> Cow<'static, str> {
        Cow::Owned(self.path.clone())
    }

    fn parameters(&self) -> QueryParams<'_> {
        let mut params = QueryParams::default();
        for (key, value) in &self.query {
            params.push(*key, value.as_str());
        }
        params
    }

    fn body(&self) -> Result<Option<(&'static str, Vec<u8>)>, api::BodyError> {
        match &self.body {
            None => Ok(None),
            Some(value) => Ok(Some(("application/json", serde_json::to_vec(value)?))),
        }
    }
}

impl Pageable for Rest {}

fn project(path: &str) -> String {
    format!("projects/{}", super::http_util::encode(path))
}

fn map_error(err: ApiError<RestError>, what: &str) -> ForgeError {
    let what_s = what.to_owned();
    match err {
        ApiError::GitlabRateLimited { rl_reset, .. } => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let reset = rl_reset.to_string().parse::<u64>().unwrap_or(now + 60);
            ForgeError::RateLimited {
                forge: FORGE,
                retry_after: Duration::from_secs(reset.saturating_sub(now).max(1)),
            }
        }
        ApiError::Client { source } => ForgeError::Network {
            forge: FORGE,
            what: what_s,
            message: crate::redact::urls_in(&source.to_string()),
        },
        ApiError::GitlabWithStatus { status, msg } => status_error(status.as_u16(), msg, what),
        ApiError::GitlabObjectWithStatus { status, obj } => {
            status_error(status.as_u16(), obj.to_string(), what)
        }
        ApiError::GitlabUnrecognizedWithStatus { status, obj } => {
            status_error(status.as_u16(), obj.to_string(), what)
        }
        ApiError::GitlabService { status, data } => status_error(
            status.as_u16(),
            String::from_utf8_lossy(&data).chars().take(200).collect(),
            what,
        ),
        ApiError::DataType { source, .. } | ApiError::Json { source } => ForgeError::Decode {
            forge: FORGE,
            what: what_s,
            message: source.to_string(),
        },
        other => ForgeError::Api {
            forge: FORGE,
            what: what_s,
            status: 0,
            message: crate::redact::urls_in(&other.to_string()),
        },
    }
}

fn status_error(status: u16, message: String, what: &str) -> ForgeError {
    match status {
        401 => ForgeError::Auth {
            forge: FORGE,
            status,
            message,
        },
        404 => ForgeError::NotFound {
            forge: FORGE,
            what: what.to_owned(),
        },
        429 => ForgeError::RateLimited {
            forge: FORGE,
            retry_after: Duration::from_secs(60),
        },
        _ => ForgeError::Api {
            forge: FORGE,
            what: what.to_owned(),
            status,
            message,
        },
    }
}

/// The status a call is counted under (the gitlab crate hides the status
/// of a success: 200).
fn status_of<T>(result: &Result<T, ForgeError>) -> u16 {
    match result {
        Ok(_) => 200,
        Err(e) => e.status(),
    }
}

impl GitLab {
    /// Connects to `config.url` with GITLAB_TOKEN; the token is checked now.
    pub async fn connect(config: &GitLabConfig, secrets: &Secrets) -> Result<GitLab, ForgeError> {
        let token = secrets.gitlab_token.clone().ok_or_else(|| ForgeError::Setup {
            forge: FORGE,
            message: "GITLAB_TOKEN is not set; export a token with the \"api\" scope".into(),
        })?;
        let url = url::Url::parse(&config.url).map_err(|e| ForgeError::Setup {
            forge: FORGE,
            message: format!("gitlab.url {:?}: {e}", config.url),
        })?;
        let mut host = url.host_str().unwrap_or_default().to_owned();
        if let Some(port) = url.port() {
            host = format!("{host}:{port}");
        }
        let prefix = url.path().trim_end_matches('/');
        host.push_str(prefix);
        let mut builder = GitlabBuilder::new(host, token.expose());
        if url.scheme() == "http" {
            builder.insecure();
        }
        let client = builder.build_async().await.map_err(|e| {
            let message = crate::redact::urls_in(&e.to_string().replace(token.expose(), "***"));
            if message.contains("401") || message.to_ascii_lowercase().contains("unauthorized") {
                ForgeError::Auth {
                    forge: FORGE,
                    status: 401,
                    message,
                }
            } else {
                ForgeError::Network {
                    forge: FORGE,
                    what: config.url.clone(),
                    message,
                }
            }
        })?;
        Ok(GitLab {
            client,
            token,
            config: config.clone(),
            user_ids: Mutex::new(HashMap::new()),
            metrics: Arc::default(),
            identity: tokio::sync::OnceCell::new(),
        })
    }

    /// Counts this client's calls in `metrics` (the daemon's).
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> GitLab {
        self.metrics = metrics;
        self
    }

    /// One call; retried with backoff as [`retry`] allows (a POST creates
    /// a note or an MR, so it is never repeated blindly).
    async fn one<T: DeserializeOwned + Send + 'static>(
        &self,
        rest: Rest,
        what: &str,
    ) -> Result<T, ForgeError> {
        retry::send_with_retries(Rest::repeat(&rest.method), what, || async {
            let result = rest
                .query_async(&self.client)
                .await
                .map_err(|e| map_error(e, what));
            self.metrics.forge_call(FORGE, status_of(&result));
            result
        })
        .await
    }

    /// Every page of a list (reads only, so always safe to repeat).
    async fn all<T: DeserializeOwned + Send + 'static>(
        &self,
        rest: Rest,
        what: &str,
    ) -> Result<Vec<T>, ForgeError> {
        retry::send_with_retries(Repeat::Safe, what, || async {
            let result = api::paged(&rest, Pagination::All)
                .query_async(&self.client)
                .await
                .map_err(|e| map_error(e, what));
            self.metrics.forge_call(FORGE, status_of(&result));
            result
        })
        .await
    }

    /// One read whose answer is not JSON (a job's trace), as bytes.
    async fn raw(&self, rest: Rest, what: &str) -> Result<Vec<u8>, ForgeError> {
        retry::send_with_retries(Repeat::Safe, what, || async {
            let result = api::raw(&rest)
                .query_async(&self.client)
                .await
                .map_err(|e| map_error(e, what));
            self.metrics.forge_call(FORGE, status_of(&result));
            result
        })
        .await
    }

    fn item_path(item: &ItemRef) -> String {
        let kind = match item.kind {
            ItemKind::Issue => "issues",
            ItemKind::Change => "merge_requests",
        };
        format!("{}/{kind}/{}", project(&item.repo), item.number)
    }

    /// Every note of the item, system notes included, oldest first.
    async fn notes(&self, item: &ItemRef) -> Result<Vec<Note>, ForgeError> {
        self.all(
            Rest::get(format!("{}/notes", Self::item_path(item)))
                .with("sort", "asc")
                .with("order_by", "created_at"),
            "read comments",
        )
        .await
    }
}

#[async_trait]
impl Intake for GitLab {
    fn kind(&self) -> ForgeKind {
        ForgeKind::GitLab
    }

    async fn identity(&self) -> Result<String, ForgeError> {
        self.identity
            .get_or_try_init(|| self.ask_identity())
            .await
            .cloned()
    }

    async fn user_id(&self, username: &str) -> Result<Option<u64>, ForgeError> {
        if let Some(id) = lock(&self.user_ids).get(username) {
            return Ok(Some(*id));
        }
        let users: Vec<User> = self
            .all(
                Rest::get("users".into()).with("username", username),
                "look up a user",
            )
            .await?;
        let id = users.into_iter().find(|u| u.username == username).map(|u| u.id);
        if let Some(id) = id {
            lock(&self.user_ids).insert(username.to_owned(), id);
        }
        Ok(id)
    }

    async fn recent_comments(&self, repo: &str, since: &str) -> Result<RecentComments, ForgeError> {
        self.list_recent_comments(repo, since).await
    }

    async fn acknowledge(&self, item: &ItemRef, comment: Option<&Comment>) -> Result<(), ForgeError> {
        self.award(item, comment, "eyes").await
    }

    async fn watched_repositories(&self) -> Result<Vec<String>, ForgeError> {
        let mut projects = self.config.projects.clone();
        if self.config.all_projects {
            let member: Vec<Project> = self
                .all(
                    Rest::get("projects".into())
                        .with("membership", "true")
                        .with("archived", "false")
                        .with("simple", "true"),
                    "list projects",
                )
                .await?;
            for p in member {
                if !projects
                    .iter()
                    .any(|q| q.eq_ignore_ascii_case(&p.path_with_namespace))
                {
                    projects.push(p.path_with_namespace);
                }
            }
        }
        Ok(projects)
    }

    async fn repository_by_id(&self, id: u64) -> Result<Option<String>, ForgeError> {
        // `GET /projects/:id` takes the numeric id as well as the path.
        match self
            .one::<Project>(Rest::get(format!("projects/{id}")), "read the project")
            .await
        {
            Ok(p) => Ok(Some(p.path_with_namespace)),
            Err(ForgeError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn poll_labelled(&self, repo: &str, label: &str, since: Option<&str>) -> Result<Poll, ForgeError> {
        let mut items = Vec::new();
        for (kind, segment) in [(ItemKind::Issue, "issues"), (ItemKind::Change, "merge_requests")] {
            let mut rest = Rest::get(format!("{}/{segment}", project(repo)))
                .with("order_by", "updated_at")
                .with("sort", "desc");
            // After the first poll, everything updated since (labelled or not,
            // open or not), so a label taken off or an item closed is seen too.
            rest = match since {
                Some(since) => rest.with("updated_after", since),
                None => rest.with("state", "opened").with("labels", label),
            };
            let found: Vec<Issue> = self.all(rest, "list labelled issues and merge requests").await?;
            items.extend(found.into_iter().map(|i| i.into_item(repo, kind)));
        }
        Ok(match since {
            Some(_) => Poll::UpdatedSince(items),
            None => Poll::All(items),
        })
    }

    async fn item(&self, item: &ItemRef) -> Result<Item, ForgeError> {
        let issue: Issue = self
            .one(Rest::get(Self::item_path(item)), "read the issue")
            .await?;
        Ok(issue.into_item(&item.repo, item.kind))
    }

    async fn text_edited_at(&self, item: &ItemRef) -> Result<TextEdits, ForgeError> {
        let notes = self.notes(item).await?;
        Ok(text_edits(&notes))
    }

    async fn label_applied(&self, item: &ItemRef, label: &str) -> Result<Option<LabelApplied>, ForgeError> {
        let events: Vec<LabelEvent> = self
            .all(
                Rest::get(format!("{}/resource_label_events", Self::item_path(item))),
                "read label events",
            )
            .await?;
        Ok(events
            .into_iter()
            .rev()
            .find(|e| e.action == "add" && e.label.as_ref().is_some_and(|l| l.name == label))
            .and_then(|e| {
                let at = parse_time(e.created_at.as_deref());
                e.user.map(|u| LabelApplied {
                    by: u.username,
                    at,
                    by_id: Some(u.id),
                })
            }))
    }

    async fn may_trigger(&self, repo: &str, user: &str) -> Result<bool, ForgeError> {
        let Some(id) = self.user_id(user).await? else {
            return Ok(false);
        };
        let path = format!("{}/members/all/{id}", project(repo));
        match self
            .one::<Member>(Rest::get(path), "read a member's access level")
            .await
        {
            Ok(member) => Ok(member.access_level >= self.config.min_access_level),
            Err(ForgeError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn who_may_trigger(&self) -> String {
        format!(
            "members with the {} role or higher",
            super::gitlab_role(self.config.min_access_level)
        )
    }

    async fn change(&self, item: &ItemRef) -> Result<ChangeInfo, ForgeError> {
        let mr: MergeRequest = self
            .one(Rest::get(Self::item_path(item)), "read the merge request")
            .await?;
        Ok(mr.into_change())
    }
}

#[async_trait]
impl Thread for GitLab {
    fn upload_site(&self, repo: &str) -> Option<crate::thread_images::UploadSite> {
        crate::thread_images::UploadSite::gitlab(&self.config.url, repo)
    }

    async fn thumbs_up(&self, item: &ItemRef, comment_id: u64) -> Result<Vec<String>, ForgeError> {
        self.thumbs_up_on(item, comment_id).await
    }

    async fn comments(&self, item: &ItemRef) -> Result<Vec<Comment>, ForgeError> {
        Ok(self
            .notes(item)
            .await?
            .into_iter()
            .filter(|n| !n.system)
            .map(|n| Comment {
                id: n.id,
                author: n.author.username,
                body: n.body,
                place: match n.position {
                    Some(p) => CommentPlace::Line {
                        path: p.new_path.or(p.old_path).unwrap_or_default(),
                        line: p.new_line.or(p.old_line),
                    },
                    None => CommentPlace::Thread,
                },
                created_at: n.created_at.unwrap_or_default(),
            })
            .collect())
    }

    async fn create_comment(&self, item: &ItemRef, body: &str) -> Result<u64, ForgeError> {
        let path = format!("{}/notes", Self::item_path(item));
        let note: Note = self
            .one(
                Rest::send(Method::POST, path, json!({ "body": body })),
                "post a comment",
            )
            .await?;
        Ok(note.id)
    }

    async fn edit_comment(&self, item: &ItemRef, id: u64, body: &str) -> Result<(), ForgeError> {
        let path = format!("{}/notes/{id}", Self::item_path(item));
        let _: Value = self
            .one(
                Rest::send(Method::PUT, path, json!({ "body": body })),
                "edit a comment",
            )
            .await?;
        Ok(())
    }

    async fn edit_labels(&self, item: &ItemRef, add: &[&str], remove: &[&str]) -> Result<(), ForgeError> {
        let body = json!({ "add_labels": add.join(","), "remove_labels": remove.join(",") });
        let _: Value = self
            .one(
                Rest::send(Method::PUT, Self::item_path(item), body),
                "change labels",
            )
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Delivery for GitLab {
    async fn git_credentials(&self) -> Result<Credentials, ForgeError> {
        Ok(Credentials {
            username: "oauth2".into(),
            token: self.token.clone(),
        })
    }

    async fn repository(&self, repo: &str) -> Result<RepoInfo, ForgeError> {
        let p: Project = self.one(Rest::get(project(repo)), "read the project").await?;
        Ok(RepoInfo {
            clone_url: p.http_url_to_repo,
            default_branch: p.default_branch.unwrap_or_else(|| "main".into()),
        })
    }

    async fn find_open_change(
        &self,
        repo: &str,
        source_branch: &str,
    ) -> Result<Option<ChangeInfo>, ForgeError> {
        let found: Vec<MergeRequest> = self
            .all(
                Rest::get(format!("{}/merge_requests", project(repo)))
                    .with("state", "opened")
                    .with("source_branch", source_branch),
                "list merge requests",
            )
            .await?;
        Ok(found
            .into_iter()
            .map(MergeRequest::into_change)
            .find(|c| c.source_branch == source_branch && c.same_repo))
    }

    async fn create_draft_change(
        &self,
        repo: &str,
        source_branch: &str,
        target_branch: &str,
        title: &str,
        body: &str,
    ) -> Result<ChangeInfo, ForgeError> {
        // GitLab marks drafts by the title prefix.
        let title = if title.starts_with("Draft:") {
            title.to_owned()
        } else {
            format!("Draft: {title}")
        };
        let request = json!({
            "source_branch": source_branch,
            "target_branch": target_branch,
            "title": title,
            "description": body,
            "remove_source_branch": true,
        });
        let mr: MergeRequest = self
            .one(
                Rest::send(Method::POST, format!("{}/merge_requests", project(repo)), request),
                "open a draft merge request",
            )
            .await?;
        Ok(mr.into_change())
    }
}

#[async_trait]
impl Checks for GitLab {
    async fn checks(&self, repo: &str, sha: &str) -> Result<Vec<Check>, ForgeError> {
        self.list_checks(repo, sha).await
    }

    async fn check_log(&self, repo: &str, check: &Check) -> Result<Option<String>, ForgeError> {
        self.read_job_trace(repo, check).await
    }

    async fn rerun_check(&self, repo: &str, check: &Check) -> Result<bool, ForgeError> {
        self.retry_job(repo, check).await
    }
}

#[async_trait]
impl Reviews for GitLab {
    async fn review_threads(&self, item: &ItemRef) -> Result<Vec<ReviewThread>, ForgeError> {
        self.list_review_threads(item).await
    }

    async fn reply_in_thread(
        &self,
        item: &ItemRef,
        thread: &ReviewThread,
        body: &str,
    ) -> Result<(), ForgeError> {
        self.reply_to(item, thread, body).await
    }

    async fn resolve_thread(&self, item: &ItemRef, thread: &ReviewThread) -> Result<bool, ForgeError> {
        self.resolve(item, thread).await
    }
}
