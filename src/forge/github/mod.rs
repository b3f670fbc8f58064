//! GitHub through octocrab: a personal token or a GitHub App installation,
//! any base URL (GitHub Enterprise Server). Every GET is conditional: the
//! ETag of the last answer is sent as `If-None-Match`, and a 304 (which GitHub
//! does not count against the rate limit) is answered from the cache.

use super::http_util::{encode, next_link, path_and_query};
use super::retry::Repeat;
use super::{
    lock, parse_time, ChangeInfo, Check, Checks, Comment, CommentPlace, Delivery, ForgeError, ForgeKind,
    Intake, Item, ItemKind, ItemRef, LabelApplied, Poll, RecentComments, RepoInfo, ReviewThread, Reviews,
    TextEdits, Thread,
};
use crate::config::{GitHubConfig, Secret, Secrets};
use crate::git::Credentials;
use async_trait::async_trait;
use http::{HeaderMap, Method, StatusCode};
use octocrab::Octocrab;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

mod checks;
mod conversation;
mod history;
mod opening;
mod requests;
mod reviews;
mod wire;

use requests::decode;
use wire::*;

const FORGE: &str = "github";
/// Cached answers kept for conditional requests; past this the cache starts over.
const MAX_CACHED: usize = 4096;

enum Auth {
    Token(Secret),
    /// An App installation; the App's own client asks who the App is.
    App(Box<Octocrab>),
}

pub struct GitHub {
    crab: Octocrab,
    auth: Auth,
    config: GitHubConfig,
    /// request path -> (ETag, body) of the last 200 answer.
    cache: Mutex<HashMap<String, (String, String)>>,
    /// Set while the rate limit is exhausted: no request is sent before.
    blocked_until: Mutex<Option<Instant>>,
    /// Where each call and the rate-limit headroom are counted.
    metrics: Arc<crate::metrics::Metrics>,
    /// The account forgehand acts as, once asked.
    identity: tokio::sync::OnceCell<String>,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl GitHub {
    /// A client for `config.api_url`, authenticated with the App (when
    /// configured) or GITHUB_TOKEN.
    pub fn new(config: &GitHubConfig, secrets: &Secrets, timeout: Duration) -> Result<GitHub, ForgeError> {
        let setup = |message: String| ForgeError::Setup {
            forge: FORGE,
            message,
        };
        let builder = Octocrab::builder()
            .base_uri(config.api_url.as_str())
            .map_err(|e| setup(format!("github.api_url {:?} is not usable: {e}", config.api_url)))?
            .set_connect_timeout(Some(timeout.min(Duration::from_secs(30))))
            .set_read_timeout(Some(timeout))
            .set_write_timeout(Some(timeout))
            // octocrab's own retry resends a 429 at once, ignoring Retry-After;
            // `send` honours it instead (and the intake pauses the forge).
            .add_retry_config(octocrab::service::middleware::retry::RetryConfig::None);
        let (crab, auth) = match config.app {
            Some(app) => {
                let pem = secrets.github_app_private_key.as_ref().ok_or_else(|| {
                    setup("github.app_id is set but GITHUB_APP_PRIVATE_KEY is not; put the App's private key (PEM) there".into())
                })?;
                let key = octocrab::EncodingKey::from_rsa_pem(pem.expose().as_bytes()).map_err(|e| {
                    setup(format!(
                        "GITHUB_APP_PRIVATE_KEY is not an RSA private key in PEM form ({e})"
                    ))
                })?;
                let app_crab = builder
                    .app(octocrab::models::AppId(app.app_id), key)
                    .build()
                    .map_err(|e| setup(format!("cannot build the GitHub client: {e}")))?;
                let crab = app_crab
                    .installation(octocrab::models::InstallationId(app.installation_id))
                    .map_err(|e| setup(format!("cannot use installation {}: {e}", app.installation_id)))?;
                (crab, Auth::App(Box::new(app_crab)))
            }
            None => {
                let token = secrets.github_token.clone().ok_or_else(|| {
                    setup("GITHUB_TOKEN is not set; export a token with contents, issues and pull-request write access (or configure a GitHub App)".into())
                })?;
                let crab = builder
                    .personal_token(token.expose().to_owned())
                    .build()
                    .map_err(|e| setup(format!("cannot build the GitHub client: {e}")))?;
                (crab, Auth::Token(token))
            }
        };
        Ok(GitHub {
            crab,
            auth,
            config: config.clone(),
            cache: Mutex::new(HashMap::new()),
            blocked_until: Mutex::new(None),
            metrics: Arc::default(),
            identity: tokio::sync::OnceCell::new(),
        })
    }

    /// Counts this client's calls in `metrics` (the daemon's).
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> GitHub {
        self.metrics = metrics;
        self
    }

    /// The issue's events (labels, renames), every page.
    async fn events(&self, item: &ItemRef) -> Result<Vec<IssueEvent>, ForgeError> {
        let path = format!(
            "{}/issues/{}/events?per_page=100",
            Self::repo_path(&item.repo)?,
            item.number
        );
        Ok(self
            .get_all::<IssueEvent>(&path, "read the issue's events")
            .await?
            .0)
    }

    /// GitHub's GraphQL endpoint beside the REST one: `/graphql` on
    /// api.github.com, `/api/graphql` on Enterprise Server (`/api/v3`).
    fn graphql_url(&self) -> String {
        let base = self.config.api_url.trim_end_matches('/');
        match base.strip_suffix("/api/v3") {
            Some(host) => format!("{host}/api/graphql"),
            None => format!("{base}/graphql"),
        }
    }

    fn repo_path(repo: &str) -> Result<String, ForgeError> {
        let (owner, name) = repo.split_once('/').ok_or_else(|| ForgeError::Setup {
            forge: FORGE,
            message: format!("{repo:?} is not owner/name"),
        })?;
        Ok(format!("/repos/{}/{}", encode(owner), encode(name)))
    }
}

#[async_trait]
impl Intake for GitHub {
    fn kind(&self) -> ForgeKind {
        ForgeKind::GitHub
    }

