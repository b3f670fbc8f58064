//! What a task packs for its planners. The whole checkout when it fits the
//! budget (`planning.context_tokens`); otherwise a selection: the files the
//! request names, then files holding identifiers the request mentions (most
//! distinct ones first), then the other files in their folders, as many as
//! fit, and a listing of every file left out so the models know it exists.

use super::pack::{self, Corpus, PackError, PackOptions, Packed, SkipReason, Skipped, SourceFile};
use memchr::memmem;
use std::collections::{BTreeSet, HashSet};
use std::path::Path;

/// The source name of the listing of files left out.
pub const LEFT_OUT_SOURCE: &str = "[files left out of this pack]";

#[derive(Debug, Clone)]
pub struct Selection {
    pub packed: Packed,
    /// The whole checkout fitted.
    pub whole: bool,
    /// Files left out to stay within the budget.
    pub left_out: Vec<String>,
    /// Tokens of the whole checkout, packed.
    pub whole_tokens: u64,
}

/// Packs the checkout at `root` for `request` within `budget` tokens.
pub fn for_task(
    root: &Path,
    request: &str,
    budget: u64,
    options: PackOptions,
) -> Result<Selection, PackError> {
    Ok(choose(read_whole(root, options)?, request, budget))
}

/// The whole checkout read and packed: what every selection starts from,
/// whatever the request. A task reads it while its sandbox starts.
#[derive(Debug)]
pub struct Whole {
    corpus: Corpus,
    packed: Packed,
}

/// Reads and packs the whole checkout at `root` (the costly part: reading
/// and counting every file).
pub fn read_whole(root: &Path, options: PackOptions) -> Result<Whole, PackError> {
    Ok(Whole::from_corpus(pack::read(root, &[".".to_owned()], options)?))
}

impl Whole {
    /// Packs and counts the files read (the count is most of the time).
    pub fn from_corpus(corpus: Corpus) -> Whole {
        let packed = pack::render(&corpus.files, corpus.skipped.clone());
        Whole { corpus, packed }
    }
}

/// The whole checkout when it fits `budget`, else a selection for `request`.
pub fn choose(whole: Whole, request: &str, budget: u64) -> Selection {
    let Whole { corpus, packed } = whole;
    if packed.tokens <= budget {
        let whole_tokens = packed.tokens;
        return Selection {
            packed,
            whole: true,
            left_out: Vec::new(),
            whole_tokens,
        };
    }
    select(corpus, &packed, request, budget)
}

fn select(corpus: Corpus, whole: &Packed, request: &str, budget: u64) -> Selection {
    let Corpus { files, skipped } = corpus;
    let sizes: Vec<u64> = whole.files.iter().map(|f| f.tokens).collect();
    let order = priority(&files, request);
    // Room for the listing of what is left out: a tenth of the budget at most.
    let listing_room = budget / 10;
    // Indices in a document change a count by a token or two: keep 1 % spare.
    let room = budget.saturating_sub(listing_room).saturating_sub(budget / 100);
    let mut chosen: Vec<usize> = Vec::new();
    let mut used = 0u64;
    for index in order {
        if used + sizes[index] <= room {
            used += sizes[index];
            chosen.push(index);
        }
    }
    loop {
        let mut keep: Vec<usize> = chosen.clone();
        keep.sort_unstable();
        let taken: HashSet<usize> = keep.iter().copied().collect();
        let left_out: Vec<usize> = (0..files.len()).filter(|i| !taken.contains(i)).collect();
        let mut selected: Vec<SourceFile> = keep.iter().map(|&i| files[i].clone()).collect();
        selected.push(SourceFile {
            path: LEFT_OUT_SOURCE.to_owned(),
            text: listing(&files, &sizes, &left_out, listing_room),
        });
        let mut all_skipped = skipped.clone();
        all_skipped.extend(left_out.iter().map(|&i| Skipped {
            path: files[i].path.clone(),
            reason: SkipReason::OverBudget { tokens: sizes[i] },
        }));
        let packed = pack::render(&selected, all_skipped);
        if packed.tokens <= budget || chosen.is_empty() {
            return Selection {
                packed,
                whole: false,
                left_out: left_out.iter().map(|&i| files[i].path.clone()).collect(),
                whole_tokens: whole.tokens,
            };
        }
        // Over by the index slack: drop the least wanted file and try again.
        chosen.pop();
    }
}

