//! The fake GitHub's GraphQL endpoint refuses what GitHub refuses: every
//! document and its variables go through [`crate::github_graphql::check`]
//! (GitHub's published schema) before the fake answers from its state. A
//! refused request gets GitHub's answer (HTTP 200, `errors` and no `data`)
//! and is a conformance failure: the test fails when the fake is dropped.

use super::{FakeGitHub, State};
use crate::fake_http::Reply;
use serde_json::{json, Value};

/// GitHub's refusal of a GraphQL request that does not validate, recorded
/// as a violation; `None` when the request may run.
pub(super) fn refuse(s: &mut State, body: &Value) -> Option<Reply> {
    let errors = crate::github_graphql::check(body).err()?;
    let query = body.get("query").and_then(Value::as_str).unwrap_or("");
    s.violations.push(format!(
        "GitHub's GraphQL schema refuses this request: {}\n  query: {query}\n  variables: {}",
        errors
            .iter()
            .map(|e| e["message"].as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join("; "),
        body.get("variables").unwrap_or(&Value::Null),
    ));
    Some(Reply::json(200, json!({ "errors": errors })))
}

/// Records a violation when the fake's answer to an accepted GraphQL
/// request has a field the request did not select (GitHub sends none).
pub(super) fn check_answer(state: &std::sync::Mutex<State>, body: &Value, reply: &Reply) {
    if reply.status != 200 {
        return;
    }
    let Ok(answer) = serde_json::from_slice::<Value>(&reply.body) else {
        return;
    };
    // A refused request was recorded when it was refused.
    if crate::github_graphql::check(body).is_err() {
        return;
    }
    if let Err(why) = crate::github_graphql::check_answer(body, &answer) {
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        s.violations.push(format!(
            "the fake's GraphQL answer gives what GitHub would not: {why}"
        ));
    }
}

impl FakeGitHub {
    /// What the fake took or gave that GitHub's descriptions do not allow,
    /// taken so the fake does not fail the test when dropped: for tests
    /// that send such requests on purpose.
    pub fn take_violations(&self) -> Vec<String> {
        self.with(|s| std::mem::take(&mut s.violations))
    }
}
