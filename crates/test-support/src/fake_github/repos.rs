//! The fake GitHub's repositories: the token's repositories, one
//! repository, a collaborator's permission, and an item's `lastEditedAt`
//! over GraphQL (review threads: threads.rs).

use super::changes::{issue_in, not_found, ok};
use super::json::user;
use super::State;
use crate::fake_http::{github_stamp, paged, Reply};
use serde_json::{json, Value};
use wiremock::Request;

/// The answer to a request on repositories, if it is one.
pub(super) fn route(s: &State, req: &Request, segs: &[&str], body: &Value) -> Option<Reply> {
    Some(match (req.method.as_str(), segs) {
        ("POST", ["graphql"]) => last_edited(s, body),
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
        ("GET", ["repos", o, r, "collaborators", who, "permission"]) => {
            permission(s, &format!("{o}/{r}"), who)
        }
        _ => return None,
    })
}

/// GraphQL: an item's `lastEditedAt` (`null` for one the token may not see).
fn last_edited(s: &State, body: &Value) -> Reply {
    let vars = &body["variables"];
    let name = format!(
        "{}/{}",
        vars["owner"].as_str().unwrap_or(""),
        vars["name"].as_str().unwrap_or("")
    );
    let number = vars["number"].as_u64().unwrap_or(0).to_string();
    match issue_in(s, &name, &number) {
        // GitHub answers null for a node the token may not see.
        Some(_) if s.graphql_hides_items => ok(json!({"data": {"repository": {"issueOrPullRequest": null}}})),
        Some(i) => ok(
            json!({"data": {"repository": {"issueOrPullRequest": {"lastEditedAt": i.edited.map(github_stamp)}}}}),
        ),
        None => ok(
            json!({"data": {"repository": null}, "errors": [{"type": "NOT_FOUND", "message": format!("Could not resolve to a Repository with the name '{name}'.")}]}),
        ),
    }
}

/// A collaborator's permission, with the legacy name GitHub also gives.
fn permission(s: &State, name: &str, who: &str) -> Reply {
    let Some(repo) = s.repos.get(name) else {
        return not_found();
    };
    let permission = repo
        .permissions
        .get(who)
        .cloned()
        .unwrap_or_else(|| "read".into());
    let legacy = match permission.as_str() {
        "maintain" => "write",
        "triage" => "read",
        p => p,
    };
    ok(json!({"permission": legacy, "role_name": permission, "user": user(who)}))
}
