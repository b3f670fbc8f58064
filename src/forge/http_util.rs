//! Small HTTP helpers both forges share: Link pagination, rate-limit headers.

use http::HeaderMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The `rel="next"` target of a `Link` header.
pub fn next_link(headers: &HeaderMap) -> Option<String> {
    let link = headers.get(http::header::LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let is_next = params
            .split(';')
            .any(|p| matches!(p.trim(), r#"rel="next""# | "rel=next"));
        is_next.then(|| {
            target
                .trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_owned()
        })
    })
}

/// How long the server asks us to wait: `Retry-After` (seconds), else the
/// reset time of an exhausted rate limit (`x-ratelimit-reset`, Unix seconds;
/// GitLab also sends `ratelimit-reset`).
pub fn wait_from_headers(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<u64>().ok();
    if let Some(secs) = number("retry-after") {
        return Some(Duration::from_secs(secs));
    }
    let remaining = number("x-ratelimit-remaining").or_else(|| number("ratelimit-remaining"))?;
    if remaining > 0 {
        return None;
    }
    let reset = number("x-ratelimit-reset").or_else(|| number("ratelimit-reset"))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(reset.saturating_sub(now).max(1)))
}

/// The rate-limit units left, when the server said.
pub fn remaining(headers: &HeaderMap) -> Option<u64> {
    ["x-ratelimit-remaining", "ratelimit-remaining"]
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok()?.trim().parse().ok())
}

/// `path?query` of an absolute or relative address.
pub fn path_and_query(address: &str) -> String {
    match url::Url::parse(address) {
        Ok(url) => match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        },
        Err(_) => address.to_owned(),
    }
}

/// Percent-encodes one path segment or query value.
pub fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_headers_give_the_next_page() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::LINK,
            r#"<https://api.example/repos/a/b/issues?page=2>; rel="next", <https://api.example/repos/a/b/issues?page=5>; rel="last""#
                .parse()
                .unwrap(),
        );
        assert_eq!(
            next_link(&headers).as_deref(),
            Some("https://api.example/repos/a/b/issues?page=2")
        );
        assert_eq!(path_and_query("https://api.example/x/y?page=2"), "/x/y?page=2");
    }

    #[test]
    fn waits_come_from_retry_after_or_an_exhausted_limit() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "7".parse().unwrap());
        assert_eq!(wait_from_headers(&headers), Some(Duration::from_secs(7)));
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-remaining", "10".parse().unwrap());
        assert_eq!(wait_from_headers(&headers), None);
        headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
        let reset = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 30;
        headers.insert("x-ratelimit-reset", reset.to_string().parse().unwrap());
        let wait = wait_from_headers(&headers).unwrap();
        assert!(wait <= Duration::from_secs(30) && wait >= Duration::from_secs(28));
    }
}
