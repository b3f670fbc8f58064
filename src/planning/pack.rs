//! Packing files for a model: the files under the given paths,
//! recursively, in the XML that files-to-prompt's `--cxml` writes:
//!
//! ```text
//! <documents>
//! <document index="1">
//! <source>src/main.rs</source>
//! <document_content>
//! ...
//! </document_content>
//! </document>
//! </documents>
//! ```
//!
//! `.gitignore` at every level, `.git/info/exclude`, the global git ignore
//! and `.ignore` files are honoured (the `ignore` crate). Hidden files,
//! binary files, text that is not UTF-8 and files over the size limit are
//! left out, and each of them is reported with the reason. A path named
//! explicitly is packed even where an ignore file would leave it out.
//!
//! Reading and token counting run in parallel. The count is exact: every
//! document starts with `<document` right after a `>\n`, which the o200k
//! pre-tokenizer always splits at, so the tokens of the whole text are the
//! sum of the tokens of its parts. A file's count is kept for the next pack
//! that has it ([`super::counts`]).

use crate::llm::tokens::count_text;
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

const HEADER: &str = "<documents>\n";
const FOOTER: &str = "</documents>";
/// Bytes looked at for a NUL when telling binary files from text.
const BINARY_SNIFF: usize = 8000;

#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("{path} is outside {root}; only paths inside the project can be packed")]
    OutsideRoot { path: String, root: PathBuf },
    #[error("{path} does not exist under {root}")]
    NotFound { path: String, root: PathBuf },
    #[error("cannot read the project folder {root}: {detail}")]
    Root { root: PathBuf, detail: String },
    #[error("no paths were given; name at least one file or folder")]
    NoPaths,
}

/// Why a file was left out of a pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    Hidden,
    Binary,
    NotUtf8,
    TooLarge {
        bytes: u64,
        limit: u64,
    },
    Unreadable(String),
    /// Left out by the task's selection to stay within the token budget.
    OverBudget {
        tokens: u64,
    },
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Hidden => write!(f, "hidden"),
            SkipReason::Binary => write!(f, "binary"),
            SkipReason::NotUtf8 => write!(f, "not UTF-8 text"),
            SkipReason::TooLarge { bytes, limit } => {
                write!(f, "{bytes} bytes, over the limit of {limit}")
            }
            SkipReason::Unreadable(e) => write!(f, "unreadable: {e}"),
            SkipReason::OverBudget { tokens } => {
                write!(f, "{tokens} tokens, left out to stay within the token budget")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Relative to the packed root, `/`-separated.
    pub path: String,
    pub reason: SkipReason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedFile {
    pub path: String,
    pub bytes: u64,
    /// Tokens of this file's whole `<document>` element.
    pub tokens: u64,
}

/// The packed XML and what went into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    pub xml: String,
    /// Exact o200k token count of `xml`.
    pub tokens: u64,
    pub files: Vec<PackedFile>,
    pub skipped: Vec<Skipped>,
}

impl Packed {
    /// One line per skipped file, for logs and tool answers.
    pub fn skip_report(&self) -> String {
        let mut out = String::new();
        for s in &self.skipped {
            let _ = writeln!(out, "- {}: {}", s.path, s.reason);
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackOptions {
    pub max_file_bytes: u64,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            max_file_bytes: 1 << 20,
        }
    }
}

/// A text file read for packing.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: String,
    pub text: String,
}

/// The files found under some paths, read, with what was left out.
#[derive(Debug, Clone, Default)]
pub struct Corpus {
    /// Sorted by path.
    pub files: Vec<SourceFile>,
    pub skipped: Vec<Skipped>,
}

/// Packs `paths` (relative to `root`, or absolute inside it) into XML.
pub fn pack(root: &Path, paths: &[String], options: PackOptions) -> Result<Packed, PackError> {
    let corpus = read(root, paths, options)?;
    Ok(render(&corpus.files, corpus.skipped))
}

