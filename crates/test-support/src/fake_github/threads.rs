//! A pull request's review threads, as GitHub keeps them: each inline
//! comment that answers none opens a thread; replies (`POST
//! …/pulls/N/comments/ID/replies`) join it; GraphQL lists the threads
//! (`reviewThreads`) and resolves one (`resolveReviewThread`).

use super::json::review_json;
use super::{FakeReview, State, BOT};
use crate::fake_http::{tick, Reply};
use serde_json::{json, Value};

/// The answer when the request is one of these routes.
pub(super) fn route(s: &mut State, segs: &[&str], body: &Value) -> Option<Reply> {
    match segs {
        ["graphql"] => {
            let query = body["query"].as_str().unwrap_or("");
            if query.contains("resolveReviewThread") {
                Some(resolve(s, body["variables"]["thread"].as_str().unwrap_or("")))
            } else if query.contains("reviewThreads") {
                Some(list(s, &body["variables"]))
            } else {
                None
            }
        }
        ["repos", o, r, "pulls", n, "comments", id, "replies"] => {
            let name = format!("{o}/{r}");
            Some(reply(s, &name, n.parse().ok()?, id.parse().ok()?, body))
        }
        _ => None,
    }
}

fn list(s: &State, vars: &Value) -> Reply {
    let name = format!(
        "{}/{}",
        vars["owner"].as_str().unwrap_or(""),
        vars["name"].as_str().unwrap_or("")
    );
    let number = vars["number"].as_u64().unwrap_or(0);
    let Some(pull) = s
        .repos
        .get(&name)
        .and_then(|r| r.issues.get(&number))
        .filter(|i| i.is_pr)
    else {
        return Reply::json(
            200,
            json!({"data": {"repository": {"pullRequest": null}}, "errors": [{"type": "NOT_FOUND", "message": format!("Could not resolve to a PullRequest with the number of {number}.")}]}),
        );
    };
    let threads: Vec<Value> = pull
        .reviews
        .iter()
        .filter(|r| r.line.is_some() && r.in_reply_to.is_none())
        .map(|root| {
            let (path, line) = root.line.clone().unwrap_or_default();
            let comments: Vec<Value> = pull
                .reviews
                .iter()
                .filter(|r| r.id == root.id || r.in_reply_to == Some(root.id))
                .map(|c| {
                    json!({"databaseId": c.id, "body": c.body, "createdAt": crate::fake_http::github_stamp(c.clock), "author": {"login": c.author}})
                })
                .collect();
            json!({"id": thread_id(root.id), "isResolved": root.resolved, "path": path, "line": line, "comments": {"nodes": comments}})
        })
        .collect();
    Reply::json(
        200,
        json!({"data": {"repository": {"pullRequest": {"reviewThreads": {"nodes": threads}}}}}),
    )
}

fn thread_id(root: u64) -> String {
    format!("PRRT_kwDO{root}")
}

fn resolve(s: &mut State, thread: &str) -> Reply {
    let root = thread
        .strip_prefix("PRRT_kwDO")
        .and_then(|id| id.parse::<u64>().ok());
    let found = s
        .repos
        .values_mut()
        .flat_map(|r| r.issues.values_mut())
        .flat_map(|i| i.reviews.iter_mut())
        .find(|r| Some(r.id) == root && r.line.is_some());
    match found {
        Some(review) => {
            review.resolved = true;
            Reply::json(
                200,
                json!({"data": {"resolveReviewThread": {"thread": {"id": thread, "isResolved": true}}}}),
            )
        }
        None => Reply::json(
            200,
            json!({"data": {"resolveReviewThread": null}, "errors": [{"type": "NOT_FOUND", "message": format!("Could not resolve to a node with the global id of '{thread}'")}]}),
        ),
    }
}

fn reply(s: &mut State, name: &str, number: u64, first: u64, body: &Value) -> Reply {
    s.next_id += 1;
    s.clock = tick(s.clock);
    let (id, clock) = (s.next_id, s.clock);
    let Some(pull) = s.repos.get_mut(name).and_then(|r| r.issues.get_mut(&number)) else {
        return Reply::json(404, json!({"message": "Not Found"}));
    };
    let Some(root) = pull
        .reviews
        .iter()
        .find(|r| r.id == first && r.line.is_some())
        .cloned()
    else {
        return Reply::json(404, json!({"message": "Not Found"}));
    };
    let text = body["body"].as_str().unwrap_or("").to_owned();
    let comment = FakeReview {
        id,
        author: BOT.into(),
        body: text,
        state: "COMMENTED".into(),
        line: root.line.clone(),
        clock,
        in_reply_to: Some(root.id),
        resolved: false,
    };
    pull.reviews.push(comment.clone());
    pull.updated = clock;
    Reply::json(201, review_json(&comment, false).unwrap_or_default())
}