    async fn watched_repositories(&self) -> Result<Vec<String>, ForgeError> {
        let mut repos = self.config.repositories.clone();
        if self.config.all_repositories {
            let visible: Vec<String> = match self.auth {
                Auth::App(_) => {
                    let mut names = Vec::new();
                    let mut path = "/installation/repositories?per_page=100".to_owned();
                    for _ in 0..100 {
                        let answer = self
                            .send(
                                Method::GET,
                                &path,
                                None,
                                "list installation repositories",
                                Repeat::Safe,
                            )
                            .await?;
                        let page: InstallationRepositories =
                            decode(&answer.body, "list installation repositories")?;
                        names.extend(page.repositories.into_iter().map(|r| r.full_name));
                        match next_link(&answer.headers) {
                            Some(next) => path = path_and_query(&next),
                            None => break,
                        }
                    }
                    names
                }
                Auth::Token(_) => self
                    .get_all::<Repository>("/user/repos?per_page=100", "list repositories")
                    .await?
                    .0
                    .into_iter()
                    .map(|r| r.full_name)
                    .collect(),
            };
            for name in visible {
                if !repos.iter().any(|r| r.eq_ignore_ascii_case(&name)) {
                    repos.push(name);
                }
            }
        }
        Ok(repos)
    }

    async fn poll_labelled(&self, repo: &str, label: &str, _since: Option<&str>) -> Result<Poll, ForgeError> {
        // Sorted by update, so any change to a labelled item changes page 1 and its ETag.
        let path = format!(
            "{}/issues?state=open&labels={}&sort=updated&direction=desc&per_page=100",
            Self::repo_path(repo)?,
            encode(label)
        );
        let (issues, unchanged) = self.get_all::<Issue>(&path, "list labelled issues").await?;
        if unchanged {
            return Ok(Poll::Unchanged);
        }
        Ok(Poll::All(issues.into_iter().map(|i| i.into_item(repo)).collect()))
    }

