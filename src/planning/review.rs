//! The edits `sage-review` asks for: SEARCH/REPLACE blocks under a file path,
//!
//! ```text
//! src/lib.rs
//! <<<<<<< SEARCH
//! old lines
//! =======
//! new lines
//! >>>>>>> REPLACE
//! ```
//!
//! parsed, then checked against the files: a block is usable when its
//! SEARCH text occurs exactly once in its file (or is empty for a new file).

use super::pack::PackError;
use std::path::Path;

const SEARCH: &str = "<<<<<<< SEARCH";
const DIVIDER: &str = "=======";
const REPLACE: &str = ">>>>>>> REPLACE";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditBlock {
    pub path: String,
    pub search: String,
    pub replace: String,
    /// 1-based line of `<<<<<<< SEARCH` in the answer.
    pub line: usize,
}

/// How a block fits the file it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// The SEARCH text occurs exactly once.
    Once,
    /// An empty SEARCH for a file that does not exist yet.
    NewFile,
    NotFound,
    Ambiguous {
        count: usize,
    },
    NoSuchFile,
    /// The path is outside the project, or the file cannot be read.
    Refused(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedBlock {
    pub block: EditBlock,
    pub fit: Fit,
}

impl CheckedBlock {
    pub fn usable(&self) -> bool {
        matches!(self.fit, Fit::Once | Fit::NewFile)
    }
}

/// Blocks in order, and a message for each block that is not well formed.
/// Markers count when indented too. A block's file is the last non-blank
/// line between the previous block and its `<<<<<<< SEARCH` (fences and
/// Markdown around it stripped) when that line looks like a path; a block
/// straight after another, with nothing between, edits the same file; a
/// block under prose names no file and is reported, never guessed.
pub fn parse(answer: &str) -> (Vec<EditBlock>, Vec<String>) {
    let lines: Vec<&str> = answer.lines().collect();
    let mut blocks = Vec::new();
    let mut problems = Vec::new();
    // Where the text after the previous block starts, and that block's file.
    let mut after_previous = 0;
    let mut previous_path: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != SEARCH {
            i += 1;
            continue;
        }
        let start = i;
        let before = lines[after_previous..start]
            .iter()
            .rev()
            .map(|l| l.trim())
            .find(|l| !l.is_empty() && !l.starts_with("```"));
        let path = match before {
            Some(line) => Some(clean_path(line)).filter(|p| looks_like_path(p)),
            None => previous_path.clone(),
        };
        let mut search = Vec::new();
        let mut replace = Vec::new();
        let mut in_replace = false;
        let mut closed = false;
        i += 1;
        while i < lines.len() {
            let line = lines[i];
            match line.trim() {
                DIVIDER if !in_replace => in_replace = true,
                REPLACE if in_replace => {
                    closed = true;
                    break;
                }
                SEARCH => break,
                _ if in_replace => replace.push(line),
                _ => search.push(line),
            }
            i += 1;
        }
        if !closed {
            problems.push(format!(
                "the block at line {} is not closed with `{}` (and `{}` between SEARCH and REPLACE)",
                start + 1,
                REPLACE,
                DIVIDER
            ));
            after_previous = i;
            continue;
        }
        i += 1;
        after_previous = i;
        let Some(path) = path else {
            problems.push(match before {
                Some(line) => format!(
                    "the block at line {} names no file: the line before `{SEARCH}` is {line:?}, which is not a path; put the file's path on the line before each block",
                    start + 1
                ),
                None => format!("the block at line {} names no file before `{SEARCH}`", start + 1),
            });
            continue;
        };
        previous_path = Some(path.clone());
        blocks.push(EditBlock {
            path,
            search: join_lines(&search),
            replace: join_lines(&replace),
            line: start + 1,
        });
    }
    (blocks, problems)
}

/// A path has no spaces and is not a marker or a sentence's end.
fn looks_like_path(text: &str) -> bool {
    !text.is_empty()
        && !text.chars().any(char::is_whitespace)
        && !text.starts_with("<<<<<<<")
        && !text.starts_with(">>>>>>>")
        && !text.starts_with("=======")
        && !text.ends_with('.')
}

fn join_lines(lines: &[&str]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("{}\n", lines.join("\n"))
    }
}

/// A path line may carry markdown around it: `**src/a.rs**`, `` `src/a.rs` ``, `src/a.rs:`.
fn clean_path(line: &str) -> String {
    line.trim_matches(|c: char| c == '*' || c == '`' || c == '#' || c == ':' || c.is_whitespace())
        .trim_start_matches("./")
        .to_owned()
}

/// Checks every block against the files under `root`.
pub fn check(root: &Path, blocks: Vec<EditBlock>) -> Vec<CheckedBlock> {
    blocks
        .into_iter()
        .map(|block| {
            let fit = fit(root, &block);
            CheckedBlock { block, fit }
        })
        .collect()
}

