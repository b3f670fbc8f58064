//! A repository's `shallow` file: the commits whose parents it does not
//! hold, one hexadecimal id a line, as git and libgit2 read it.

use git2::Oid;
use std::path::Path;

/// The commits `git_dir`'s `shallow` file lists (none when it has none).
pub fn read(git_dir: &Path) -> Vec<Oid> {
    std::fs::read_to_string(git_dir.join("shallow"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| Oid::from_str(l.trim()).ok())
        .collect()
}

/// The file's text for `commits`.
pub fn text(commits: &[Oid]) -> String {
    commits.iter().map(|oid| format!("{oid}\n")).collect()
}

/// Writes `commits`, sorted and once each, as `git_dir`'s `shallow` file;
/// with none, removes the file (the repository is whole).
pub fn write(git_dir: &Path, commits: &[Oid]) -> std::io::Result<()> {
    let path = git_dir.join("shallow");
    if commits.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let mut sorted = commits.to_vec();
    sorted.sort();
    sorted.dedup();
    std::fs::write(path, text(&sorted))
}
