//! The fake GitHub's webhook deliveries: what it does that GitHub would
//! deliver an event for (a label, a comment, a review, a check) is sent
//! to the configured URL, signed, with a payload checked against the
//! webhook schemas of GitHub's API description.

use super::json::user;
use super::State;
use crate::webhook_sender::WebhookSender;
use serde_json::{json, Value};

/// The repository as webhook payloads carry it.
fn repository(name: &str) -> Value {
    let (owner, short) = name.split_once('/').unwrap_or((name, name));
    json!({
        "id": name.len() as u64 * 104_729,
        "name": short,
        "full_name": name,
        "private": false,
        "owner": user(owner),
        "html_url": format!("https://github.example/{name}"),
    })
}

/// Sends `event` (`action`) about `repo` when webhooks are on; `fields`
/// are the event's own (`issue`, `comment`, `check_run`, ...).
pub(super) fn emit(s: &mut State, event: &str, action: Option<&str>, repo: &str, actor: &str, fields: Value) {
    let Some(hooks) = s.hooks.clone() else {
        return;
    };
    let mut payload = json!({ "repository": repository(repo), "sender": user(actor) });
    if let Some(action) = action {
        payload["action"] = json!(action);
    }
    for (key, value) in fields.as_object().into_iter().flatten() {
        payload[key] = value.clone();
    }
    let name = match action {
        Some(action) => format!("{}-{action}", event.replace('_', "-")),
        None => event.replace('_', "-"),
    };
    if let Err(why) = crate::github_api::api().check_webhook(&name, &payload) {
        s.violations.push(why);
    }
    hooks.send(event, &payload);
}

/// Turns deliveries on (to `url`, signed with `secret`).
pub(super) fn enable(s: &mut State, url: &str, secret: &str) -> WebhookSender {
    let sender = WebhookSender::start(url, crate::webhook_sender::Signing::GitHub(secret.to_owned()));
    s.hooks = Some(sender.clone());
    sender
}
