//! A stateful fake of the GitLab REST API v4 (the parts forgehand uses), on
//! a real HTTP server: `PRIVATE-TOKEN` auth, URL-encoded project paths,
//! `updated_after` filtering (on or after, as GitLab documents), offset
//! pagination with `Link`/`x-next-page`, resource label events, member
//! access levels, notes (system notes for text edits, as GitLab writes
//! them) and merge requests. Every request and every answer is checked
//! against GitLab's documentation (`gitlab_api.rs`); anything else is a
//! test failure when the fake is dropped.

mod conversation;
mod discussions;
mod history;
mod items;
mod listing;
mod merge_requests;
mod pipelines;
mod projects;
mod uploads;

pub use conversation::Award;
pub use history::MergedRequest;

use crate::fake_http::{decode, query, request_line, serve, stamp, tick, Reply};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

pub const BOT: &str = "forgehand-bot";

#[derive(Debug, Clone)]
pub struct Item {
    pub iid: u64,
    pub title: String,
    pub description: String,
    pub author: String,
    pub labels: Vec<String>,
    pub open: bool,
    pub notes: Vec<Note>,
    /// (action, user, label, clock)
    pub label_events: Vec<(String, String, String, u64)>,
    pub updated: u64,
    /// Merge requests only.
    pub source_branch: String,
    pub target_branch: String,
}

#[derive(Debug, Clone, Default)]
pub struct Note {
    pub id: u64,
    pub author: String,
    pub body: String,
    /// Written by GitLab itself ("changed the description", ...).
    pub system: bool,
    pub created: u64,
    pub updated: u64,
    /// A diff note's place and discussion (see discussions.rs).
    pub thread: Option<discussions::DiffThread>,
}

/// Requests that fail on purpose: the next `times` requests whose path
/// contains `path` get `status`.
struct Fault {
    path: String,
    times: usize,
    status: u16,
}

#[derive(Default)]
struct Project {
    id: u64,
    clone_url: String,
    issues: BTreeMap<u64, Item>,
    merge_requests: BTreeMap<u64, Item>,
    /// username -> access level
    members: HashMap<String, u32>,
    /// The bare repository behind `clone_url`, for the CI to read.
    bare: Option<std::path::PathBuf>,
    /// Merged merge requests (by iid).
    merged: BTreeMap<u64, MergedRequest>,
}

#[derive(Default)]
struct State {
    token: String,
    /// Files uploaded to projects' threads, served on the web routes.
    uploads: uploads::Uploads,
    projects: BTreeMap<String, Project>,
    users: Vec<String>,
    next_id: u64,
    clock: u64,
    requests: Vec<String>,
    faults: Vec<Fault>,
    /// Requests or answers GitLab's documentation does not have.
    violations: Vec<String>,
    /// Every emoji awarded, in order.
    awards: Vec<Award>,
    /// The CI that runs on pushed commits, and its jobs.
    ci: Option<crate::fake_ci::CiScript>,
    jobs: Vec<crate::fake_ci::FakeJob>,
    /// Names of the jobs retried, in order.
    retries: Vec<String>,
}

pub struct FakeGitLab {
    pub server: MockServer,
    state: Arc<Mutex<State>>,
}

struct Handler(Arc<Mutex<State>>);

fn user_id(s: &State, name: &str) -> u64 {
    s.users
        .iter()
        .position(|u| u == name)
        .map(|i| i as u64 + 1)
        .unwrap_or(0)
}

