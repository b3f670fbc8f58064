//! The fake GitLab's conversation-wide routes: a project's comment events
//! (where forgehand looks for mentions) and award emoji.

use super::{item_in, note_json, user_json, State, BOT};
use crate::fake_http::{paged, parse_time, query, stamp, tick, Reply};
use serde_json::{json, Value};
use wiremock::Request;

/// An emoji awarded: on what (`issue 4`, `note 12`), which, by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Award {
    pub on: String,
    pub name: String,
    pub user: String,
}

/// The answer when `segs` is one of these routes.
pub(super) fn route(s: &mut State, req: &Request, segs: &[&str], body: &Value) -> Option<Reply> {
    Some(match (req.method.as_str(), segs) {
        ("GET", ["projects", path, "events"]) => {
            let q = query(req);
            if q.get("action").map(String::as_str) != Some("commented") {
                return Some(paged(req, Vec::new()));
            }
            // `after`: events created after that day (the day itself excluded).
            let after = match q.get("after").map(|day| parse_time(day)) {
                // A day (YYYY-MM-DD): its last millisecond, read as a time.
                Some(Some(midnight)) => midnight + 86_400_000 - 1,
                Some(None) => return Some(Reply::json(400, json!({"error": "after is invalid"}))),
                None => 0,
            };
            let p = s.projects.get(*path)?;
            let mut events: Vec<(u64, Value)> = Vec::new();
            for (kind, items) in [("Issue", &p.issues), ("MergeRequest", &p.merge_requests)] {
                for item in items.values() {
                    for note in item.notes.iter().filter(|n| n.created > after) {
                        let mut json_note = note_json(s, note);
                        json_note["noteable_type"] = json!(kind);
                        json_note["noteable_iid"] = json!(item.iid);
                        events.push((
                            note.created,
                            json!({
                                "id": note.id,
                                "project_id": p.id,
                                "action_name": "commented on",
                                "target_id": note.id,
                                "target_type": "Note",
                                "author": user_json(s, &note.author),
                                "author_username": note.author,
                                "created_at": stamp(note.created),
                                "note": json_note,
                            }),
                        ));
                    }
                }
            }
            events.sort_by_key(|(at, _)| *at);
            paged(req, events.into_iter().map(|(_, e)| e).collect())
        }
        ("POST", ["projects", path, kind @ ("issues" | "merge_requests"), iid, "award_emoji"]) => {
            item_in(s, path, kind, iid)?;
            award(s, format!("{} {iid}", kind.trim_end_matches('s')), body)
        }
        (
            "GET",
            ["projects", path, kind @ ("issues" | "merge_requests"), iid, "notes", id, "award_emoji"],
        ) => {
            // "List a comment's emoji reactions".
            let item = item_in(s, path, kind, iid)?;
            let id: u64 = id.parse().ok()?;
            if !item.notes.iter().any(|n| n.id == id) {
                return Some(Reply::json(404, json!({"message": "404 Note Not Found"})));
            }
            let on = format!("note {id}");
            let list: Vec<Value> = s
                .awards
                .iter()
                .enumerate()
                .filter(|(_, a)| a.on == on)
                .map(|(at, a)| {
                    json!({"id": at + 1, "name": a.name, "user": user_json(s, &a.user), "created_at": stamp(s.clock), "updated_at": stamp(s.clock), "awardable_id": id, "awardable_type": "Note"})
                })
                .collect();
            paged(req, list)
        }
        (
            "POST",
            ["projects", path, kind @ ("issues" | "merge_requests"), iid, "notes", id, "award_emoji"],
        ) => {
            let item = item_in(s, path, kind, iid)?;
            let id: u64 = id.parse().ok()?;
            if !item.notes.iter().any(|n| n.id == id) {
                return Some(Reply::json(404, json!({"message": "404 Note Not Found"})));
            }
            award(s, format!("note {id}"), body)
        }
        _ => return None,
    })
}

/// Awards `body.name` as forgehand's account; GitLab refuses an emoji the
/// user awarded already.
fn award(s: &mut State, on: String, body: &Value) -> Reply {
    let Some(name) = body.get("name").and_then(Value::as_str) else {
        return Reply::json(400, json!({"message": "400 Bad request - name is missing"}));
    };
    let award = Award {
        on,
        name: name.to_owned(),
        user: BOT.to_owned(),
    };
    if s.awards.contains(&award) {
        return Reply::json(
            404,
            json!({"message": "404 Award Emoji Name has already been taken Not Found"}),
        );
    }
    s.awards.push(award);
    s.clock = tick(s.clock);
    Reply::json(
        201,
        json!({"id": s.awards.len(), "name": name, "user": user_json(s, BOT), "created_at": stamp(s.clock), "updated_at": stamp(s.clock)}),
    )
}
