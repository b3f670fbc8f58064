//! The fake GitHub's state changed as GitHub changes it (labels,
//! comments, reviews, each with the webhook GitHub sends for it), the
//! lookups the routes share, and GitHub's plain answers.

use super::json::{issue_json, pull_json, review_json, user};
use super::{FakeReview, Issue, State};
use crate::fake_http::{github_stamp, tick, Reply};
use serde_json::{json, Value};

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
        "created_at": github_stamp(clock), "updated_at": github_stamp(clock)});
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

/// GitHub's 404.
pub(super) fn not_found() -> Reply {
    Reply::json(404, json!({"message": "Not Found"}))
}

/// GitHub's 200 with `v`.
pub(super) fn ok(v: Value) -> Reply {
    Reply::json(200, v)
}
