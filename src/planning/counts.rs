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

use super::pack::SourceFile;
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

/// Tokens of `document`, the element of `file` at `index` in a pack: kept
/// from an earlier pack when the file's path and text are the same, else
/// counted (and kept).
pub fn document_tokens(index: usize, file: &SourceFile, document: &str) -> u64 {
    let key = key(file);
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
fn key(file: &SourceFile) -> [u8; 16] {
    let mut hasher = Sha256::new();
    hasher.update(file.path.as_bytes());
    hasher.update([0]);
    hasher.update(file.text.as_bytes());
    let digest = hasher.finalize();
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

#[cfg(test)]
mod tests {
    use super::super::pack::{document, render};
    use super::*;

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: path.to_owned(),
            text: text.to_owned(),
        }
    }

    #[test]
    fn a_kept_count_is_exact_at_any_index() {
        let texts = [
            "fn main() {}\n",
            "/* a comment right after the element's start */\n",
            "\n\nleading blank lines",
            "12345 digits first\n",
            "日本語のテキスト\r\n",
            "",
            "  indented\n",
        ];
        for (n, text) in texts.iter().enumerate() {
            let f = file(&format!("kept/{n}.txt"), text);
            for index in [1, 7, 10, 99, 100, 999, 1000, 1234, 20_001] {
                let doc = document(index, &f);
                assert_eq!(
                    document_tokens(index, &f, &doc),
                    count_text(&doc),
                    "{text:?} at {index}"
                );
            }
        }
    }

    #[test]
    fn a_pack_after_a_file_was_added_before_the_others_counts_the_same() {
        let files: Vec<SourceFile> = (0..12)
            .map(|i| {
                file(
                    &format!("shift/f{i}.py"),
                    &format!("def f{i}():\n    return {i}\n"),
                )
            })
            .collect();
        let first = render(&files[1..], Vec::new());
        assert_eq!(first.tokens, count_text(&first.xml));
        // Every file but the first now one index later, its count kept.
        let second = render(&files, Vec::new());
        assert_eq!(second.tokens, count_text(&second.xml));
        assert!(kept() >= 12);
    }
}
