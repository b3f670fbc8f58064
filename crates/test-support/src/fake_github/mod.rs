//! A stateful fake of the GitHub REST API (the parts forgehand uses), on a
//! real HTTP server: the same paths, JSON shapes, status codes, `ETag` /
//! `If-None-Match` with 304 answers that cost no rate limit, `Link`
//! pagination and `x-ratelimit-*` headers. Labels move, comments are stored,
//! pull requests are created and listed, permissions are enforced.

mod attachments;
mod changes;
mod checks;
mod conversation;
mod graphql;
mod history;
mod issues;
mod json;
mod listing;
mod pulls;
mod repos;
mod routes;
mod threads;
mod webhooks;

pub use crate::fake_ci::{CiScript, Commit, FakeJob, JobEnd};
pub use conversation::Reaction;
pub use history::Merged;

use changes::{add_comment, add_labels, emit_review, remove_label};
use json::pull_json;

use crate::fake_http::{decode, query, serve, tick, Reply};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

pub const BOT: &str = "forgehand-bot";
const LIMIT: u64 = 5000;

#[derive(Debug, Clone)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub user: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub is_pr: bool,
    pub comments: Vec<(u64, String, String)>,
    /// A pull request's reviews and inline review comments.
    pub reviews: Vec<FakeReview>,
    /// (event, actor, label, clock)
    pub events: Vec<(String, String, String, u64)>,
    /// When the title or body was last edited (clock), if ever.
    pub edited: Option<u64>,
    pub updated: u64,
}

/// A review's body (`line: None`) or an inline review comment.
#[derive(Debug, Clone)]
pub struct FakeReview {
    pub id: u64,
    pub author: String,
    pub body: String,
    pub state: String,
    /// (path, line) of an inline comment.
    pub line: Option<(String, u64)>,
    pub clock: u64,
    /// The inline comment this one answers (its thread's first).
    pub in_reply_to: Option<u64>,
    /// Whether the thread this inline comment opens is resolved.
    pub resolved: bool,
}

#[derive(Debug, Clone)]
pub struct Pull {
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub draft: bool,
}

#[derive(Default)]
struct Repo {
    clone_url: String,
    default_branch: String,
    bare: Option<PathBuf>,
    issues: BTreeMap<u64, Issue>,
    pulls: BTreeMap<u64, Pull>,
    permissions: HashMap<String, String>,
    /// Draft pull requests are refused (private repositories on GitHub Free).
    no_drafts: bool,
    /// Merged pull requests (by number).
    merged: BTreeMap<u64, Merged>,
    /// The merge commit that closed each issue closed by a pull request.
    closed_by: BTreeMap<u64, String>,
}

impl Repo {
    /// The number the next issue or pull request gets.
    fn next_number(&self) -> u64 {
        self.issues.keys().max().copied().unwrap_or(0) + 1
    }
}

#[derive(Default)]
struct State {
    token: String,
    /// Files uploaded to threads, served on the web host.
    attachments: attachments::Attachments,
    repos: BTreeMap<String, Repo>,
    next_id: u64,
    clock: u64,
    /// When each comment was written (by id).
    created: BTreeMap<u64, u64>,
    rate_used: u64,
    requests: Vec<String>,
    /// How long POST /pulls waits after creating the PR before answering.
    pull_delay: Option<Duration>,
    /// GitHub App: (installation id, the installation token it mints).
    app: Option<(u64, String)>,
    /// The next request is refused as rate limited, with this Retry-After.
    limit_next: Option<u64>,
    /// (path part, times, status): the next `times` requests whose path
    /// contains the part answer `status` without doing anything.
    failing: Vec<(String, usize, u16)>,
    /// GraphQL answers `issueOrPullRequest: null` (a node the token may not see).
    graphql_hides_items: bool,
    /// Faults injected into a share of the answers.
    chaos: Option<Chaos>,
    /// What the fake took or gave that GitHub's API description does not
    /// have (see `crate::github_api`); a test fails on any.
    violations: Vec<String>,
    /// When each comment was last edited (by id), when it was.
    comment_updated: BTreeMap<u64, u64>,
    /// Every reaction placed, in order.
    reactions: Vec<Reaction>,
    /// Where webhook deliveries go, when they are on.
    hooks: Option<crate::webhook_sender::WebhookSender>,
    /// The CI that runs on pushed commits, and its jobs.
    ci: Option<crate::fake_ci::CiScript>,
    jobs: Vec<crate::fake_ci::FakeJob>,
    /// Names of the jobs re-run, in order.
    reruns: Vec<String>,
}

