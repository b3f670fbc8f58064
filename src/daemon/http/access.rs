//! Who may read the listener's pages: with `FORGEHAND_HTTP_TOKEN` set, the
//! status page, `/metrics` and the transcripts (with their live events)
//! ask for the token. Scripts send it as `Authorization: Bearer <token>`;
//! a browser sends it as HTTP Basic credentials, the token as the password
//! and any user name, after a 401 whose `Basic` challenge made it ask (it
//! then sends the same credentials with the page's own requests, such as
//! the live transcript's `EventSource`). The probes and the webhooks do
//! not come here: the forges' deliveries prove themselves with their own
//! secret.

use super::HttpState;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The challenges of a refusal: Basic first, the one browsers answer by
/// asking for a user name and password; Bearer for scripts.
const BASIC_CHALLENGE: &str = "Basic realm=\"forgehand\", charset=\"UTF-8\"";
const BEARER_CHALLENGE: &str = "Bearer realm=\"forgehand\"";

/// `None` when the request may pass; else the refusal.
pub(super) fn refuse(state: &HttpState, headers: &HeaderMap) -> Option<Response> {
    let token = state.token.as_ref()?;
    let offered = headers
        .get(AUTHORIZATION)
        .and_then(|value| offered_token(value.as_bytes()));
    if offered.is_some_and(|offered| same_secret(&offered, token.expose().as_bytes())) {
        return None;
    }
    Some(challenge())
}

/// The token an `Authorization` value offers: a Bearer token, or the
/// password of Basic credentials (whatever the user name). The scheme's
/// name is case-insensitive (RFC 9110, section 11.1).
fn offered_token(value: &[u8]) -> Option<Vec<u8>> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, credentials) = value.split_once(' ')?;
    let credentials = credentials.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(credentials.as_bytes().to_vec());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        // RFC 7617: base64 of "user-id:password"; the user id has no colon.
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(credentials)
            .ok()?;
        let colon = decoded.iter().position(|b| *b == b':')?;
        return Some(decoded[colon + 1..].to_vec());
    }
    None
}

/// Compares the digests, in constant time: neither how much of the token
/// a guess got right nor its length shows in how long the answer takes.
fn same_secret(offered: &[u8], token: &[u8]) -> bool {
    Sha256::digest(offered)
        .as_slice()
        .ct_eq(Sha256::digest(token).as_slice())
        .into()
}

fn challenge() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        [(CONTENT_TYPE, "text/plain; charset=utf-8")],
        "this page asks for the value of FORGEHAND_HTTP_TOKEN: in a browser, as the \
         password (any user name); from a script, as Authorization: Bearer <token>\n",
    )
        .into_response();
    let headers = response.headers_mut();
    headers.append(WWW_AUTHENTICATE, HeaderValue::from_static(BASIC_CHALLENGE));
    headers.append(WWW_AUTHENTICATE, HeaderValue::from_static(BEARER_CHALLENGE));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user_and_password: &str) -> Vec<u8> {
        let encoded = base64::engine::general_purpose::STANDARD.encode(user_and_password);
        format!("Basic {encoded}").into_bytes()
    }

    #[test]
    fn a_bearer_token_or_the_password_of_basic_credentials_is_offered() {
        assert_eq!(offered_token(b"Bearer t0ken"), Some(b"t0ken".to_vec()));
        assert_eq!(offered_token(b"bearer  t0ken "), Some(b"t0ken".to_vec()));
        assert_eq!(offered_token(&basic("anyone:t0ken")), Some(b"t0ken".to_vec()));
        assert_eq!(offered_token(&basic(":t0ken")), Some(b"t0ken".to_vec()));
        // Only the first colon ends the user id; the password may hold more.
        assert_eq!(offered_token(&basic("me:t0:ken")), Some(b"t0:ken".to_vec()));
        assert_eq!(offered_token(&basic("t0ken")), None, "no colon: no password");
        assert_eq!(offered_token(b"Basic not base64!"), None);
        assert_eq!(offered_token(b"Digest t0ken"), None);
        assert_eq!(offered_token(b"t0ken"), None);
    }

    #[test]
    fn only_the_whole_token_is_the_same_secret() {
        assert!(same_secret(b"t0ken", b"t0ken"));
        assert!(!same_secret(b"t0ke", b"t0ken"));
        assert!(!same_secret(b"t0kenn", b"t0ken"));
        assert!(!same_secret(b"", b"t0ken"));
        assert!(!same_secret(b"T0KEN", b"t0ken"));
    }

    #[test]
    fn a_refusal_challenges_browsers_and_scripts() {
        let refused = challenge();
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
        let challenges: Vec<_> = refused.headers().get_all(WWW_AUTHENTICATE).iter().collect();
        assert_eq!(challenges, [BASIC_CHALLENGE, BEARER_CHALLENGE]);
    }
}
