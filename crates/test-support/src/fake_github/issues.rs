//! The fake GitHub's issues: listings, one issue, its events, its
//! comments (listed, posted, edited) and its labels.

use super::changes::{add_comment, add_labels, issue_in, not_found, ok, remove_label};
use super::json::{issue_json, user};
use super::listing::{arrange, Entry, Sorting};
use super::{Issue, State, BOT};
use crate::fake_http::{github_stamp, paged, parse_time, query, tick, whole_seconds, Reply};
use serde_json::{json, Value};
use std::collections::HashMap;
use wiremock::Request;

/// The answer to a request on a repository's issues, if it is one.
pub(super) fn route(s: &mut State, req: &Request, base: &str, segs: &[&str], body: &Value) -> Option<Reply> {
    let q = query(req);
    Some(match (req.method.as_str(), segs) {
        ("GET", ["repos", o, r, "issues"]) => list(s, req, base, &format!("{o}/{r}"), &q),
        ("POST", ["repos", o, r, "issues"]) => create(s, base, &format!("{o}/{r}"), body),
        ("GET", ["repos", o, r, "issues", n]) => match issue_in(s, &format!("{o}/{r}"), n) {
            Some(i) => ok(issue_json(base, &format!("{o}/{r}"), i)),
            None => not_found(),
        },
        ("GET", ["repos", o, r, "issues", n, "events"]) => events(s, req, &format!("{o}/{r}"), n),
        ("GET", ["repos", o, r, "issues", n, "comments"]) => comments(s, req, &format!("{o}/{r}"), n, &q),
        ("POST", ["repos", o, r, "issues", n, "comments"]) => comment(s, &format!("{o}/{r}"), n, body),
        ("PATCH", ["repos", o, r, "issues", "comments", id]) => {
            edit_comment(s, &format!("{o}/{r}"), id, body)
        }
        ("POST", ["repos", o, r, "issues", n, "labels"]) => label(s, &format!("{o}/{r}"), n, body),
        ("DELETE", ["repos", o, r, "issues", n, "labels", label]) => {
            unlabel(s, &format!("{o}/{r}"), n, label)
        }
        _ => return None,
    })
}

/// `GET /repos/{o}/{r}/issues`: filtered by labels, state and `since`, sorted as asked.
fn list(s: &State, req: &Request, base: &str, name: &str, q: &HashMap<String, String>) -> Reply {
    let Some(repo) = s.repos.get(name) else {
        return not_found();
    };
    let wanted: Vec<&str> = q
        .get("labels")
        .map(|l| l.split(',').collect())
        .unwrap_or_default();
    let state = q.get("state").map(String::as_str).unwrap_or("open");
    // `creator`: the login of the user who opened it.
    let creator = q.get("creator");
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
        .filter(|i| creator.is_none_or(|c| c.eq_ignore_ascii_case(&i.user)))
        .filter(|i| whole_seconds(i.updated) >= since)
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
    let values = list.iter().map(|i| issue_json(base, name, i)).collect();
    paged(req, values)
}

