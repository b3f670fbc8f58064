//! Committing what the model left uncommitted, from the work tree a stream
//! held, as `git add -A` would: the parent's files as they now are (ignored
//! or not), deletions, new files the tree's `.gitignore` files do not
//! exclude, links as links. Submodules (gitlinks) are carried as they were
//! while their folder stands; their contents are never committed as files.

use super::intake::{WorkFile, WorkTree};
use super::{git, LeftoverCommit, UntrustedError};
use git2::{Index, IndexEntry, IndexTime, Oid, Repository};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const GITLINK: u32 = 0o160000;
/// Largest `.gitignore` read; a larger one is left out (its size is read
/// from the object's header, so it is never loaded).
const MAX_GITIGNORE_BYTES: usize = 1 << 20;
/// Most `.gitignore` files read for one commit, and most bytes of them.
const MAX_GITIGNORES: usize = 10_000;
const MAX_GITIGNORE_TOTAL_BYTES: usize = 64 << 20;

pub(super) struct Made {
    /// `None`: nothing changed.
    pub commit: Option<Oid>,
    pub left_out: Vec<String>,
}

pub(super) fn commit(
    repo: &Repository,
    tree: &WorkTree,
    parent: Oid,
    how: &LeftoverCommit<'_>,
) -> Result<Made, UntrustedError> {
    let parent = repo
        .find_commit(parent)
        .map_err(git("read the result's commit"))?;
    let tracked = tracked_entries(&parent)?;
    let gitlinks: BTreeSet<Vec<u8>> = tracked
        .iter()
        .filter(|(_, (mode, _))| *mode == GITLINK)
        .map(|(path, _)| path.clone())
        .collect();
    let mut index = Index::new().map_err(git("make an index"))?;
    for (path, (mode, oid)) in &tracked {
        match tree.files.get(path) {
            Some(file) => add(&mut index, path, *file)?,
            // A submodule whose folder still stands is kept as it was.
            None if *mode == GITLINK && (tree.dirs.contains(path) || tree.nested.contains(path)) => {
                add_entry(&mut index, path, GITLINK, *oid, 0)?;
            }
            // Gone from the tree: a deletion.
            None => {}
        }
    }
    let mut ignores = Ignores::new(repo, tree);
    let mut left_out = Vec::new();
    for (path, file) in &tree.files {
        if tracked.contains_key(path) || within(path, &gitlinks) || within(path, &tree.nested) {
            continue;
        }
        if !ignores.ignored(path) {
            add_new(&mut index, path, *file, &mut left_out)?;
        }
    }
    left_out.append(&mut ignores.left_out);
    left_out.extend(
        tree.nested
            .iter()
            .filter(|folder| !gitlinks.contains(*folder) && !within(folder, &gitlinks))
            .map(|folder| {
                format!(
                    "`{}`: a repository inside the tree that is no submodule; its files were not committed",
                    String::from_utf8_lossy(folder)
                )
            }),
    );
    let tree_id = index.write_tree_to(repo).map_err(git("write the tree"))?;
    if tree_id == parent.tree_id() {
        return Ok(Made {
            commit: None,
            left_out,
        });
    }
    let written = repo.find_tree(tree_id).map_err(git("read the tree"))?;
    let commit = repo
        .commit(None, how.author, how.author, how.message, &written, &[&parent])
        .map_err(git("commit the leftovers"))?;
    Ok(Made {
        commit: Some(commit),
        left_out,
    })
}

/// Every blob, link and gitlink of `commit`'s tree: path -> (mode, id).
fn tracked_entries(commit: &git2::Commit<'_>) -> Result<BTreeMap<Vec<u8>, (u32, Oid)>, UntrustedError> {
    let mut tracked = BTreeMap::new();
    commit
        .tree()
        .map_err(git("read the result's tree"))?
        .walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            let mode = entry.filemode() as u32;
            if matches!(
                entry.kind(),
                Some(git2::ObjectType::Blob | git2::ObjectType::Commit)
            ) {
                let mut path = dir.as_bytes().to_vec();
                path.extend_from_slice(entry.name_bytes());
                tracked.insert(path, (mode, entry.id()));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(git("list the result's files"))?;
    Ok(tracked)
}

/// Whether a folder of `set` holds `path` (strictly inside it).
fn within(path: &[u8], set: &BTreeSet<Vec<u8>>) -> bool {
    path.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'/')
        .any(|(at, _)| set.contains(&path[..at]))
}

