//! The fake GitLab's users, projects and members (`GET /user`, `/users`,
//! `/projects`, `/projects/:id`, `/projects/:id/members/all/:user_id`).

use super::{not_found, user_json, State, BOT};
use crate::fake_http::{paged, query, Reply};
use serde_json::json;
use std::collections::HashMap;
use wiremock::Request;

/// The answer to a request for users, projects or members, if it is one.
pub(super) fn route(s: &State, req: &Request, segs: &[&str]) -> Option<Reply> {
    let q = query(req);
    Some(match (req.method.as_str(), segs) {
        ("GET", ["user"]) => Reply::json(200, user_json(s, BOT)),
        ("GET", ["users"]) => users(s, req, &q),
        ("GET", ["projects"]) => projects(s, req, &q),
        // ":id: The ID or URL-encoded path of the project" (projects.md).
        ("GET", ["projects", id_or_path]) => project(s, id_or_path),
        ("GET", ["projects", path, "members", "all", uid]) => member(s, path, uid),
        _ => return None,
    })
}

/// `GET /users?username=`: the user, if there is one.
fn users(s: &State, req: &Request, q: &HashMap<String, String>) -> Reply {
    let name = q.get("username").cloned().unwrap_or_default();
    let list = if s.users.contains(&name) {
        vec![user_json(s, &name)]
    } else {
        vec![]
    };
    paged(req, list)
}

/// `GET /projects` (`membership=true`: the bot's).
fn projects(s: &State, req: &Request, q: &HashMap<String, String>) -> Reply {
    let list = s
            .projects
            .iter()
            .filter(|(_, p)| p.members.contains_key(BOT) || !q.contains_key("membership"))
            .map(|(path, p)| json!({"id": p.id, "path_with_namespace": path, "http_url_to_repo": p.clone_url, "default_branch": "main"}))
            .collect();
    paged(req, list)
}

/// `GET /projects/:id`, by id or path.
fn project(s: &State, id_or_path: &str) -> Reply {
    let found = match id_or_path.parse::<u64>() {
        Ok(id) => s.projects.iter().find(|(_, p)| p.id == id),
        Err(_) => s.projects.get_key_value(id_or_path),
    };
    match found {
        Some((path, p)) => Reply::json(
            200,
            json!({"id": p.id, "path_with_namespace": path, "http_url_to_repo": p.clone_url, "default_branch": "main"}),
        ),
        None => not_found("Project"),
    }
}

/// `GET /projects/:id/members/all/:user_id`: the access level.
fn member(s: &State, path: &str, uid: &str) -> Reply {
    let Some(p) = s.projects.get(path) else {
        return not_found("Project");
    };
    let uid: u64 = uid.parse().unwrap_or(0);
    let name = s
        .users
        .get((uid as usize).wrapping_sub(1))
        .cloned()
        .unwrap_or_default();
    match p.members.get(&name) {
        Some(level) => Reply::json(200, json!({"id": uid, "username": name, "access_level": level})),
        None => not_found("Member"),
    }
}
