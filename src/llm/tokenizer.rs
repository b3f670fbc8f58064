//! The o200k tokenizer (the encoding of OpenAI's current models) in about
//! 9 MB instead of 65. Text is split as tiktoken splits it (`bpe-openai`'s
//! pre-tokenizing regex, which needs no byte-pair tables), and each piece
//! is merged by rank, as tiktoken merges: the lowest-ranked adjacent pair
//! first, until no pair is a token. The vocabulary is compiled in by
//! `build.rs` (every token's bytes, in rank order); the index over it (a
//! hash table of ranks, 4 bytes a token) is built at the first count. Counts equal `bpe-openai`'s (and tiktoken's),
//! which the tests check over the repository's own sources.

use bpe::byte_pair_encoding::BytePairEncoding;
use hashbrown::HashTable;
use std::hash::BuildHasher;
use std::sync::LazyLock;

/// Every token's bytes, concatenated in rank order.
const BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k.bytes"));
/// Where each token starts in [`BYTES`] (little-endian `u32`s), and its end.
const STARTS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k.starts"));

/// o200k's split pattern as `bpe-openai` writes it for its regex engine:
/// the negative look-ahead `\s+(?!\S)` becomes a second pattern whose last
/// character is dropped from the match.
const PATTERN: [&str; 6] = [
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "\\p{N}{1,3}",
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
    "\\s*[\\r\\n]+",
    "\\s+$",
];

const NO_RANK: u32 = u32::MAX;

static O200K: LazyLock<O200k> = LazyLock::new(O200k::build);

struct O200k {
    /// Every rank, found by its token's bytes (hashed with [`hash`]).
    ranks: HashTable<u32>,
    /// Only its pre-tokenizer is used: the byte-pair tables it carries are
    /// those of the 256 single bytes.
    splitter: bpe_openai::Tokenizer,
}

/// The number of o200k tokens in `text`, counted as the APIs count user
/// text (`<|endoftext|>` is plain text there, not a special token).
pub fn count(text: &str) -> usize {
    O200K.count(text)
}

impl O200k {
    fn build() -> O200k {
        let tokens = STARTS.len() / 4 - 1;
        let mut ranks = HashTable::with_capacity(tokens);
        for rank in 0..tokens as u32 {
            ranks.insert_unique(hash(token(rank)), rank, |&r| hash(token(r)));
        }
        let single_bytes = BytePairEncoding::from_dictionary((0..=255u8).map(|b| vec![b]), None);
        let pattern = PATTERN.join("|");
        let splitter = bpe_openai::Tokenizer::new_lookahead(
            single_bytes,
            &[(&pattern, false), ("\\s+\\s", true), ("\\s+", false)],
            false,
        )
        .unwrap_or_else(|e| unreachable!("o200k's split pattern is valid: {e}"));
        O200k { ranks, splitter }
    }

    fn count(&self, text: &str) -> usize {
        self.splitter
            .split(text)
            .map(|piece| self.count_piece(piece.as_bytes()))
            .sum()
    }

    fn rank(&self, bytes: &[u8]) -> u32 {
        self.ranks
            .find(hash(bytes), |&rank| token(rank) == bytes)
            .copied()
            .unwrap_or(NO_RANK)
    }

    /// Tokens of one piece: merged by rank, lowest first. Most pieces are a
    /// token already (a word, a run of spaces): one look-up.
    fn count_piece(&self, piece: &[u8]) -> usize {
        if piece.len() <= 1 || self.rank(piece) != NO_RANK {
            return piece.len().min(1);
        }
        // (where a part starts, the rank of it merged with the next part)
        let mut parts: Vec<(usize, u32)> = Vec::with_capacity(piece.len() + 1);
        for i in 0..piece.len() - 1 {
            parts.push((i, self.rank(&piece[i..i + 2])));
        }
        parts.push((piece.len() - 1, NO_RANK));
        parts.push((piece.len(), NO_RANK));
        // The rank of parts i and i + 1 merged with i + 2, once i + 1 is gone.
        let merged = |parts: &[(usize, u32)], i: usize| match parts.get(i + 3) {
            Some(&(end, _)) => self.rank(&piece[parts[i].0..end]),
            None => NO_RANK,
        };
        while let Some((i, _)) = lowest(&parts) {
            if i > 0 {
                parts[i - 1].1 = merged(&parts, i - 1);
            }
            parts[i].1 = merged(&parts, i);
            parts.remove(i + 1);
        }
        parts.len() - 1
    }
}

/// The bytes of the token of `rank`.
fn token(rank: u32) -> &'static [u8] {
    let start = |i: usize| {
        let at = &STARTS[i * 4..i * 4 + 4];
        u32::from_le_bytes([at[0], at[1], at[2], at[3]]) as usize
    };
    let rank = rank as usize;
    &BYTES[start(rank)..start(rank + 1)]
}

fn hash(bytes: &[u8]) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(bytes)
}

/// The part whose merge with the next has the lowest rank, if any is a token.
fn lowest(parts: &[(usize, u32)]) -> Option<(usize, u32)> {
    let mut best: Option<(usize, u32)> = None;
    for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
        if rank != NO_RANK && best.is_none_or(|(_, b)| rank < b) {
            best = Some((i, rank));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_as_bpe_openai(text: &str) {
        assert_eq!(
            count(text),
            bpe_openai::o200k_base().count(text),
            "{:?}",
            text.chars().take(80).collect::<String>()
        );
    }

    #[test]
    fn counts_equal_bpe_openais_on_edge_cases() {
        for text in [
            "",
            "a",
            "hello world",
            "<|endoftext|>",
            "  leading and trailing  ",
            "\n\n\t  \r\n mixed   whitespace\n",
            "don't WON'T I'LL we've",
            "数字は123456789、絵文字は🙂👍🏽。",
            "αβγ δεζ Ωμέγα",
            "fn main() { println!(\"{:?}\", x.iter().map(|y| y * 2).collect::<Vec<_>>()); }",
            "https://example.test/a/b?c=d&e=f#g",
            "ÀÉÎÕÜ àéîõü ﬁﬂ",
            "\u{200b}\u{feff}zero width",
        ] {
            same_as_bpe_openai(text);
        }
        same_as_bpe_openai(&"word ".repeat(1000));
        same_as_bpe_openai(&"x".repeat(5000));
    }

    #[test]
    fn counts_equal_bpe_openais_on_the_repositorys_sources() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut stack = vec![root.join("src"), root.join("prompts"), root.join("docs/src")];
        let mut files = 0;
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                for entry in std::fs::read_dir(&path).unwrap().flatten() {
                    stack.push(entry.path());
                }
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                same_as_bpe_openai(&text);
                files += 1;
            }
        }
        assert!(files > 100, "{files}");
    }
}
