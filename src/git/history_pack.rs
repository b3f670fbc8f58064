//! The history a sandbox gets: the last commits of the branches it works
//! with (`git.history_depth` of them, newest first), packed into one pack
//! beside the project, with the commits whose parents were left out named
//! as shallow. Enough for `git log`, `git diff` and `git blame` of recent
//! work, however long the repository's history; never every PR branch.

use super::GitError;
use git2::{Oid, Repository};
use std::collections::{BinaryHeap, HashSet};
use std::path::{Path, PathBuf};

/// A packed slice of history on the host, ready to be copied in.
#[derive(Debug, Clone)]
pub struct HistoryPack {
    /// A folder holding `objects/pack/pack-*.{pack,idx}`.
    pub dir: PathBuf,
    /// The packed commits whose parents are not in the pack.
    pub shallow: Vec<Oid>,
    pub commits: usize,
}

impl HistoryPack {
    /// Makes the folder a bare repository git can fetch from, with `refname`
    /// at `tip` and the pack's shallow edge.
    pub fn as_repository(&self, refname: &str, tip: Oid) -> std::io::Result<()> {
        let dir = &self.dir;
        std::fs::write(dir.join("HEAD"), format!("{tip}\n"))?;
        std::fs::write(
            dir.join("config"),
            "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
        )?;
        let reference = dir.join(refname);
        if let Some(parent) = reference.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(reference, format!("{tip}\n"))?;
        if !self.shallow.is_empty() {
            std::fs::write(dir.join("shallow"), self.shallow_file())?;
        }
        Ok(())
    }

    /// The text of a `shallow` file naming [`HistoryPack::shallow`].
    pub fn shallow_file(&self) -> String {
        self.shallow.iter().map(|oid| format!("{oid}\n")).collect()
    }
}

/// Packs up to `depth` commits (`None`: all) reachable from `tips`, newest
/// first by committer time, with their trees and blobs, into `into`
/// (made anew). A commit whose parent the repository lacks (a shallow
/// mirror's edge) ends its line of history.
pub fn write(
    repo: &Repository,
    tips: &[Oid],
    depth: Option<u32>,
    into: &Path,
) -> Result<HistoryPack, GitError> {
    let started = std::time::Instant::now();
    let chosen = newest_commits(repo, tips, depth.map_or(usize::MAX, |d| d as usize))?;
    let included: HashSet<Oid> = chosen.iter().copied().collect();
    let mut shallow = Vec::new();
    let mut builder = repo
        .packbuilder()
        .map_err(|e| GitError::failed("start the history pack", e))?;
    builder.set_threads(0);
    for &oid in &chosen {
        let commit = repo
            .find_commit(oid)
            .map_err(|e| GitError::failed("read a commit for the history pack", e))?;
        if commit.parent_ids().any(|p| !included.contains(&p)) {
            shallow.push(oid);
        }
        builder
            .insert_commit(oid)
            .map_err(|e| GitError::failed("pack a commit", e))?;
    }
    let pack_dir = into.join("objects").join("pack");
    let io = |e: std::io::Error| GitError::Failed {
        action: format!("make the history folder {}", into.display()),
        detail: e.to_string(),
    };
    if into.exists() {
        std::fs::remove_dir_all(into).map_err(io)?;
    }
    std::fs::create_dir_all(&pack_dir).map_err(io)?;
    builder
        .write(&pack_dir, 0o444)
        .map_err(|e| GitError::failed("write the history pack", e))?;
    shallow.sort();
    tracing::debug!(
        commits = chosen.len(),
        objects = builder.object_count(),
        ms = started.elapsed().as_millis() as u64,
        "packed the sandbox's history"
    );
    Ok(HistoryPack {
        dir: into.to_owned(),
        shallow,
        commits: chosen.len(),
    })
}

/// Up to `limit` commits reachable from `tips`, newest first. Reads only
/// the commits it takes and their parents, so a 50,000-commit history
/// costs what 50 commits do.
fn newest_commits(repo: &Repository, tips: &[Oid], limit: usize) -> Result<Vec<Oid>, GitError> {
    let mut queue = BinaryHeap::new();
    let mut queued = HashSet::new();
    for &tip in tips {
        let commit = repo
            .find_commit(tip)
            .map_err(|e| GitError::failed("read a branch tip for the history pack", e))?;
        if queued.insert(tip) {
            queue.push((commit.committer().when().seconds(), tip));
        }
    }
    let mut chosen = Vec::new();
    while let Some((_, oid)) = queue.pop() {
        if chosen.len() >= limit {
            break;
        }
        chosen.push(oid);
        let Ok(commit) = repo.find_commit(oid) else {
            continue;
        };
        for parent in commit.parent_ids() {
            // A parent the repository lacks: the shallow edge.
            if let Ok(found) = repo.find_commit(parent) {
                if queued.insert(parent) {
                    queue.push((found.committer().when().seconds(), parent));
                }
            }
        }
    }
    Ok(chosen)
}
