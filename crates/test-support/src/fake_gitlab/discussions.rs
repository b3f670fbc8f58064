//! A merge request's discussions, as GitLab keeps them: a diff note opens
//! a resolvable discussion on a line; replies join it
//! (`POST …/discussions/:id/notes`); `PUT …/discussions/:id` with
//! `resolved` resolves all its notes. Every other note is a discussion of
//! its own (`individual_note`).

use super::{item_in, item_in_mut, note_json, FakeGitLab, Note, State, BOT};
use crate::fake_http::{paged, tick, Reply};
use serde_json::{json, Value};
use wiremock::Request;

/// Where a diff note sits, and its discussion.
#[derive(Debug, Clone, Default)]
pub struct DiffThread {
    pub discussion: String,
    pub path: String,
    pub line: u64,
    pub resolved: bool,
}

/// A note's fields as a diff note (notes.md, discussions.md).
pub(super) fn describe(note: &mut Value, thread: &DiffThread) {
    note["type"] = json!("DiffNote");
    note["resolvable"] = json!(true);
    note["resolved"] = json!(thread.resolved);
    note["position"] = json!({
        "base_sha": "0".repeat(40),
        "start_sha": "0".repeat(40),
        "head_sha": "0".repeat(40),
        "old_path": thread.path,
        "new_path": thread.path,
        "position_type": "text",
        "old_line": null,
        "new_line": thread.line,
    });
}

/// A discussion's id: 40 hex digits, like GitLab's.
fn discussion_id(note: u64) -> String {
    format!("{note:040x}")
}

impl FakeGitLab {
    /// A diff note by `author` on `path` at `line` of merge request `iid`,
    /// opening a discussion.
    pub fn diff_note(&self, project: &str, iid: u64, author: &str, path: &str, line: u64, body: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            s.next_id += 1;
            let (clock, id) = (s.clock, s.next_id);
            let item = s
                .projects
                .get_mut(project)
                .unwrap()
                .merge_requests
                .get_mut(&iid)
                .unwrap();
            item.notes.push(Note {
                id,
                author: author.into(),
                body: body.into(),
                system: false,
                created: clock,
                updated: clock,
                thread: Some(DiffThread {
                    discussion: discussion_id(id),
                    path: path.into(),
                    line,
                    resolved: false,
                }),
            });
            item.updated = clock;
        });
    }

    /// `author`'s reply in the `discussion`-th diff discussion opened on
    /// merge request `iid` (0 is the first): a note that joins it, on the
    /// same line, as `POST …/discussions/:id/notes` makes it.
    pub fn discussion_reply(&self, project: &str, iid: u64, discussion: usize, author: &str, body: &str) {
        self.with(|s| {
            s.clock = tick(s.clock);
            s.next_id += 1;
            let (clock, id) = (s.clock, s.next_id);
            let item = s
                .projects
                .get_mut(project)
                .unwrap()
                .merge_requests
                .get_mut(&iid)
                .unwrap();
            let mut opened: Vec<DiffThread> = Vec::new();
            for thread in item.notes.iter().filter_map(|n| n.thread.clone()) {
                if !opened.iter().any(|t| t.discussion == thread.discussion) {
                    opened.push(thread);
                }
            }
            let thread = opened.into_iter().nth(discussion).expect("no such discussion");
            item.notes.push(Note {
                id,
                author: author.into(),
                body: body.into(),
                system: false,
                created: clock,
                updated: clock,
                thread: Some(thread),
            });
            item.updated = clock;
        });
    }

    /// The merge request's diff discussions as (first note's body,
    /// resolved, the replies' bodies), in the order they were opened.
    pub fn discussions(&self, project: &str, iid: u64) -> Vec<(String, bool, Vec<String>)> {
        let notes = self.with(|s| s.projects[project].merge_requests[&iid].notes.clone());
        let mut out: Vec<(String, String, bool, Vec<String>)> = Vec::new();
        for note in &notes {
            let Some(thread) = &note.thread else { continue };
            match out.iter_mut().find(|(id, ..)| *id == thread.discussion) {
                Some((_, _, _, replies)) => replies.push(note.body.clone()),
                None => out.push((
                    thread.discussion.clone(),
                    note.body.clone(),
                    thread.resolved,
                    Vec::new(),
                )),
            }
        }
        out.into_iter()
            .map(|(_, body, resolved, replies)| (body, resolved, replies))
            .collect()
    }
}

/// The answer when `segs` is one of these routes.
pub(super) fn route(s: &mut State, req: &Request, segs: &[&str], body: &Value) -> Option<Reply> {
    Some(match (req.method.as_str(), segs) {
        ("GET", ["projects", path, "merge_requests", iid, "discussions"]) => {
            let item = item_in(s, path, "merge_requests", iid)?;
            let mut list: Vec<(String, Vec<Value>)> = Vec::new();
            for note in &item.notes {
                let id = match &note.thread {
                    Some(thread) => thread.discussion.clone(),
                    None => discussion_id(note.id),
                };
                match list.iter_mut().find(|(d, _)| *d == id) {
                    Some((_, notes)) => notes.push(note_json(s, note)),
                    None => list.push((id, vec![note_json(s, note)])),
                }
            }
            let threads: Vec<Value> = list
                .into_iter()
                .map(|(id, notes)| {
                    let individual = notes.len() == 1 && notes[0].get("position").is_none();
                    json!({"id": id, "individual_note": individual, "notes": notes})
                })
                .collect();
            paged(req, threads)
        }
        ("POST", ["projects", path, "merge_requests", iid, "discussions", discussion, "notes"]) => {
            let text = body
                .get("body")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            s.clock = tick(s.clock);
            s.next_id += 1;
            let (clock, id) = (s.clock, s.next_id);
            let item = item_in_mut(s, path, "merge_requests", iid)?;
            let Some(thread) = item
                .notes
                .iter()
                .filter_map(|n| n.thread.clone())
                .find(|t| t.discussion == *discussion)
            else {
                return Some(Reply::json(404, json!({"message": "404 Discussion Not Found"})));
            };
            let note = Note {
                id,
                author: BOT.into(),
                body: text,
                system: false,
                created: clock,
                updated: clock,
                thread: Some(thread),
            };
            item.notes.push(note.clone());
            item.updated = clock;
            Reply::json(201, note_json(s, &note))
        }
        ("PUT", ["projects", path, "merge_requests", iid, "discussions", discussion]) => {
            let resolved = body.get("resolved").and_then(Value::as_bool).unwrap_or(false);
            let item = item_in_mut(s, path, "merge_requests", iid)?;
            let mut notes = Vec::new();
            for note in item.notes.iter_mut() {
                if let Some(thread) = note.thread.as_mut().filter(|t| t.discussion == *discussion) {
                    thread.resolved = resolved;
                    notes.push(note.clone());
                }
            }
            if notes.is_empty() {
                return Some(Reply::json(404, json!({"message": "404 Discussion Not Found"})));
            }
            let notes: Vec<Value> = notes.iter().map(|n| note_json(s, n)).collect();
            Reply::json(
                200,
                json!({"id": discussion, "individual_note": false, "notes": notes}),
            )
        }
        _ => return None,
    })
}
