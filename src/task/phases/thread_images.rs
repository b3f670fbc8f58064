//! The thread's images for this run (`agent.images`): read from the same
//! texts that reach the model (people allowed to trigger, sanitized),
//! downloaded from the forge's upload hosts only (see
//! [`crate::thread_images`]), said on the progress comment and recorded
//! in the transcript. Planning and the agent's first turn carry them.

use crate::config::ThreadImagesConfig;
use crate::task::handoff::Claimed;
use crate::task::handoff::ThreadImages;
use crate::task::phases::context::conversation_key;
use crate::task::phases::request;
use crate::task::report::events::TaskEvent;
use crate::task::run::TaskRun;
use crate::thread_images::{self, Gathered};
use crate::transcript::Entry;

/// Images up to this many base64 bytes are shown whole on the transcript
/// page as their own thumbnail; larger ones are described.
const THUMBNAIL_BASE64: usize = 256 * 1024;

/// Downloads the images of the thread's heard texts.
pub(in crate::task) async fn gather(
    run: &TaskRun<'_>,
    config: &ThreadImagesConfig,
    branch_prefix: &str,
    claimed: &Claimed,
) -> ThreadImages {
    if !config.enabled {
        return ThreadImages::default();
    }
    let continued = conversation_key(&run.item, &claimed.target.branch, branch_prefix) != run.item.key();
    let heard = request::messages(
        &claimed.item,
        &claimed.thread.author,
        &claimed.thread.comments,
        !continued,
    );
    let texts: Vec<&str> = heard.iter().map(|m| m.text.as_str()).collect();
    if !texts
        .iter()
        .any(|t| t.contains("![") || t.to_ascii_lowercase().contains("<img"))
    {
        return ThreadImages::default();
    }
    let Some(site) = run.forge.upload_site(&run.item.repo) else {
        return ThreadImages::default();
    };
    let token = match run.forge.git_credentials().await {
        Ok(credentials) => credentials.token,
        Err(e) => {
            run.note(format!(
                "Images from the thread left out: no credentials for the forge ({e})"
            ));
            return ThreadImages::default();
        }
    };
    let gathered = thread_images::gather(&texts, &site, &token, config).await;
    if let Some(line) = progress_line(&gathered) {
        run.note(line);
    }
    record(run, &gathered);
    ThreadImages {
        notes: gathered.refused.iter().map(|r| r.note()).collect(),
        images: gathered.images,
    }
}

/// The progress comment's line on the thread's images.
fn progress_line(gathered: &Gathered) -> Option<String> {
    let mut parts = Vec::new();
    if !gathered.images.is_empty() {
        parts.push(format!(
            "{} given to the models that take images",
            gathered.images.len()
        ));
    }
    for refused in &gathered.refused {
        parts.push(format!("one left out: {}", refused.why));
    }
    if gathered.over_count > 0 {
        parts.push(format!(
            "{} past agent.images.max_count not downloaded",
            gathered.over_count
        ));
    }
    if !gathered.elsewhere.is_empty() {
        parts.push(format!(
            "{} link(s) to other hosts not fetched (only the forge's own uploads are)",
            gathered.elsewhere.len()
        ));
    }
    (!parts.is_empty()).then(|| format!("Images from the thread: {}", parts.join("; ")))
}

/// Each image, with a thumbnail when small, and each refusal, for the
/// transcript.
fn record(run: &TaskRun<'_>, gathered: &Gathered) {
    for image in &gathered.images {
        run.emit(TaskEvent::Image(Entry::Image {
            source: image.source.clone(),
            alt: image.alt.clone(),
            media_type: Some(image.media_type.clone()),
            bytes: (image.data.len() / 4 * 3) as u64,
            size: image.size,
            thumbnail: (image.data.len() <= THUMBNAIL_BASE64).then(|| image.data_url()),
            refused: None,
        }));
    }
    for refused in &gathered.refused {
        let bytes = match refused.why {
            thread_images::fetch::FetchError::NotAnImage { bytes } => bytes,
            _ => 0,
        };
        run.emit(TaskEvent::Image(Entry::Image {
            source: refused.source.clone(),
            alt: refused.alt.clone(),
            media_type: None,
            bytes,
            size: None,
            thumbnail: None,
            refused: Some(refused.why.to_string()),
        }));
    }
    for link in &gathered.elsewhere {
        run.emit(TaskEvent::TranscriptNote(format!(
            "Image link not fetched (not one of the forge's upload hosts): {link}"
        )));
    }
}
