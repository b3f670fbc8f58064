//! How GitLab filters and orders listings, as its REST docs say:
//! - notes (notes.md, "List project issue notes" and the merge request
//!   twin): `order_by` `created_at` (default) or `updated_at`, `sort`
//!   `asc` or `desc` (default `desc`);
//! - issues and merge requests (issues.md, merge_requests.md):
//!   `updated_after` "on or after the given time", ISO 8601, read as a
//!   time; `order_by` `created_at` (default), `updated_at` or `title`,
//!   `sort` `desc` by default.
//!
//! A value Grape (GitLab's API framework) cannot take is its `400` with
//! `{"error": "<param> is invalid"}` or `"... does not have a valid value"`.

use super::{note_json, Item, State};
use crate::fake_http::{parse_time, Reply};
use serde_json::{json, Value};
use std::collections::HashMap;

fn bad(message: String) -> Reply {
    Reply::json(400, json!({ "error": message }))
}

/// `param` when it is one of `allowed` (or absent: `default`).
fn choice<'a>(
    q: &'a HashMap<String, String>,
    param: &str,
    allowed: &[&str],
    default: &'a str,
) -> Result<&'a str, Reply> {
    match q.get(param) {
        None => Ok(default),
        Some(value) if allowed.contains(&value.as_str()) => Ok(value),
        Some(_) => Err(bad(format!("{param} does not have a valid value"))),
    }
}

/// An item's notes as `q` asks for them.
pub(super) fn notes(s: &State, item: &Item, q: &HashMap<String, String>) -> Result<Vec<Value>, Reply> {
    let order_by = choice(q, "order_by", &["created_at", "updated_at"], "created_at")?;
    let sort = choice(q, "sort", &["asc", "desc"], "desc")?;
    let mut notes: Vec<_> = item.notes.iter().collect();
    match order_by {
        "updated_at" => notes.sort_by_key(|n| (n.updated, n.id)),
        _ => notes.sort_by_key(|n| (n.created, n.id)),
    }
    if sort == "desc" {
        notes.reverse();
    }
    Ok(notes.into_iter().map(|n| note_json(s, n)).collect())
}

/// `updated_after`, read as a time (none: everything).
pub(super) fn updated_after(q: &HashMap<String, String>) -> Result<u64, Reply> {
    match q.get("updated_after") {
        None => Ok(0),
        Some(text) => parse_time(text).ok_or_else(|| bad("updated_after is invalid".into())),
    }
}

/// Orders issues or merge requests as `q` asks (iids follow creation).
pub(super) fn order_items(list: &mut [&Item], q: &HashMap<String, String>) -> Result<(), Reply> {
    let order_by = choice(
        q,
        "order_by",
        &["created_at", "updated_at", "title"],
        "created_at",
    )?;
    let sort = choice(q, "sort", &["asc", "desc"], "desc")?;
    match order_by {
        "updated_at" => list.sort_by_key(|i| (i.updated, i.iid)),
        "title" => list.sort_by(|a, b| (&a.title, a.iid).cmp(&(&b.title, b.iid))),
        _ => list.sort_by_key(|i| i.iid),
    }
    if sort == "desc" {
        list.reverse();
    }
    Ok(())
}
