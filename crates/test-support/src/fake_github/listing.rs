//! How GitHub filters and orders a listing of comments: `since` ("only
//! results last updated at or after the given time", an ISO 8601
//! timestamp, compared as a time with the whole second GitHub keeps), and `sort` (`created` or `updated`) with
//! `direction` (`asc` or `desc`, ignored without `sort`) where the
//! endpoint takes them; without `sort`, oldest first ("ordered by
//! ascending ID"). An unreadable `since` is refused in GitHub's words
//! (lampepfl/bench#581 quotes the answer).

use crate::fake_http::{parse_time, whole_seconds, Reply};
use serde_json::{json, Value};
use std::collections::HashMap;

/// One item of a listing: when it was created and last updated (the
/// fakes' clock), its id, and its JSON.
pub(super) struct Entry {
    pub created: u64,
    pub updated: u64,
    pub id: u64,
    pub value: Value,
}

/// Whether the endpoint takes `sort` and `direction` (the comments of one
/// issue take only `since`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Sorting {
    SinceOnly,
    SortAndDirection,
}

/// GitHub's answer to a `since` it cannot read.
fn unreadable_since(docs: &str) -> Reply {
    Reply::json(
        422,
        json!({
            "message": "The since parameter needs to be in ISO 8601 format: YYYY-MM-DDTHH:MM:SSZ",
            "documentation_url": docs,
        }),
    )
}

/// The entries `q` asks for, in the order it asks; `docs` is where the
/// endpoint's documentation is, for a refusal.
pub(super) fn arrange(
    q: &HashMap<String, String>,
    mut entries: Vec<Entry>,
    sorting: Sorting,
    docs: &str,
) -> Result<Vec<Value>, Reply> {
    if let Some(since) = q.get("since") {
        let Some(since) = parse_time(since) else {
            return Err(unreadable_since(docs));
        };
        entries.retain(|e| whole_seconds(e.updated) >= since);
    }
    let sort = match sorting {
        Sorting::SortAndDirection => q.get("sort").map(String::as_str),
        Sorting::SinceOnly => None,
    };
    match sort {
        Some("updated") => entries.sort_by_key(|e| (e.updated, e.id)),
        _ => entries.sort_by_key(|e| (e.created, e.id)),
    }
    if sort.is_some() && q.get("direction").map(String::as_str) == Some("desc") {
        entries.reverse();
    }
    Ok(entries.into_iter().map(|e| e.value).collect())
}