impl FakeGitLab {
    pub async fn start(token: &str) -> FakeGitLab {
        let state = Arc::new(Mutex::new(State {
            token: token.to_owned(),
            next_id: 500,
            users: vec![BOT.to_owned()],
            ..State::default()
        }));
        let server = serve(Handler(state.clone())).await;
        FakeGitLab { server, state }
    }

    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// The conformance failures seen so far, taken (a test that sends
    /// what GitLab refuses on purpose takes them before the fake's drop
    /// checks that none is left).
    pub fn take_violations(&self) -> Vec<String> {
        std::mem::take(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()).violations)
    }

    /// Uploads `bytes` as `name` to `project`'s threads; returns the
    /// address markdown links it by (`/uploads/<secret>/<name>`).
    pub fn upload(&self, project: &str, bytes: Vec<u8>, name: &str) -> String {
        self.with(|s| {
            let id = s.projects.get(project).map(|p| p.id).unwrap_or(0);
            s.uploads.add(project, id, bytes, name)
        })
    }

    /// Every request for an upload: its path and whether it had the token.
    pub fn upload_requests(&self) -> Vec<(String, bool)> {
        self.with(|s| s.uploads.requests.clone())
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    /// Commits of `project` (whose bare repository is `bare`) get the jobs
    /// `script` says.
    pub fn run_ci(&self, project: &str, bare: std::path::PathBuf, script: crate::fake_ci::CiScript) {
        self.with(|s| {
            s.projects.get_mut(project).unwrap().bare = Some(bare);
            s.ci = Some(script);
        });
    }

    /// Every job run so far, and the names of those retried.
    pub fn jobs(&self) -> (Vec<crate::fake_ci::FakeJob>, Vec<String>) {
        self.with(|s| (s.jobs.clone(), s.retries.clone()))
    }

    /// A project; its id is 10 for the first, 11 for the next...
    pub fn add_project(&self, path: &str, clone_url: &str) {
        self.with(|s| {
            let id = s.projects.len() as u64 + 10;
            s.projects.insert(
                path.to_owned(),
                Project {
                    id,
                    clone_url: clone_url.to_owned(),
                    ..Project::default()
                },
            );
        });
    }

    /// 10 Guest, 20 Reporter, 30 Developer, 40 Maintainer, 50 Owner.
    pub fn add_member(&self, project: &str, user: &str, level: u32) {
        self.with(|s| {
            if !s.users.iter().any(|u| u == user) {
                s.users.push(user.to_owned());
            }
            s.projects
                .get_mut(project)
                .unwrap()
                .members
                .insert(user.to_owned(), level);
        });
    }

    pub fn open_issue(&self, project: &str, author: &str, title: &str, description: &str) -> u64 {
        self.with(|s| items::insert_issue(s, project, author, title, description))
    }

    /// The issues of `project` the bot opened, by iid.
    pub fn issues_by_bot(&self, project: &str) -> Vec<Item> {
        self.with(|s| {
            s.projects[project]
                .issues
                .values()
                .filter(|i| i.author == BOT)
                .cloned()
                .collect()
        })
    }

    pub fn add_label(&self, project: &str, iid: u64, label: &str, user: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            let clock = s.clock;
            let item = s.projects.get_mut(project).unwrap().issues.get_mut(&iid).unwrap();
            edit_labels(item, &[label.to_owned()], &[], user, clock);
        });
    }

    /// The author edits the title and description; GitLab records each
    /// change as a system note by the editor (`SystemNotes::IssuablesService`).
    pub fn edit_text(&self, project: &str, iid: u64, title: &str, description: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            s.next_id += 1;
            let (clock, id) = (s.clock, s.next_id);
            let item = s.projects.get_mut(project).unwrap().issues.get_mut(&iid).unwrap();
            let author = item.author.clone();
            let mut notes = Vec::new();
            if item.title != title {
                notes.push(format!("changed title from **{}** to **{title}**", item.title));
            }
            if item.description != description {
                notes.push("changed the description".to_owned());
            }
            item.title = title.into();
            item.description = description.into();
            item.updated = clock;
            for (k, body) in notes.into_iter().enumerate() {
                item.notes.push(Note {
                    id: id * 10 + k as u64,
                    author: author.clone(),
                    body,
                    system: true,
                    created: clock,
                    updated: clock,
                    thread: None,
                });
            }
        });
    }

    /// Someone comments on an issue.
    /// `user` awards `name` (such as `thumbsup`) to note `id`.
    pub fn award(&self, id: u64, user: &str, name: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            s.awards.push(Award {
                on: format!("note {id}"),
                name: name.to_owned(),
                user: user.to_owned(),
            });
        });
    }

    /// Every emoji awarded so far.
    pub fn awards(&self) -> Vec<Award> {
        self.with(|s| s.awards.clone())
    }

    pub fn comment(&self, project: &str, iid: u64, author: &str, body: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            s.next_id += 1;
            let (clock, id) = (s.clock, s.next_id);
            let item = s.projects.get_mut(project).unwrap().issues.get_mut(&iid).unwrap();
            item.notes.push(Note {
                id,
                author: author.into(),
                body: body.into(),
                system: false,
                created: clock,
                updated: clock,
                thread: None,
            });
            item.updated = clock;
        });
    }

    /// The next `times` requests whose path contains `path` answer `status`.
    pub fn fail(&self, path: &str, times: usize, status: u16) {
        self.with(|s| {
            s.faults.push(Fault {
                path: path.into(),
                times,
                status,
            })
        });
    }

    /// How many requests were made so far.
    pub fn request_count(&self) -> usize {
        self.with(|s| s.requests.len())
    }

    pub fn issue(&self, project: &str, iid: u64) -> Item {
        self.with(|s| s.projects[project].issues[&iid].clone())
    }

    pub fn merge_requests(&self, project: &str) -> Vec<Item> {
        self.with(|s| s.projects[project].merge_requests.values().cloned().collect())
    }

    pub fn requests(&self) -> Vec<String> {
        self.with(|s| s.requests.clone())
    }
}

