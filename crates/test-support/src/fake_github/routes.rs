//! The fake GitHub's routes: each documented endpoint forgehand uses, and
//! the JSON GitHub answers it with.

use super::json::{issue_json, pull_json, review_json, user};
use super::listing::{arrange, Entry, Sorting};
use super::{FakeReview, Handler, Issue, State, BOT};
use crate::fake_http::{decode, paged, parse_time, query, request_line, stamp, tick, Reply};
use serde_json::{json, Value};
use wiremock::Request;

fn issue_in<'a>(s: &'a State, name: &str, number: &str) -> Option<&'a Issue> {
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
        let method = req.method.as_str().to_owned();
        s.requests.push(request_line(req));
        let path = req.url.path().to_owned();
        if let Some(failing) = s.failing.iter_mut().find(|f| f.1 > 0 && path.contains(&f.0)) {
            failing.1 -= 1;
            return Reply::json(failing.2, json!({"message": "Server Error"}));
        }
        // A job log's link is pre-signed storage, not the API: no token.
        if path.starts_with("/_job-logs/") {
            let base = format!("{}://{}", req.url.scheme(), req.url.authority());
            let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
            return super::checks::route(&mut s, req, &base, &segs)
                .unwrap_or_else(|| Reply::json(404, json!({"message": "Not Found"})));
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

        match (method.as_str(), segs.as_slice()) {
            // GraphQL: an item's lastEditedAt (review threads: threads.rs).
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
                // `since`: updated at or after, read as a time.
                let since = match q.get("since").map(|t| parse_time(t)) {
                    Some(None) => {
                        return Reply::json(
                            422,
                            json!({"message": "The since parameter needs to be in ISO 8601 format: YYYY-MM-DDTHH:MM:SSZ",
                                "documentation_url": "https://docs.github.com/rest/issues/issues#list-repository-issues"}),
                        )
                    }
                    Some(Some(at)) => at,
                    None => 0,
                };
                let mut list: Vec<&Issue> = repo
                    .issues
                    .values()
                    .filter(|i| state == "all" || (state == "open") == i.open)
                    .filter(|i| wanted.iter().all(|w| i.labels.iter().any(|l| l == w)))
                    .filter(|i| i.updated >= since)
                    .collect();
                // `sort` (created, updated, comments; created by default),
                // `direction` (desc by default); numbers follow creation.
                match q.get("sort").map(String::as_str) {
                    Some("updated") => list.sort_by_key(|i| (i.updated, i.number)),
                    Some("comments") => list.sort_by_key(|i| (i.comments.len(), i.number)),
                    _ => list.sort_by_key(|i| i.number),
                }
                if q.get("direction").map(String::as_str) != Some("asc") {
                    list.reverse();
                }
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
                                if event == "closed" {
                                    let number: u64 = n.parse().unwrap_or(0);
                                    e["commit_id"] = json!(s.repos[&name].closed_by.get(&number));
                                } else if event == "renamed" {
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
                let Some(i) = issue_in(&s, &name, n) else {
                    return not_found();
                };
                let list = i
                    .comments
                    .iter()
                    .map(|(id, a, b)| {
                        let created = s.created.get(id).copied().unwrap_or(0);
                        let updated = s.comment_updated.get(id).copied().unwrap_or(created);
                        Entry {
                            created,
                            updated,
                            id: *id,
                            value: json!({"id": id, "user": user(a), "body": b,
                                "created_at": stamp(created), "updated_at": stamp(updated)}),
                        }
                    })
                    .collect();
                let docs = "https://docs.github.com/rest/issues/comments#list-issue-comments";
                match arrange(&q, list, Sorting::SinceOnly, docs) {
                    Ok(list) => paged(req, list),
                    Err(refusal) => refusal,
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
                let text = text.to_owned();
                let id = add_comment(&mut s, &name, number, BOT, &text);
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
                        s.clock = tick(s.clock);
                        let clock = s.clock;
                        s.comment_updated.insert(id, clock);
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
                let Some(i) = issue_in(&s, &name, n).filter(|i| i.is_pr) else {
                    return not_found();
                };
                let reviews = *list == "reviews";
                let items = i
                    .reviews
                    .iter()
                    .filter_map(|v| {
                        Some(Entry {
                            created: v.clock,
                            updated: v.clock,
                            id: v.id,
                            value: review_json(v, reviews)?,
                        })
                    })
                    .collect();
                // Reviews come in chronological order and take no `since`.
                let (sorting, docs) = match reviews {
                    true => (
                        Sorting::SinceOnly,
                        "https://docs.github.com/rest/pulls/reviews#list-reviews-for-a-pull-request",
                    ),
                    false => (
                        Sorting::SortAndDirection,
                        "https://docs.github.com/rest/pulls/comments#list-review-comments-on-a-pull-request",
                    ),
                };
                match arrange(&q, items, sorting, docs) {
                    Ok(list) => paged(req, list),
                    Err(refusal) => refusal,
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
            ("POST", ["repos", o, r, "pulls"]) => super::pulls::create(&mut s, o, &format!("{o}/{r}"), &body),
            _ => not_found(),
        }
    }
}