/// Finds and reads the files under `paths`, in parallel.
pub fn read(root: &Path, paths: &[String], options: PackOptions) -> Result<Corpus, PackError> {
    if paths.is_empty() {
        return Err(PackError::NoPaths);
    }
    let root = root.canonicalize().map_err(|e| PackError::Root {
        root: root.to_owned(),
        detail: e.to_string(),
    })?;
    let mut explicit_files = Vec::new();
    let mut dirs = Vec::new();
    for given in paths {
        let resolved = resolve_inside(&root, given)?;
        if resolved.is_dir() {
            dirs.push(resolved);
        } else {
            explicit_files.push(resolved);
        }
    }
    let skipped = Arc::new(Mutex::new(Vec::new()));
    let mut found: Vec<PathBuf> = explicit_files;
    if !dirs.is_empty() {
        found.extend(walk(&root, &dirs, &skipped));
    }
    let mut found: Vec<(String, PathBuf)> = found
        .into_iter()
        .map(|abs| (relative(&root, &abs), abs))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found.dedup_by(|a, b| a.0 == b.0);

    let outcomes: Vec<Result<SourceFile, Skipped>> = found
        .par_iter()
        .map(|(rel, abs)| read_one(rel, abs, options.max_file_bytes))
        .collect();
    let mut files = Vec::with_capacity(outcomes.len());
    let mut skipped = std::mem::take(&mut *skipped.lock().unwrap_or_else(|p| p.into_inner()));
    for outcome in outcomes {
        match outcome {
            Ok(file) => files.push(file),
            Err(skip) => skipped.push(skip),
        }
    }
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Corpus { files, skipped })
}

/// Renders files (in the order given) into the XML, counting in parallel.
pub fn render(files: &[SourceFile], skipped: Vec<Skipped>) -> Packed {
    let documents: Vec<(String, u64)> = files
        .par_iter()
        .enumerate()
        .map(|(i, file)| {
            let doc = document(i + 1, file);
            let tokens = super::counts::document_tokens(i + 1, (&file.path, &file.text), &doc);
            (doc, tokens)
        })
        .collect();
    let size = HEADER.len() + FOOTER.len() + documents.iter().map(|(d, _)| d.len()).sum::<usize>();
    let mut xml = String::with_capacity(size);
    xml.push_str(HEADER);
    let mut tokens = count_text(HEADER) + count_text(FOOTER);
    let mut packed = Vec::with_capacity(files.len());
    for (file, (doc, doc_tokens)) in files.iter().zip(&documents) {
        xml.push_str(doc);
        tokens += doc_tokens;
        packed.push(PackedFile {
            path: file.path.clone(),
            bytes: file.text.len() as u64,
            tokens: *doc_tokens,
        });
    }
    xml.push_str(FOOTER);
    Packed {
        xml,
        tokens,
        files: packed,
        skipped,
    }
}

/// One `<document>` element, ending with a newline.
pub fn document(index: usize, file: &SourceFile) -> String {
    let newline = if file.text.ends_with('\n') { "" } else { "\n" };
    format!(
        "<document index=\"{index}\">\n<source>{}</source>\n<document_content>\n{}{newline}</document_content>\n</document>\n",
        file.path, file.text
    )
}

/// `given` as an absolute path inside `root`, after `..` and symlinks.
pub(crate) fn resolve_inside(root: &Path, given: &str) -> Result<PathBuf, PackError> {
    let candidate = if Path::new(given).is_absolute() {
        PathBuf::from(given)
    } else {
        root.join(given)
    };
    // Refuse before touching the filesystem when the words alone leave the root.
    let lexical = normalize(&candidate);
    if !lexical.starts_with(root) {
        return Err(PackError::OutsideRoot {
            path: given.to_owned(),
            root: root.to_owned(),
        });
    }
    let resolved = candidate.canonicalize().map_err(|_| PackError::NotFound {
        path: given.to_owned(),
        root: root.to_owned(),
    })?;
    if !resolved.starts_with(root) {
        return Err(PackError::OutsideRoot {
            path: given.to_owned(),
            root: root.to_owned(),
        });
    }
    Ok(resolved)
}

/// Removes `.` and folds `..` without asking the filesystem.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn relative(root: &Path, abs: &Path) -> String {
    let rel = abs.strip_prefix(root).unwrap_or(abs);
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

