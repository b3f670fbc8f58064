//! The HTTP part every provider shares: POST a JSON body, map failures to
//! [`LlmError`] with the provider's own message, read `Retry-After`.

use super::LlmError;
use serde_json::Value;
use std::time::Duration;

/// Sends `body` and returns the JSON answer, or the error it maps to.
pub async fn post_json(
    provider: &str,
    request: reqwest::RequestBuilder,
    body: &Value,
) -> Result<Value, LlmError> {
    let response = request.json(body).send().await.map_err(|e| LlmError::Network {
        provider: provider.to_owned(),
        detail: describe_reqwest(&e),
    })?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after);
    let text = response.text().await.map_err(|e| LlmError::Network {
        provider: provider.to_owned(),
        detail: describe_reqwest(&e),
    })?;
    if (200..300).contains(&status) {
        return serde_json::from_str(&text).map_err(|e| LlmError::Decode {
            provider: provider.to_owned(),
            detail: format!("the body is not JSON ({e}): {}", clip(&text)),
        });
    }
    let message = error_message(&text);
    // Gemini says how long to wait in the body (google.rpc.RetryInfo).
    let retry_after = retry_after.or_else(|| retry_info(&text));
    let overloaded = matches!(status, 429 | 503 | 529) || message.to_ascii_lowercase().contains("overloaded");
    let provider = provider.to_owned();
    Err(if overloaded {
        LlmError::Overloaded {
            provider,
            status,
            message,
            retry_after,
        }
    } else if status >= 500 {
        LlmError::Server {
            provider,
            status,
            message,
        }
    } else {
        LlmError::Rejected {
            provider,
            status,
            message,
        }
    })
}

/// The provider's own error message from its JSON error body (all three use
/// `{"error": {"message": ...}}`), else the body itself.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        let error = v.get("error")?;
        let message = error.get("message").and_then(Value::as_str);
        let kind = error
            .get("type")
            .or_else(|| error.get("status"))
            .and_then(Value::as_str);
        Some(match (kind, message) {
            (Some(kind), Some(message)) => format!("{kind}: {message}"),
            (None, Some(message)) => message.to_owned(),
            _ => error.to_string(),
        })
    });
    from_json.unwrap_or_else(|| match body.trim() {
        "" => "(an empty body)".to_owned(),
        text => clip(text),
    })
}

/// `Retry-After` as seconds (HTTP dates are rare from these APIs and ignored).
fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(3600.0)))
}

/// `retryDelay` of a `google.rpc.RetryInfo` detail in an error body ("30s",
/// "1.5s").
fn retry_info(body: &str) -> Option<Duration> {
    let parsed: Value = serde_json::from_str(body).ok()?;
    let details = parsed.pointer("/error/details")?.as_array()?;
    details
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| {
            d.get("retryDelay")?
                .as_str()?
                .strip_suffix('s')
                .and_then(parse_retry_after)
        })
}

fn clip(text: &str) -> String {
    const LIMIT: usize = 500;
    if text.len() <= LIMIT {
        return text.trim().to_owned();
    }
    let mut end = LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn describe_reqwest(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        "the request timed out (llm.request_timeout)".to_owned()
    } else if err.is_connect() {
        format!("connection failed: {err}")
    } else {
        err.to_string()
    }
}

/// An OpenAI-style endpoint: a base URL and a bearer key, which local
/// OpenAI-compatible servers may go without.
pub struct BearerEndpoint {
    http: reqwest::Client,
    base_url: String,
    key: Option<crate::config::Secret>,
}

impl BearerEndpoint {
    pub fn new(
        base_url: &str,
        key: Option<crate::config::Secret>,
        timeout: Duration,
    ) -> Result<BearerEndpoint, LlmError> {
        Ok(BearerEndpoint {
            http: client(timeout)?,
            base_url: base_url.trim_end_matches('/').to_owned(),
            key,
        })
    }

    /// A POST to `path` (after the base URL), with the key when there is one.
    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.post(format!("{}{path}", self.base_url));
        match &self.key {
            Some(key) => request.bearer_auth(key.expose()),
            None => request,
        }
    }
}

/// A client with the configured timeout and no proxy surprises.
pub fn client(timeout: Duration) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(30).min(timeout))
        .build()
        .map_err(|e| LlmError::NoModel {
            detail: format!("the HTTP client could not be built: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_come_from_the_providers_body() {
        assert_eq!(
            error_message(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
            "overloaded_error: Overloaded"
        );
        assert_eq!(
            error_message(r#"{"error":{"code":400,"message":"bad schema","status":"INVALID_ARGUMENT"}}"#),
            "INVALID_ARGUMENT: bad schema"
        );
        assert_eq!(error_message("upstream connect error"), "upstream connect error");
        assert_eq!(error_message(""), "(an empty body)");
    }

    #[test]
    fn geminis_retry_info_says_how_long_to_wait() {
        let body = r#"{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}"#;
        assert_eq!(retry_info(body), Some(Duration::from_secs(37)));
        assert_eq!(retry_info(r#"{"error":{"code":429,"message":"x"}}"#), None);
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