fn fit(root: &Path, block: &EditBlock) -> Fit {
    let root = match root.canonicalize() {
        Ok(r) => r,
        Err(e) => return Fit::Refused(e.to_string()),
    };
    let path = match super::pack::resolve_inside(&root, &block.path) {
        Ok(p) => p,
        Err(PackError::NotFound { .. }) => {
            return if block.search.trim().is_empty() {
                Fit::NewFile
            } else {
                Fit::NoSuchFile
            }
        }
        Err(e) => return Fit::Refused(e.to_string()),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return Fit::Refused(format!("cannot read it: {e}")),
    };
    if block.search.is_empty() {
        return Fit::Ambiguous { count: 0 };
    }
    // A CRLF file matches blocks the model wrote with `\n`.
    let text = text.replace("\r\n", "\n");
    match text.matches(block.search.as_str()).count() {
        // The file's last line may have no newline, where the block's has one.
        0 => match block.search.strip_suffix('\n') {
            Some(bare) if !bare.is_empty() && text.ends_with(bare) && text.matches(bare).count() == 1 => {
                Fit::Once
            }
            _ => Fit::NotFound,
        },
        1 => Fit::Once,
        count => Fit::Ambiguous { count },
    }
}

/// What is wrong with the blocks that cannot be applied, each with its file
/// and the first lines of its SEARCH text; empty when every block fits.
pub fn problems(checked: &[CheckedBlock]) -> Vec<String> {
    checked
        .iter()
        .filter(|c| !c.usable())
        .map(|c| {
            let first: Vec<&str> = c.block.search.lines().take(3).collect();
            let what = match &c.fit {
                Fit::NotFound => "its SEARCH text occurs nowhere in the file".to_owned(),
                Fit::Ambiguous { count: 0 } => "its SEARCH text is empty but the file exists".to_owned(),
                Fit::Ambiguous { count } => {
                    format!("its SEARCH text occurs {count} times; it must be unique")
                }
                Fit::NoSuchFile => "the file does not exist".to_owned(),
                Fit::Refused(why) => why.clone(),
                Fit::Once | Fit::NewFile => String::new(),
            };
            format!(
                "{} (block at line {}): {what}; SEARCH begins: {:?}",
                c.block.path,
                c.block.line,
                first.join("\n")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_parsed_with_their_paths() {
        let answer = "Some words.\n\n**src/a.rs**\n```rust\n<<<<<<< SEARCH\nfn a() {}\n=======\nfn a() { b() }\n>>>>>>> REPLACE\n```\n\nnew.txt\n<<<<<<< SEARCH\n=======\nhello\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nunclosed\n";
        let (blocks, problems) = parse(answer);
        assert_eq!(blocks.len(), 2, "{blocks:?}");
        assert_eq!(blocks[0].path, "src/a.rs");
        assert_eq!(blocks[0].search, "fn a() {}\n");
        assert_eq!(blocks[0].replace, "fn a() { b() }\n");
        assert_eq!(blocks[1].path, "new.txt");
        assert_eq!(blocks[1].search, "");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("not closed"));
    }

    #[test]
    fn a_block_right_after_another_edits_the_same_file_and_prose_names_none() {
        let answer = "src/a.rs\n<<<<<<< SEARCH\none\n=======\n1\n>>>>>>> REPLACE\n<<<<<<< SEARCH\ntwo\n=======\n2\n>>>>>>> REPLACE\n\nThen add this at the end:\n<<<<<<< SEARCH\n=======\nthree\n>>>>>>> REPLACE\n";
        let (blocks, problems) = parse(answer);
        assert_eq!(blocks.len(), 2, "{blocks:?}");
        assert!(blocks.iter().all(|b| b.path == "src/a.rs"), "{blocks:?}");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("not a path"), "{problems:?}");
    }

    #[test]
    fn indented_markers_are_blocks_too() {
        let answer = "1. In `src/a.rs`:\n   src/a.rs\n   <<<<<<< SEARCH\n   fn a() {}\n   =======\n   fn a() { b() }\n   >>>>>>> REPLACE\n";
        let (blocks, problems) = parse(answer);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].path, "src/a.rs");
        assert_eq!(blocks[0].search, "   fn a() {}\n");
    }

    #[test]
    fn a_search_on_the_last_line_without_a_newline_is_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "first\nlast line").unwrap();
        let block = EditBlock {
            path: "a.txt".into(),
            search: "last line\n".into(),
            replace: "final line\n".into(),
            line: 1,
        };
        assert_eq!(fit(dir.path(), &block), Fit::Once);
        let elsewhere = EditBlock {
            search: "first line\n".into(),
            ..block
        };
        assert_eq!(fit(dir.path(), &elsewhere), Fit::NotFound);
    }
}
