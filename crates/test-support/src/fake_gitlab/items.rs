//! The fake GitLab's issues and merge requests: listings, one item, its
//! labels (`add_labels`/`remove_labels`), its label events and its notes.

use super::{
    edit_labels, item_in, item_in_mut, item_json, listing, not_found, note_json, user_json, Item, Note,
    State, BOT,
};
use crate::fake_http::{paged, query, stamp, tick, Reply};
use serde_json::{json, Value};
use std::collections::HashMap;
use wiremock::Request;

/// The answer to a request on an issue or merge request, if it is one.
pub(super) fn route(s: &mut State, req: &Request, base: &str, segs: &[&str], body: &Value) -> Option<Reply> {
    let q = query(req);
    let kinds = |kind: &str| matches!(kind, "issues" | "merge_requests");
    Some(match (req.method.as_str(), segs) {
        ("GET", ["projects", path, kind]) if kinds(kind) => list(s, req, (base, path, kind), &q),
        ("POST", ["projects", path, "issues"]) => create(s, base, path, body),
        ("GET", ["projects", path, kind, iid]) if kinds(kind) => one(s, (base, path, kind), iid),
        ("PUT", ["projects", path, kind, iid]) if kinds(kind) => relabel(s, (base, path, kind), iid, body),
        ("GET", ["projects", path, kind, iid, "resource_label_events"]) if kinds(kind) => {
            label_events(s, req, (path, kind), iid)
        }
        ("GET", ["projects", path, kind, iid, "notes"]) if kinds(kind) => {
            notes(s, req, (path, kind), iid, &q)
        }
        ("POST", ["projects", path, kind, iid, "notes"]) if kinds(kind) => {
            add_note(s, (path, kind), iid, body)
        }
        ("PUT", ["projects", path, kind, iid, "notes", id]) if kinds(kind) => {
            edit_note(s, (path, kind), (iid, id), body)
        }
        _ => return None,
    })
}

/// The project's issues or merge requests, filtered and ordered as asked.
fn list(
    s: &State,
    req: &Request,
    (base, path, kind): (&str, &str, &str),
    q: &HashMap<String, String>,
) -> Reply {
    let Some(p) = s.projects.get(path) else {
        return not_found("Project");
    };
    let mr = kind == "merge_requests";
    let items = if mr { &p.merge_requests } else { &p.issues };
    let state = q.get("state").cloned().unwrap_or_else(|| "all".into());
    let wanted: Vec<&str> = q
        .get("labels")
        .map(|l| l.split(',').collect())
        .unwrap_or_default();
    let after = match listing::updated_after(q) {
        Ok(after) => after,
        Err(refusal) => return refusal,
    };
    let source = q.get("source_branch").cloned();
    let author = q.get("author_username").cloned();
    let mut list: Vec<&Item> = items
        .values()
        .filter(|i| state == "all" || (state == "opened") == i.open)
        .filter(|i| wanted.iter().all(|w| i.labels.iter().any(|l| l == w)))
        .filter(|i| i.updated >= after)
        .filter(|i| source.as_ref().is_none_or(|b| &i.source_branch == b))
        .filter(|i| author.as_ref().is_none_or(|a| &i.author == a))
        .collect();
    if let Err(refusal) = listing::order_items(&mut list, q) {
        return refusal;
    }
    let values = list.iter().map(|i| item_json(s, base, path, p, i, mr)).collect();
    paged(req, values)
}