    async fn item(&self, item: &ItemRef) -> Result<Item, ForgeError> {
        let path = format!("{}/issues/{}", Self::repo_path(&item.repo)?, item.number);
        let issue: Issue = self.get(&path, "read the issue").await?;
        Ok(issue.into_item(&item.repo))
    }

    async fn label_applied(&self, item: &ItemRef, label: &str) -> Result<Option<LabelApplied>, ForgeError> {
        let events = self.events(item).await?;
        Ok(events
            .into_iter()
            .rev()
            .find(|e| e.event == "labeled" && e.label.as_ref().is_some_and(|l| l.name == label))
            .and_then(|e| {
                let at = parse_time(e.created_at.as_deref());
                e.actor.map(|a| LabelApplied {
                    by: a.login,
                    at,
                    by_id: a.id,
                })
            }))
    }

    async fn text_edited_at(&self, item: &ItemRef) -> Result<TextEdits, ForgeError> {
        // The body's last edit is only in GraphQL; a title change is a `renamed` event.
        let (owner, name) = item.repo.split_once('/').unwrap_or((item.repo.as_str(), ""));
        let answer = self
            .graphql(
                "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { issueOrPullRequest(number: $number) { ... on Issue { lastEditedAt } ... on PullRequest { lastEditedAt } } } }",
                json!({"owner": owner, "name": name, "number": item.number}),
                "read when the issue was last edited",
            )
            .await?;
        // `lastEditedAt: null` is "never edited"; an answer without the item
        // (or with a time that does not parse) says nothing, so it is no vouch.
        let Some(found) = answer
            .pointer("/data/repository/issueOrPullRequest")
            .and_then(Value::as_object)
        else {
            return Ok(TextEdits::Unknown(
                "GitHub's GraphQL answer does not include the item".into(),
            ));
        };
        let body = match found.get("lastEditedAt") {
            None => {
                return Ok(TextEdits::Unknown(
                    "GitHub's GraphQL answer has no lastEditedAt".into(),
                ))
            }
            Some(Value::Null) => None,
            Some(at) => match parse_time(at.as_str()) {
                Some(at) => Some(at),
                None => {
                    return Ok(TextEdits::Unknown(format!(
                        "GitHub's lastEditedAt {at} is not a time"
                    )))
                }
            },
        };
        let renamed = self
            .events(item)
            .await?
            .into_iter()
            .filter(|e| e.event == "renamed")
            .filter_map(|e| parse_time(e.created_at.as_deref()))
            .max();
        Ok(match body.max(renamed) {
            Some(at) => TextEdits::LastAt(at),
            None => TextEdits::Never,
        })
    }