/// Faults on a share of requests, the way a struggling GitHub behaves. The
/// choice is drawn from a seeded generator, so a run can be repeated.
pub struct Chaos {
    rng: fastrand::Rng,
    /// Share of requests that get a fault (0.3: 30 %).
    share: f64,
    /// How long a "timed out" answer is held (longer than the client waits).
    hold: Duration,
    /// Requests still to refuse in the current secondary-rate-limit burst.
    burst_left: u32,
    pub counts: FaultCounts,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct FaultCounts {
    /// 500 before anything was done.
    pub refused: u32,
    /// The request was carried out, but the answer is a 502.
    pub lost_answers: u32,
    /// The request was carried out, but the answer never came in time.
    pub timeouts: u32,
    /// 403 secondary rate limit with Retry-After.
    pub secondary_limits: u32,
}

enum Fault {
    Refused,
    LostAnswer,
    Timeout,
    SecondaryLimit,
}

impl Chaos {
    fn draw(&mut self) -> Option<Fault> {
        if self.burst_left > 0 {
            self.burst_left -= 1;
            self.counts.secondary_limits += 1;
            return Some(Fault::SecondaryLimit);
        }
        // One request in 60 starts a burst of four refusals.
        if self.rng.u32(0..60) == 0 {
            self.burst_left = 3;
            self.counts.secondary_limits += 1;
            return Some(Fault::SecondaryLimit);
        }
        if self.rng.f64() >= self.share {
            return None;
        }
        Some(match self.rng.u32(0..3) {
            0 => {
                self.counts.refused += 1;
                Fault::Refused
            }
            1 => {
                self.counts.lost_answers += 1;
                Fault::LostAnswer
            }
            _ => {
                self.counts.timeouts += 1;
                Fault::Timeout
            }
        })
    }
}

pub struct FakeGitHub {
    pub server: MockServer,
    state: Arc<Mutex<State>>,
}

struct Handler(Arc<Mutex<State>>);

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        let violations = std::mem::take(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()).violations);
        if !std::thread::panicking() {
            assert!(
                violations.is_empty(),
                "the fake GitHub took or gave what GitHub's API description does not have:\n{}",
                violations.join("\n")
            );
        }
    }
}

impl FakeGitHub {
    pub async fn start(token: &str) -> FakeGitHub {
        let state = Arc::new(Mutex::new(State {
            token: token.to_owned(),
            next_id: 1000,
            ..State::default()
        }));
        let server = serve(Handler(state.clone())).await;
        FakeGitHub { server, state }
    }

    pub fn api_url(&self) -> String {
        self.server.uri()
    }

    /// Uploads `bytes` to a thread as GitHub does for a file named `name`;
    /// returns the address markdown links it by.
    pub fn upload(&self, bytes: Vec<u8>, name: &str) -> String {
        let id = self.with(|s| s.attachments.add(bytes, name));
        format!("{}/user-attachments/assets/{id}", self.server.uri())
    }

