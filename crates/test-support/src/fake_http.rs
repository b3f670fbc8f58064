//! Pieces both fake forges share: answers whose body can be read back (for
//! ETags), offset pagination with `Link` headers, query and path decoding.

use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;
use wiremock::{Mock, MockServer, Request, Respond};

/// A server on loopback that hands every request to `responder`.
pub async fn serve(responder: impl Respond + 'static) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(responder)
        .mount(&server)
        .await;
    server
}

pub fn query(req: &Request) -> HashMap<String, String> {
    req.url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// "METHOD path?query", as the fakes record each request.
pub fn request_line(req: &Request) -> String {
    match req.url.query() {
        Some(q) => format!("{} {}?{q}", req.method.as_str(), req.url.path()),
        None => format!("{} {}", req.method.as_str(), req.url.path()),
    }
}

pub fn decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

/// The fakes' clock: milliseconds since the epoch at each change, one
/// more than the last when changes come faster, so what a fake stamps is
/// as recent as it really is (a daemon looks at the last minutes'
/// comments, however long the test process has run) and ordered as the
/// fake made it.
pub fn tick(last: u64) -> u64 {
    let now = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or_default();
    now.max(last + 1)
}

/// A clock reading (see [`tick`]) as the forges write time.
pub fn stamp(clock: u64) -> String {
    let at =
        chrono::DateTime::from_timestamp_millis(i64::try_from(clock).unwrap_or_default()).unwrap_or_default();
    at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// A clock reading as GitHub writes time, REST and GraphQL alike: whole
/// seconds (`2026-01-01T00:00:00Z`), where GitLab gives milliseconds.
pub fn github_stamp(clock: u64) -> String {
    let at = chrono::DateTime::from_timestamp_millis(i64::try_from(whole_seconds(clock)).unwrap_or_default())
        .unwrap_or_default();
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A clock reading cut to the second it is in: the time GitHub keeps, so
/// its `since` compares with what it shows (an item of 12:00:00.9 is not
/// after a `since` of 12:00:00.5 on GitHub).
pub fn whole_seconds(clock: u64) -> u64 {
    clock - clock % 1000
}

/// Pages a list by `per_page` / `page` with a `Link` header.
pub fn paged(req: &Request, items: Vec<Value>) -> Reply {
    let q = query(req);
    let per_page: usize = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page: usize = q.get("page").and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    let start = (page - 1) * per_page;
    let chunk: Vec<Value> = items.iter().skip(start).take(per_page).cloned().collect();
    let mut response = Reply::json(200, Value::Array(chunk));
    response.headers.push(("x-page".into(), page.to_string()));
    response.headers.push(("x-per-page".into(), per_page.to_string()));
    response.headers.push(("x-total".into(), items.len().to_string()));
    if start + per_page < items.len() {
        response
            .headers
            .push(("x-next-page".into(), (page + 1).to_string()));
        let mut next = req.url.clone();
        let pairs: Vec<(String, String)> = req
            .url
            .query_pairs()
            .filter(|(k, _)| k != "page")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        next.query_pairs_mut()
            .clear()
            .extend_pairs(pairs)
            .append_pair("page", &(page + 1).to_string());
        response
            .headers
            .push(("link".into(), format!("<{next}>; rel=\"next\"")));
    }
    response
}

/// An answer before it becomes a `ResponseTemplate` (whose body cannot be read back).
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub headers: Vec<(String, String)>,
    pub delay: Option<Duration>,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            body: serde_json::to_vec(&body).unwrap(),
            headers: Vec::new(),
            delay: None,
        }
    }
}

impl Reply {
    pub fn into_template(self) -> wiremock::ResponseTemplate {
        let mut response =
            wiremock::ResponseTemplate::new(self.status).set_body_raw(self.body, "application/json");
        for (k, v) in &self.headers {
            response = response.insert_header(k.as_str(), v.as_str());
        }
        if let Some(delay) = self.delay {
            response = response.set_delay(delay);
        }
        response
    }
}

/// A time a forge takes in a query (`since`, `updated_after`) as the
/// fakes' clock reads it (milliseconds since the epoch): ISO 8601 with an
/// offset or `Z`, with or without fractional seconds; without an offset,
/// UTC; a bare date is its midnight, UTC. `None` when it is none of these.
pub fn parse_time(text: &str) -> Option<u64> {
    use chrono::{DateTime, NaiveDate, NaiveDateTime};
    let millis = DateTime::parse_from_rfc3339(text)
        .map(|at| at.timestamp_millis())
        .or_else(|_| {
            NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
                .map(|at| at.and_utc().timestamp_millis())
        })
        .or_else(|_| {
            NaiveDate::parse_from_str(text, "%Y-%m-%d").map(|day| {
                day.and_hms_opt(0, 0, 0)
                    .unwrap_or_default()
                    .and_utc()
                    .timestamp_millis()
            })
        })
        .ok()?;
    u64::try_from(millis).ok()
}
