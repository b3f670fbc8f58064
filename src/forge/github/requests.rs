//! Sending GitHub one request: the rate-limit block, the conditional GET
//! cache (an unchanged answer costs no rate limit), metrics, retries, and
//! the answer decoded or turned into a [`ForgeError`].

use super::{lock, Answer, GitHub, FORGE, MAX_CACHED};
use crate::forge::http_util::{next_link, path_and_query, remaining, wait_from_headers};
use crate::forge::retry::{self, Repeat};
use crate::forge::ForgeError;
use http::{HeaderMap, Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;

impl GitHub {
    /// One request, with short rate-limit waits (up to
    /// [`retry::MAX_INLINE_WAIT`]); server errors and broken connections are
    /// retried with backoff when `repeat` allows (see [`retry`]).
    pub(super) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
        repeat: Repeat,
    ) -> Result<Answer, ForgeError> {
        retry::send_with_retries(repeat, what, || self.send_once(method.clone(), path, body, what)).await
    }

    async fn send_once(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Answer, ForgeError> {
        self.check_not_blocked()?;
        let cached = (method == Method::GET)
            .then(|| lock(&self.cache).get(path).cloned())
            .flatten();
        let etag = cached.as_ref().map(|(etag, _)| etag.as_str());
        let (status, headers, text) = self.request(&method, path, body, etag, what).await?;
        if remaining(&headers) == Some(0) {
            if let Some(wait) = wait_from_headers(&headers) {
                *lock(&self.blocked_until) = Some(Instant::now() + wait);
            }
        }
        if status == StatusCode::NOT_MODIFIED {
            if let Some((_, body)) = cached {
                return Ok(Answer {
                    status,
                    headers,
                    body,
                });
            }
        }
        if status.is_success() {
            if method == Method::GET {
                self.remember(path, &headers, &text);
            }
            return Ok(Answer {
                status,
                headers,
                body: text,
            });
        }
        let err = error_for(status, &headers, &text, what);
        if let Some(wait) = err.retry_after() {
            // Nothing more is sent before GitHub's time is up.
            *lock(&self.blocked_until) = Some(Instant::now() + wait);
        }
        Err(err)
    }

    /// While GitHub's rate limit is spent, nothing is sent.
    fn check_not_blocked(&self) -> Result<(), ForgeError> {
        if let Some(until) = *lock(&self.blocked_until) {
            let now = Instant::now();
            if until > now {
                return Err(ForgeError::RateLimited {
                    forge: FORGE,
                    retry_after: until - now,
                });
            }
        }
        Ok(())
    }

    /// Sends one request (a GET with the cached `etag`, so an unchanged
    /// answer costs no rate limit) and reads the whole answer; counts it.
    async fn request(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        etag: Option<&str>,
        what: &str,
    ) -> Result<(StatusCode, HeaderMap, String), ForgeError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static("application/vnd.github+json"),
        );
        if let Some(value) = etag.and_then(|etag| http::HeaderValue::from_str(etag).ok()) {
            headers.insert(http::header::IF_NONE_MATCH, value);
        }
        let result = match *method {
            Method::GET => self.crab._get_with_headers(path, Some(headers)).await,
            Method::POST => self.crab._post(path, body).await,
            Method::PATCH => self.crab._patch(path, body).await,
            Method::PUT => self.crab._put(path, body).await,
            Method::DELETE => self.crab._delete(path, body).await,
            ref other => {
                return Err(ForgeError::Setup {
                    forge: FORGE,
                    message: format!("method {other} is not used"),
                })
            }
        };
        let network = |e: octocrab::Error| ForgeError::Network {
            forge: FORGE,
            what: what.to_owned(),
            message: crate::redact::urls_in(&e.to_string()),
        };
        let response = result.map_err(network)?;
        let status = response.status();
        let headers = response.headers().clone();
        self.metrics.forge_call(FORGE, status.as_u16());
        if let Some(left) = remaining(&headers) {
            self.metrics.rate_limit(FORGE, left);
        }
        let text = self.crab.body_to_string(response).await.map_err(network)?;
        Ok((status, headers, text))
    }

    /// Keeps a GET's answer with its ETag for the next conditional GET.
    fn remember(&self, path: &str, headers: &HeaderMap, text: &str) {
        if let Some(etag) = headers.get(http::header::ETAG).and_then(|v| v.to_str().ok()) {
            let mut cache = lock(&self.cache);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
            cache.insert(path.to_owned(), (etag.to_owned(), text.to_owned()));
        }
    }

    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str, what: &str) -> Result<T, ForgeError> {
        let answer = self.send(Method::GET, path, None, what, Repeat::Safe).await?;
        decode(&answer.body, what)
    }

    /// Every page of a list, following `Link: rel="next"`. The flag says
    /// whether the first page was unchanged (304).
    pub(super) async fn get_all<T: DeserializeOwned>(
        &self,
        path: &str,
        what: &str,
    ) -> Result<(Vec<T>, bool), ForgeError> {
        let first = self.send(Method::GET, path, None, what, Repeat::Safe).await?;
        let unchanged = first.status == StatusCode::NOT_MODIFIED;
        let mut items: Vec<T> = decode(&first.body, what)?;
        let mut next = next_link(&first.headers);
        let mut pages = 1;
        while let Some(address) = next.take() {
            pages += 1;
            if pages > 100 {
                break;
            }
            let page = self
                .send(Method::GET, &path_and_query(&address), None, what, Repeat::Safe)
                .await?;
            items.extend(decode::<Vec<T>>(&page.body, what)?);
            next = next_link(&page.headers);
        }
        Ok((items, unchanged))
    }

    pub(super) async fn write<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &Value,
        what: &str,
        repeat: Repeat,
    ) -> Result<T, ForgeError> {
        let answer = self.send(method, path, Some(body), what, repeat).await?;
        decode(&answer.body, what)
    }
}