    /// Every request for an upload: its path and whether it carried the token.
    pub fn upload_requests(&self) -> Vec<(String, bool)> {
        self.with(|s| s.attachments.requests.clone())
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    /// A repository whose git remote is `clone_url` (served elsewhere) and,
    /// when given, the bare repository behind it (to check PR branches).
    pub fn add_repo(&self, name: &str, clone_url: &str, bare: Option<PathBuf>) {
        self.with(|s| {
            s.repos.insert(
                name.to_owned(),
                Repo {
                    clone_url: clone_url.to_owned(),
                    default_branch: "main".into(),
                    bare,
                    ..Repo::default()
                },
            );
        });
    }

    /// `repo` refuses draft pull requests, as GitHub does for private
    /// repositories of accounts on GitHub Free.
    pub fn refuse_drafts(&self, repo: &str) {
        self.with(|s| s.repos.get_mut(repo).unwrap().no_drafts = true);
    }

    /// `admin`, `maintain`, `write`, `triage`, `read` or `none`.
    pub fn set_permission(&self, repo: &str, user: &str, permission: &str) {
        self.with(|s| {
            s.repos
                .get_mut(repo)
                .unwrap()
                .permissions
                .insert(user.to_owned(), permission.to_owned());
        });
    }

    pub fn open_issue(&self, repo: &str, author: &str, title: &str, body: &str) -> u64 {
        self.with(|s| issues::insert_issue(s, repo, author, title, body))
    }

    /// The issues of `repo` the bot opened, by number.
    pub fn issues_by_bot(&self, repo: &str) -> Vec<Issue> {
        self.with(|s| {
            s.repos[repo]
                .issues
                .values()
                .filter(|i| i.user == BOT && !i.is_pr)
                .cloned()
                .collect()
        })
    }

    /// A pull request from `head` (a branch of the same repository).
    pub fn open_pull(&self, repo: &str, author: &str, title: &str, head: &str) -> u64 {
        self.open_pull_onto(repo, author, title, head, "main")
    }

    /// A pull request from `head` onto `base`.
    pub fn open_pull_onto(&self, repo: &str, author: &str, title: &str, head: &str, base: &str) -> u64 {
        let number = self.open_issue(repo, author, title, "PR description");
        self.with(|s| {
            let r = s.repos.get_mut(repo).unwrap();
            r.issues.get_mut(&number).unwrap().is_pr = true;
            r.pulls.insert(
                number,
                Pull {
                    number,
                    head: head.into(),
                    base: base.into(),
                    title: title.into(),
                    body: "PR description".into(),
                    draft: false,
                },
            );
        });
        number
    }

    pub fn add_label(&self, repo: &str, number: u64, label: &str, actor: &str) {
        self.with(|s| add_labels(s, repo, number, &[label.to_owned()], actor));
    }

    pub fn remove_label(&self, repo: &str, number: u64, label: &str, actor: &str) {
        self.with(|s| remove_label(s, repo, number, label, actor));
    }

    pub fn comment(&self, repo: &str, number: u64, author: &str, body: &str) {
        self.with(|s| add_comment(s, repo, number, author, body));
    }

    /// Commits get the jobs `script` says (GitHub Actions).
    pub fn run_ci(&self, script: crate::fake_ci::CiScript) {
        self.with(|s| s.ci = Some(script));
    }

    /// Every job run so far.
    pub fn jobs(&self) -> Vec<crate::fake_ci::FakeJob> {
        self.with(|s| s.jobs.clone())
    }

    /// Names of the jobs re-run, in order.
    pub fn reruns(&self) -> Vec<String> {
        self.with(|s| s.reruns.clone())
    }

    /// Webhook deliveries of what happens from now on go to `url`, signed
    /// with `secret`; the sender says what was delivered and can lose or
    /// repeat deliveries.
    pub fn send_webhooks_to(&self, url: &str, secret: &str) -> crate::webhook_sender::WebhookSender {
        self.with(|s| webhooks::enable(s, url, secret))
    }

    /// A submitted review with `body` (`state`: COMMENTED, CHANGES_REQUESTED,
    /// APPROVED or PENDING, a draft only its author sees).
    pub fn review(&self, repo: &str, number: u64, author: &str, state: &str, body: &str) {
        self.add_review(repo, number, author, state, body, None);
    }

    /// An inline review comment on `path` at `line`.
    pub fn review_comment(&self, repo: &str, number: u64, author: &str, path: &str, line: u64, body: &str) {
        self.add_review(repo, number, author, "COMMENTED", body, Some((path.into(), line)));
    }

    /// `author`'s reply in the `thread`-th review thread opened on the pull
    /// request (0 is the first), as GitHub's "Reply" box posts it: a review
    /// comment on the same line that answers the thread's first comment.
    pub fn review_reply(&self, repo: &str, number: u64, thread: usize, author: &str, body: &str) {
        let root = self
            .issue(repo, number)
            .reviews
            .into_iter()
            .filter(|r| r.line.is_some() && r.in_reply_to.is_none())
            .nth(thread)
            .expect("no such review thread");
        self.add_comment_in_review(
            repo,
            number,
            author,
            "COMMENTED",
            body,
            root.line.clone(),
            Some(root.id),
        );
    }

    fn add_review(
        &self,
        repo: &str,
        number: u64,
        author: &str,
        state: &str,
        body: &str,
        line: Option<(String, u64)>,
    ) {
        self.add_comment_in_review(repo, number, author, state, body, line, None);
    }

    #[allow(clippy::too_many_arguments)]
    fn add_comment_in_review(
        &self,
        repo: &str,
        number: u64,
        author: &str,
        state: &str,
        body: &str,
        line: Option<(String, u64)>,
        in_reply_to: Option<u64>,
    ) {
        self.with(|s| {
            s.next_id += 1;
            s.clock = tick(s.clock);
            let (id, clock) = (s.next_id, s.clock);
            let issue = s.repos.get_mut(repo).unwrap().issues.get_mut(&number).unwrap();
            assert!(issue.is_pr, "reviews are on pull requests");
            let review = FakeReview {
                id,
                author: author.into(),
                body: body.into(),
                state: state.into(),
                line,
                clock,
                in_reply_to,
                resolved: false,
            };
            issue.reviews.push(review.clone());
            issue.updated = clock;
            emit_review(s, repo, number, &review);
        });
    }

    /// Waits until the fake's clock is in a later whole second than its
    /// last change, so what happens next shows a later time: GitHub's
    /// times are whole seconds, and a person's next step comes seconds later.
    pub async fn next_second(&self) {
        let last = self.with(|s| s.clock);
        let next = crate::fake_http::whole_seconds(last) + 1000;
        loop {
            let now = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or_default();
            if now >= next {
                return;
            }
            tokio::time::sleep(Duration::from_millis(next - now)).await;
        }
    }

    /// The author edits the title and body (a rename is an event; a body
    /// edit only shows in GraphQL's `lastEditedAt`).
    pub fn edit_text(&self, repo: &str, number: u64, title: &str, body: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            let clock = s.clock;
            let issue = s.repos.get_mut(repo).unwrap().issues.get_mut(&number).unwrap();
            if issue.title != title {
                let author = issue.user.clone();
                issue.events.push(("renamed".into(), author, title.into(), clock));
                issue.title = title.into();
            }
            if issue.body != body {
                issue.body = body.into();
                issue.edited = Some(clock);
            }
            issue.updated = clock;
        });
    }

    pub fn issue(&self, repo: &str, number: u64) -> Issue {
        self.with(|s| s.repos[repo].issues[&number].clone())
    }

    pub fn pulls(&self, repo: &str) -> Vec<Pull> {
        self.with(|s| s.repos[repo].pulls.values().cloned().collect())
    }

    /// Rate-limit units used so far (304 answers are free).
    pub fn rate_used(&self) -> u64 {
        self.with(|s| s.rate_used)
    }

    /// "METHOD path?query" of every request, in order.
    pub fn requests(&self) -> Vec<String> {
        self.with(|s| s.requests.clone())
    }

    /// Accepts a GitHub App JWT for `installation` and mints `token` for it.
    pub fn enable_app(&self, installation: u64, token: &str) {
        self.with(|s| s.app = Some((installation, token.to_owned())));
    }

    /// Answers the next request with 429 and `Retry-After: seconds`.
    /// GraphQL answers every item as null, as it does for a node the token may not see.
    pub fn hide_graphql_items(&self) {
        self.with(|s| s.graphql_hides_items = true);
    }

    /// The next `times` requests whose path contains `path` answer `status`.
    pub fn fail(&self, path: &str, times: usize, status: u16) {
        self.with(|s| s.failing.push((path.into(), times, status)));
    }

    pub fn rate_limit_next(&self, seconds: u64) {
        self.with(|s| s.limit_next = Some(seconds));
    }

    pub fn set_pull_delay(&self, delay: Option<Duration>) {
        self.with(|s| s.pull_delay = delay);
    }

    /// From now on, `share` of the requests fail (500, a 502 after doing
    /// the work, an answer held for `hold`), plus secondary-rate-limit bursts.
    pub fn start_chaos(&self, seed: u64, share: f64, hold: Duration) {
        self.with(|s| {
            s.chaos = Some(Chaos {
                rng: fastrand::Rng::with_seed(seed),
                share,
                hold,
                burst_left: 0,
                counts: FaultCounts::default(),
            })
        });
    }

    /// Ends the faults; returns how many of each there were.
    pub fn stop_chaos(&self) -> FaultCounts {
        self.with(|s| s.chaos.take().map(|c| c.counts).unwrap_or_default())
    }

    /// The label events of an issue: (event, label).
    /// Every reaction placed so far.
    pub fn reactions(&self) -> Vec<Reaction> {
        self.with(|s| s.reactions.clone())
    }

    /// `user` reacts with `content` (such as `+1`) to issue comment `id`.
    pub fn react(&self, id: u64, user: &str, content: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            s.reactions.push(Reaction {
                on: format!("comment {id}"),
                content: content.to_owned(),
                user: user.to_owned(),
            });
        });
    }

    /// Edits comment `id` as its author would (a mention edited later).
    pub fn edit_comment(&self, repo: &str, id: u64, body: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            let clock = s.clock;
            s.comment_updated.insert(id, clock);
            let issue = s
                .repos
                .get_mut(repo)
                .and_then(|r| {
                    r.issues
                        .values_mut()
                        .find(|i| i.comments.iter().any(|c| c.0 == id))
                })
                .expect("the comment exists");
            issue.updated = clock;
            if let Some(c) = issue.comments.iter_mut().find(|c| c.0 == id) {
                c.2 = body.to_owned();
            }
        });
    }

    /// The pull request's review threads as (first comment's body,
    /// resolved, the replies' bodies), in the order they were opened.
    pub fn review_threads(&self, repo: &str, number: u64) -> Vec<(String, bool, Vec<String>)> {
        let reviews = self.issue(repo, number).reviews;
        reviews
            .iter()
            .filter(|r| r.line.is_some() && r.in_reply_to.is_none())
            .map(|root| {
                let replies = reviews
                    .iter()
                    .filter(|r| r.in_reply_to == Some(root.id))
                    .map(|r| r.body.clone())
                    .collect();
                (root.body.clone(), root.resolved, replies)
            })
            .collect()
    }

    pub fn label_events(&self, repo: &str, number: u64) -> Vec<(String, String)> {
        self.issue(repo, number)
            .events
            .into_iter()
            .map(|(event, _, label, _)| (event, label))
            .collect()
    }
}

