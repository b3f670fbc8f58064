//! One upload downloaded on the host: redirects followed by hand, only to
//! hosts the forge's [`UploadSite`] allows, the credential only on the
//! forge's own host; the body read up to a cap; the type read from the
//! bytes.

use super::magic::sniff;
use super::site::UploadSite;
use crate::config::Secret;
use reqwest::Url;
use std::time::Duration;

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;
/// One download's time limit.
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(30);

/// An image as downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    pub media_type: &'static str,
    pub size: Option<(u32, u32)>,
    pub bytes: Vec<u8>,
}

/// Why an upload was not taken; the text is the note the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("it redirected to {host}, which is not one of the forge's upload hosts")]
    Redirected { host: String },
    #[error("it redirected more than {MAX_REDIRECTS} times")]
    TooManyRedirects,
    #[error("the forge answered HTTP {status}")]
    Status { status: u16 },
    #[error("it is larger than agent.images.max_bytes ({max} bytes)")]
    TooLarge { max: u64 },
    #[error("the file is not a PNG, JPEG, GIF or WebP image (its bytes say so, whatever its name)")]
    NotAnImage { bytes: u64 },
    #[error("it could not be downloaded: {detail}")]
    Network { detail: String },
}

/// A client that follows no redirect by itself.
pub fn client() -> Result<reqwest::Client, FetchError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(DOWNLOAD_TIMEOUT)
        .build()
        .map_err(|e| FetchError::Network {
            detail: crate::redact::http_error(&e),
        })
}

/// Downloads `url` (an address [`UploadSite::upload_url`] gave) with at
/// most `max_bytes` of body.
pub async fn download(
    http: &reqwest::Client,
    site: &UploadSite,
    token: &Secret,
    url: Url,
    max_bytes: u64,
) -> Result<Downloaded, FetchError> {
    let mut url = url;
    for _ in 0..=MAX_REDIRECTS {
        let mut request = http.get(url.clone()).header("accept", "image/*");
        if site.takes_credential(&url) {
            let (name, value) = site.credential_header(token.expose());
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|e| FetchError::Network {
            // The address redacted: a signed one is a credential too.
            detail: crate::redact::http_error(&e),
        })?;
        let status = response.status();
        if status.is_redirection() {
            let next = response
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .and_then(|l| url.join(l).ok())
                .ok_or(FetchError::Status {
                    status: status.as_u16(),
                })?;
            if !site.may_follow(&next) {
                return Err(FetchError::Redirected {
                    host: next.host_str().unwrap_or_default().to_owned(),
                });
            }
            url = next;
            continue;
        }
        if !status.is_success() {
            return Err(FetchError::Status {
                status: status.as_u16(),
            });
        }
        let bytes = read_capped(response, max_bytes).await?;
        return match sniff(&bytes) {
            Some((media_type, size)) => Ok(Downloaded {
                media_type,
                size,
                bytes,
            }),
            None => Err(FetchError::NotAnImage {
                bytes: bytes.len() as u64,
            }),
        };
    }
    Err(FetchError::TooManyRedirects)
}

/// The body, or [`FetchError::TooLarge`] as soon as it passes `max`.
async fn read_capped(mut response: reqwest::Response, max: u64) -> Result<Vec<u8>, FetchError> {
    if response.content_length().is_some_and(|n| n > max) {
        return Err(FetchError::TooLarge { max });
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| FetchError::Network {
        detail: crate::redact::http_error(&e),
    })? {
        if (bytes.len() + chunk.len()) as u64 > max {
            return Err(FetchError::TooLarge { max });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}