/// Every file under `dirs` that the ignore files let through; hidden
/// entries are recorded in `skipped` (the `.git` folder silently).
fn walk(root: &Path, dirs: &[PathBuf], skipped: &Arc<Mutex<Vec<Skipped>>>) -> Vec<PathBuf> {
    let mut builder = ignore::WalkBuilder::new(&dirs[0]);
    for dir in &dirs[1..] {
        builder.add(dir);
    }
    let hidden = skipped.clone();
    let root_for_filter = root.to_owned();
    builder
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |entry| {
            let name = entry.file_name().to_string_lossy();
            if entry.depth() == 0 || !name.starts_with('.') {
                return true;
            }
            if name != ".git" {
                hidden.lock().unwrap_or_else(|p| p.into_inner()).push(Skipped {
                    path: relative(&root_for_filter, entry.path()),
                    reason: SkipReason::Hidden,
                });
            }
            false
        });
    let found = Arc::new(Mutex::new(Vec::new()));
    builder.build_parallel().run(|| {
        let found = found.clone();
        let skipped = skipped.clone();
        let root = root.to_owned();
        Box::new(move |entry| {
            match entry {
                Ok(entry) if entry.file_type().is_some_and(|t| t.is_file()) => {
                    found
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(entry.into_path());
                }
                Ok(_) => {}
                Err(err) => {
                    let path = match &err {
                        ignore::Error::WithPath { path, .. } => relative(&root, path),
                        _ => String::new(),
                    };
                    skipped.lock().unwrap_or_else(|p| p.into_inner()).push(Skipped {
                        path,
                        reason: SkipReason::Unreadable(err.to_string()),
                    });
                }
            }
            ignore::WalkState::Continue
        })
    });
    let found = std::mem::take(&mut *found.lock().unwrap_or_else(|p| p.into_inner()));
    found
}

fn read_one(rel: &str, abs: &Path, max_bytes: u64) -> Result<SourceFile, Skipped> {
    let skip = |reason| Skipped {
        path: rel.to_owned(),
        reason,
    };
    let meta = std::fs::metadata(abs).map_err(|e| skip(SkipReason::Unreadable(e.to_string())))?;
    if meta.len() > max_bytes {
        return Err(skip(SkipReason::TooLarge {
            bytes: meta.len(),
            limit: max_bytes,
        }));
    }
    let bytes = std::fs::read(abs).map_err(|e| skip(SkipReason::Unreadable(e.to_string())))?;
    if memchr::memchr(0, &bytes[..bytes.len().min(BINARY_SNIFF)]).is_some() {
        return Err(skip(SkipReason::Binary));
    }
    let text = String::from_utf8(bytes).map_err(|_| skip(SkipReason::NotUtf8))?;
    Ok(SourceFile {
        path: rel.to_owned(),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_of_the_whole_is_the_sum_of_its_parts() {
        let files: Vec<SourceFile> = [
            "fn main() {}\n",
            "no newline at the end>",
            "  \n\n  spaced \n\n",
            "<|endoftext|> special",
            "日本語のテキスト\r\n",
            "",
            ">>>\n",
        ]
        .iter()
        .enumerate()
        .map(|(i, text)| SourceFile {
            path: format!("dir/f{i}.txt"),
            text: (*text).to_owned(),
        })
        .collect();
        let packed = render(&files, Vec::new());
        assert_eq!(packed.tokens, count_text(&packed.xml));
        assert!(packed
            .xml
            .starts_with("<documents>\n<document index=\"1\">\n<source>dir/f0.txt</source>"));
        assert!(packed.xml.ends_with("</document>\n</documents>"));
    }

    #[test]
    fn lexical_escapes_are_refused_before_the_filesystem_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for bad in ["../x", "/etc/passwd", "a/../../b"] {
            let err = resolve_inside(&root, bad).unwrap_err();
            assert!(matches!(err, PackError::OutsideRoot { .. }), "{bad}: {err}");
        }
    }

    fn counted_file(path: &str, text: &str) -> SourceFile {
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
            let f = counted_file(&format!("kept/{n}.txt"), text);
            for index in [1, 7, 10, 99, 100, 999, 1000, 1234, 20_001] {
                let doc = document(index, &f);
                assert_eq!(
                    super::super::counts::document_tokens(index, (&f.path, &f.text), &doc),
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
                counted_file(
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
        assert!(super::super::counts::kept() >= 12);
    }
}