/// File indices, most wanted first: named, then by identifiers found, then
/// neighbours of those, then the rest by size (small first).
fn priority(files: &[SourceFile], request: &str) -> Vec<usize> {
    let lower_request = request.to_ascii_lowercase();
    let identifiers = identifiers(request);
    let finders: Vec<memmem::Finder<'_>> = identifiers
        .iter()
        .map(|i| memmem::Finder::new(i.as_bytes()))
        .collect();
    let mut named = Vec::new();
    let mut by_hits: Vec<(usize, usize)> = Vec::new();
    for (i, file) in files.iter().enumerate() {
        if is_named(&file.path, &lower_request) {
            named.push(i);
            continue;
        }
        let hits = finders
            .iter()
            .filter(|f| f.find(file.text.as_bytes()).is_some())
            .count();
        if hits > 0 {
            by_hits.push((i, hits));
        }
    }
    by_hits.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut order: Vec<usize> = named;
    order.extend(by_hits.iter().map(|(i, _)| *i));
    let folders: BTreeSet<&str> = order.iter().map(|&i| parent(&files[i].path)).collect();
    let placed: HashSet<usize> = order.iter().copied().collect();
    let neighbours: Vec<usize> = (0..files.len())
        .filter(|i| !placed.contains(i) && folders.contains(parent(&files[*i].path)))
        .collect();
    order.extend(neighbours);
    let placed: HashSet<usize> = order.iter().copied().collect();
    let mut rest: Vec<usize> = (0..files.len()).filter(|i| !placed.contains(i)).collect();
    rest.sort_by_key(|&i| (files[i].text.len(), i));
    order.extend(rest);
    order
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("")
}

/// The request names the file by its path, or by a file name that is
/// distinctive enough (with an extension) as a word of its own.
fn is_named(path: &str, lower_request: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    if lower_request.contains(&lower) {
        return true;
    }
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    if !name.contains('.') || name.len() < 4 {
        return false;
    }
    lower_request.match_indices(name).any(|(at, _)| {
        let before = lower_request[..at].chars().next_back();
        let after = lower_request[at + name.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
        boundary(before) && boundary(after)
    })
}

/// Words of the request that look like code: in backticks, or snake_case,
/// camelCase, PascalCase with an inner capital, or `a::b` paths.
pub fn identifiers(request: &str) -> Vec<String> {
    let mut found: BTreeSet<String> = BTreeSet::new();
    let quoted: Vec<&str> = request.split('`').skip(1).step_by(2).collect();
    let mut consider = |word: &str, quoted: bool| {
        for part in word.split("::") {
            let part = part.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
            if part.len() < 4 || !part.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') {
                continue;
            }
            if !part.chars().all(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let inner_capital =
                part.chars().skip(1).any(|c| c.is_uppercase()) && part.chars().any(|c| c.is_lowercase());
            if quoted || part.contains('_') || inner_capital {
                found.insert(part.to_owned());
            }
        }
    };
    for q in &quoted {
        for word in q.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
            consider(word, true);
        }
    }
    for word in request.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
        consider(word, false);
    }
    found.into_iter().collect()
}

/// One line per file left out, cut to about `room` tokens.
fn listing(files: &[SourceFile], sizes: &[u64], left_out: &[usize], room: u64) -> String {
    let mut out = format!(
        "These {} files of the project exist but are not in this pack, to stay within the token budget. Their contents cannot be shown; where the plan depends on one, name it and say what you assume it holds.\n",
        left_out.len()
    );
    // A line is roughly its length / 3 tokens; stop well before the room.
    let max_bytes = (room as usize).saturating_mul(3);
    for (n, &i) in left_out.iter().enumerate() {
        let line = format!("{} ({} tokens)\n", files[i].path, sizes[i]);
        if out.len() + line.len() > max_bytes {
            out.push_str(&format!("... and {} more\n", left_out.len() - n));
            break;
        }
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_words_are_found_and_prose_is_not() {
        let ids = identifiers("Fix `parse` in the RequestBuilder so max_retries works; see crate::llm::retry_after. Thanks everyone");
        assert_eq!(ids, vec!["RequestBuilder", "max_retries", "parse", "retry_after"]);
    }

    #[test]
    fn the_left_out_listing_names_the_files_without_inviting_a_request() {
        let files = vec![
            SourceFile {
                path: "src/a.rs".into(),
                text: String::new(),
            },
            SourceFile {
                path: "src/b.rs".into(),
                text: String::new(),
            },
        ];
        let text = listing(&files, &[10, 20], &[1], 1000);
        assert!(text.contains("src/b.rs") && !text.contains("src/a.rs"), "{text}");
        // The planners have no tool to fetch a file: nothing tells them to ask.
        assert!(!text.to_lowercase().contains("ask for"), "{text}");
        assert!(text.contains("say what you assume it holds"), "{text}");
    }

    #[test]
    fn named_files_need_a_whole_word() {
        assert!(is_named("src/config/mod.rs", "look at src/config/mod.rs please"));
        assert!(is_named("src/router.rs", "the bug is in router.rs."));
        assert!(!is_named("src/router.rs", "the bug is in myrouter.rs"));
        assert!(!is_named("src/mod.rs", "nothing"));
    }
}
