//! Opening a pull request (`POST /repos/{o}/{r}/pulls`), refused as GitHub
//! refuses it: `422 Validation Failed` with GitHub's `errors` entries, word
//! for word as GitHub sends them (and as integrators quote them):
//! - no title (and no `issue` to take it from):
//!   `{"resource":"Issue","code":"missing_field","field":"title"}`
//!   (github/docs#15498, google/go-github#296: the resource is `Issue`);
//! - a base branch the repository does not have:
//!   `{"resource":"PullRequest","field":"base","code":"invalid"}`
//!   (iterative/cml#619, github/github-mcp-server#477);
//! - a head branch it does not have:
//!   `{"resource":"PullRequest","field":"head","code":"invalid"}`
//!   (peter-evans/create-pull-request#1763);
//! - an open pull request from the same head: `{"resource":"PullRequest",
//!   "code":"custom","message":"A pull request already exists for OWNER:BRANCH."}`
//!   (vsoch/pull-request-action#86);
//! - a head with no commits beyond the base: `{"resource":"PullRequest",
//!   "code":"custom","message":"No commits between BASE and HEAD"}`
//!   (peter-evans/create-pull-request#2105, Cloudflare-Studio/ask-bonk#90);
//! - a draft where drafts are not supported (SWE-agent/SWE-agent#179).

use super::changes::{issue_in, not_found, ok};
use super::json::{pull_json, review_json};
use super::listing::{arrange, Entry, Sorting};
use super::{Issue, Pull, Repo, State, BOT};
use crate::fake_http::{paged, query, tick, Reply};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use wiremock::Request;

/// Where GitHub's answers to this endpoint point.
const DOCS: &str = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request";

/// GitHub's `422 Validation Failed` with `errors`.
fn validation_failed(errors: Vec<Value>) -> Reply {
    Reply::json(
        422,
        json!({"message": "Validation Failed", "errors": errors, "documentation_url": DOCS}),
    )
}

fn invalid(field: &str) -> Value {
    json!({"resource": "PullRequest", "field": field, "code": "invalid"})
}

fn custom(message: String) -> Value {
    json!({"resource": "PullRequest", "code": "custom", "message": message})
}

/// Whether the bare repository has branch `name`.
fn has_branch(bare: &Path, name: &str) -> bool {
    !name.is_empty()
        && std::process::Command::new("git")
            .arg("--git-dir")
            .arg(bare)
            .args(["rev-parse", "--verify", "-q", &format!("refs/heads/{name}")])
            .output()
            .is_ok_and(|o| o.status.success())
}

/// Whether `head` has commits that `base` does not.
fn has_new_commits(bare: &Path, base: &str, head: &str) -> bool {
    std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args([
            "rev-list",
            "--count",
            &format!("refs/heads/{base}..refs/heads/{head}"),
        ])
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<u64>().ok())
        .is_some_and(|n| n > 0)
}

/// The head branch `head` names in repository `owner/...`: `BRANCH` or
/// `OWNER:BRANCH` (another owner's is a fork the fake does not have).
fn head_branch<'a>(owner: &str, head: &'a str) -> Option<&'a str> {
    match head.split_once(':') {
        Some((who, branch)) if who == owner => Some(branch),
        Some(_) => None,
        None => Some(head),
    }
}

/// What was asked: title, head branch, base branch, body, draft.
struct Asked {
    title: String,
    head: String,
    base: String,
    body: String,
    draft: bool,
}

/// The request's refusal, if GitHub would refuse it, else what it asks.
fn validate(repo: &Repo, owner: &str, body: &Value) -> Result<Asked, Reply> {
    let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or_default();
    let from_issue = body
        .get("issue")
        .and_then(Value::as_u64)
        .and_then(|n| repo.issues.get(&n));
    let title = match (text("title"), from_issue) {
        ("", Some(issue)) => issue.title.clone(),
        (title, _) => title.to_owned(),
    };
    let head = head_branch(owner, text("head")).unwrap_or_default().to_owned();
    let base = text("base").to_owned();
    let mut errors = Vec::new();
    if title.trim().is_empty() {
        errors.push(json!({"resource": "Issue", "code": "missing_field", "field": "title"}));
    }
    // Without its bare repository the fake cannot tell which branches exist.
    if let Some(bare) = &repo.bare {
        if !has_branch(bare, &base) {
            errors.push(invalid("base"));
        }
        if !has_branch(bare, &head) {
            errors.push(invalid("head"));
        }
    }
    if !errors.is_empty() {
        return Err(validation_failed(errors));
    }
    if repo
        .pulls
        .values()
        .any(|p| p.head == head && repo.issues[&p.number].open)
    {
        return Err(validation_failed(vec![custom(format!(
            "A pull request already exists for {owner}:{head}."
        ))]));
    }
    if let Some(bare) = &repo.bare {
        if !has_new_commits(bare, &base, &head) {
            return Err(validation_failed(vec![custom(format!(
                "No commits between {base} and {head}"
            ))]));
        }
    }
    let draft = body.get("draft").and_then(Value::as_bool).unwrap_or(false);
    if repo.no_drafts && draft {
        // GitHub's answer, word for word (SWE-agent/SWE-agent#179).
        return Err(Reply::json(
            422,
            json!({"message": "Draft pull requests are not supported in this repository.", "documentation_url": DOCS}),
        ));
    }
    Ok(Asked {
        title,
        head,
        base,
        body: text("body").to_owned(),
        draft,
    })
}

