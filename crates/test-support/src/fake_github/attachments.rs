//! Files people upload to GitHub's threads. `<web>/user-attachments/assets/<id>`
//! answers a request with the token by a 302 to a signed address on
//! GitHub's image host (`private-user-images.githubusercontent.com/...?jwt=`;
//! here under `/private-user-images/` on the fake's own host), which serves
//! the bytes with the type the upload's name gave, whatever they are.
//! Without the token the asset is a 404, as GitHub answers for what a
//! caller may not see.

use wiremock::{Request, ResponseTemplate};

#[derive(Default)]
pub(super) struct Attachments {
    /// id -> (bytes, the `Content-Type` its name gives).
    files: std::collections::HashMap<String, (Vec<u8>, String)>,
    /// Each request for an upload: its path and whether it carried the token.
    pub requests: Vec<(String, bool)>,
}

impl Attachments {
    /// Stores `bytes` as an upload named `name`; returns its id.
    pub(super) fn add(&mut self, bytes: Vec<u8>, name: &str) -> String {
        let id = format!("0b1c2d3e-0000-4000-8000-{:012}", self.files.len() + 1);
        let kind = match name.rsplit('.').next().unwrap_or_default() {
            "png" => "image/png",
            "jpg" | "jpeg" => "image/jpeg",
            "gif" => "image/gif",
            "webp" => "image/webp",
            _ => "application/octet-stream",
        };
        self.files.insert(id.clone(), (bytes, kind.to_owned()));
        id
    }

    /// The answer to `req` when it asks for an upload; `None` otherwise.
    pub(super) fn respond(&mut self, req: &Request, token: &str) -> Option<ResponseTemplate> {
        let path = req.url.path();
        let authorized = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == format!("Bearer {token}") || v == format!("token {token}"));
        if let Some(id) = path.strip_prefix("/user-attachments/assets/") {
            self.requests.push((path.to_owned(), authorized));
            if !authorized || !self.files.contains_key(id) {
                return Some(ResponseTemplate::new(404).set_body_string("Not Found"));
            }
            let signed = format!("/private-user-images/{id}?jwt=signed-{id}");
            return Some(ResponseTemplate::new(302).insert_header("location", signed.as_str()));
        }
        if let Some(id) = path.strip_prefix("/private-user-images/") {
            self.requests.push((path.to_owned(), authorized));
            let signed = req
                .url
                .query_pairs()
                .any(|(k, v)| k == "jwt" && v == format!("signed-{id}"));
            return Some(match self.files.get(id) {
                Some((bytes, kind)) if signed => {
                    ResponseTemplate::new(200).set_body_raw(bytes.clone(), kind.as_str())
                }
                _ => ResponseTemplate::new(404).set_body_string("Not Found"),
            });
        }
        None
    }
}
