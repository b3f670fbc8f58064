//! The fake GitHub's conversation-wide routes: who the token is, a user
//! by login, every
//! comment of a repository since a time (the mentions forgehand looks for),
//! and reactions.

use super::json::user;
use super::listing::{arrange, Entry, Sorting};
use super::{State, BOT};
use crate::fake_http::{github_stamp, paged, query, tick, Reply};
use serde_json::{json, Value};
use wiremock::Request;

/// A reaction forgehand (or anyone) placed: on what, which, by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaction {
    /// `issue N`, `comment ID` or `review comment ID`.
    pub on: String,
    pub content: String,
    pub user: String,
}

/// Whether `login` is an account the fake knows: forgehand's, a
/// collaborator, or anyone who wrote, reviewed or labelled something.
fn known_user(s: &State, login: &str) -> bool {
    login == BOT
        || s.repos.values().any(|repo| {
            repo.permissions.contains_key(login)
                || repo.issues.values().any(|issue| {
                    issue.user == login
                        || issue.comments.iter().any(|(_, author, _)| author == login)
                        || issue.reviews.iter().any(|review| review.author == login)
                        || issue.events.iter().any(|(_, actor, _, _)| actor == login)
                })
        })
}

/// The answer when `segs` is one of these routes.
pub(super) fn route(s: &mut State, req: &Request, base: &str, segs: &[&str], body: &Value) -> Option<Reply> {
    let method = req.method.as_str();
    Some(match (method, segs) {
        ("GET", ["user"]) => Reply::json(200, user(BOT)),
        ("GET", ["users", login]) if known_user(s, login) => Reply::json(200, user(login)),
        ("GET", ["users", _]) => Reply::json(404, json!({"message": "Not Found"})),
        ("GET", ["repos", o, r, "issues", "comments"]) => {
            let name = format!("{o}/{r}");
            let repo = s.repos.get(&name)?;
            let mut list = Vec::new();
            for issue in repo.issues.values() {
                for (id, author, text) in &issue.comments {
                    let created = s.created.get(id).copied().unwrap_or(0);
                    let updated = s.comment_updated.get(id).copied().unwrap_or(created);
                    let page = if issue.is_pr { "pull" } else { "issues" };
                    list.push(Entry {
                        created,
                        updated,
                        id: *id,
                        value: json!({
                            "id": id,
                            "user": user(author),
                            "body": text,
                            "created_at": github_stamp(created),
                            "updated_at": github_stamp(updated),
                            "html_url": format!("https://github.example/{name}/{page}/{}#issuecomment-{id}", issue.number),
                            "issue_url": format!("{base}/repos/{name}/issues/{}", issue.number),
                        }),
                    });
                }
            }
            let docs = "https://docs.github.com/rest/issues/comments#list-issue-comments-for-a-repository";
            match arrange(&query(req), list, Sorting::SortAndDirection, docs) {
                Ok(list) => paged(req, list),
                Err(refusal) => refusal,
            }
        }
        ("GET", ["repos", o, r, "pulls", "comments"]) => {
            let name = format!("{o}/{r}");
            let repo = s.repos.get(&name)?;
            let mut list = Vec::new();
            for issue in repo.issues.values().filter(|i| i.is_pr) {
                for review in &issue.reviews {
                    let Some((path, line)) = &review.line else {
                        continue;
                    };
                    let at = github_stamp(review.clock);
                    list.push(Entry {
                        created: review.clock,
                        updated: review.clock,
                        id: review.id,
                        value: json!({
                            "id": review.id,
                            "pull_request_review_id": review.id,
                            "user": user(&review.author),
                            "body": review.body,
                            "path": path,
                            "line": line,
                            "original_line": line,
                            "created_at": at,
                            "updated_at": at,
                            "pull_request_url": format!("{base}/repos/{name}/pulls/{}", issue.number),
                        }),
                    });
                }
            }
            let docs = "https://docs.github.com/rest/pulls/comments#list-review-comments-in-a-repository";
            match arrange(&query(req), list, Sorting::SortAndDirection, docs) {
                Ok(list) => paged(req, list),
                Err(refusal) => refusal,
            }
        }
        ("GET", ["repos", o, r, "issues", "comments", id, "reactions"]) => {
            // "List reactions for an issue comment": `content` filters.
            let name = format!("{o}/{r}");
            let id: u64 = id.parse().ok()?;
            if !issue_comment_exists(s.repos.get(&name)?, id) {
                return Some(Reply::json(404, json!({"message": "Not Found"})));
            }
            let content = query(req).get("content").cloned();
            let on = format!("comment {id}");
            let list: Vec<Value> = s
                .reactions
                .iter()
                .enumerate()
                .filter(|(_, r)| r.on == on && content.as_ref().is_none_or(|c| *c == r.content))
                .map(|(at, r)| {
                    json!({"id": at as u64 + 1, "user": user(&r.user), "content": r.content, "created_at": github_stamp(s.clock)})
                })
                .collect();
            paged(req, list)
        }
        ("POST", ["repos", o, r, "issues", n, "reactions"]) => {
            let name = format!("{o}/{r}");
            let number: u64 = n.parse().ok()?;
            s.repos.get(&name)?.issues.get(&number)?;
            react(s, format!("issue {number}"), body)
        }
        ("POST", ["repos", o, r, "issues", "comments", id, "reactions"]) => {
            let name = format!("{o}/{r}");
            let id: u64 = id.parse().ok()?;
            if !issue_comment_exists(s.repos.get(&name)?, id) {
                return Some(Reply::json(404, json!({"message": "Not Found"})));
            }
            react(s, format!("comment {id}"), body)
        }
        ("POST", ["repos", o, r, "pulls", "comments", id, "reactions"]) => {
            let name = format!("{o}/{r}");
            let id: u64 = id.parse().ok()?;
            let exists = s
                .repos
                .get(&name)?
                .issues
                .values()
                .any(|i| i.reviews.iter().any(|v| v.id == id && v.line.is_some()));
            if !exists {
                return Some(Reply::json(404, json!({"message": "Not Found"})));
            }
            react(s, format!("review comment {id}"), body)
        }
        _ => return None,
    })
}

/// GitHub's reaction contents (`POST …/reactions`, `content` enum).
const CONTENTS: [&str; 8] = [
    "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes",
];

/// Places `body.content` on `on` as forgehand's account: 201, or 200 with
/// the reaction that was there already.
fn react(s: &mut State, on: String, body: &Value) -> Reply {
    let Some(content) = body
        .get("content")
        .and_then(Value::as_str)
        .filter(|c| CONTENTS.contains(c))
    else {
        return Reply::json(
            422,
            json!({"message": "Validation Failed", "errors": [{"resource": "Reaction", "field": "content", "code": "invalid"}]}),
        );
    };
    let reaction = Reaction {
        on,
        content: content.to_owned(),
        user: BOT.to_owned(),
    };
    let existing = s.reactions.iter().position(|r| *r == reaction);
    let (status, id) = match existing {
        Some(at) => (200, at as u64 + 1),
        None => {
            s.reactions.push(reaction);
            (201, s.reactions.len() as u64)
        }
    };
    s.clock = tick(s.clock);
    Reply::json(
        status,
        json!({"id": id, "user": user(BOT), "content": content, "created_at": github_stamp(s.clock)}),
    )
}

/// Whether `repo` holds the issue comment `id`.
fn issue_comment_exists(repo: &super::Repo, id: u64) -> bool {
    repo.issues.values().any(|i| i.comments.iter().any(|c| c.0 == id))
}
