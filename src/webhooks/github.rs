//! GitHub's deliveries: `X-Hub-Signature-256` is `sha256=` and the
//! HMAC-SHA256 of the body under the webhook's secret, in hex;
//! `X-GitHub-Event` names the event and `X-GitHub-Delivery` the delivery
//! (the same id when GitHub or a person redelivers it). A webhook set to
//! the content type `application/x-www-form-urlencoded` sends the same
//! JSON in the form field `payload`; the signature is over the body as
//! sent either way.

use super::{text_at, Delivery, Doorbell, Received, RepoName, Topic};
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
    let payload = payload(delivery)?;
    let Some(repo) = text_at(&payload, &["repository", "full_name"]) else {
        return Err(Received::Malformed(format!(
            "a {event} delivery without repository.full_name"
        )));
    };
    let doorbell = Doorbell {
        forge: ForgeKind::GitHub,
        repo: RepoName::Path(repo.to_owned()),
        topic,
    };
    Ok(Some((header("x-github-delivery"), doorbell)))
}

/// The delivery's JSON payload: the body, or its form field `payload`
/// when the webhook sends `application/x-www-form-urlencoded`.
fn payload(delivery: &Delivery<'_>) -> Result<serde_json::Value, Received> {
    let content_type = (delivery.header)("content-type").unwrap_or_default();
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    if media_type.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
        let Some((_, json)) =
            url::form_urlencoded::parse(delivery.body).find(|(field, _)| field == "payload")
        else {
            return Err(Received::Malformed(
                "a form-encoded delivery without the field \"payload\"".into(),
            ));
        };
        return serde_json::from_str(&json)
            .map_err(|e| Received::Malformed(format!("the form field \"payload\" is not JSON ({e})")));
    }
    serde_json::from_slice(delivery.body).map_err(|e| {
        Received::Malformed(format!(
            "the body is not JSON ({e}); set the webhook's content type to application/json \
             (or application/x-www-form-urlencoded)"
        ))
    })
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

    fn deliver(
        content_type: &str,
        body: &[u8],
        signed: &[u8],
    ) -> Result<Option<(Option<String>, Doorbell)>, Received> {
        let signature = sign("hook-secret", signed);
        let header = |name: &str| match name {
            "content-type" => Some(content_type.to_owned()),
            "x-github-event" => Some("issues".to_owned()),
            "x-github-delivery" => Some("72d3162e-cc78-11e3-81ab-4c9367dc0958".to_owned()),
            "x-hub-signature-256" => Some(signature.clone()),
            _ => None,
        };
        check(
            Some(&Secret::new("hook-secret")),
            &Delivery {
                header: &header,
                body,
            },
        )
    }

    #[test]
    fn a_form_encoded_delivery_is_read_from_its_payload_field() {
        let json = r#"{"action":"labeled","issue":{"number":7},"repository":{"full_name":"Acme/App"}}"#;
        let form: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", json)
            .finish();
        let expected = Doorbell {
            forge: ForgeKind::GitHub,
            repo: RepoName::Path("Acme/App".into()),
            topic: Topic::Items,
        };
        let (_, doorbell) = deliver(
            "application/x-www-form-urlencoded",
            form.as_bytes(),
            form.as_bytes(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(doorbell, expected);
        let (_, doorbell) = deliver("application/json", json.as_bytes(), json.as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(doorbell, expected);
        // The signature is over the body as sent, not over the JSON inside.
        assert!(matches!(
            deliver(
                "application/x-www-form-urlencoded",
                form.as_bytes(),
                json.as_bytes()
            ),
            Err(Received::Refused(_))
        ));
        assert!(matches!(
            deliver("application/x-www-form-urlencoded", b"other=1", b"other=1"),
            Err(Received::Malformed(why)) if why.contains("payload")
        ));
        assert!(matches!(
            deliver("application/json", form.as_bytes(), form.as_bytes()),
            Err(Received::Malformed(why)) if why.contains("content type")
        ));
    }
}