impl Respond for Handler {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        {
            let mut s = self.0.lock().unwrap();
            let token = s.token.clone();
            if let Some(response) = s.attachments.respond(req, &token) {
                return response;
            }
        }
        let fault = self.0.lock().unwrap().chaos.as_mut().and_then(Chaos::draw);
        let hold = self.0.lock().unwrap().chaos.as_ref().map(|c| c.hold);
        match fault {
            Some(Fault::Refused) => {
                return ResponseTemplate::new(500).set_body_raw(
                    br#"{"message":"Server Error"}"#.to_vec(),
                    "application/json; charset=utf-8",
                )
            }
            Some(Fault::SecondaryLimit) => {
                return ResponseTemplate::new(403)
                    .insert_header("retry-after", "1")
                    .set_body_raw(
                        br#"{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}"#.to_vec(),
                        "application/json; charset=utf-8",
                    )
            }
            _ => {}
        }
        let response = self.answer(req);
        match (fault, hold) {
            // The work is done; the client sees a gateway error or nothing in time.
            (Some(Fault::LostAnswer), _) => ResponseTemplate::new(502).set_body_raw(
                b"<html><body><h1>502 Bad Gateway</h1></body></html>".to_vec(),
                "text/html",
            ),
            (Some(Fault::Timeout), Some(hold)) => response.set_delay(hold),
            _ => response,
        }
    }
}