/// Issue or MR `iid` (a path segment) of `project`; `kind` is the path's
/// "issues" or "merge_requests".
/// GitLab's 404 for `what` (`Project`, `Issue`, `Note`, `Member`).
fn not_found(what: &str) -> Reply {
    Reply::json(404, json!({"message": format!("404 {what} Not Found")}))
}

fn item_in<'a>(s: &'a State, project: &str, kind: &str, iid: &str) -> Option<&'a Item> {
    let p = s.projects.get(project)?;
    let items = if kind == "merge_requests" {
        &p.merge_requests
    } else {
        &p.issues
    };
    items.get(&iid.parse().ok()?)
}

fn item_in_mut<'a>(s: &'a mut State, project: &str, kind: &str, iid: &str) -> Option<&'a mut Item> {
    let p = s.projects.get_mut(project)?;
    let items = if kind == "merge_requests" {
        &mut p.merge_requests
    } else {
        &mut p.issues
    };
    items.get_mut(&iid.parse().ok()?)
}

fn edit_labels(item: &mut Item, add: &[String], remove: &[String], user: &str, clock: u64) {
    for label in add {
        if !label.is_empty() && !item.labels.contains(label) {
            item.labels.push(label.clone());
            item.label_events
                .push(("add".into(), user.into(), label.clone(), clock));
        }
    }
    for label in remove {
        if item.labels.contains(label) {
            item.labels.retain(|l| l != label);
            item.label_events
                .push(("remove".into(), user.into(), label.clone(), clock));
        }
    }
    item.updated = clock;
}

fn user_json(s: &State, name: &str) -> Value {
    json!({ "id": user_id(s, name), "username": name, "name": name, "state": "active" })
}

fn note_json(s: &State, n: &Note) -> Value {
    let mut note = json!({
        "id": n.id,
        "author": user_json(s, &n.author),
        "body": n.body,
        "system": n.system,
        "created_at": stamp(n.created),
        "updated_at": stamp(n.updated),
    });
    if let Some(thread) = &n.thread {
        discussions::describe(&mut note, thread);
    }
    note
}

fn item_json(s: &State, base: &str, path: &str, p: &Project, i: &Item, mr: bool) -> Value {
    let mut v = json!({
        "id": p.id * 1000 + i.iid,
        "iid": i.iid,
        "project_id": p.id,
        "title": i.title,
        "description": i.description,
        "author": user_json(s, &i.author),
        "labels": i.labels,
        "state": if i.open { "opened" } else { "closed" },
        "web_url": format!("{base}/{path}/-/{}/{}", if mr { "merge_requests" } else { "issues" }, i.iid),
        "updated_at": stamp(i.updated),
        "created_at": stamp(0),
    });
    if !i.open && !mr {
        v["closed_at"] = json!(stamp(i.updated));
    }
    if mr {
        v["source_branch"] = json!(i.source_branch);
        v["target_branch"] = json!(i.target_branch);
        v["source_project_id"] = json!(p.id);
        v["target_project_id"] = json!(p.id);
        v["draft"] = json!(i.title.starts_with("Draft:"));
    }
    v
}

