//! Files uploaded to a GitLab project's threads (Markdown uploads API:
//! `POST /projects/:id/uploads` answers `url` `/uploads/<secret>/<file>`
//! and `full_path` `/-/project/<id>/uploads/<secret>/<file>`). They are
//! served on the web routes `/<project>/uploads/<secret>/<file>` and
//! `/-/project/<id>/uploads/<secret>/<file>`, with the type the file's name
//! gives; a private project's upload needs the `PRIVATE-TOKEN` (404
//! without it, as GitLab answers for what a caller may not see).

use wiremock::{Request, ResponseTemplate};

/// One uploaded file.
struct Upload {
    project: String,
    project_id: u64,
    secret: String,
    name: String,
    bytes: Vec<u8>,
}

#[derive(Default)]
pub(super) struct Uploads {
    files: Vec<Upload>,
    /// Each request for an upload: its path and whether it had the token.
    pub requests: Vec<(String, bool)>,
}

impl Uploads {
    /// Stores `bytes` as `name` in `project`; returns the markdown `url`.
    pub(super) fn add(&mut self, project: &str, id: u64, bytes: Vec<u8>, name: &str) -> String {
        let secret = format!("{:032x}", self.files.len() as u128 + 0x66db_cd21);
        self.files.push(Upload {
            project: project.to_owned(),
            project_id: id,
            secret: secret.clone(),
            name: name.to_owned(),
            bytes,
        });
        format!("/uploads/{secret}/{name}")
    }

    /// The answer to `req` when it asks for an upload; `None` otherwise.
    pub(super) fn respond(&mut self, req: &Request, token: &str) -> Option<ResponseTemplate> {
        let path = req.url.path().trim_start_matches('/');
        let (owner, rest) = path.split_once("/uploads/")?;
        let (secret, name) = rest.split_once('/')?;
        let authorized = req
            .headers
            .get("private-token")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == token);
        self.requests.push((req.url.path().to_owned(), authorized));
        let by_id: Option<u64> = owner.strip_prefix("-/project/").and_then(|id| id.parse().ok());
        let found = self.files.iter().find(|u| {
            (by_id == Some(u.project_id) || owner == u.project) && u.secret == secret && u.name == name
        });
        Some(match found {
            Some(Upload { bytes, .. }) if authorized => {
                let kind = match name.rsplit('.').next().unwrap_or_default() {
                    "png" => "image/png",
                    "jpg" | "jpeg" => "image/jpeg",
                    _ => "application/octet-stream",
                };
                ResponseTemplate::new(200).set_body_raw(bytes.clone(), kind)
            }
            _ => ResponseTemplate::new(404).set_body_string("Not Found"),
        })
    }
}
