//! The HTTP part every provider shares: the client, and failures mapped to
//! [`LlmError`] with the provider's own message and refusal and its
//! `Retry-After`, whether they come as an error answer or inside a stream.

use super::{LlmError, Refusal};
use serde_json::Value;
use std::time::Duration;

/// The error an answer with HTTP `status` and body `text` maps to: the
/// provider's own refusal (`refusal` reads its error object) first, then
/// overload, server failures and other refusals.
pub(crate) fn error_answer(
    provider: &str,
    status: u16,
    retry_after: Option<Duration>,
    text: &str,
    refusal: fn(&Value) -> Option<Refusal>,
) -> LlmError {
    let message = error_message(text);
    let provider = provider.to_owned();
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    // The error object: under `error`, or the body itself (vLLM's older
    // ErrorResponse has its fields at the top).
    let error = parsed
        .as_ref()
        .map(|v| v.get("error").filter(|e| e.is_object()).unwrap_or(v));
    if let Some(refusal) = error.and_then(refusal) {
        return LlmError::Refused {
            provider,
            refusal,
            message,
        };
    }
    // Gemini says how long to wait in the body (google.rpc.RetryInfo).
    let retry_after = retry_after.or_else(|| retry_info(text));
    let overloaded = matches!(status, 429 | 503 | 529) || message.to_ascii_lowercase().contains("overloaded");
    if overloaded {
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
    }
}

/// The error a provider sent inside a stream, `error` being its error
/// object (`type`, `code` or `status`, and `message`): its own refusal, an
/// overload worth waiting out, or else a broken-off answer to ask again.
pub(crate) fn in_stream_error(
    provider: &str,
    error: &Value,
    refusal: fn(&Value) -> Option<Refusal>,
) -> LlmError {
    let message = error_message(&serde_json::json!({ "error": error }).to_string());
    let provider = provider.to_owned();
    if let Some(refusal) = refusal(error) {
        return LlmError::Refused {
            provider,
            refusal,
            message,
        };
    }
    let kind = ["type", "code", "status"]
        .iter()
        .find_map(|key| error.get(*key).and_then(Value::as_str))
        .unwrap_or_default()
        .to_ascii_lowercase();
    let code = error.get("code").and_then(Value::as_u64);
    let overloaded = [
        "overloaded",
        "rate_limit",
        "resource_exhausted",
        "unavailable",
        "slow_down",
    ]
    .iter()
    .any(|k| kind.contains(k))
        || matches!(code, Some(429 | 503 | 529))
        || message.to_ascii_lowercase().contains("overloaded");
    if overloaded {
        return LlmError::Overloaded {
            provider,
            status: code.and_then(|c| u16::try_from(c).ok()).unwrap_or(529),
            message,
            retry_after: None,
        };
    }
    LlmError::StreamCut {
        provider,
        detail: format!("an error event came instead of the rest of the answer: {message}"),
    }
}

/// The provider's own error message from its JSON error body (all three use
/// `{"error": {"message": ...}}`), else the body itself; addresses in it
/// redacted (a proxy may echo the request's).
fn error_message(body: &str) -> String {
    crate::redact::urls_in(&provider_words(body))
}

fn provider_words(body: &str) -> String {
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
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
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

/// A transport failure in words, its address redacted (a base URL may
/// carry a key in its query); `timeout` says which limit a timeout was.
pub(crate) fn describe_reqwest(err: &reqwest::Error, timeout: &str) -> String {
    if err.is_timeout() {
        timeout.to_owned()
    } else if err.is_connect() {
        format!("connection failed: {}", crate::redact::http_error(err))
    } else {
        crate::redact::http_error(err)
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

/// A client with the configured timeout and no proxy surprises. It
/// follows no redirect: reqwest drops `Authorization` on a redirect to
/// another host, but not `x-api-key` or `x-goog-api-key`, which would
/// carry a model key wherever a redirect points.
pub fn client(timeout: Duration) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(30).min(timeout))
        .build()
        .map_err(|e| LlmError::NoModel {
            detail: format!(
                "the HTTP client could not be built: {}",
                crate::redact::http_error(&e)
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn each_provider_reads_its_refusals_from_its_own_error_shape() {
        use crate::llm::{anthropic, chat_completions, gemini, responses};
        let refused = |err: LlmError| match err {
            LlmError::Refused { refusal, .. } => Some(refusal),
            _ => None,
        };
        let too_long = [
            (
                "openai",
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                chat_completions::refusal as fn(&Value) -> Option<Refusal>,
            ),
            (
                "openai",
                r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#,
                responses::refusal,
            ),
            // vLLM: OpenAI's older words, no code.
            (
                "openai",
                r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","type":"BadRequestError","param":null,"code":400}"#,
                chat_completions::refusal,
            ),
            (
                "anthropic",
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_1"}"#,
                anthropic::refusal,
            ),
            (
                "anthropic",
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648, decrease input length or `max_tokens` and try again"}}"#,
                anthropic::refusal,
            ),
            (
                "gemini",
                r#"{"error":{"code":400,"message":"The input token count (1048600) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
                gemini::refusal,
            ),
        ];
        for (provider, body, refusal) in too_long {
            let err = error_answer(provider, 400, None, body, refusal);
            assert_eq!(refused(err), Some(Refusal::ContextTooLong), "{body}");
        }
        let blocked = [
            (
                r#"{"error":{"message":"Invalid prompt: your prompt was flagged as potentially violating our usage policy.","type":"invalid_request_error","param":null,"code":"invalid_prompt"}}"#,
                responses::refusal as fn(&Value) -> Option<Refusal>,
            ),
            (
                r#"{"type":"error","error":{"details":null,"type":"invalid_request_error","message":"Output blocked by content filtering policy"}}"#,
                anthropic::refusal,
            ),
        ];
        for (body, refusal) in blocked {
            let err = error_answer("p", 400, None, body, refusal);
            assert_eq!(refused(err), Some(Refusal::ContentPolicy), "{body}");
        }
        // Another provider's words are not this one's refusal.
        let other =
            r#"{"error":{"message":"prompt is too long","type":"invalid_request_error","code":null}}"#;
        let err = error_answer("openai", 400, None, other, responses::refusal);
        assert!(matches!(err, LlmError::Rejected { status: 400, .. }), "{err}");
    }

    #[test]
    fn an_error_inside_a_stream_is_an_overload_a_refusal_or_a_cut() {
        use crate::llm::anthropic;
        let overloaded = json!({"type": "overloaded_error", "message": "Overloaded"});
        let err = in_stream_error("anthropic", &overloaded, anthropic::refusal);
        assert!(matches!(err, LlmError::Overloaded { status: 529, .. }), "{err}");
        let blocked =
            json!({"type": "invalid_request_error", "message": "Output blocked by content filtering policy"});
        let err = in_stream_error("anthropic", &blocked, anthropic::refusal);
        assert!(matches!(
            err,
            LlmError::Refused {
                refusal: Refusal::ContentPolicy,
                ..
            }
        ));
        let unavailable =
            json!({"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"});
        let err = in_stream_error("gemini", &unavailable, crate::llm::gemini::refusal);
        assert!(matches!(err, LlmError::Overloaded { status: 503, .. }), "{err}");
        let server = json!({"code": "server_error", "message": "The server had an error"});
        let err = in_stream_error("openai", &server, crate::llm::responses::refusal);
        assert!(
            matches!(err, LlmError::StreamCut { .. }) && err.is_retryable(),
            "{err}"
        );
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
