//! A Git LFS server written from the batch API specification
//! (git-lfs/docs/api/batch.md, basic-transfers.md): `POST
//! <endpoint>/objects/batch` with `application/vnd.git-lfs+json` both ways,
//! HTTP basic auth for the batch, `download` / `upload` / `verify` actions
//! whose hrefs carry their own `Authorization` header, objects checked
//! against their sha256 and size on upload. Never kinder than a real
//! server: a missing or wrong media type is 406/422, a wrong credential
//! 401 with `LFS-Authenticate`, an unknown request a 500 the test sees.

use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

pub const MEDIA_TYPE: &str = "application/vnd.git-lfs+json";

/// The signature in signed download hrefs ([`FakeLfs::sign_downloads_at`]):
/// a credential for the object, which must never be shown.
pub const DOWNLOAD_SIGNATURE: &str =
    "X-Amz-Signature=5ec12e7f00d5a1a7f3e2b9c4d8e6f1a0b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7";

/// The token the fake's action hrefs require (not the forge's).
const ACTION_TOKEN: &str = "RemoteAuth fake-lfs-action-token";

#[derive(Default)]
struct State {
    objects: HashMap<String, Vec<u8>>,
    /// Request lines, in order.
    requests: Vec<String>,
    /// Requests the specification does not have: a test failure.
    unknown: Vec<String>,
    refuse_uploads: bool,
    /// Where download hrefs point, signed, instead of this server.
    signed_downloads: Option<String>,
}

pub struct FakeLfs {
    pub server: MockServer,
    state: Arc<Mutex<State>>,
}

struct Responder {
    state: Arc<Mutex<State>>,
    basic: String,
    base: Arc<Mutex<String>>,
}

impl FakeLfs {
    /// A server that takes the batch API with basic auth `username:token`.
    pub async fn start(username: &str, token: &str) -> FakeLfs {
        let state = Arc::new(Mutex::new(State::default()));
        let base = Arc::new(Mutex::new(String::new()));
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{username}:{token}"))
        );
        let server = crate::fake_http::serve(Responder {
            state: state.clone(),
            basic,
            base: base.clone(),
        })
        .await;
        *base.lock().unwrap() = server.uri();
        FakeLfs { server, state }
    }

    /// The endpoint of repository `repo` (`owner/name`) on this server.
    pub fn endpoint(&self, repo: &str) -> String {
        format!("{}/{repo}.git/info/lfs", self.server.uri())
    }

    /// Stores `content`; returns its pointer text.
    pub fn put(&self, content: &[u8]) -> String {
        let oid = hex(content);
        self.state
            .lock()
            .unwrap()
            .objects
            .insert(oid.clone(), content.to_vec());
        pointer_text(content)
    }

    pub fn object(&self, oid: &str) -> Option<Vec<u8>> {
        self.state.lock().unwrap().objects.get(oid).cloned()
    }

    /// Makes every upload batch answer 403, as a server that denies write access.
    pub fn refuse_uploads(&self) {
        self.state.lock().unwrap().refuse_uploads = true;
    }

    /// Makes download hrefs point at `storage` with a signed query, as a
    /// real LFS server hands out presigned addresses of its object storage
    /// (S3 query authentication: the signature travels in the query).
    pub fn sign_downloads_at(&self, storage: &str) {
        self.state.lock().unwrap().signed_downloads = Some(storage.trim_end_matches('/').to_owned());
    }

    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn unknown_requests(&self) -> Vec<String> {
        self.state.lock().unwrap().unknown.clone()
    }
}

/// The canonical pointer text git-lfs writes for `content`.
pub fn pointer_text(content: &[u8]) -> String {
    format!(
        "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n",
        hex(content),
        content.len()
    )
}

fn hex(content: &[u8]) -> String {
    Sha256::digest(content)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn lfs_json(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(serde_json::to_vec(&body).unwrap(), MEDIA_TYPE)
}

fn header<'r>(req: &'r Request, name: &str) -> Option<&'r str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let line = format!("{} {}", req.method.as_str(), req.url.path());
        self.state.lock().unwrap().requests.push(line.clone());
        let path = req.url.path().to_owned();
        let method = req.method.as_str();
        if method == "POST" && path.ends_with("/info/lfs/objects/batch") {
            return self.batch(req);
        }
        if let Some(oid) = path.strip_prefix("/objects/") {
            if method == "GET" {
                return self.download(req, oid);
            }
            if method == "PUT" {
                return self.upload(req, oid);
            }
        }
        if method == "POST" && path == "/verify" {
            return self.verify(req);
        }
        self.state.lock().unwrap().unknown.push(line.clone());
        ResponseTemplate::new(500).set_body_string(format!("the fake LFS server does not know {line}"))
    }
}

