//! Images from the thread: the screenshots and diagrams people put in an
//! issue or its comments, given to the models that take images.
//!
//! Only the texts that reach the model are read (the caller passes the
//! thread as [`crate::task::request`] filtered it: people allowed to
//! trigger, sanitized). Each image link ([`links`]) is checked against the
//! forge's own upload hosts ([`site`]); a link anywhere else is never
//! fetched and stays text. Uploads are downloaded on the host with the
//! forge's credential ([`fetch`]), at most `agent.images.max_count` of
//! them and `max_bytes` each, and kept only when their bytes are a PNG,
//! JPEG, GIF or WebP image ([`magic`]).

pub mod fetch;
pub mod links;
pub mod magic;
pub mod site;

pub use site::UploadSite;

use crate::config::{Secret, ThreadImagesConfig};
use crate::llm::image::ImagePart;
use base64::Engine;

/// What became of a thread's image links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gathered {
    /// Downloaded and checked, in the thread's order.
    pub images: Vec<ImagePart>,
    /// Uploads that could not be taken, with why.
    pub refused: Vec<Refused>,
    /// Links to other hosts, never fetched (the text keeps them).
    pub elsewhere: Vec<String>,
    /// Uploads past `max_count`, not fetched.
    pub over_count: usize,
}

/// An upload that was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub alt: String,
    pub source: String,
    pub why: fetch::FetchError,
}

impl Refused {
    /// The note the models read in its place.
    pub fn note(&self) -> String {
        let alt = self.alt.trim();
        let alt = if alt.is_empty() { "no alt text" } else { alt };
        format!("[image: {alt}, not shown: {}]", self.why)
    }
}

/// The images linked from `texts` (in order) that live on `site`.
pub async fn gather(
    texts: &[&str],
    site: &UploadSite,
    token: &Secret,
    config: &ThreadImagesConfig,
) -> Gathered {
    let mut gathered = Gathered::default();
    let mut seen = Vec::new();
    let http = match fetch::client() {
        Ok(http) => http,
        Err(e) => {
            tracing::warn!("images from the thread are left out: {e}");
            return gathered;
        }
    };
    for link in texts.iter().flat_map(|t| links::image_links(t)) {
        if seen.contains(&link.url) {
            continue;
        }
        seen.push(link.url.clone());
        let Some(url) = site.upload_url(&link.url) else {
            gathered.elsewhere.push(link.url);
            continue;
        };
        if gathered.images.len() + gathered.refused.len() >= config.max_count {
            gathered.over_count += 1;
            continue;
        }
        match fetch::download(&http, site, token, url, config.max_bytes).await {
            Ok(image) => gathered.images.push(ImagePart {
                media_type: image.media_type.to_owned(),
                data: base64::engine::general_purpose::STANDARD.encode(&image.bytes),
                alt: link.alt,
                source: link.url,
                size: image.size,
                animated: magic::animated_gif(&image.bytes),
            }),
            Err(why) => gathered.refused.push(Refused {
                alt: link.alt,
                source: link.url,
                why,
            }),
        }
    }
    gathered
}
