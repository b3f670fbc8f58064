//! What the fake GitLab remembers of merged work: merge requests merged on
//! a base commit that closed issues (`issues/:iid/closed_by`), a merge
//! request's `diff_refs`, and its diffs, as GitLab's REST API answers them.

use super::{item_json, FakeGitLab, Item, State};
use crate::fake_http::{paged, stamp, tick, Reply};
use serde_json::{json, Value};
use wiremock::Request;

/// A merged merge request: its base, its files (path, `added` /
/// `modified` / `removed`, diff) and the issues it closed.
#[derive(Debug, Clone)]
pub struct MergedRequest {
    pub base_sha: String,
    pub files: Vec<(String, String, String)>,
    pub closes: Vec<u64>,
    pub merged_at: u64,
}

impl FakeGitLab {
    /// A merge request by `author` made on `base_sha` and merged, closing
    /// `issue`; its iid.
    pub fn merge_closing(
        &self,
        project: &str,
        author: &str,
        issue: u64,
        base_sha: &str,
        files: &[(&str, &str, &str)],
    ) -> u64 {
        self.with(|s| {
            s.clock = tick(s.clock);
            let clock = s.clock;
            let p = s.projects.get_mut(project).unwrap();
            let iid = p.merge_requests.keys().max().copied().unwrap_or(0) + 1;
            p.merge_requests.insert(
                iid,
                Item {
                    iid,
                    title: format!("Resolve #{issue}"),
                    description: format!("Closes #{issue}"),
                    author: author.into(),
                    labels: vec![],
                    open: false,
                    notes: vec![],
                    label_events: vec![],
                    updated: clock,
                    source_branch: format!("fix-{issue}"),
                    target_branch: "main".into(),
                },
            );
            let closed = p.issues.get_mut(&issue).unwrap();
            closed.open = false;
            closed.updated = clock;
            p.merged.insert(
                iid,
                MergedRequest {
                    base_sha: base_sha.to_owned(),
                    files: files
                        .iter()
                        .map(|(path, status, diff)| {
                            ((*path).to_owned(), (*status).to_owned(), (*diff).to_owned())
                        })
                        .collect(),
                    closes: vec![issue],
                    merged_at: clock,
                },
            );
            iid
        })
    }

    /// Closes `issue` by hand (no merge request).
    pub fn close_issue(&self, project: &str, issue: u64) {
        self.with(|s| {
            s.clock = tick(s.clock);
            let clock = s.clock;
            let item = s
                .projects
                .get_mut(project)
                .unwrap()
                .issues
                .get_mut(&issue)
                .unwrap();
            item.open = false;
            item.updated = clock;
        });
    }
}

/// A merged request as GitLab shows it.
fn merged_json(s: &State, base: &str, path: &str, iid: u64) -> Option<Value> {
    let p = s.projects.get(path)?;
    let (item, merged) = (p.merge_requests.get(&iid)?, p.merged.get(&iid)?);
    let mut v = item_json(s, base, path, p, item, true);
    v["state"] = json!("merged");
    v["merged_at"] = json!(stamp(merged.merged_at));
    v["diff_refs"] =
        json!({"base_sha": merged.base_sha, "head_sha": "0".repeat(40), "start_sha": merged.base_sha});
    Some(v)
}

/// The answer when `segs` is one of these routes.
pub(super) fn route(s: &mut State, req: &Request, base: &str, segs: &[&str]) -> Option<Reply> {
    if req.method.as_str() != "GET" {
        return None;
    }
    Some(match segs {
        ["projects", path, "issues", iid, "closed_by"] => {
            let issue: u64 = iid.parse().ok()?;
            let p = s.projects.get(*path)?;
            let list = p
                .merged
                .iter()
                .filter(|(_, m)| m.closes.contains(&issue))
                .filter_map(|(mr, _)| merged_json(s, base, path, *mr))
                .collect();
            paged(req, list)
        }
        ["projects", path, "merge_requests", iid] => {
            Reply::json(200, merged_json(s, base, path, iid.parse().ok()?)?)
        }
        ["projects", path, "merge_requests", iid, "diffs"] => {
            let merged = s.projects.get(*path)?.merged.get(&iid.parse().ok()?)?;
            let list = merged
                .files
                .iter()
                .map(|(file, status, diff)| {
                    json!({
                        "old_path": file, "new_path": file, "a_mode": "100644", "b_mode": "100644",
                        "diff": diff, "new_file": status == "added", "renamed_file": false,
                        "deleted_file": status == "removed", "generated_file": false,
                    })
                })
                .collect();
            paged(req, list)
        }
        _ => return None,
    })
}
