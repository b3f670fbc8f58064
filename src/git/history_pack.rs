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
        super::shallow::write(dir, &shallow)
    }

    /// The text of a `shallow` file naming [`HistoryPack::shallow`].
    pub fn shallow_file(&self) -> String {
        super::shallow::text(&self.shallow)
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

/// A history pack kept under `cache` (a folder of the repository's mirror)
/// by its tips and depth: later tasks on the same commits reuse it instead
/// of packing the same history again. Entries nobody used for a day are
/// removed when a new one is made.
pub fn cached(
    repo: &Repository,
    tips: &[Oid],
    depth: Option<u32>,
    cache: &Path,
) -> Result<HistoryPack, GitError> {
    use sha2::Digest;
    let mut sorted = tips.to_vec();
    sorted.sort();
    sorted.dedup();
    let mut key = sha2::Sha256::new();
    for tip in &sorted {
        key.update(tip.as_bytes());
    }
    key.update(depth.unwrap_or(0).to_le_bytes());
    let dir = cache.join(&hex::encode(key.finalize())[..16]);
    if let Some(found) = read_cached(&dir) {
        return Ok(found);
    }
    let io = |e: std::io::Error| GitError::Failed {
        action: format!("keep the history pack in {}", cache.display()),
        detail: e.to_string(),
    };
    std::fs::create_dir_all(cache).map_err(io)?;
    forget_unused(cache, std::time::Duration::from_secs(24 * 3600));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let building = cache.join(format!(".building-{}-{nanos}", std::process::id()));
    let mut pack = write(repo, (&sorted, &[]), depth, &building)?;
    let meta = format!("{}\n{}", pack.commits, pack.shallow_file());
    std::fs::write(building.join(META), meta).map_err(io)?;
    match std::fs::rename(&building, &dir) {
        Ok(()) => {}
        // Another task made the same one meanwhile: theirs is as good.
        Err(_) if read_cached(&dir).is_some() => {
            let _ = std::fs::remove_dir_all(&building);
        }
        Err(e) => return Err(io(e)),
    }
    pack.dir = dir;
    Ok(pack)
}

/// The file of a kept history pack naming its commit count and shallow edge.
const META: &str = "forgehand-history";

fn read_cached(dir: &Path) -> Option<HistoryPack> {
    let meta = std::fs::read_to_string(dir.join(META)).ok()?;
    let mut lines = meta.lines();
    let commits = lines.next()?.parse().ok()?;
    let shallow = lines.filter_map(|l| Oid::from_str(l).ok()).collect();
    // Used now: kept by the next clean-up.
    let _ = std::fs::File::options()
        .append(true)
        .open(dir.join(META))
        .and_then(|f| f.set_modified(std::time::SystemTime::now()));
    Some(HistoryPack {
        dir: dir.to_owned(),
        shallow,
        commits,
    })
}

/// Removes kept history packs (and abandoned half-made ones) unused for `age`.
fn forget_unused(cache: &Path, age: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let used = std::fs::metadata(path.join(META))
            .or_else(|_| entry.metadata())
            .and_then(|m| m.modified());
        let old = used.is_ok_and(|t| t.elapsed().is_ok_and(|e| e > age));
        if old {
            if let Err(e) = std::fs::remove_dir_all(&path) {
                tracing::debug!("cannot remove the old history pack {}: {e}", path.display());
            }
        }
    }
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
