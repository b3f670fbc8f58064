//! The LFS batch API over HTTPS (`POST <endpoint>/objects/batch`, media
//! type `application/vnd.git-lfs+json`, the `basic` transfer): which
//! actions the server gives for a set of objects, then the downloads,
//! uploads and verifications those actions name. Every URL is checked
//! against [`Access`] before it is contacted; no redirect is followed (it
//! could carry the credential elsewhere).

use super::pointer::Pointer;
use super::remote::{redacted, Access};
use super::LfsError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use url::Url;

pub const MEDIA_TYPE: &str = "application/vnd.git-lfs+json";

/// Objects asked about in one batch request (servers cap it; 100 is
/// git-lfs's own batch size).
pub const BATCH_SIZE: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Download,
    Upload,
}

#[derive(Serialize)]
struct BatchRequest<'a> {
    operation: Operation,
    transfers: [&'static str; 1],
    objects: Vec<ObjectSpec<'a>>,
    hash_algo: &'static str,
}

#[derive(Serialize)]
struct ObjectSpec<'a> {
    oid: &'a str,
    size: u64,
}

#[derive(Deserialize)]
struct BatchResponse {
    #[serde(default)]
    transfer: Option<String>,
    objects: Vec<ObjectAnswer>,
}

/// The server's answer for one object.
#[derive(Debug, Deserialize)]
pub struct ObjectAnswer {
    pub oid: String,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub actions: HashMap<String, Action>,
    #[serde(default)]
    pub error: Option<ObjectError>,
}

#[derive(Debug, Deserialize)]
pub struct ObjectError {
    pub code: u16,
    /// The server's words, with any address in them redacted.
    #[serde(default, deserialize_with = "text_without_urls")]
    pub message: String,
}

fn text_without_urls<'de, D: serde::Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    String::deserialize(de).map(|text| crate::redact::urls_in(&text))
}

/// Where to send or fetch one object, with the headers to send.
#[derive(Debug, Clone, Deserialize)]
pub struct Action {
    pub href: String,
    #[serde(default)]
    pub header: HashMap<String, String>,
}

/// An LFS server at one endpoint.
pub struct Client {
    endpoint: Url,
    access: Access,
    http: reqwest::Client,
}

impl Client {
    pub fn new(endpoint: Url, access: Access) -> Result<Client, LfsError> {
        if let Some(why) = access.refusal(&endpoint) {
            return Err(LfsError::NotAllowed { why });
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| LfsError::Endpoint {
                detail: format!("cannot make the HTTP client: {}", crate::redact::http_error(&e)),
            })?;
        Ok(Client {
            endpoint,
            access,
            http,
        })
    }

    /// The endpoint as it may be said.
    pub fn endpoint(&self) -> String {
        redacted(&self.endpoint)
    }

    /// Asks the server about `objects` for `operation`, in batches.
    pub async fn batch(
        &self,
        operation: Operation,
        objects: &[Pointer],
    ) -> Result<Vec<ObjectAnswer>, LfsError> {
        // Onto the path: a query or fragment never takes the batch path in.
        let mut url = self.endpoint.clone();
        url.set_query(None);
        url.set_fragment(None);
        let path = format!("{}/objects/batch", url.path().trim_end_matches('/'));
        url.set_path(&path);
        let mut answers = Vec::with_capacity(objects.len());
        for chunk in objects.chunks(BATCH_SIZE) {
            let body = BatchRequest {
                operation,
                transfers: ["basic"],
                objects: chunk
                    .iter()
                    .map(|p| ObjectSpec {
                        oid: &p.oid,
                        size: p.size,
                    })
                    .collect(),
                hash_algo: "sha256",
            };
            let response = self
                .http
                .post(url.clone())
                .basic_auth(
                    &self.access.credentials.username,
                    Some(self.access.credentials.token.expose()),
                )
                .header(reqwest::header::ACCEPT, MEDIA_TYPE)
                .header(reqwest::header::CONTENT_TYPE, MEDIA_TYPE)
                .json(&body)
                .send()
                .await
                .map_err(|e| network(&url, &e))?;
            let response = checked(&url, response).await?;
            let parsed: BatchResponse = response.json().await.map_err(|e| LfsError::Protocol {
                detail: format!(
                    "the batch answer from {} is not the LFS batch JSON ({})",
                    redacted(&url),
                    crate::redact::http_error(&e)
                ),
            })?;
            if parsed.transfer.as_deref().is_some_and(|t| t != "basic") {
                return Err(LfsError::Protocol {
                    detail: format!(
                        "the server chose the transfer {:?}; only basic was offered",
                        parsed.transfer
                    ),
                });
            }
            answers.extend(parsed.objects);
        }
        Ok(answers)
    }

