//! GitLab's deliveries: `X-Gitlab-Token` carries the webhook's secret
//! token as it was entered; `X-Gitlab-Event` names the hook and
//! `X-Gitlab-Event-UUID` (or, on older versions, `X-Gitlab-Webhook-UUID`)
//! the delivery.

use super::{same_secret, text_at, Delivery, Doorbell, Received, Topic};
use crate::config::Secret;
use crate::forge::ForgeKind;

/// The delivery's id and doorbell; `None` for a hook forgehand does not act on.
pub(super) fn check(
    secret: Option<&Secret>,
    delivery: &Delivery<'_>,
) -> Result<Option<(Option<String>, Doorbell)>, Received> {
    let Some(secret) = secret else {
        return Err(Received::Refused(
            "a GitLab delivery, but FORGEHAND_GITLAB_WEBHOOK_SECRET is not set".into(),
        ));
    };
    let header = delivery.header;
    let given = header("x-gitlab-token").unwrap_or_default();
    if !same_secret(given.as_bytes(), secret.expose().as_bytes()) {
        return Err(Received::Refused(
            "X-Gitlab-Token is missing or is not FORGEHAND_GITLAB_WEBHOOK_SECRET: set the webhook's secret token".into(),
        ));
    }
    let event = header("x-gitlab-event").unwrap_or_default();
    let Some(topic) = topic(&event) else {
        return Ok(None);
    };
    let payload: serde_json::Value = serde_json::from_slice(delivery.body)
        .map_err(|_| Received::Malformed(format!("a {event} whose body is not JSON")))?;
    let Some(project) = text_at(&payload, &["project", "path_with_namespace"]) else {
        return Err(Received::Malformed(format!(
            "a {event} without project.path_with_namespace"
        )));
    };
    let id = header("x-gitlab-event-uuid").or_else(|| header("x-gitlab-webhook-uuid"));
    let doorbell = Doorbell {
        forge: ForgeKind::GitLab,
        repo: project.to_owned(),
        topic,
    };
    Ok(Some((id, doorbell)))
}

/// What a hook rings for.
fn topic(event: &str) -> Option<Topic> {
    match event {
        "Issue Hook"
        | "Confidential Issue Hook"
        | "Merge Request Hook"
        | "Note Hook"
        | "Confidential Note Hook" => Some(Topic::Items),
        "Pipeline Hook" | "Job Hook" => Some(Topic::Checks),
        _ => None,
    }
}
