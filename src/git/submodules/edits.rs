//! What the model changed inside a submodule's folder, read from the
//! sandbox's tar of that folder as data (nothing is unpacked on the host)
//! and compared with the submodule's commit in its mirror: each file's
//! blob id is hashed as it streams, so no file is held in memory. These
//! changes are never pushed; the PR says what was left out.

use super::Present;
use crate::config::CopyOutLimits;
use git2::{Oid, Repository};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use sha1::{Digest, Sha1};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// Changes inside one submodule's folder, by path relative to it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Edits {
    pub modified: Vec<String>,
    pub added: Vec<String>,
    pub deleted: Vec<String>,
}

impl Edits {
    pub fn is_empty(&self) -> bool {
        self.modified.is_empty() && self.added.is_empty() && self.deleted.is_empty()
    }
}

/// Compares the tar in `input` (the submodule's folder, its first path
/// component the folder's own name) with `submodule`'s commit. `inner`:
/// folders of submodules inside this one, relative to it (compared on
/// their own). A `.git` anywhere is skipped; new files the commit's
/// `.gitignore` files exclude are not counted.
pub fn compare(
    input: &mut dyn Read,
    submodule: &Present,
    inner: &[String],
    limits: &CopyOutLimits,
) -> Result<Edits, String> {
    let repo = Repository::open_bare(&submodule.mirror).map_err(|e| e.message().to_owned())?;
    let tree = repo
        .find_commit(submodule.commit)
        .and_then(|c| c.tree())
        .map_err(|e| e.message().to_owned())?;
    let mut tracked: BTreeMap<String, Oid> = BTreeMap::new();
    let mut ignores: Vec<(String, Gitignore)> = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            let path = format!("{dir}{}", String::from_utf8_lossy(entry.name_bytes()));
            if entry.name_bytes() == b".gitignore" {
                if let Some(matcher) = ignore_file(&repo, entry.id(), dir) {
                    ignores.push((dir.to_owned(), matcher));
                }
            }
            tracked.insert(path, entry.id());
        }
        git2::TreeWalkResult::Ok
    })
    .map_err(|e| e.message().to_owned())?;
    let seen = read_stream(input, inner, limits)?;
    let mut edits = Edits::default();
    for (path, oid) in &seen {
        match tracked.get(path) {
            Some(old) if old == oid => {}
            Some(_) => edits.modified.push(path.clone()),
            None if !ignored(&ignores, path) => edits.added.push(path.clone()),
            None => {}
        }
    }
    edits.deleted = tracked
        .keys()
        .filter(|path| !seen.contains_key(*path) && !inside(path, inner))
        .cloned()
        .collect();
    Ok(edits)
}

/// Path -> blob id of each file and link in the stream.
fn read_stream(
    input: &mut dyn Read,
    inner: &[String],
    limits: &CopyOutLimits,
) -> Result<BTreeMap<String, Oid>, String> {
    let mut seen = BTreeMap::new();
    let (mut bytes, mut entries) = (0u64, 0u64);
    let mut archive = tar::Archive::new(input);
    for entry in archive.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| e.to_string())?;
        entries += 1;
        bytes += entry.size();
        if entries > limits.entries || bytes > limits.bytes {
            return Err(format!(
                "the folder holds more than {} entries or {} bytes",
                limits.entries, limits.bytes
            ));
        }
        let raw = entry.path_bytes().into_owned();
        let parts: Vec<&[u8]> = raw
            .split(|b| *b == b'/')
            .filter(|p| !p.is_empty() && *p != b".")
            .collect();
        if parts.len() < 2
            || parts.len() > limits.depth + 1
            || parts.iter().any(|p| *p == b".git" || *p == b"..")
        {
            continue;
        }
        let path = String::from_utf8_lossy(&parts[1..].join(&b'/')).into_owned();
        if inside(&path, inner) {
            continue;
        }
        let oid = match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                blob_id(entry.size(), &mut entry).map_err(|e| e.to_string())?
            }
            tar::EntryType::Symlink => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                Oid::hash_object(git2::ObjectType::Blob, &target).map_err(|e| e.message().to_owned())?
            }
            _ => continue,
        };
        seen.insert(path, oid);
    }
    Ok(seen)
}