impl Handler {
    /// The answer to `req`, with GitHub's API description checked on the
    /// way in and out (a violation fails the test when the fake is dropped).
    fn handle(&self, req: &Request) -> Reply {
        let segments: Vec<String> = req
            .url
            .path()
            .trim_start_matches('/')
            .split('/')
            .map(decode)
            .collect();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let method = req.method.as_str().to_owned();
        let keys: Vec<String> = query(req).keys().cloned().collect();
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let reply = self.route(req);
        // GraphQL is checked against GitHub's GraphQL schema instead
        // (graphql.rs; the app token exchange is in the REST description);
        // a job log's storage link is not the API.
        if segments == ["graphql"] {
            graphql::check_answer(&self.0, &body, &reply);
            return reply;
        }
        if segments.first() == Some(&"_job-logs") {
            return reply;
        }
        let api = crate::github_api::api();
        let checked = api
            .check_request(&method, &segments, &keys, &body)
            .and_then(
                |op| match (reply.status, serde_json::from_slice::<Value>(&reply.body)) {
                    (200..=299, Ok(answer)) => api.check_answer(op, reply.status, &answer),
                    _ => Ok(()),
                },
            );
        if let Err(why) = checked {
            self.0.lock().unwrap().violations.push(why);
        }
        reply
    }