fn add(index: &mut Index, path: &[u8], file: WorkFile) -> Result<(), UntrustedError> {
    match file {
        WorkFile::Blob { oid, executable } => {
            let mode = if executable { 0o100755 } else { 0o100644 };
            add_entry(index, path, mode, oid, 0)
        }
        WorkFile::Link(oid) => add_entry(index, path, 0o120000, oid, 0),
    }
}

/// Adds a file the parent does not track; a name libgit2 refuses (such as
/// `.GIT/hooks/x`) is left out rather than failing the whole commit.
fn add_new(
    index: &mut Index,
    path: &[u8],
    file: WorkFile,
    left_out: &mut Vec<String>,
) -> Result<(), UntrustedError> {
    match add(index, path, file) {
        Err(UntrustedError::Git { source, .. }) if source.class() == git2::ErrorClass::Index => {
            left_out.push(format!(
                "`{}`: a name git refuses to commit",
                String::from_utf8_lossy(path)
            ));
            Ok(())
        }
        other => other,
    }
}

fn add_entry(index: &mut Index, path: &[u8], mode: u32, id: Oid, size: u32) -> Result<(), UntrustedError> {
    let entry = IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: size,
        id,
        flags: 0,
        flags_extended: 0,
        path: path.to_vec(),
    };
    index.add(&entry).map_err(git("stage a file"))
}

/// The tree's `.gitignore` files, read from their blobs, one matcher per
/// folder; a deeper file's decision wins, as in git.
struct Ignores<'a> {
    repo: &'a Repository,
    tree: &'a WorkTree,
    by_folder: HashMap<Vec<u8>, Option<Gitignore>>,
    /// `.gitignore` files read so far, and their bytes.
    read: usize,
    read_bytes: usize,
    left_out: Vec<String>,
}

impl<'a> Ignores<'a> {
    fn new(repo: &'a Repository, tree: &'a WorkTree) -> Ignores<'a> {
        Ignores {
            repo,
            tree,
            by_folder: HashMap::new(),
            read: 0,
            read_bytes: 0,
            left_out: Vec::new(),
        }
    }

    fn ignored(&mut self, path: &[u8]) -> bool {
        let full = virtual_path(path);
        let mut folders: Vec<&[u8]> = vec![&[]];
        folders.extend(
            path.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'/')
                .map(|(at, _)| &path[..at]),
        );
        let mut ignored = false;
        for folder in folders {
            let Some(matcher) = self.matcher(folder) else {
                continue;
            };
            match matcher.matched_path_or_any_parents(&full, false) {
                Match::Ignore(_) => ignored = true,
                Match::Whitelist(_) => ignored = false,
                Match::None => {}
            }
        }
        ignored
    }

    fn matcher(&mut self, folder: &[u8]) -> Option<&Gitignore> {
        if !self.by_folder.contains_key(folder) {
            let built = self.build(folder);
            self.by_folder.insert(folder.to_vec(), built);
        }
        self.by_folder.get(folder).and_then(Option::as_ref)
    }

    fn build(&mut self, folder: &[u8]) -> Option<Gitignore> {
        let mut name = folder.to_vec();
        if !name.is_empty() {
            name.push(b'/');
        }
        name.extend_from_slice(b".gitignore");
        let WorkFile::Blob { oid, .. } = self.tree.files.get(&name)? else {
            return None;
        };
        let (size, _) = self.repo.odb().ok()?.read_header(*oid).ok()?;
        let why = if size > MAX_GITIGNORE_BYTES {
            Some(format!("larger than {MAX_GITIGNORE_BYTES} bytes"))
        } else if self.read >= MAX_GITIGNORES || self.read_bytes + size > MAX_GITIGNORE_TOTAL_BYTES {
            Some(format!(
                "past {MAX_GITIGNORES} `.gitignore` files or {MAX_GITIGNORE_TOTAL_BYTES} bytes of them"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            self.left_out.push(format!(
                "`{}`: {why}; its rules were not applied",
                String::from_utf8_lossy(&name)
            ));
            return None;
        }
        self.read += 1;
        self.read_bytes += size;
        let blob = self.repo.find_blob(*oid).ok()?;
        let text = String::from_utf8_lossy(blob.content());
        let mut builder = GitignoreBuilder::new(virtual_path(folder));
        for line in text.lines() {
            // A line the matcher cannot read is skipped, as git skips it.
            let _ = builder.add_line(None, line);
        }
        builder.build().ok()
    }
}

/// A tree path under a root of its own, for the matcher (which compares
/// paths and never touches the filesystem).
fn virtual_path(path: &[u8]) -> PathBuf {
    Path::new("/").join(OsStr::from_bytes(path))
}