/// `POST /repos/{o}/{r}/issues`: the bot opens an issue, with its labels
/// (strings or `{"name": ...}` objects, as the schema takes); GitHub
/// answers 201 with the issue ("Create an issue"). GitHub silently drops
/// the labels of a creator without push access; the bot is the account
/// whose token pushes every branch in these tests, so they are kept.
fn create(s: &mut State, base: &str, name: &str, body: &Value) -> Reply {
    if !s.repos.contains_key(name) {
        return not_found();
    }
    let text = |key: &str| {
        body.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let labels: Vec<String> = body
        .get("labels")
        .and_then(Value::as_array)
        .map(|all| {
            all.iter()
                .filter_map(|l| l.as_str().or_else(|| l.get("name").and_then(Value::as_str)))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let number = insert_issue(s, name, BOT, &text("title"), &text("body"));
    add_labels(s, name, number, &labels, BOT);
    Reply::json(201, issue_json(base, name, &s.repos[name].issues[&number]))
}

/// A new open issue of `repo` by `author`; its number.
pub(super) fn insert_issue(s: &mut State, repo: &str, author: &str, title: &str, body: &str) -> u64 {
    let number = s.repos[repo].next_number();
    s.clock = tick(s.clock);
    let clock = s.clock;
    if let Some(r) = s.repos.get_mut(repo) {
        r.issues.insert(
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
    }
    number
}

/// The issue's events (labels, renames, closing).
fn events(s: &State, req: &Request, name: &str, n: &str) -> Reply {
    match issue_in(s, name, n) {
        Some(i) => {
            let events = i
                .events
                .iter()
                .enumerate()
                .map(|(k, (event, actor, label, at))| {
                    let mut e =
                        json!({"id": k, "event": event, "actor": user(actor), "created_at": github_stamp(*at)});
                    if event == "closed" {
                        let number: u64 = n.parse().unwrap_or(0);
                        e["commit_id"] = json!(s.repos[name].closed_by.get(&number));
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

/// The issue's comments, `since` read as a time, oldest first.
fn comments(s: &State, req: &Request, name: &str, n: &str, q: &HashMap<String, String>) -> Reply {
    let Some(i) = issue_in(s, name, n) else {
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
                        "created_at": github_stamp(created), "updated_at": github_stamp(updated)}),
            }
        })
        .collect();
    let docs = "https://docs.github.com/rest/issues/comments#list-issue-comments";
    match arrange(q, list, Sorting::SinceOnly, docs) {
        Ok(list) => paged(req, list),
        Err(refusal) => refusal,
    }
}

/// A comment by the bot.
fn comment(s: &mut State, name: &str, n: &str, body: &Value) -> Reply {
    let Some(number) = existing(s, name, n) else {
        return not_found();
    };
    let Some(text) = body.get("body").and_then(Value::as_str) else {
        return Reply::json(422, json!({"message": "Validation Failed"}));
    };
    let text = text.to_owned();
    let id = add_comment(s, name, number, BOT, &text);
    Reply::json(201, json!({"id": id, "user": user(BOT), "body": text}))
}

/// The bot edits its own comment (another's: 403).
fn edit_comment(s: &mut State, name: &str, id: &str, body: &Value) -> Reply {
    let id: u64 = id.parse().unwrap_or(0);
    let text = body
        .get("body")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(repo) = s.repos.get_mut(name) else {
        return not_found();
    };
    for issue in repo.issues.values_mut() {
        if let Some(c) = issue.comments.iter_mut().find(|c| c.0 == id) {
            if c.1 != BOT {
                return Reply::json(403, json!({"message": "Must have admin rights to Repository."}));
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

/// Labels added by the bot.
fn label(s: &mut State, name: &str, n: &str, body: &Value) -> Reply {
    let Some(number) = existing(s, name, n) else {
        return not_found();
    };
    let labels: Vec<String> = body
        .get("labels")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    add_labels(s, name, number, &labels, BOT);
    labels_now(s, name, number)
}

/// Issue `n`'s number, when the repository has it.
fn existing(s: &State, name: &str, n: &str) -> Option<u64> {
    let number: u64 = n.parse().ok()?;
    s.repos.get(name)?.issues.contains_key(&number).then_some(number)
}

/// The issue's labels, as GitHub answers a change of them.
fn labels_now(s: &State, name: &str, number: u64) -> Reply {
    let now = s.repos[name].issues[&number]
        .labels
        .iter()
        .map(|l| json!({"name": l}))
        .collect();
    ok(Value::Array(now))
}

/// A label removed by the bot.
fn unlabel(s: &mut State, name: &str, n: &str, label: &str) -> Reply {
    let Some(number) = existing(s, name, n) else {
        return not_found();
    };
    if !remove_label(s, name, number, label, BOT) {
        return Reply::json(404, json!({"message": "Label does not exist"}));
    }
    labels_now(s, name, number)
}
