//! The fake GitHub's routing: what it answers before any route (failures,
//! the rate limit, App tokens, credentials), then the module that answers.

use super::changes::not_found;
use super::{Handler, State};
use crate::fake_http::{decode, request_line, Reply};
use serde_json::{json, Value};
use wiremock::Request;

impl Handler {
    /// What GitHub would do with `req`, and its answer.
    pub(super) fn route(&self, req: &Request) -> Reply {
        let mut s = self.0.lock().unwrap();
        s.requests.push(request_line(req));
        if let Some(refusal) = refused(&mut s, req) {
            return refusal;
        }
        let base = format!("{}://{}", req.url.scheme(), req.url.authority());
        let segs: Vec<String> = req
            .url
            .path()
            .trim_start_matches('/')
            .split('/')
            .map(decode)
            .collect();
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        if let Some(refusal) = invalid_body(&mut s, req.method.as_str(), &segs, &body) {
            return refusal;
        }
        if segs == ["graphql"] {
            if let Some(refusal) = super::graphql::refuse(&mut s, &body) {
                return refusal;
            }
        }
        if let Some(reply) = super::conversation::route(&mut s, req, &base, &segs, &body) {
            return reply;
        }
        if let Some(reply) = super::threads::route(&mut s, &segs, &body) {
            return reply;
        }
        if let Some(reply) = super::checks::route(&mut s, req, &base, &segs) {
            return reply;
        }
        if let Some(reply) = super::history::route(&mut s, req, &segs) {
            return reply;
        }

        if let Some(reply) = super::issues::route(&mut s, req, &base, &segs, &body) {
            return reply;
        }
        if let Some(reply) = super::pulls::route(&mut s, req, &segs, &body) {
            return reply;
        }
        super::repos::route(&s, req, &segs, &body).unwrap_or_else(not_found)
    }
}

/// What GitHub answers before routing: an injected failure, a job log's
/// pre-signed link, the rate limit, an App's token exchange, bad
/// credentials. `None`: the request goes on to its route.
fn refused(s: &mut State, req: &Request) -> Option<Reply> {
    let method = req.method.as_str().to_owned();
    let path = req.url.path().to_owned();
    if let Some(failing) = s.failing.iter_mut().find(|f| f.1 > 0 && path.contains(&f.0)) {
        failing.1 -= 1;
        return Some(Reply::json(failing.2, json!({"message": "Server Error"})));
    }
    // A job log's link is pre-signed storage, not the API: no token.
    if path.starts_with("/_job-logs/") {
        let base = format!("{}://{}", req.url.scheme(), req.url.authority());
        let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        return Some(super::checks::route(s, req, &base, &segs).unwrap_or_else(not_found));
    }
    let auth = req
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Some(seconds) = s.limit_next.take() {
        let mut reply = Reply::json(
            429,
            json!({"message": "API rate limit exceeded", "documentation_url": "https://docs.github.com/rest/rate-limit"}),
        );
        reply.headers.push(("retry-after".into(), seconds.to_string()));
        return Some(reply);
    }
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("token "))
        .unwrap_or("");
    // A GitHub App trades its JWT (RS256, three dot-separated parts) for an installation token.
    if method == "POST"
        && req.url.path().starts_with("/app/installations/")
        && req.url.path().ends_with("/access_tokens")
    {
        return Some(installation_token(s, req, token));
    }
    let installation_ok = s.app.as_ref().is_some_and(|(_, minted)| minted == token);
    if token != s.token && !installation_ok {
        return Some(Reply::json(
            401,
            json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}),
        ));
    }
    None
}

/// GitHub's 422 for a body the operation's schema refuses (a wrong type,
/// a required field missing, a value outside an enum, a null where none is
/// allowed), answered before anything is done, as GitHub does; it is also
/// a violation, since forgehand must never send one.
fn invalid_body(s: &mut State, method: &str, segs: &[&str], body: &Value) -> Option<Reply> {
    let refusal = crate::github_api::api().refuse_body(method, segs, body)?;
    s.violations.push(format!(
        "{}: GitHub refuses the body {body}: {:?}",
        refusal.operation, refusal.message
    ));
    Some(Reply::json(
        422,
        json!({
            "message": refusal.message,
            "documentation_url": refusal.documentation_url,
            "status": "422",
        }),
    ))
}

/// An App's JWT traded for the installation's token.
fn installation_token(s: &State, req: &Request, token: &str) -> Reply {
    let id: u64 = req
        .url
        .path()
        .split('/')
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let is_jwt = token.split('.').count() == 3 && token.starts_with("eyJ");
    match &s.app {
        Some((app_installation, minted)) if is_jwt && *app_installation == id => Reply::json(
            201,
            json!({"token": minted, "expires_at": "2099-01-01T00:00:00Z", "permissions": {"issues": "write", "contents": "write", "pull_requests": "write"}}),
        ),
        Some(_) if is_jwt => Reply::json(404, json!({"message": "Not Found"})),
        _ => Reply::json(401, json!({"message": "A JSON web token could not be decoded"})),
    }
}
