//! Addresses as they may be said: an HTTP error that reaches a comment, a
//! log or a transcript names its URL by scheme, host, port and path only.
//! A query can be a credential (a signed storage address, an API key
//! parameter), and so can userinfo; a fragment is dropped with them.
//! reqwest's own `to_string()` repeats the whole URL, so every HTTP client
//! error is turned to text through [`http_error`], and text from elsewhere
//! that may hold addresses (a server's message, another client's error)
//! through [`urls_in`].

use url::Url;

/// `url` without userinfo, query and fragment.
pub fn url(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// A reqwest error in words: what failed, the address redacted, and the
/// causes below it (which reqwest's own text leaves out).
pub fn http_error(err: &reqwest::Error) -> String {
    let mut words = err.to_string();
    if let Some(address) = err.url() {
        words = words.replace(address.as_str(), &url(address));
    }
    let mut cause = std::error::Error::source(err);
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !words.ends_with(&said) {
            words.push_str(": ");
            words.push_str(&said);
        }
        cause = inner.source();
    }
    urls_in(&words)
}

/// `text` with every `scheme://` address in it redacted as [`url`] does:
/// userinfo, query and fragment removed. Punctuation that closes the
/// sentence or a bracket after a dropped query stays.
pub fn urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((before, scheme_len)) = next_scheme(rest) {
        out.push_str(&rest[..before]);
        let address = &rest[before..];
        let end = address.find(ends_address).unwrap_or(address.len());
        out.push_str(&redact_one(&address[..end], scheme_len));
        rest = &address[end..];
    }
    out.push_str(rest);
    out
}

/// The byte offset of the next `scheme://` in `text` and the length of
/// `scheme://`. Every `://` counts, whatever precedes it: a malformed
/// scheme must not let an address through whole.
fn next_scheme(text: &str) -> Option<(usize, usize)> {
    let at = text.find("://")?;
    let scheme = text[..at]
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        .last()
        .map_or(at, |(i, _)| i);
    Some((scheme, at + 3 - scheme))
}

/// Where an address ends in running text.
fn ends_address(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`')
}

/// Trailing characters that close a sentence or a bracket, not the address.
const CLOSING: &[char] = &[')', ']', '}', '.', ',', ';', ':', '!', '?'];

/// One address (`scheme://` is its first `scheme_len` bytes) redacted.
fn redact_one(address: &str, scheme_len: usize) -> String {
    let body = address.trim_end_matches(CLOSING);
    let (body, closing) = address.split_at(body.len().max(scheme_len));
    let (scheme, rest) = body.split_at(scheme_len);
    let rest = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    // Userinfo is everything up to the authority's last `@`.
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    format!("{scheme}{host}{path}{closing}")
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