impl Responder {
    fn batch(&self, req: &Request) -> ResponseTemplate {
        if header(req, "authorization") != Some(self.basic.as_str()) {
            return lfs_json(401, json!({"message": "Credentials needed"}))
                .insert_header("LFS-Authenticate", "Basic realm=\"Git LFS\"");
        }
        if !header(req, "accept").is_some_and(|a| a.contains(MEDIA_TYPE)) {
            return lfs_json(
                406,
                json!({"message": "Accept must be application/vnd.git-lfs+json"}),
            );
        }
        if !header(req, "content-type").is_some_and(|c| c.starts_with(MEDIA_TYPE)) {
            return lfs_json(
                422,
                json!({"message": "Content-Type must be application/vnd.git-lfs+json"}),
            );
        }
        let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
            return lfs_json(422, json!({"message": "the body is not JSON"}));
        };
        let operation = body["operation"].as_str().unwrap_or_default().to_owned();
        let basic = body["transfers"]
            .as_array()
            .is_none_or(|t| t.iter().any(|t| t == "basic"));
        if !matches!(operation.as_str(), "download" | "upload") || !basic {
            return lfs_json(
                422,
                json!({"message": "operation must be download or upload, with the basic transfer"}),
            );
        }
        let Some(objects) = body["objects"].as_array() else {
            return lfs_json(422, json!({"message": "objects is missing"}));
        };
        if operation == "upload" && self.state.lock().unwrap().refuse_uploads {
            return lfs_json(
                403,
                json!({"message": "write access to this repository's LFS storage is denied"}),
            );
        }
        let base = self.base.lock().unwrap().clone();
        let state = self.state.lock().unwrap();
        let stored = &state.objects;
        let mut answers = Vec::new();
        for object in objects {
            let oid = object["oid"].as_str().unwrap_or_default();
            let Some(size) = object["size"].as_u64() else {
                return lfs_json(422, json!({"message": "an object has no size"}));
            };
            if oid.len() != 64
                || !oid
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            {
                answers.push(
                    json!({"oid": oid, "size": size, "error": {"code": 422, "message": "invalid oid"}}),
                );
                continue;
            }
            let action = |href: String| json!({"href": href, "header": {"Authorization": ACTION_TOKEN}, "expires_in": 3600});
            let held = stored.get(oid);
            let answer = match (operation.as_str(), held) {
                ("download", Some(content)) if content.len() as u64 == size => {
                    // A presigned storage address carries its authority in
                    // its query, and no header (as S3's and GitHub's do).
                    let download = match &state.signed_downloads {
                        Some(storage) => json!({"href": format!(
                            "{storage}/objects/{oid}?{DOWNLOAD_SIGNATURE}&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAFAKE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Expires=3600"
                        ), "expires_in": 3600}),
                        None => action(format!("{base}/objects/{oid}")),
                    };
                    json!({"oid": oid, "size": size, "authenticated": true, "actions": {"download": download}})
                }
                ("download", Some(_)) => {
                    json!({"oid": oid, "size": size, "error": {"code": 422, "message": "size does not match"}})
                }
                ("download", None) => {
                    json!({"oid": oid, "size": size, "error": {"code": 404, "message": "Object does not exist"}})
                }
                (_, Some(_)) => json!({"oid": oid, "size": size, "authenticated": true}),
                (_, None) => json!({
                    "oid": oid, "size": size, "authenticated": true,
                    "actions": {
                        "upload": action(format!("{base}/objects/{oid}")),
                        "verify": action(format!("{base}/verify"))
                    }
                }),
            };
            answers.push(answer);
        }
        lfs_json(
            200,
            json!({"transfer": "basic", "objects": answers, "hash_algo": "sha256"}),
        )
    }

    fn download(&self, req: &Request, oid: &str) -> ResponseTemplate {
        if header(req, "authorization") != Some(ACTION_TOKEN) {
            return ResponseTemplate::new(401);
        }
        match self.state.lock().unwrap().objects.get(oid) {
            Some(content) => {
                ResponseTemplate::new(200).set_body_raw(content.clone(), "application/octet-stream")
            }
            None => ResponseTemplate::new(404),
        }
    }

    fn upload(&self, req: &Request, oid: &str) -> ResponseTemplate {
        if header(req, "authorization") != Some(ACTION_TOKEN) {
            return ResponseTemplate::new(401);
        }
        if hex(&req.body) != oid {
            return lfs_json(422, json!({"message": "the content's sha256 is not the oid"}));
        }
        self.state
            .lock()
            .unwrap()
            .objects
            .insert(oid.to_owned(), req.body.clone());
        ResponseTemplate::new(200)
    }

    fn verify(&self, req: &Request) -> ResponseTemplate {
        if header(req, "authorization") != Some(ACTION_TOKEN) {
            return ResponseTemplate::new(401);
        }
        if !header(req, "content-type").is_some_and(|c| c.starts_with(MEDIA_TYPE)) {
            return lfs_json(
                422,
                json!({"message": "Content-Type must be application/vnd.git-lfs+json"}),
            );
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let oid = body["oid"].as_str().unwrap_or_default();
        let size = body["size"].as_u64();
        match self.state.lock().unwrap().objects.get(oid) {
            Some(content) if Some(content.len() as u64) == size => lfs_json(200, json!({})),
            _ => lfs_json(404, json!({"message": "Object does not exist"})),
        }
    }
}
