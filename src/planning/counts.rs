//! The token counts of packed files, kept from one pack to the next by
//! their content: a repository's next task packs mostly the same files,
//! and counting is most of a pack's time (see [`super::pack`]).
//!
//! What is kept is the count of a file's `<document>` element less its
//! index's digits, so a file counted at one place in a pack is known at
//! any other (a selection, a checkout with a file added before it). The
//! digits stand alone in the o200k pre-tokenizer's pieces (`="` before
//! them, `">` after), so the element's count is the kept count plus the
//! digits' own, exactly.
//!
//! The store is bounded: 16 bytes of digest and a count per file, about
//! 1.6 MB at its most (65,536 slots of 25 bytes), emptied when full.

use crate::llm::tokens::count_text;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// Files whose counts are kept at most; the store is emptied when it holds
/// this many (a repository far larger than this is rare, and counting it
/// again costs only time).
const MAX_KEPT: usize = 50_000;

/// The count of a document less its index's, by the digest of the file's
/// path and text.
static KEPT: LazyLock<Mutex<HashMap<[u8; 16], u64>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Tokens of `document`, the element at `index` in a pack of the file at
/// `path` holding `text`: kept from an earlier pack when the file's path
/// and text are the same, else counted (and kept).
pub fn document_tokens(index: usize, (path, text): (&str, &str), document: &str) -> u64 {
    let key = key(path, text);
    let index_tokens = count_text(&index.to_string());
    let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner()).get(&key).copied();
    if let Some(rest) = kept {
        return rest + index_tokens;
    }
    let tokens = count_text(document);
    let mut store = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    if store.len() >= MAX_KEPT {
        *store = HashMap::new();
    }
    store.insert(key, tokens.saturating_sub(index_tokens));
    tokens
}

/// Files whose counts are kept now.
pub fn kept() -> usize {
    KEPT.lock().unwrap_or_else(|p| p.into_inner()).len()
}

/// The first 16 bytes of the SHA-256 of the path and the text: as good as
/// the whole digest against a chance collision among a store's files.
fn key(path: &str, text: &str) -> [u8; 16] {
    let mut hasher = Sha256::new();
    hasher.update(path.as_bytes());
    hasher.update([0]);
    hasher.update(text.as_bytes());
    let digest = hasher.finalize();
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}