/// `POST /repos/{owner}/{name}/pulls`: 201 with the pull request, or
/// GitHub's refusal.
fn create(s: &mut State, owner: &str, name: &str, body: &Value) -> Reply {
    let Some(repo) = s.repos.get(name) else {
        return Reply::json(404, json!({"message": "Not Found"}));
    };
    let asked = match validate(repo, owner, body) {
        Ok(asked) => asked,
        Err(refusal) => return refusal,
    };
    let number = repo.next_number();
    s.clock = tick(s.clock);
    let clock = s.clock;
    let pull = Pull {
        number,
        head: asked.head,
        base: asked.base,
        title: asked.title.clone(),
        body: asked.body.clone(),
        draft: asked.draft,
    };
    let Some(repo) = s.repos.get_mut(name) else {
        return Reply::json(404, json!({"message": "Not Found"}));
    };
    repo.issues.insert(
        number,
        Issue {
            number,
            title: asked.title,
            body: asked.body,
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
    let answer = pull_json(name, &pull, true);
    repo.pulls.insert(number, pull);
    let mut response = Reply::json(201, answer);
    response.delay = s.pull_delay;
    response
}

/// The answer to a request on pull requests, if it is one.
pub(super) fn route(s: &mut State, req: &Request, segs: &[&str], body: &Value) -> Option<Reply> {
    let q = query(req);
    Some(match (req.method.as_str(), segs) {
        ("GET", ["repos", o, r, "pulls", n, list @ ("reviews" | "comments")]) => {
            reviews(s, req, (&format!("{o}/{r}"), n), list, &q)
        }
        ("GET", ["repos", o, r, "pulls", n]) => one(s, &format!("{o}/{r}"), n),
        ("GET", ["repos", o, r, "pulls"]) => list(s, req, (o, &format!("{o}/{r}")), &q),
        ("POST", ["repos", o, r, "pulls"]) => create(s, o, &format!("{o}/{r}"), body),
        _ => return None,
    })
}

/// A pull request's reviews, or its review comments, ordered as GitHub documents.
fn reviews(
    s: &State,
    req: &Request,
    (name, n): (&str, &str),
    list: &str,
    q: &HashMap<String, String>,
) -> Reply {
    let Some(i) = issue_in(s, name, n).filter(|i| i.is_pr) else {
        return not_found();
    };
    let reviews = list == "reviews";
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
    match arrange(q, items, sorting, docs) {
        Ok(list) => paged(req, list),
        Err(refusal) => refusal,
    }
}

/// One pull request.
fn one(s: &State, name: &str, n: &str) -> Reply {
    let number: u64 = n.parse().unwrap_or(0);
    let Some(repo) = s.repos.get(name) else {
        return not_found();
    };
    match repo.pulls.get(&number) {
        Some(p) => ok(pull_json(name, p, repo.issues[&number].open)),
        None => not_found(),
    }
}

/// The open pull requests (`head=OWNER:BRANCH`: from that branch).
fn list(s: &State, req: &Request, (o, name): (&str, &str), q: &HashMap<String, String>) -> Reply {
    let Some(repo) = s.repos.get(name) else {
        return not_found();
    };
    let head = q.get("head").cloned();
    let list = repo
        .pulls
        .values()
        .filter(|p| repo.issues[&p.number].open)
        .filter(|p| head.as_ref().is_none_or(|h| *h == format!("{o}:{}", p.head)))
        .map(|p| pull_json(name, p, true))
        .collect();
    paged(req, list)
}
