//! A stateful fake of the GitHub REST API (the parts forgehand uses), on a
//! real HTTP server: the same paths, JSON shapes, status codes, `ETag` /
//! `If-None-Match` with 304 answers that cost no rate limit, `Link`
//! pagination and `x-ratelimit-*` headers. Labels move, comments are stored,
//! pull requests are created and listed, permissions are enforced.

use super::fake_http::{decode, paged, query, request_line, serve, stamp, Reply};
use serde_json::{json, Value};
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
}

#[derive(Default)]
struct State {
    token: String,
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
        self.with(|s| {
            let number = next_number(s.repos.get(repo).unwrap());
            s.clock += 1;
            let clock = s.clock;
            s.repos.get_mut(repo).unwrap().issues.insert(
                number,
                Issue {
                    number,
                    title: title.into(),
                    body: body.into(),
                    user: author.into(),
                    labels: vec![],
                    open: true,
                    is_pr: false,
                    comments: vec![],
                    reviews: vec![],
                    events: vec![],
                    edited: None,
                    updated: clock,
                },
            );
            number
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
        self.with(|s| {
            s.next_id += 1;
            s.clock += 1;
            let (id, clock) = (s.next_id, s.clock);
            s.created.insert(id, clock);
            let issue = s.repos.get_mut(repo).unwrap().issues.get_mut(&number).unwrap();
            issue.comments.push((id, author.into(), body.into()));
            issue.updated = clock;
        });
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

    fn add_review(
        &self,
        repo: &str,
        number: u64,
        author: &str,
        state: &str,
        body: &str,
        line: Option<(String, u64)>,
    ) {
        self.with(|s| {
            s.next_id += 1;
            s.clock += 1;
            let (id, clock) = (s.next_id, s.clock);
            let issue = s.repos.get_mut(repo).unwrap().issues.get_mut(&number).unwrap();
            assert!(issue.is_pr, "reviews are on pull requests");
            issue.reviews.push(FakeReview {
                id,
                author: author.into(),
                body: body.into(),
                state: state.into(),
                line,
                clock,
            });
            issue.updated = clock;
        });
    }

    /// The author edits the title and body (a rename is an event; a body
    /// edit only shows in GraphQL's `lastEditedAt`).
    pub fn edit_text(&self, repo: &str, number: u64, title: &str, body: &str) {
        self.with(|s| {
            s.clock += 1;
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
    pub fn label_events(&self, repo: &str, number: u64) -> Vec<(String, String)> {
        self.issue(repo, number)
            .events
            .into_iter()
            .map(|(event, _, label, _)| (event, label))
            .collect()
    }
}

/// Issue (or PR) `number`, as a path segment, of repository `name`.
/// A review as `pulls/N/reviews` lists it (`as_review`), or its inline
/// comment as `pulls/N/comments` does. A reviewer who wrote only an inline
/// comment still submitted a review: listed with an empty body.
fn review_json(v: &FakeReview, as_review: bool) -> Option<Value> {
    if as_review {
        let body = if v.line.is_some() { "" } else { v.body.as_str() };
        let mut review = json!({"id": v.id, "user": user(&v.author), "body": body, "state": v.state});
        // GitHub gives a pending review no submission time.
        if v.state != "PENDING" {
            review["submitted_at"] = json!(stamp(v.clock));
        }
        return Some(review);
    }
    let (path, line) = v.line.as_ref()?;
    Some(json!({
        "id": v.id,
        "pull_request_review_id": v.id,
        "user": user(&v.author),
        "body": v.body,
        "path": path,
        "line": line,
        "original_line": line,
        "side": "RIGHT",
        "created_at": stamp(v.clock),
    }))
}

fn issue_in<'a>(s: &'a State, name: &str, number: &str) -> Option<&'a Issue> {
    s.repos.get(name)?.issues.get(&number.parse().ok()?)
}

fn next_number(repo: &Repo) -> u64 {
    repo.issues.keys().max().copied().unwrap_or(0) + 1
}

fn add_labels(s: &mut State, repo: &str, number: u64, labels: &[String], actor: &str) {
    s.clock += 1;
    let clock = s.clock;
    let issue = s.repos.get_mut(repo).unwrap().issues.get_mut(&number).unwrap();
    for label in labels {
        if !issue.labels.contains(label) {
            issue.labels.push(label.clone());
            issue
                .events
                .push(("labeled".into(), actor.into(), label.clone(), clock));
        }
    }
    issue.updated = clock;
}

fn remove_label(s: &mut State, repo: &str, number: u64, label: &str, actor: &str) -> bool {
    s.clock += 1;
    let clock = s.clock;
    let issue = s.repos.get_mut(repo).unwrap().issues.get_mut(&number).unwrap();
    let had = issue.labels.iter().any(|l| l == label);
    issue.labels.retain(|l| l != label);
    if had {
        issue
            .events
            .push(("unlabeled".into(), actor.into(), label.into(), clock));
        issue.updated = clock;
    }
    had
}

fn user(login: &str) -> Value {
    json!({ "login": login, "id": login.len() as u64 * 7919, "type": "User",
            "html_url": format!("https://github.example/{login}") })
}

fn issue_json(base: &str, repo: &str, i: &Issue) -> Value {
    let mut v = json!({
        "id": i.number * 31,
        "number": i.number,
        "title": i.title,
        "body": i.body,
        "user": user(&i.user),
        "labels": i.labels.iter().map(|l| json!({"name": l, "color": "ededed"})).collect::<Vec<_>>(),
        "state": if i.open { "open" } else { "closed" },
        "comments": i.comments.len(),
        "html_url": format!("https://github.example/{repo}/{}/{}", if i.is_pr { "pull" } else { "issues" }, i.number),
        "url": format!("{base}/repos/{repo}/issues/{}", i.number),
        "updated_at": stamp(i.updated),
    });
    if i.is_pr {
        v["pull_request"] = json!({ "url": format!("{base}/repos/{repo}/pulls/{}", i.number) });
    }
    v
}

fn pull_json(repo: &str, p: &Pull, open: bool) -> Value {
    json!({
        "number": p.number,
        "html_url": format!("https://github.example/{repo}/pull/{}", p.number),
        "state": if open { "open" } else { "closed" },
        "draft": p.draft,
        "title": p.title,
        "body": p.body,
        "head": { "ref": p.head, "label": format!("{}:{}", repo.split('/').next().unwrap(), p.head), "repo": { "full_name": repo } },
        "base": { "ref": p.base, "repo": { "full_name": repo } },
    })
}

impl Handler {
    fn handle(&self, req: &Request) -> Reply {
        let mut s = self.0.lock().unwrap();
        let method = req.method.as_str().to_owned();
        s.requests.push(request_line(req));
        let path = req.url.path().to_owned();
        if let Some(failing) = s.failing.iter_mut().find(|f| f.1 > 0 && path.contains(&f.0)) {
            failing.1 -= 1;
            return Reply::json(failing.2, json!({"message": "Server Error"}));
        }
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if let Some(seconds) = s.limit_next.take() {
            let mut reply = Reply::json(
                429,
                json!({"message": "API rate limit exceeded", "documentation_url": "https://docs.github.com/rest/rate-limit"}),
            );
            reply.headers.push(("retry-after".into(), seconds.to_string()));
            return reply;
        }
        let token = auth
            .strip_prefix("Bearer ")
            .or_else(|| auth.strip_prefix("token "))
            .unwrap_or("");
        // A GitHub App trades its JWT (RS256, three dot-separated parts) for an installation token.
        if method == "POST"
            && req.url.path().starts_with("/app/installations/")
            && req.url.path().ends_with("/access_tokens")
        {
            let id: u64 = req
                .url
                .path()
                .split('/')
                .nth(3)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let is_jwt = token.split('.').count() == 3 && token.starts_with("eyJ");
            return match &s.app {
                Some((app_installation, minted)) if is_jwt && *app_installation == id => Reply::json(
                    201,
                    json!({"token": minted, "expires_at": "2099-01-01T00:00:00Z", "permissions": {"issues": "write", "contents": "write", "pull_requests": "write"}}),
                ),
                Some(_) if is_jwt => Reply::json(404, json!({"message": "Not Found"})),
                _ => Reply::json(401, json!({"message": "A JSON web token could not be decoded"})),
            };
        }
        let installation_ok = s.app.as_ref().is_some_and(|(_, minted)| minted == token);
        if token != s.token && !installation_ok {
            return Reply::json(
                401,
                json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}),
            );
        }
        let base = format!("{}://{}", req.url.scheme(), req.url.authority());
        let segs: Vec<String> = req
            .url
            .path()
            .trim_start_matches('/')
            .split('/')
            .map(decode)
            .collect();
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let q = query(req);
        let not_found = || Reply::json(404, json!({"message": "Not Found"}));
        let ok = |v: Value| Reply::json(200, v);

        match (method.as_str(), segs.as_slice()) {
            // GraphQL: the one query forgehand sends (an item's lastEditedAt).
            ("POST", ["graphql"]) => {
                let vars = &body["variables"];
                let name = format!(
                    "{}/{}",
                    vars["owner"].as_str().unwrap_or(""),
                    vars["name"].as_str().unwrap_or("")
                );
                let number = vars["number"].as_u64().unwrap_or(0).to_string();
                match issue_in(&s, &name, &number) {
                    // GitHub answers null for a node the token may not see.
                    Some(_) if s.graphql_hides_items => {
                        ok(json!({"data": {"repository": {"issueOrPullRequest": null}}}))
                    }
                    Some(i) => ok(
                        json!({"data": {"repository": {"issueOrPullRequest": {"lastEditedAt": i.edited.map(stamp)}}}}),
                    ),
                    None => ok(
                        json!({"data": {"repository": null}, "errors": [{"type": "NOT_FOUND", "message": format!("Could not resolve to a Repository with the name '{name}'.")}]}),
                    ),
                }
            }
            ("GET", ["user", "repos"]) => {
                let list: Vec<Value> = s
                    .repos
                    .iter()
                    .map(|(name, r)| json!({"full_name": name, "clone_url": r.clone_url, "default_branch": r.default_branch}))
                    .collect();
                paged(req, list)
            }
            ("GET", ["repos", o, r]) => {
                let name = format!("{o}/{r}");
                match s.repos.get(&name) {
                    Some(repo) => ok(
                        json!({"full_name": name, "clone_url": repo.clone_url, "default_branch": repo.default_branch, "private": true}),
                    ),
                    None => not_found(),
                }
            }
            ("GET", ["repos", o, r, "issues"]) => {
                let name = format!("{o}/{r}");
                let Some(repo) = s.repos.get(&name) else {
                    return not_found();
                };
                let wanted: Vec<&str> = q
                    .get("labels")
                    .map(|l| l.split(',').collect())
                    .unwrap_or_default();
                let state = q.get("state").map(String::as_str).unwrap_or("open");
                let mut list: Vec<&Issue> = repo
                    .issues
                    .values()
                    .filter(|i| state == "all" || (state == "open") == i.open)
                    .filter(|i| wanted.iter().all(|w| i.labels.iter().any(|l| l == w)))
                    .collect();
                list.sort_by_key(|i| std::cmp::Reverse(i.updated));
                let values = list.iter().map(|i| issue_json(&base, &name, i)).collect();
                paged(req, values)
            }
            ("GET", ["repos", o, r, "issues", n]) => {
                let name = format!("{o}/{r}");
                match issue_in(&s, &name, n) {
                    Some(i) => ok(issue_json(&base, &name, i)),
                    None => not_found(),
                }
            }
            ("GET", ["repos", o, r, "issues", n, "events"]) => {
                let name = format!("{o}/{r}");
                match issue_in(&s, &name, n) {
                    Some(i) => {
                        let events = i
                            .events
                            .iter()
                            .enumerate()
                            .map(|(k, (event, actor, label, at))| {
                                let mut e = json!({"id": k, "event": event, "actor": user(actor), "created_at": stamp(*at)});
                                if event == "renamed" {
                                    e["rename"] = json!({"from": "", "to": label});
                                } else {
                                    e["label"] = json!({"name": label, "color": "ededed"});
                                }
                                e
                            })
                            .collect();
                        paged(req, events)
                    }
                    None => not_found(),
                }
            }
            ("GET", ["repos", o, r, "issues", n, "comments"]) => {
                let name = format!("{o}/{r}");
                match issue_in(&s, &name, n) {
                    Some(i) => {
                        let list = i
                            .comments
                            .iter()
                            .map(|(id, a, b)| {
                                let at = s.created.get(id).copied().unwrap_or(0);
                                json!({"id": id, "user": user(a), "body": b, "created_at": stamp(at)})
                            })
                            .collect();
                        paged(req, list)
                    }
                    None => not_found(),
                }
            }
            ("POST", ["repos", o, r, "issues", n, "comments"]) => {
                let name = format!("{o}/{r}");
                let number: u64 = n.parse().unwrap_or(0);
                if !s.repos.get(&name).is_some_and(|r| r.issues.contains_key(&number)) {
                    return not_found();
                }
                let Some(text) = body.get("body").and_then(Value::as_str) else {
                    return Reply::json(422, json!({"message": "Validation Failed"}));
                };
                s.next_id += 1;
                s.clock += 1;
                let (id, clock) = (s.next_id, s.clock);
                s.created.insert(id, clock);
                let issue = s.repos.get_mut(&name).unwrap().issues.get_mut(&number).unwrap();
                issue.comments.push((id, BOT.into(), text.into()));
                issue.updated = clock;
                Reply::json(201, json!({"id": id, "user": user(BOT), "body": text}))
            }
            ("PATCH", ["repos", o, r, "issues", "comments", id]) => {
                let name = format!("{o}/{r}");
                let id: u64 = id.parse().unwrap_or(0);
                let text = body
                    .get("body")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let Some(repo) = s.repos.get_mut(&name) else {
                    return not_found();
                };
                for issue in repo.issues.values_mut() {
                    if let Some(c) = issue.comments.iter_mut().find(|c| c.0 == id) {
                        if c.1 != BOT {
                            return Reply::json(
                                403,
                                json!({"message": "Must have admin rights to Repository."}),
                            );
                        }
                        c.2 = text.clone();
                        return ok(json!({"id": id, "user": user(BOT), "body": text}));
                    }
                }
                not_found()
            }
            ("POST", ["repos", o, r, "issues", n, "labels"]) => {
                let name = format!("{o}/{r}");
                let number: u64 = n.parse().unwrap_or(0);
                if !s.repos.get(&name).is_some_and(|r| r.issues.contains_key(&number)) {
                    return not_found();
                }
                let labels: Vec<String> = body
                    .get("labels")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                    .unwrap_or_default();
                add_labels(&mut s, &name, number, &labels, BOT);
                let now = s.repos[&name].issues[&number]
                    .labels
                    .iter()
                    .map(|l| json!({"name": l}))
                    .collect();
                ok(Value::Array(now))
            }
            ("DELETE", ["repos", o, r, "issues", n, "labels", label]) => {
                let name = format!("{o}/{r}");
                let number: u64 = n.parse().unwrap_or(0);
                if !s.repos.get(&name).is_some_and(|r| r.issues.contains_key(&number)) {
                    return not_found();
                }
                if !remove_label(&mut s, &name, number, label, BOT) {
                    return Reply::json(404, json!({"message": "Label does not exist"}));
                }
                let now = s.repos[&name].issues[&number]
                    .labels
                    .iter()
                    .map(|l| json!({"name": l}))
                    .collect();
                ok(Value::Array(now))
            }
            ("GET", ["repos", o, r, "collaborators", who, "permission"]) => {
                let name = format!("{o}/{r}");
                let Some(repo) = s.repos.get(&name) else {
                    return not_found();
                };
                let permission = repo
                    .permissions
                    .get(*who)
                    .cloned()
                    .unwrap_or_else(|| "read".into());
                let legacy = match permission.as_str() {
                    "maintain" => "write",
                    "triage" => "read",
                    p => p,
                };
                ok(json!({"permission": legacy, "role_name": permission, "user": user(who)}))
            }
            ("GET", ["repos", o, r, "pulls", n, list @ ("reviews" | "comments")]) => {
                let name = format!("{o}/{r}");
                match issue_in(&s, &name, n).filter(|i| i.is_pr) {
                    Some(i) => {
                        let items = i
                            .reviews
                            .iter()
                            .filter_map(|v| review_json(v, *list == "reviews"))
                            .collect();
                        paged(req, items)
                    }
                    None => not_found(),
                }
            }
            ("GET", ["repos", o, r, "pulls", n]) => {
                let name = format!("{o}/{r}");
                let number: u64 = n.parse().unwrap_or(0);
                let Some(repo) = s.repos.get(&name) else {
                    return not_found();
                };
                match repo.pulls.get(&number) {
                    Some(p) => ok(pull_json(&name, p, repo.issues[&number].open)),
                    None => not_found(),
                }
            }
            ("GET", ["repos", o, r, "pulls"]) => {
                let name = format!("{o}/{r}");
                let Some(repo) = s.repos.get(&name) else {
                    return not_found();
                };
                let head = q.get("head").cloned();
                let list = repo
                    .pulls
                    .values()
                    .filter(|p| repo.issues[&p.number].open)
                    .filter(|p| head.as_ref().is_none_or(|h| *h == format!("{o}:{}", p.head)))
                    .map(|p| pull_json(&name, p, true))
                    .collect();
                paged(req, list)
            }
            ("POST", ["repos", o, r, "pulls"]) => {
                let name = format!("{o}/{r}");
                let Some(repo) = s.repos.get(&name) else {
                    return not_found();
                };
                let head = body
                    .get("head")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let base_branch = body
                    .get("base")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let exists = repo.bare.as_ref().is_none_or(|bare| {
                    std::process::Command::new("git")
                        .arg("--git-dir")
                        .arg(bare)
                        .args(["rev-parse", "--verify", "-q", &format!("refs/heads/{head}")])
                        .output()
                        .is_ok_and(|o| o.status.success())
                });
                if !exists {
                    return Reply::json(
                        422,
                        json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "field": "head", "code": "invalid"}]}),
                    );
                }
                if repo
                    .pulls
                    .values()
                    .any(|p| p.head == head && repo.issues[&p.number].open)
                {
                    return Reply::json(
                        422,
                        json!({"message": "Validation Failed", "errors": [{"message": format!("A pull request already exists for {o}:{head}.")}]}),
                    );
                }
                let title = body
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let text = body
                    .get("body")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let number = next_number(repo);
                s.clock += 1;
                let clock = s.clock;
                let pull = Pull {
                    number,
                    head,
                    base: base_branch,
                    title: title.clone(),
                    body: text.clone(),
                    draft: body.get("draft").and_then(Value::as_bool).unwrap_or(false),
                };
                let repo = s.repos.get_mut(&name).unwrap();
                repo.issues.insert(
                    number,
                    Issue {
                        number,
                        title,
                        body: text,
                        user: BOT.into(),
                        labels: vec![],
                        open: true,
                        is_pr: true,
                        comments: vec![],
                        reviews: vec![],
                        events: vec![],
                        edited: None,
                        updated: clock,
                    },
                );
                let answer = pull_json(&name, &pull, true);
                repo.pulls.insert(number, pull);
                let mut response = Reply::json(201, answer);
                response.delay = s.pull_delay;
                response
            }
            _ => not_found(),
        }
    }
}

impl Respond for Handler {
    fn respond(&self, req: &Request) -> ResponseTemplate {
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