    async fn may_trigger(&self, repo: &str, user: &str) -> Result<bool, ForgeError> {
        let path = format!(
            "{}/collaborators/{}/permission",
            Self::repo_path(repo)?,
            encode(user)
        );
        match self
            .get::<Permission>(&path, "read a collaborator's permission")
            .await
        {
            Ok(p) => Ok(matches!(p.permission.as_str(), "admin" | "maintain" | "write")),
            Err(ForgeError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn who_may_trigger(&self) -> String {
        "people with write access".into()
    }

    async fn identity(&self) -> Result<String, ForgeError> {
        self.identity
            .get_or_try_init(|| self.ask_identity())
            .await
            .cloned()
    }

    async fn user_id(&self, login: &str) -> Result<Option<u64>, ForgeError> {
        self.ask_user_id(login).await
    }

    async fn recent_comments(&self, repo: &str, since: &str) -> Result<RecentComments, ForgeError> {
        self.list_recent_comments(repo, since).await
    }

    async fn acknowledge(&self, item: &ItemRef, comment: Option<&Comment>) -> Result<(), ForgeError> {
        self.react(item, comment, "eyes").await
    }

    async fn change(&self, item: &ItemRef) -> Result<ChangeInfo, ForgeError> {
        let path = format!("{}/pulls/{}", Self::repo_path(&item.repo)?, item.number);
        let pull: Pull = self.get(&path, "read the pull request").await?;
        Ok(pull.into_change(&item.repo))
    }
}

#[async_trait]
impl Thread for GitHub {
    fn upload_site(&self, _repo: &str) -> Option<crate::thread_images::UploadSite> {
        crate::thread_images::UploadSite::github(&self.config.api_url)
    }

    async fn thumbs_up(&self, item: &ItemRef, comment_id: u64) -> Result<Vec<String>, ForgeError> {
        self.thumbs_up_on(item, comment_id).await
    }

    async fn comments(&self, item: &ItemRef) -> Result<Vec<Comment>, ForgeError> {
        let path = format!(
            "{}/issues/{}/comments?per_page=100",
            Self::repo_path(&item.repo)?,
            item.number
        );
        let (comments, _) = self.get_all::<IssueComment>(&path, "read comments").await?;
        Ok(comments
            .into_iter()
            .map(|c| Comment {
                id: c.id,
                author: c.user.login,
                body: c.body.unwrap_or_default(),
                place: CommentPlace::Thread,
                created_at: c.created_at.unwrap_or_default(),
            })
            .collect())
    }

    async fn reviews(&self, item: &ItemRef) -> Result<Vec<Comment>, ForgeError> {
        if item.kind != ItemKind::Change {
            return Ok(Vec::new());
        }
        let base = format!("{}/pulls/{}", Self::repo_path(&item.repo)?, item.number);
        let (reviews, _) = self
            .get_all::<Review>(&format!("{base}/reviews?per_page=100"), "read reviews")
            .await?;
        let (lines, _) = self
            .get_all::<ReviewComment>(&format!("{base}/comments?per_page=100"), "read review comments")
            .await?;
        // A pending review is its author's draft: nobody else sees it yet.
        let mut out: Vec<Comment> = reviews
            .into_iter()
            .filter(|r| r.state != "PENDING")
            .filter_map(|r| {
                Some(Comment {
                    id: r.id,
                    author: r.user?.login,
                    body: r.body.unwrap_or_default(),
                    place: CommentPlace::Review,
                    created_at: r.submitted_at.unwrap_or_default(),
                })
            })
            .collect();
        out.extend(lines.into_iter().filter_map(|c| {
            Some(Comment {
                id: c.id,
                author: c.user?.login,
                body: c.body.unwrap_or_default(),
                place: CommentPlace::Line {
                    path: c.path.unwrap_or_default(),
                    line: c.line.or(c.original_line),
                },
                created_at: c.created_at.unwrap_or_default(),
            })
        }));
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        Ok(out)
    }

    async fn create_comment(&self, item: &ItemRef, body: &str) -> Result<u64, ForgeError> {
        let path = format!("{}/issues/{}/comments", Self::repo_path(&item.repo)?, item.number);
        let comment: IssueComment = self
            .write(
                Method::POST,
                &path,
                &json!({ "body": body }),
                "post a comment",
                Repeat::Once,
            )
            .await?;
        Ok(comment.id)
    }

    async fn edit_comment(&self, item: &ItemRef, id: u64, body: &str) -> Result<(), ForgeError> {
        let path = format!("{}/issues/comments/{id}", Self::repo_path(&item.repo)?);
        let _: Value = self
            .write(
                Method::PATCH,
                &path,
                &json!({ "body": body }),
                "edit a comment",
                Repeat::Safe,
            )
            .await?;
        Ok(())
    }

    async fn edit_labels(&self, item: &ItemRef, add: &[&str], remove: &[&str]) -> Result<(), ForgeError> {
        let base = format!("{}/issues/{}/labels", Self::repo_path(&item.repo)?, item.number);
        if !add.is_empty() {
            let _: Value = self
                .write(
                    Method::POST,
                    &base,
                    &json!({ "labels": add }),
                    "add labels",
                    Repeat::Safe,
                )
                .await?;
        }
        // One DELETE per label (GitHub has no batch removal), sent together;
        // a label that is not there answers 404, which is fine.
        let paths: Vec<String> = remove.iter().map(|l| format!("{base}/{}", encode(l))).collect();
        let removals = paths
            .iter()
            .map(|path| self.send(Method::DELETE, path, None, "remove a label", Repeat::Safe));
        for result in futures_util::future::join_all(removals).await {
            match result {
                Ok(_) | Err(ForgeError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Delivery for GitHub {
    async fn git_credentials(&self) -> Result<Credentials, ForgeError> {
        let token = match &self.auth {
            Auth::Token(token) => token.clone(),
            Auth::App(_) => {
                use octocrab::secrecy::ExposeSecret;
                let token = self
                    .crab
                    .installation_token()
                    .await
                    .map_err(|e| ForgeError::Auth {
                        forge: FORGE,
                        status: 0,
                        message: format!(
                            "cannot get an installation token: {}",
                            crate::redact::urls_in(&e.to_string())
                        ),
                    })?;
                Secret::new(token.expose_secret().to_owned())
            }
        };
        Ok(Credentials {
            username: "x-access-token".into(),
            token,
        })
    }

    async fn repository(&self, repo: &str) -> Result<RepoInfo, ForgeError> {
        let info: Repository = self.get(&Self::repo_path(repo)?, "read the repository").await?;
        Ok(RepoInfo {
            clone_url: info.clone_url,
            default_branch: info.default_branch,
        })
    }

    async fn find_open_change(
        &self,
        repo: &str,
        source_branch: &str,
    ) -> Result<Option<ChangeInfo>, ForgeError> {
        let owner = repo.split('/').next().unwrap_or_default();
        let path = format!(
            "{}/pulls?state=open&head={}&per_page=100",
            Self::repo_path(repo)?,
            encode(&format!("{owner}:{source_branch}"))
        );
        let (pulls, _) = self.get_all::<Pull>(&path, "list pull requests").await?;
        Ok(pulls
            .into_iter()
            .map(|p| p.into_change(repo))
            .find(|p| p.source_branch == source_branch && p.same_repo))
    }

    async fn create_draft_change(
        &self,
        repo: &str,
        source_branch: &str,
        target_branch: &str,
        title: &str,
        body: &str,
    ) -> Result<ChangeInfo, ForgeError> {
        self.open_pull(repo, (source_branch, target_branch), (title, body), true)
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
        self.open_pull(repo, (source_branch, target_branch), (title, body), false)
            .await
    }
}

impl GitHub {
    async fn open_pull(
        &self,
        repo: &str,
        (source_branch, target_branch): (&str, &str),
        (title, body): (&str, &str),
        draft: bool,
    ) -> Result<ChangeInfo, ForgeError> {
        let path = format!("{}/pulls", Self::repo_path(repo)?);
        let request = json!({
            "title": title,
            "head": source_branch,
            "base": target_branch,
            "body": body,
            "draft": draft,
        });
        let what = match draft {
            true => "open a draft pull request",
            false => "open a pull request",
        };
        let pull: Pull = self
            .write(Method::POST, &path, &request, what, Repeat::Once)
            .await?;
        Ok(pull.into_change(repo))
    }
}

#[async_trait]
impl Checks for GitHub {
    async fn checks(&self, repo: &str, sha: &str) -> Result<Vec<Check>, ForgeError> {
        self.list_checks(repo, sha).await
    }

    async fn check_log(&self, repo: &str, check: &Check) -> Result<Option<String>, ForgeError> {
        self.read_check_log(repo, check).await
    }

    async fn rerun_check(&self, repo: &str, check: &Check) -> Result<bool, ForgeError> {
        self.rerun_job(repo, check).await
    }
}

#[async_trait]
impl Reviews for GitHub {
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

    async fn resolve_thread(&self, _item: &ItemRef, thread: &ReviewThread) -> Result<bool, ForgeError> {
        self.resolve(thread).await
    }
}