/// The git blob id of `size` bytes read from `input`.
fn blob_id(size: u64, input: &mut dyn Read) -> std::io::Result<Oid> {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {size}\0").as_bytes());
    let mut buffer = [0u8; 64 * 1024];
    loop {
        let n = input.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Oid::from_bytes(&hasher.finalize()).map_err(std::io::Error::other)
}

/// Whether `path` lies in one of the `folders` (or is one).
fn inside(path: &str, folders: &[String]) -> bool {
    folders.iter().any(|f| {
        path == f
            || path
                .strip_prefix(f.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// A `.gitignore` of the submodule's commit (trusted: from its mirror).
fn ignore_file(repo: &Repository, id: Oid, dir: &str) -> Option<Gitignore> {
    let blob = repo.find_blob(id).ok().filter(|b| b.size() <= 1 << 20)?;
    let mut builder = GitignoreBuilder::new(Path::new("/").join(dir));
    for line in String::from_utf8_lossy(blob.content()).lines() {
        let _ = builder.add_line(None, line);
    }
    builder.build().ok()
}

fn ignored(ignores: &[(String, Gitignore)], path: &str) -> bool {
    let full = Path::new("/").join(path);
    let mut verdict = false;
    // Shallower files first, so a deeper file's decision wins, as in git.
    for (dir, matcher) in ignores {
        if !path.starts_with(dir.as_str()) {
            continue;
        }
        match matcher.matched_path_or_any_parents(&full, false) {
            ignore::Match::Ignore(_) => verdict = true,
            ignore::Match::Whitelist(_) => verdict = false,
            ignore::Match::None => {}
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_streamed_blob_id_is_gits() {
        let text = b"hello\n";
        let streamed = blob_id(text.len() as u64, &mut &text[..]).unwrap();
        assert_eq!(streamed, Oid::hash_object(git2::ObjectType::Blob, text).unwrap());
    }

    #[test]
    fn changes_additions_and_deletions_are_found_and_ignored_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path().join("m.git")).unwrap();
        let mut index = git2::Index::new().unwrap();
        for (path, text) in [
            ("a.txt", "a\n"),
            ("b.txt", "b\n"),
            (".gitignore", "build/\n"),
            ("keep.txt", "k\n"),
        ] {
            let id = repo.blob(text.as_bytes()).unwrap();
            let mut entry = entry_for(path, id);
            entry.file_size = text.len() as u32;
            index.add(&entry).unwrap();
        }
        let tree = repo.find_tree(index.write_tree_to(&repo).unwrap()).unwrap();
        let who = git2::Signature::now("t", "t@localhost").unwrap();
        let commit = repo.commit(None, &who, &who, "c", &tree, &[]).unwrap();
        let mut tar = tar::Builder::new(Vec::new());
        for (path, text) in [
            ("sub/a.txt", "a changed\n"),
            ("sub/.gitignore", "build/\n"),
            ("sub/keep.txt", "k\n"),
            ("sub/new.txt", "n\n"),
            ("sub/build/out.o", "x"),
            ("sub/.git", "gitdir: elsewhere\n"),
        ] {
            let mut header = tar::Header::new_gnu();
            header.set_size(text.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, path, text.as_bytes()).unwrap();
        }
        let bytes = tar.into_inner().unwrap();
        let present = Present {
            path: "vendored/sub".into(),
            commit,
            url: "https://forge.example/sub.git".into(),
            mirror: dir.path().join("m.git"),
        };
        let edits = compare(&mut &bytes[..], &present, &[], &CopyOutLimits::default()).unwrap();
        assert_eq!(
            edits,
            Edits {
                modified: vec!["a.txt".into()],
                added: vec!["new.txt".into()],
                deleted: vec!["b.txt".into()],
            }
        );
    }

    fn entry_for(path: &str, id: Oid) -> git2::IndexEntry {
        git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: 0o100644,
            uid: 0,
            gid: 0,
            file_size: 0,
            id,
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        }
    }
}
