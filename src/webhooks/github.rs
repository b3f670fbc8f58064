//! GitHub's deliveries: `X-Hub-Signature-256` is `sha256=` and the
//! HMAC-SHA256 of the body under the webhook's secret, in hex;
//! `X-GitHub-Event` names the event and `X-GitHub-Delivery` the delivery
//! (the same id when GitHub or a person redelivers it).

use super::{text_at, Delivery, Doorbell, Received, Topic};
use crate::config::Secret;
use crate::forge::ForgeKind;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The delivery's id and doorbell; `None` for an event forgehand does not act on.
pub(super) fn check(
    secret: Option<&Secret>,
    delivery: &Delivery<'_>,
) -> Result<Option<(Option<String>, Doorbell)>, Received> {
    let Some(secret) = secret else {
        return Err(Received::Refused(
            "a GitHub delivery, but FORGEHAND_GITHUB_WEBHOOK_SECRET is not set".into(),
        ));
    };
    let header = delivery.header;
    let Some(signature) = header("x-hub-signature-256") else {
        return Err(Received::Refused(
            "no X-Hub-Signature-256 header: give the webhook a secret (the value of FORGEHAND_GITHUB_WEBHOOK_SECRET)"
                .into(),
        ));
    };
    if !signed_with(secret, delivery.body, &signature) {
        return Err(Received::Refused(
            "X-Hub-Signature-256 does not match the body under FORGEHAND_GITHUB_WEBHOOK_SECRET".into(),
        ));
    }
    let event = header("x-github-event").unwrap_or_default();
    let Some(topic) = topic(&event) else {
        return Ok(None);
    };
    let payload: serde_json::Value = serde_json::from_slice(delivery.body).map_err(|_| {
        Received::Malformed("the body is not JSON: set the webhook's content type to application/json".into())
    })?;
    let Some(repo) = text_at(&payload, &["repository", "full_name"]) else {
        return Err(Received::Malformed(format!(
            "a {event} delivery without repository.full_name"
        )));
    };
    let doorbell = Doorbell {
        forge: ForgeKind::GitHub,
        repo: repo.to_owned(),
        topic,
    };
    Ok(Some((header("x-github-delivery"), doorbell)))
}

/// What an event rings for.
fn topic(event: &str) -> Option<Topic> {
    match event {
        "issues"
        | "issue_comment"
        | "pull_request"
        | "pull_request_review"
        | "pull_request_review_comment"
        | "pull_request_review_thread" => Some(Topic::Items),
        "check_suite" | "check_run" | "workflow_run" | "workflow_job" | "status" => Some(Topic::Checks),
        _ => None,
    }
}

/// Whether `signature` (`sha256=<hex>`) is the body's HMAC under `secret`,
/// compared in constant time.
fn signed_with(secret: &Secret, body: &[u8], signature: &str) -> bool {
    let Some(given) = signature
        .trim()
        .strip_prefix("sha256=")
        .and_then(|hex| hex::decode(hex).ok())
    else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `X-Hub-Signature-256` value GitHub sends for `body` under `secret`.
    fn sign(secret: &str, body: &[u8]) -> String {
        let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
            Ok(mac) => mac,
            // HMAC takes keys of any length.
            Err(_) => return String::new(),
        };
        mac.update(body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    #[test]
    fn githubs_documented_example_signature_verifies() {
        // GitHub's "Validating webhook deliveries" example.
        let secret = Secret::new("It's a Secret to Everybody");
        let signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(signed_with(&secret, b"Hello, World!", signature));
        assert_eq!(sign("It's a Secret to Everybody", b"Hello, World!"), signature);
        assert!(!signed_with(&secret, b"Hello, World?", signature));
        assert!(!signed_with(&secret, b"Hello, World!", "sha256=zz"));
        assert!(!signed_with(&secret, b"Hello, World!", "sha1=757107ea"));
    }
}