    fn answer(&self, req: &Request) -> ResponseTemplate {
        let reply = self.handle(req);
        let mut s = self.0.lock().unwrap();
        let reset = 4_102_444_800u64;
        let mut headers = reply.headers.clone();
        // Conditional requests: an ETag over the body; a match is a 304 that costs no rate limit.
        if req.method.as_str() == "GET" && reply.status == 200 {
            let etag = format!("W/\"{:x}\"", Sha256::digest(&reply.body));
            let matches = req
                .headers
                .get("if-none-match")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v == etag);
            headers.push(("etag".into(), etag));
            if matches {
                let mut response = ResponseTemplate::new(304);
                for (k, v) in headers.iter().filter(|(k, _)| k == "etag") {
                    response = response.insert_header(k.as_str(), v.as_str());
                }
                return rate_headers(response, s.rate_used, reset);
            }
        }
        s.rate_used += 1;
        let mut response =
            ResponseTemplate::new(reply.status).set_body_raw(reply.body, "application/json; charset=utf-8");
        for (k, v) in &headers {
            response = response.insert_header(k.as_str(), v.as_str());
        }
        if let Some(delay) = reply.delay {
            response = response.set_delay(delay);
        }
        rate_headers(response, s.rate_used, reset)
    }
}

fn rate_headers(response: ResponseTemplate, used: u64, reset: u64) -> ResponseTemplate {
    response
        .insert_header("x-ratelimit-limit", LIMIT.to_string().as_str())
        .insert_header(
            "x-ratelimit-remaining",
            LIMIT.saturating_sub(used).to_string().as_str(),
        )
        .insert_header("x-ratelimit-used", used.to_string().as_str())
        .insert_header("x-ratelimit-reset", reset.to_string().as_str())
        .insert_header("x-ratelimit-resource", "core")
}
