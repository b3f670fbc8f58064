//! Which paths of a tree `.gitattributes` hands to the LFS filter
//! (`filter=lfs`), read from the tree's own `.gitattributes` files (the
//! top one and any in folders, deeper ones winning, the last matching line
//! of a file winning, as git reads them).

use git2::{ObjectType, Repository, Tree, TreeWalkMode, TreeWalkResult};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use std::path::Path;

/// The `filter=lfs` patterns of a tree.
pub struct LfsPaths {
    /// (folder with a trailing `/`, or "" for the top; its patterns), top first.
    files: Vec<(String, Gitignore)>,
}

impl LfsPaths {
    /// Reads every `.gitattributes` of `tree`.
    pub fn of_tree(repo: &Repository, tree: &Tree<'_>) -> Result<LfsPaths, git2::Error> {
        let mut found = Vec::new();
        tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(ObjectType::Blob) && entry.name_bytes() == b".gitattributes" {
                found.push((dir.to_owned(), entry.id()));
            }
            TreeWalkResult::Ok
        })?;
        found.sort_by_key(|(dir, _)| dir.matches('/').count());
        let mut files = Vec::new();
        for (dir, id) in found {
            let blob = repo.find_blob(id)?;
            if let Some(matcher) = matcher(&dir, &String::from_utf8_lossy(blob.content())) {
                files.push((dir, matcher));
            }
        }
        Ok(LfsPaths { files })
    }

    /// Reads one top-level `.gitattributes` text (for tests and callers
    /// that have only that file).
    pub fn of_text(text: &str) -> LfsPaths {
        LfsPaths {
            files: matcher("", text)
                .map(|m| (String::new(), m))
                .into_iter()
                .collect(),
        }
    }

    /// Whether any `.gitattributes` names the LFS filter at all.
    pub fn any(&self) -> bool {
        !self.files.is_empty()
    }

    /// Whether `path` (relative to the top, `/`-separated) is an LFS file.
    pub fn is_lfs(&self, path: &str) -> bool {
        let mut lfs = false;
        for (dir, matcher) in &self.files {
            let Some(inner) = path.strip_prefix(dir.as_str()) else {
                continue;
            };
            match matcher.matched(Path::new(inner), false) {
                Match::Ignore(_) => lfs = true,
                Match::Whitelist(_) => lfs = false,
                Match::None => {}
            }
        }
        lfs
    }
}

/// One file's lines as a matcher: a pattern whose attributes set
/// `filter=lfs` matches, one that sets another filter or unsets it
/// (`-filter`, `!filter`) un-matches. `None` when the file never names LFS.
fn matcher(dir: &str, text: &str) -> Option<Gitignore> {
    let mut builder = GitignoreBuilder::new("");
    let mut names_lfs = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("[attr]") || line.starts_with('"') {
            continue;
        }
        let mut words = line.split_whitespace();
        let Some(pattern) = words.next() else { continue };
        let mut setting = None;
        for attribute in words {
            match attribute {
                "filter=lfs" => setting = Some(true),
                "-filter" | "!filter" => setting = Some(false),
                other if other.starts_with("filter=") => setting = Some(false),
                _ => {}
            }
        }
        let written = match setting {
            Some(true) => {
                names_lfs = true;
                pattern.to_owned()
            }
            Some(false) => format!("!{pattern}"),
            None => continue,
        };
        if builder.add_line(None, &written).is_err() {
            tracing::debug!(
                folder = dir,
                pattern,
                "a .gitattributes pattern could not be read; skipped"
            );
        }
    }
    if !names_lfs {
        return None;
    }
    builder.build().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_set_and_unset_the_lfs_filter() {
        let paths = LfsPaths::of_text(
            "# large files\n*.bin filter=lfs diff=lfs merge=lfs -text\nassets/** filter=lfs\nassets/small.txt -filter\n*.md text\n",
        );
        assert!(paths.any());
        assert!(paths.is_lfs("model.bin"));
        assert!(paths.is_lfs("deep/down/model.bin"));
        assert!(paths.is_lfs("assets/logo.png"));
        assert!(!paths.is_lfs("assets/small.txt"));
        assert!(!paths.is_lfs("README.md"));
        assert!(!LfsPaths::of_text("*.md text\n").any());
    }
}
