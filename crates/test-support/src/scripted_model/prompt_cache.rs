//! Prompt caching as each provider documents it, for the scripted model
//! server: which part of a request's input the provider would serve from
//! its cache, write to it, or read fresh, so that usage figures (and so
//! cost) follow what the client sends. Tokens are estimated as 4 bytes of
//! the JSON of each block.
//!
//! - Anthropic (prompt caching guide): only prefixes ending at a block with
//!   `cache_control` are written (at least 1024 tokens); a read is the
//!   longest stored prefix ending at a block boundary at most 20 blocks
//!   before a breakpoint; writes are billed apart from reads and input.
//! - OpenAI (prompt caching guide): automatic for prefixes of 1024 tokens
//!   and more, in steps of 128; nothing is billed for writes.
//! - Gemini (implicit caching): automatic, from 1024 tokens (4096 on Pro
//!   models), reported as `cachedContentTokenCount`.

use super::Format;
use serde_json::Value;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Every input token.
    pub total: u64,
    pub read: u64,
    pub written: u64,
}

#[derive(Default)]
pub struct PromptCache {
    /// Stored prefixes: hash of the prefix, its tokens.
    stored: HashMap<u64, u64>,
}

/// A request's input as blocks in prefix order, with whether each carries a
/// cache breakpoint.
fn blocks(format: Format, body: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    // The marker says where a prefix ends; it is not part of what is cached.
    let mut push = |v: &Value| {
        let mut content = v.clone();
        let marked = content
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        out.push((content.to_string(), marked));
    };
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    match format {
        Format::Anthropic => {
            list(&body["tools"]).iter().for_each(&mut push);
            match &body["system"] {
                Value::Array(blocks) => blocks.iter().for_each(&mut push),
                Value::Null => {}
                other => push(other),
            }
            for m in list(&body["messages"]) {
                list(&m["content"]).iter().for_each(&mut push);
            }
        }
        Format::Responses => {
            push(&body["instructions"]);
            list(&body["tools"]).iter().for_each(&mut push);
            list(&body["input"]).iter().for_each(&mut push);
        }
        Format::Gemini => {
            push(&body["systemInstruction"]);
            push(&body["tools"]);
            for c in list(&body["contents"]) {
                list(&c["parts"]).iter().for_each(&mut push);
            }
        }
        Format::OpenAi => {
            push(&body["tools"]);
            list(&body["messages"]).iter().for_each(&mut push);
        }
    }
    out
}

fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

impl PromptCache {
    /// What the provider would report for `body` (and what it now stores).
    pub fn account(&mut self, format: Format, model: &str, body: &Value) -> CacheUsage {
        let blocks = blocks(format, body);
        // Prefix hashes and token counts at each block boundary (index k:
        // the first k blocks).
        let mut hashes = vec![0u64];
        let mut counts = vec![0u64];
        let mut hasher = DefaultHasher::new();
        for (text, _) in &blocks {
            text.hash(&mut hasher);
            hashes.push(hasher.finish());
            counts.push(counts.last().unwrap() + tokens(text));
        }
        let total = *counts.last().unwrap();
        match format {
            Format::Anthropic => self.explicit(&blocks, &hashes, &counts, total),
            _ => {
                let minimum = if format == Format::Gemini && model.contains("pro") {
                    4096
                } else {
                    1024
                };
                self.automatic(&hashes, &counts, total, minimum)
            }
        }
    }

    fn explicit(
        &mut self,
        blocks: &[(String, bool)],
        hashes: &[u64],
        counts: &[u64],
        total: u64,
    ) -> CacheUsage {
        let breakpoints: Vec<usize> = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.1)
            .map(|(i, _)| i + 1)
            .collect();
        let read_at = breakpoints
            .iter()
            .flat_map(|&b| (b.saturating_sub(20)..=b).rev())
            .filter(|&j| self.stored.contains_key(&hashes[j]))
            .max()
            .unwrap_or(0);
        let last = breakpoints.iter().copied().max().unwrap_or(0);
        let mut written = 0;
        if last > read_at && counts[last] >= 1024 {
            written = counts[last] - counts[read_at];
            for &b in &breakpoints {
                if counts[b] >= 1024 {
                    self.stored.insert(hashes[b], counts[b]);
                }
            }
        }
        CacheUsage {
            total,
            read: counts[read_at],
            written,
        }
    }

    fn automatic(&mut self, hashes: &[u64], counts: &[u64], total: u64, minimum: u64) -> CacheUsage {
        let hit = (0..hashes.len())
            .rev()
            .find(|&j| self.stored.contains_key(&hashes[j]))
            .map(|j| counts[j])
            .unwrap_or(0);
        let read = if hit >= minimum {
            hit - (hit - minimum) % 128
        } else {
            0
        };
        for (j, &count) in counts.iter().enumerate() {
            if count >= minimum {
                self.stored.insert(hashes[j], count);
            }
        }
        CacheUsage {
            total,
            read,
            written: 0,
        }
    }
}
