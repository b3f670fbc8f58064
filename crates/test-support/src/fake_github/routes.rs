//! The fake GitHub's routes: each documented endpoint forgehand uses, and
//! the JSON GitHub answers it with.

use super::json::{issue_json, pull_json, review_json, user};
use super::{FakeReview, Handler, Issue, State};
use crate::fake_http::{decode, request_line, stamp, tick, Reply};
use serde_json::{json, Value};
use wiremock::Request;

pub(super) fn issue_in<'a>(s: &'a State, name: &str, number: &str) -> Option<&'a Issue> {
    s.repos.get(name)?.issues.get(&number.parse().ok()?)
}

pub(super) fn add_labels(s: &mut State, repo: &str, number: u64, labels: &[String], actor: &str) {
    s.clock = tick(s.clock);
    let clock = s.clock;
    let issue = s.repos.get_mut(repo).unwrap().issues.get_mut(&number).unwrap();
    let mut added = Vec::new();
    for label in labels {
        if !issue.labels.contains(label) {
            issue.labels.push(label.clone());
            issue
                .events
                .push(("labeled".into(), actor.into(), label.clone(), clock));
            added.push(label.clone());
        }
    }
    issue.updated = clock;
    for label in added {
        let label = json!({"name": label, "color": "ededed"});
        let fields = item_fields(s, repo, number);
        let (event, mut fields) = fields;
        fields["label"] = label;
        super::webhooks::emit(s, event, Some("labeled"), repo, actor, fields);
    }
}

/// The base of the `url` fields in webhook payloads.
const HOOK_BASE: &str = "https://api.github.example";

/// The event an issue or pull request's changes are (`issues`,
/// `pull_request`) and the fields naming it in a payload.
fn item_fields(s: &State, repo: &str, number: u64) -> (&'static str, Value) {
    let r = &s.repos[repo];
    let issue = &r.issues[&number];
    match r.pulls.get(&number) {
        Some(pull) => (
            "pull_request",
            json!({"number": number, "pull_request": pull_json(repo, pull, issue.open)}),
        ),
        None => ("issues", json!({"issue": issue_json(HOOK_BASE, repo, issue)})),
    }
}

/// A comment by `author` on issue or PR `number`; its id.
pub(super) fn add_comment(s: &mut State, repo: &str, number: u64, author: &str, text: &str) -> u64 {
    s.next_id += 1;
    s.clock = tick(s.clock);
    let (id, clock) = (s.next_id, s.clock);
    s.created.insert(id, clock);
    let issue = s.repos.get_mut(repo).unwrap().issues.get_mut(&number).unwrap();
    issue.comments.push((id, author.into(), text.into()));
    issue.updated = clock;
    let issue = issue_json(HOOK_BASE, repo, &s.repos[repo].issues[&number]);
    let comment = json!({"id": id, "user": user(author), "body": text,
        "created_at": stamp(clock), "updated_at": stamp(clock)});
    super::webhooks::emit(
        s,
        "issue_comment",
        Some("created"),
        repo,
        author,
        json!({"issue": issue, "comment": comment}),
    );
    id
}

/// What GitHub delivers for a review (its body) or an inline comment.
pub(super) fn emit_review(s: &mut State, repo: &str, number: u64, review: &FakeReview) {
    let pull = match s.repos[repo].pulls.get(&number) {
        Some(p) => pull_json(repo, p, s.repos[repo].issues[&number].open),
        None => return,
    };
    match &review.line {
        None if review.state != "PENDING" => {
            let review_json = review_json(review, true).unwrap_or_default();
            super::webhooks::emit(
                s,
                "pull_request_review",
                Some("submitted"),
                repo,
                &review.author,
                json!({"review": review_json, "pull_request": pull}),
            );
        }
        Some(_) => {
            let comment = review_json(review, false).unwrap_or_default();
            super::webhooks::emit(
                s,
                "pull_request_review_comment",
                Some("created"),
                repo,
                &review.author,
                json!({"comment": comment, "pull_request": pull}),
            );
        }
        None => {}
    }
}

pub(super) fn remove_label(s: &mut State, repo: &str, number: u64, label: &str, actor: &str) -> bool {
    s.clock = tick(s.clock);
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

impl Handler {
    /// What GitHub would do with `req`, and its answer.
    pub(super) fn route(&self, req: &Request) -> Reply {
        let mut s = self.0.lock().unwrap();
        s.requests.push(request_line(req));
        if let Some(refusal) = refused(&mut s, req) {
            return refusal;
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
        if segs == ["graphql"] {
            if let Some(refusal) = super::graphql::refuse(&mut s, &body) {
                return refusal;
            }
        }
        if let Some(reply) = super::conversation::route(&mut s, req, &base, &segs, &body) {
            return reply;
        }
        if let Some(reply) = super::threads::route(&mut s, &segs, &body) {
            return reply;
        }
        if let Some(reply) = super::checks::route(&mut s, req, &base, &segs) {
            return reply;
        }
        if let Some(reply) = super::history::route(&mut s, req, &segs) {
            return reply;
        }

        if let Some(reply) = super::issues::route(&mut s, req, &base, &segs, &body) {
            return reply;
        }
        if let Some(reply) = super::pulls::route(&mut s, req, &segs, &body) {
            return reply;
        }
        super::repos::route(&s, req, &segs, &body).unwrap_or_else(not_found)
    }
}

/// GitHub's 404.
pub(super) fn not_found() -> Reply {
    Reply::json(404, json!({"message": "Not Found"}))
}

/// GitHub's 200 with `v`.
pub(super) fn ok(v: Value) -> Reply {
    Reply::json(200, v)
}

/// What GitHub answers before routing: an injected failure, a job log's
/// pre-signed link, the rate limit, an App's token exchange, bad
/// credentials. `None`: the request goes on to its route.
fn refused(s: &mut State, req: &Request) -> Option<Reply> {
    let method = req.method.as_str().to_owned();
    let path = req.url.path().to_owned();
    if let Some(failing) = s.failing.iter_mut().find(|f| f.1 > 0 && path.contains(&f.0)) {
        failing.1 -= 1;
        return Some(Reply::json(failing.2, json!({"message": "Server Error"})));
    }
    // A job log's link is pre-signed storage, not the API: no token.
    if path.starts_with("/_job-logs/") {
        let base = format!("{}://{}", req.url.scheme(), req.url.authority());
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        return Some(super::checks::route(s, req, &base, &segs).unwrap_or_else(not_found));
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
        return Some(reply);
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
        return Some(installation_token(s, req, token));
    }
    let installation_ok = s.app.as_ref().is_some_and(|(_, minted)| minted == token);
    if token != s.token && !installation_ok {
        return Some(Reply::json(
            401,
            json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}),
        ));
    }
    None
}

/// An App's JWT traded for the installation's token.
fn installation_token(s: &State, req: &Request, token: &str) -> Reply {
    let id: u64 = req
        .url
        .path()
        .split('/')
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let is_jwt = token.split('.').count() == 3 && token.starts_with("eyJ");
    match &s.app {
        Some((app_installation, minted)) if is_jwt && *app_installation == id => Reply::json(
            201,
            json!({"token": minted, "expires_at": "2099-01-01T00:00:00Z", "permissions": {"issues": "write", "contents": "write", "pull_requests": "write"}}),
        ),
        Some(_) if is_jwt => Reply::json(404, json!({"message": "Not Found"})),
        _ => Reply::json(401, json!({"message": "A JSON web token could not be decoded"})),
    }
}
