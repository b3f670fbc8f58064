//! What GitLab refuses when a merge request is opened (`POST
//! /projects/:id/merge_requests`), in its words, where the fake knows the
//! project's bare repository ([`FakeGitLab::set_repository`]):
//! - the same branch as source and target: `422` with `{"message":
//!   ["You can't use same project/branch for source and target"]}`
//!   (`validate_branches`, NARKOZ/gitlab#145);
//! - a branch the repository lacks: `400` with `{"message":
//!   {"source_branch": ["does not exist"]}}` (or `target_branch`;
//!   yaoyuannnn/gerritlab#87);
//! - an open merge request from the same source branch: `409` with
//!   `{"message": ["Another open merge request already exists for this
//!   source branch: !IID"]}`.

use super::{item_json, not_found, FakeGitLab, Item, Project, State, BOT};
use crate::fake_http::{tick, Reply};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use wiremock::Request;

impl FakeGitLab {
    /// `bare` is the repository behind `project`: merge requests between
    /// branches it lacks are refused.
    pub fn set_repository(&self, project: &str, bare: PathBuf) {
        self.with(|s| s.projects.get_mut(project).expect("a project").bare = Some(bare));
    }
}

fn has_branch(bare: &Path, name: &str) -> bool {
    std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(["rev-parse", "--verify", "-q", &format!("refs/heads/{name}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// GitLab's refusal of a merge request from `source` onto `target`, if any.
pub(super) fn refusal(p: &Project, source: &str, target: &str) -> Option<Reply> {
    if source == target {
        return Some(Reply::json(
            422,
            json!({"message": ["You can't use same project/branch for source and target"]}),
        ));
    }
    if let Some(bare) = &p.bare {
        for (field, branch) in [("source_branch", source), ("target_branch", target)] {
            if !has_branch(bare, branch) {
                return Some(Reply::json(400, json!({"message": {field: ["does not exist"]}})));
            }
        }
    }
    let open = p
        .merge_requests
        .values()
        .find(|m| m.open && m.source_branch == source)?;
    Some(Reply::json(
        409,
        json!({"message": [format!("Another open merge request already exists for this source branch: !{}", open.iid)]}),
    ))
}

/// The answer to `POST /projects/:id/merge_requests`, if the request is one.
pub(super) fn route(s: &mut State, req: &Request, base: &str, segs: &[&str], body: &Value) -> Option<Reply> {
    match (req.method.as_str(), segs) {
        ("POST", ["projects", path, "merge_requests"]) => Some(open(s, base, path, body)),
        _ => None,
    }
}

/// `POST /projects/:id/merge_requests`: opened, or refused as GitLab does.
fn open(s: &mut State, base: &str, path: &str, body: &Value) -> Reply {
    let field = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (source, target, title) = (field("source_branch"), field("target_branch"), field("title"));
    if source.is_empty() || target.is_empty() || title.is_empty() {
        return Reply::json(
            400,
            json!({"message": "400 Bad request - source_branch, target_branch, title are missing"}),
        );
    }
    s.clock = tick(s.clock);
    let clock = s.clock;
    let Some(p) = s.projects.get_mut(path) else {
        return not_found("Project");
    };
    if let Some(refusal) = refusal(p, &source, &target) {
        return refusal;
    }
    let iid = p.merge_requests.keys().max().copied().unwrap_or(0) + 1;
    p.merge_requests.insert(
        iid,
        Item {
            iid,
            title,
            description: field("description"),
            author: BOT.into(),
            labels: vec![],
            open: true,
            notes: vec![],
            label_events: vec![],
            updated: clock,
            source_branch: source,
            target_branch: target,
        },
    );
    let p = &s.projects[path];
    Reply::json(201, item_json(s, base, path, p, &p.merge_requests[&iid], true))
}