    /// A request to an action's href, with its headers; the forge
    /// credential only when the action brings no authorization of its own
    /// and the href is at the LFS server's or the forge's own origin (a
    /// storage address elsewhere is signed, and must not see the token).
    fn action_request(
        &self,
        method: reqwest::Method,
        action: &Action,
    ) -> Result<reqwest::RequestBuilder, LfsError> {
        let url = Url::parse(&action.href).map_err(|e| LfsError::Protocol {
            detail: format!("an action's href is not a URL ({e})"),
        })?;
        if let Some(why) = self.access.refusal(&url) {
            return Err(LfsError::NotAllowed { why });
        }
        let credential = self.access.takes_credential(&url, &self.endpoint);
        let mut request = self.http.request(method, url);
        let mut authorized = false;
        for (name, value) in &action.header {
            authorized |= name.eq_ignore_ascii_case("authorization");
            request = request.header(name.as_str(), value.as_str());
        }
        if !authorized && credential {
            let c = &self.access.credentials;
            request = request.basic_auth(&c.username, Some(c.token.expose()));
        }
        Ok(request)
    }

    /// Downloads `pointer`'s object to `dest` (through a file beside it),
    /// checking its size and sha256 as it comes.
    pub async fn download(&self, action: &Action, pointer: &Pointer, dest: &Path) -> Result<(), LfsError> {
        let mut response = sent(self.action_request(reqwest::Method::GET, action)?, action).await?;
        let partial = dest.with_extension("forgehand-lfs-partial");
        let io = |source| LfsError::Io {
            path: partial.clone(),
            source,
        };
        let mut file = std::fs::File::create(&partial).map_err(io)?;
        let (mut hasher, mut size) = (Sha256::new(), 0u64);
        while let Some(chunk) = response.chunk().await.map_err(|e| LfsError::Network {
            url: href_shown(&action.href),
            detail: crate::redact::http_error(&e),
        })? {
            size += chunk.len() as u64;
            if size > pointer.size {
                break;
            }
            hasher.update(&chunk);
            file.write_all(&chunk).map_err(io)?;
        }
        drop(file);
        if size != pointer.size || hex::encode(hasher.finalize()) != pointer.oid {
            let _ = std::fs::remove_file(&partial);
            return Err(LfsError::Corrupt {
                oid: pointer.oid.clone(),
            });
        }
        std::fs::rename(&partial, dest).map_err(|source| LfsError::Io {
            path: dest.to_owned(),
            source,
        })
    }

    /// Sends an object's content to an upload action.
    pub async fn upload(&self, action: &Action, content: Vec<u8>) -> Result<(), LfsError> {
        let request = self
            .action_request(reqwest::Method::PUT, action)?
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(content);
        sent(request, action).await.map(drop)
    }

    /// Asks a verify action whether the server holds `pointer`'s object.
    pub async fn verify(&self, action: &Action, pointer: &Pointer) -> Result<(), LfsError> {
        let request = self
            .action_request(reqwest::Method::POST, action)?
            .header(reqwest::header::ACCEPT, MEDIA_TYPE)
            .header(reqwest::header::CONTENT_TYPE, MEDIA_TYPE)
            .body(serde_json::json!({"oid": pointer.oid, "size": pointer.size}).to_string());
        sent(request, action).await.map(drop)
    }
}

fn href_shown(href: &str) -> String {
    Url::parse(href)
        .map(|u| redacted(&u))
        .unwrap_or_else(|_| "(not a URL)".into())
}

fn network(url: &Url, err: &reqwest::Error) -> LfsError {
    LfsError::Network {
        url: redacted(url),
        detail: crate::redact::http_error(err),
    }
}

/// Sends `request` to `action`'s address; its answer when the status is
/// a success (else the server's error, said with the address redacted).
async fn sent(request: reqwest::RequestBuilder, action: &Action) -> Result<reqwest::Response, LfsError> {
    let response = request.send().await.map_err(|e| LfsError::Network {
        url: href_shown(&action.href),
        detail: crate::redact::http_error(&e),
    })?;
    checked_href(&action.href, response).await
}

async fn checked_href(href: &str, response: reqwest::Response) -> Result<reqwest::Response, LfsError> {
    match Url::parse(href) {
        Ok(url) => checked(&url, response).await,
        Err(e) => Err(LfsError::Protocol {
            detail: e.to_string(),
        }),
    }
}

/// The response when it succeeded, else the server's refusal with the
/// `message` of its LFS error JSON.
async fn checked(url: &Url, response: reqwest::Response) -> Result<reqwest::Response, LfsError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let text = response.text().await.unwrap_or_default();
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(200).collect());
    Err(LfsError::Refused {
        url: redacted(url),
        status: status.as_u16(),
        message: crate::sanitize::for_forge_line(&crate::redact::urls_in(&message), 200),
    })
}