impl Handler {
    fn handle(&self, req: &Request) -> Reply {
        let mut s = self.0.lock().unwrap();
        s.requests.push(request_line(req));
        let token = req
            .headers
            .get("private-token")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if token != s.token {
            return Reply::json(401, json!({"message": "401 Unauthorized"}));
        }
        let base = format!("{}://{}", req.url.scheme(), req.url.authority());
        let Some(rest) = req.url.path().strip_prefix("/api/v4/") else {
            return Reply::json(404, json!({"error": "404 Not Found"}));
        };
        // Segments stay encoded until split, so "group%2Fapp" is one segment.
        let segs: Vec<String> = rest.trim_end_matches('/').split('/').map(decode).collect();
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        if let Some(reply) = conversation::route(&mut s, req, &segs, &body) {
            return reply;
        }
        if let Some(reply) = discussions::route(&mut s, req, &segs, &body) {
            return reply;
        }
        if let Some(reply) = pipelines::route(&mut s, req, &segs) {
            return reply;
        }
        if let Some(reply) = history::route(&mut s, req, &base, &segs) {
            return reply;
        }

        if let Some(reply) = projects::route(&s, req, &segs) {
            return reply;
        }
        if let Some(reply) = items::route(&mut s, req, &base, &segs, &body) {
            return reply;
        }
        if let Some(reply) = merge_requests::route(&mut s, req, &base, &segs, &body) {
            return reply;
        }
        Reply::json(404, json!({"error": "404 Not Found"}))
    }
}

impl Handler {
    /// A documented request gets its answer (checked too); anything else is
    /// a violation, answered as GitLab answers what it does not know.
    fn checked(&self, req: &Request) -> Reply {
        let path = req.url.path().to_owned();
        let segments: Vec<String> = path
            .strip_prefix("/api/v4/")
            .unwrap_or(&path)
            .trim_end_matches('/')
            .split('/')
            .map(decode)
            .collect();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let keys: Vec<String> = query(req).into_keys().collect();
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let endpoint = match crate::gitlab_api::check_request(req.method.as_str(), &segments, &keys, &body) {
            Ok(e) => e,
            Err(refusal) => {
                let mut s = self.0.lock().unwrap();
                s.requests.push(request_line(req));
                s.violations.push(refusal.violation);
                return Reply::json(400, json!({"error": refusal.error}));
            }
        };
        {
            let mut s = self.0.lock().unwrap();
            if let Some(fault) = s
                .faults
                .iter_mut()
                .find(|f| f.times > 0 && path.contains(&f.path))
            {
                fault.times -= 1;
                let status = fault.status;
                s.requests.push(request_line(req));
                return Reply::json(status, json!({"message": format!("{status} Bad Gateway")}));
            }
        }
        let reply = self.handle(req);
        if let (Some(entity), 200..=299) = (endpoint.answer, reply.status) {
            let answer: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
            if let Err(why) = crate::gitlab_api::check_answer(entity, &answer) {
                self.0
                    .lock()
                    .unwrap()
                    .violations
                    .push(format!("{} {}: {why}", endpoint.method, endpoint.path));
            }
        }
        reply
    }
}

impl Drop for FakeGitLab {
    fn drop(&mut self) {
        let violations = std::mem::take(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()).violations);
        if !std::thread::panicking() {
            assert!(
                violations.is_empty(),
                "the fake GitLab saw what GitLab does not document:\n{}",
                violations.join("\n")
            );
        }
    }
}

impl Respond for Handler {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        if !req.url.path().starts_with("/api/v4/") {
            let mut s = self.0.lock().unwrap();
            let token = s.token.clone();
            if let Some(response) = s.uploads.respond(req, &token) {
                return response;
            }
        }
        let mut reply = self.checked(req);
        reply.headers.push(("ratelimit-limit".into(), "2000".into()));
        reply.headers.push(("ratelimit-remaining".into(), "1999".into()));
        reply.into_template()
    }
}
