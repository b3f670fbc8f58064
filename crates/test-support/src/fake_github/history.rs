//! What the fake GitHub remembers of merged work: pull requests merged
//! with a merge commit that closed an issue (its `closed` event carries
//! the commit), the pull requests of a commit, and a pull request's files
//! with their patches, as GitHub's REST API answers them.

use super::{pull_json, FakeGitHub, State};
use crate::fake_http::{github_stamp, paged, tick, Reply};
use serde_json::{json, Value};
use wiremock::Request;

/// A file a merged pull request changed: (path, status, patch).
pub type PullFile = (String, String, String);

/// A pull request merged into its base.
#[derive(Debug, Clone)]
pub struct Merged {
    pub base_sha: String,
    pub merge_sha: String,
    pub files: Vec<PullFile>,
    pub merged_at: u64,
}

impl FakeGitHub {
    /// Merges pull request `pull` (made on `base_sha`, merged as
    /// `merge_sha`), which closes `issue` ("Fixes #N"): both close, the
    /// issue's `closed` event names the merge commit.
    pub fn merge_closing(
        &self,
        repo: &str,
        pull: u64,
        issue: u64,
        base_sha: &str,
        merge_sha: &str,
        files: &[(&str, &str, &str)],
    ) {
        self.with(|s| {
            s.clock = tick(s.clock);
            let clock = s.clock;
            let r = s.repos.get_mut(repo).unwrap();
            let merged_by = r.issues[&pull].user.clone();
            for number in [pull, issue] {
                let item = r.issues.get_mut(&number).unwrap();
                item.open = false;
                item.updated = clock;
            }
            r.issues
                .get_mut(&issue)
                .unwrap()
                .events
                .push(("closed".into(), merged_by, String::new(), clock));
            r.closed_by.insert(issue, merge_sha.to_owned());
            r.merged.insert(
                pull,
                Merged {
                    base_sha: base_sha.to_owned(),
                    merge_sha: merge_sha.to_owned(),
                    files: files
                        .iter()
                        .map(|(p, st, patch)| ((*p).to_owned(), (*st).to_owned(), (*patch).to_owned()))
                        .collect(),
                    merged_at: clock,
                },
            );
        });
    }

    /// Closes `issue` by hand (no commit, no pull request).
    pub fn close_issue(&self, repo: &str, issue: u64, by: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            let clock = s.clock;
            let item = s.repos.get_mut(repo).unwrap().issues.get_mut(&issue).unwrap();
            item.open = false;
            item.updated = clock;
            item.events
                .push(("closed".into(), by.into(), String::new(), clock));
        });
    }
}

/// The answer when `segs` is one of these routes.
pub(super) fn route(s: &mut State, req: &Request, segs: &[&str]) -> Option<Reply> {
    let method = req.method.as_str();
    Some(match (method, segs) {
        ("GET", ["repos", o, r, "commits", sha, "pulls"]) => {
            let name = format!("{o}/{r}");
            let repo = s.repos.get(&name)?;
            let list: Vec<Value> = repo
                .merged
                .iter()
                .filter(|(_, m)| m.merge_sha == *sha)
                .filter_map(|(number, m)| {
                    let pull = repo.pulls.get(number)?;
                    let mut v = pull_json(&name, pull, false);
                    v["merged_at"] = json!(github_stamp(m.merged_at));
                    v["merge_commit_sha"] = json!(m.merge_sha);
                    v["base"]["sha"] = json!(m.base_sha);
                    Some(v)
                })
                .collect();
            paged(req, list)
        }
        ("GET", ["repos", o, r, "pulls", n, "files"]) => {
            let name = format!("{o}/{r}");
            let number: u64 = n.parse().ok()?;
            let merged = s.repos.get(&name)?.merged.get(&number)?;
            let list = merged
                .files
                .iter()
                .map(|(path, status, patch)| {
                    let lines = patch.lines().count() as u64;
                    json!({
                        "sha": "0000000000000000000000000000000000000000",
                        "filename": path,
                        "status": status,
                        "additions": lines,
                        "deletions": 0,
                        "changes": lines,
                        "blob_url": format!("https://github.example/{name}/blob/{}/{path}", merged.merge_sha),
                        "raw_url": format!("https://github.example/{name}/raw/{}/{path}", merged.merge_sha),
                        "contents_url": format!("https://github.example/{name}/contents/{path}"),
                        "patch": patch,
                    })
                })
                .collect();
            paged(req, list)
        }
        _ => return None,
    })
}