pub(super) fn decode<T: DeserializeOwned>(body: &str, what: &str) -> Result<T, ForgeError> {
    serde_json::from_str(body).map_err(|e| ForgeError::Decode {
        forge: FORGE,
        what: what.to_owned(),
        message: e.to_string(),
    })
}

/// What one entry of a validation failure's `errors` says: its `message`,
/// or its field and code (`` `base` is invalid ``).
fn validation_detail(error: &Value) -> Option<String> {
    if let Some(message) = error.get("message").and_then(Value::as_str) {
        return Some(message.to_owned());
    }
    let field = error.get("field").and_then(Value::as_str)?;
    let code = error.get("code").and_then(Value::as_str).unwrap_or("invalid");
    Some(match code {
        "missing_field" | "missing" => format!("`{field}` is missing"),
        "invalid" => format!("`{field}` is invalid"),
        "already_exists" => format!("`{field}` already exists"),
        other => format!("`{field}`: {other}"),
    })
}

fn error_for(status: StatusCode, headers: &HeaderMap, body: &str, what: &str) -> ForgeError {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let mut message = parsed
        .as_ref()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(200).collect());
    // A validation failure says what failed in `errors[].message`, or only
    // by field and code (`{"field":"base","code":"invalid"}`).
    let details: Vec<String> = parsed
        .as_ref()
        .and_then(|v| v.get("errors").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(validation_detail)
        .collect();
    if !details.is_empty() {
        message = format!("{message}: {}", details.join("; "));
    }
    let limited = status == StatusCode::TOO_MANY_REQUESTS
        || (status == StatusCode::FORBIDDEN
            && (remaining(headers) == Some(0)
                || headers.contains_key("retry-after")
                || message.to_ascii_lowercase().contains("rate limit")));
    if limited {
        return ForgeError::RateLimited {
            forge: FORGE,
            retry_after: wait_from_headers(headers).unwrap_or(Duration::from_secs(60)),
        };
    }
    match status {
        StatusCode::UNAUTHORIZED => ForgeError::Auth {
            forge: FORGE,
            status: status.as_u16(),
            message,
        },
        StatusCode::NOT_FOUND => ForgeError::NotFound {
            forge: FORGE,
            what: what.to_owned(),
        },
        _ => ForgeError::Api {
            forge: FORGE,
            what: what.to_owned(),
            status: status.as_u16(),
            message,
        },
    }
}
