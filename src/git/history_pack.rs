//! The history a sandbox gets: the last commits of the branches it works
//! with (`git.history_depth` generations from each tip, as `git clone
//! --depth` counts them), packed into one pack
//! beside the project, with the commits whose parents were left out named
//! as shallow. Enough for `git log`, `git diff` and `git blame` of recent
//! work, however long the repository's history; never every PR branch.

use super::GitError;
use git2::{Oid, Repository};
use std::collections::HashSet;
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
    /// at `tip`. What the pack left out because the receiver has it is read
    /// from the receiver's `borrowed` object folder (its path as the
    /// receiver sees it), whose shallow edge (`borrowed_shallow`) is added
    /// to the pack's own.
    pub fn as_repository(
        &self,
        (refname, tip): (&str, Oid),
        (borrowed, borrowed_shallow): (&str, &[Oid]),
    ) -> std::io::Result<()> {
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
        let info = dir.join("objects").join("info");
        std::fs::create_dir_all(&info)?;
        std::fs::write(info.join("alternates"), format!("{borrowed}\n"))?;
        let mut shallow = self.shallow.clone();
        shallow.extend(borrowed_shallow);
        shallow.sort();
        shallow.dedup();
        if !shallow.is_empty() {
            let text: String = shallow.iter().map(|oid| format!("{oid}\n")).collect();
            std::fs::write(dir.join("shallow"), text)?;
        }
        Ok(())
    }

    /// The text of a `shallow` file naming [`HistoryPack::shallow`].
    pub fn shallow_file(&self) -> String {
        self.shallow.iter().map(|oid| format!("{oid}\n")).collect()
    }
}

/// Packs the commits fewer than `depth` generations (`None`: all) from
/// `tips`, with their trees and blobs, into `into`
/// (made anew). A commit whose parent the repository lacks (a shallow
/// mirror's edge) ends its line of history, and so does a commit the
/// receiver already `has` (left out, its history too).
pub fn write(
    repo: &Repository,
    (tips, has): (&[Oid], &[Oid]),
    depth: Option<u32>,
    into: &Path,
) -> Result<HistoryPack, GitError> {
    let started = std::time::Instant::now();
    let has: HashSet<Oid> = has.iter().copied().collect();
    let chosen = within_depth(repo, tips, &has, depth.map_or(usize::MAX, |d| d as usize))?;
    let mut included: HashSet<Oid> = chosen.iter().copied().collect();
    included.extend(&has);
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

/// The commits fewer than `depth` generations from one of `tips` (every
/// tip itself, whatever the depth), as `git clone --depth` counts them,
/// stopping at what the receiver `has` and at parents the repository
/// lacks. Reads only those commits, so a 50,000-commit history costs what
/// 50 commits do.
fn within_depth(
    repo: &Repository,
    tips: &[Oid],
    has: &HashSet<Oid>,
    depth: usize,
) -> Result<Vec<Oid>, GitError> {
    let mut seen = has.clone();
    let mut level: Vec<Oid> = tips.iter().copied().filter(|tip| seen.insert(*tip)).collect();
    let mut chosen = Vec::new();
    let mut generation = 0;
    while !level.is_empty() && (generation == 0 || generation < depth) {
        let mut next = Vec::new();
        for oid in level {
            let commit = match repo.find_commit(oid) {
                Ok(commit) => commit,
                // A tip must be readable; a parent may be past the mirror's edge.
                Err(e) if generation == 0 => {
                    return Err(GitError::failed("read a branch tip for the history pack", e))
                }
                Err(_) => continue,
            };
            chosen.push(oid);
            next.extend(commit.parent_ids().filter(|p| seen.insert(*p)));
        }
        level = next;
        generation += 1;
    }
    Ok(chosen)
}
