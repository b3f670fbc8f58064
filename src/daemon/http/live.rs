//! `/tasks/ID/events`: a run in flight as server-sent events, for its
//! transcript page's script. A reader first gets the entries journalled
//! since the page was made (`?from=N`, or after the `Last-Event-ID` its
//! browser sends when it reconnects), then each event as it happens. A run
//! not in flight in this process answers 204, which tells a browser to
//! stop asking.

use super::{refuse, text, HttpState};
use crate::transcript::{Entry, LiveEvent};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;

pub(super) async fn transcript_events(
    State(state): State<Arc<HttpState>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = refuse(&state, &headers) {
        return refused;
    }
    let Ok(id) = id.parse::<i64>() else {
        return text(StatusCode::NOT_FOUND, format!("\"{id}\" is not a run id\n"));
    };
    let Some(follow) = state.live.follow(id) else {
        return StatusCode::NO_CONTENT.into_response();
    };
    let from = first_wanted(query.as_deref(), &headers);
    // Followed before the journal is read: an entry written meanwhile
    // comes twice (dropped below by its seq), never not at all.
    let journal = state.journal.clone();
    let written = match tokio::task::spawn_blocking(move || journal.entries_from(id, from)).await {
        Ok(Ok(rows)) => rows,
        Ok(Err(e)) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the journal: {e}\n"),
            )
        }
        Err(e) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the journal: {e}\n"),
            )
        }
    };
    let mut next = from;
    let mut first = Vec::with_capacity(written.len());
    for (seq, row) in written {
        next = seq + 1;
        if let Ok(entry) = serde_json::from_str::<Entry>(&row) {
            first.push(sse(&LiveEvent::entry(seq, &entry)));
        }
    }
    let later = futures_util::stream::unfold(follow, |mut follow| async move {
        let event = follow.recv().await;
        Some((event, follow))
    })
    .scan(next, |next, event| {
        let out = match event {
            // Fallen behind: end; the browser reconnects and reads the journal.
            Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => None,
            Ok(event) => match &*event {
                LiveEvent::Entry { seq, .. } if *seq < *next => Some(None),
                LiveEvent::Entry { seq, .. } => {
                    *next = seq + 1;
                    Some(Some(sse(&event)))
                }
                _ => Some(Some(sse(&event))),
            },
        };
        std::future::ready(out)
    })
    .filter_map(std::future::ready);
    let events = futures_util::stream::iter(first)
        .chain(later)
        .map(Ok::<_, Infallible>);
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

/// The first entry the reader wants: after the last one its browser saw
/// (`Last-Event-ID`), else `?from=N`, else the first.
fn first_wanted(query: Option<&str>, headers: &HeaderMap) -> u64 {
    let last_seen = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(seen) = last_seen {
        return seen + 1;
    }
    query
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("from="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `event` as a server-sent event; an entry carries its seq as the event's
/// id, so a reconnecting browser says where it was.
fn sse(event: &LiveEvent) -> Event {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    let sent = Event::default().data(data);
    match event {
        LiveEvent::Entry { seq, .. } => sent.id(seq.to_string()),
        _ => sent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconnecting_browser_resumes_after_the_last_entry_it_saw() {
        let mut headers = HeaderMap::new();
        assert_eq!(first_wanted(None, &headers), 0);
        assert_eq!(first_wanted(Some("from=12"), &headers), 12);
        assert_eq!(first_wanted(Some("x=1&from=7"), &headers), 7);
        headers.insert("last-event-id", "20".parse().unwrap());
        assert_eq!(first_wanted(Some("from=12"), &headers), 21);
    }
}
