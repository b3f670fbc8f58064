//! The JSON shapes the fake GitHub answers and delivers with (a user, an
//! issue, a pull request, a review or review comment), shared by its
//! routes and its webhook deliveries.

use super::{FakeReview, Issue, Pull};
use crate::fake_http::github_stamp;
use serde_json::{json, Value};

pub(super) fn user(login: &str) -> Value {
    json!({ "login": login, "id": login.len() as u64 * 7919, "type": "User",
            "html_url": format!("https://github.example/{login}") })
}

pub(super) fn review_json(v: &FakeReview, as_review: bool) -> Option<Value> {
    if as_review {
        let body = if v.line.is_some() { "" } else { v.body.as_str() };
        let mut review = json!({"id": v.id, "user": user(&v.author), "body": body, "state": v.state});
        // GitHub gives a pending review no submission time.
        if v.state != "PENDING" {
            review["submitted_at"] = json!(github_stamp(v.clock));
        }
        return Some(review);
    }
    let (path, line) = v.line.as_ref()?;
    let mut comment = json!({
        "id": v.id,
        "pull_request_review_id": v.id,
        "user": user(&v.author),
        "body": v.body,
        "path": path,
        "line": line,
        "original_line": line,
        "side": "RIGHT",
        "created_at": github_stamp(v.clock),
    });
    if let Some(first) = v.in_reply_to {
        comment["in_reply_to_id"] = json!(first);
    }
    Some(comment)
}

pub(super) fn issue_json(base: &str, repo: &str, i: &Issue) -> Value {
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
        "updated_at": github_stamp(i.updated),
    });
    if !i.open {
        v["closed_at"] = json!(github_stamp(i.updated));
    }
    if i.is_pr {
        v["pull_request"] = json!({ "url": format!("{base}/repos/{repo}/pulls/{}", i.number) });
    }
    v
}

pub(super) fn pull_json(repo: &str, p: &Pull, open: bool) -> Value {
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