/// `POST /projects/:id/issues` ("New issue"): the bot opens an issue with
/// its labels (a comma-separated string or an array); 201 with the issue.
fn create(s: &mut State, base: &str, path: &str, body: &Value) -> Reply {
    if !s.projects.contains_key(path) {
        return not_found("Project");
    }
    let text = |key: &str| {
        body.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let labels: Vec<String> = match body.get("labels") {
        Some(Value::String(list)) => list
            .split(',')
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let iid = insert_issue(s, path, BOT, &text("title"), &text("description"));
    s.clock = tick(s.clock);
    let clock = s.clock;
    if let Some(item) = s.projects.get_mut(path).and_then(|p| p.issues.get_mut(&iid)) {
        edit_labels(item, &labels, &[], BOT, clock);
    }
    let p = &s.projects[path];
    Reply::json(201, item_json(s, base, path, p, &p.issues[&iid], false))
}

/// A new open issue of `project` by `author`; its iid.
pub(super) fn insert_issue(
    s: &mut State,
    project: &str,
    author: &str,
    title: &str,
    description: &str,
) -> u64 {
    if !s.users.iter().any(|u| u == author) {
        s.users.push(author.to_owned());
    }
    s.clock = tick(s.clock);
    let clock = s.clock;
    let Some(p) = s.projects.get_mut(project) else {
        return 0;
    };
    let iid = p.issues.keys().max().copied().unwrap_or(0) + 1;
    p.issues.insert(
        iid,
        Item {
            iid,
            title: title.into(),
            description: description.into(),
            author: author.into(),
            labels: vec![],
            open: true,
            notes: vec![],
            label_events: vec![],
            updated: clock,
            source_branch: String::new(),
            target_branch: String::new(),
        },
    );
    iid
}

/// One issue or merge request.
fn one(s: &State, (base, path, kind): (&str, &str, &str), iid: &str) -> Reply {
    let Some(p) = s.projects.get(path) else {
        return not_found("Project");
    };
    let mr = kind == "merge_requests";
    let items = if mr { &p.merge_requests } else { &p.issues };
    match items.get(&iid.parse().unwrap_or(0)) {
        Some(i) => Reply::json(200, item_json(s, base, path, p, i, mr)),
        None => not_found("Issue"),
    }
}

/// `PUT` with `add_labels`/`remove_labels`.
fn relabel(s: &mut State, (base, path, kind): (&str, &str, &str), iid: &str, body: &Value) -> Reply {
    let split = |key: &str| -> Vec<String> {
        body.get(key)
            .and_then(Value::as_str)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (add, remove) = (split("add_labels"), split("remove_labels"));
    s.clock = tick(s.clock);
    let clock = s.clock;
    let mr = kind == "merge_requests";
    let Some(p) = s.projects.get_mut(path) else {
        return not_found("Project");
    };
    let items = if mr { &mut p.merge_requests } else { &mut p.issues };
    let Some(item) = items.get_mut(&iid.parse().unwrap_or(0)) else {
        return not_found("Issue");
    };
    edit_labels(item, &add, &remove, BOT, clock);
    let p = &s.projects[path];
    let items = if mr { &p.merge_requests } else { &p.issues };
    Reply::json(
        200,
        item_json(s, base, path, p, &items[&iid.parse().unwrap_or(0)], mr),
    )
}

/// The item's resource label events.
fn label_events(s: &State, req: &Request, (path, kind): (&str, &str), iid: &str) -> Reply {
    let Some(item) = item_in(s, path, kind, iid) else {
        return not_found("Issue");
    };
    let list = item
            .label_events
            .iter()
            .enumerate()
            .map(|(k, (action, user, label, at))| json!({"id": k + 1, "action": action, "user": user_json(s, user), "label": {"id": 1, "name": label}, "created_at": stamp(*at)}))
            .collect();
    paged(req, list)
}

/// The item's notes, ordered as asked.
fn notes(
    s: &State,
    req: &Request,
    (path, kind): (&str, &str),
    iid: &str,
    q: &HashMap<String, String>,
) -> Reply {
    let Some(item) = item_in(s, path, kind, iid) else {
        return not_found("Issue");
    };
    match listing::notes(s, item, q) {
        Ok(list) => paged(req, list),
        Err(refusal) => refusal,
    }
}

/// A new note by the bot.
fn add_note(s: &mut State, (path, kind): (&str, &str), iid: &str, body: &Value) -> Reply {
    let Some(text) = body.get("body").and_then(Value::as_str).map(str::to_owned) else {
        return Reply::json(400, json!({"message": "400 Bad request - body is missing"}));
    };
    s.next_id += 1;
    s.clock = tick(s.clock);
    let (id, clock) = (s.next_id, s.clock);
    let Some(item) = item_in_mut(s, path, kind, iid) else {
        return not_found("Issue");
    };
    let note = Note {
        id,
        author: BOT.into(),
        body: text,
        system: false,
        created: clock,
        updated: clock,
        thread: None,
    };
    item.notes.push(note.clone());
    item.updated = clock;
    Reply::json(201, note_json(s, &note))
}

/// The bot edits its own note (another's, or a system note: 403).
fn edit_note(s: &mut State, (path, kind): (&str, &str), (iid, id): (&str, &str), body: &Value) -> Reply {
    let text = body
        .get("body")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let id: u64 = id.parse().unwrap_or(0);
    s.clock = tick(s.clock);
    let clock = s.clock;
    let Some(item) = item_in_mut(s, path, kind, iid) else {
        return not_found("Issue");
    };
    let Some(note) = item.notes.iter_mut().find(|n| n.id == id) else {
        return not_found("Note");
    };
    if note.author != BOT || note.system {
        return Reply::json(403, json!({"message": "403 Forbidden"}));
    }
    note.body = text;
    note.updated = clock;
    let note = note.clone();
    Reply::json(200, note_json(s, &note))
}
