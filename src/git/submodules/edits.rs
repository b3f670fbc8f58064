//! What the model changed inside a submodule's folder, read from the
//! sandbox's tar of that folder as data (nothing is unpacked on the host)
//! and compared with the submodule's commit in its mirror: each file's
//! blob id is hashed as it streams, so no file is held in memory, and one
//! budget of bytes and entries holds for all the folders read. These
//! changes are never pushed; the PR says what was left out.

use super::Present;
use crate::config::CopyOutLimits;
use crate::git::untrusted::Capped;
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

/// Longest path or link target an entry may name (GNU long names and pax
/// records included); a longer one is skipped unread.
const MAX_NAME_BYTES: u64 = 4096;

/// What the sandbox's tars of all the submodules' folders may take
/// together: one budget for the task, spent as the streams are read.
#[derive(Debug, Clone)]
pub struct Budget {
    limits: CopyOutLimits,
    bytes_left: u64,
    entries_left: u64,
}

impl Budget {
    pub fn new(limits: &CopyOutLimits) -> Budget {
        Budget {
            limits: *limits,
            bytes_left: limits.bytes,
            entries_left: limits.entries,
        }
    }

    fn spent(&self) -> String {
        format!(
            "the submodules' folders hold more than {} entries or {} bytes together",
            self.limits.entries, self.limits.bytes
        )
    }
}

/// Path (relative to the streamed folder) -> blob id of each file and link.
pub type Seen = BTreeMap<String, Oid>;

/// Compares `seen` (the submodule's folder, as [`read_folder`] and
/// [`within`] give it) with `submodule`'s commit. `inner`: folders of
/// submodules inside this one, relative to it (compared on their own). New
/// files the commit's `.gitignore` files exclude are not counted.
pub fn compare(seen: &Seen, submodule: &Present, inner: &[String]) -> Result<Edits, String> {
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
    let mut edits = Edits::default();
    for (path, oid) in seen.iter().filter(|(path, _)| !inside(path, inner)) {
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

/// The part of `seen` inside `folder`, relative to it.
pub fn within(seen: &Seen, folder: &str) -> Seen {
    let prefix = format!("{folder}/");
    seen.iter()
        .filter_map(|(path, oid)| Some((path.strip_prefix(&prefix)?.to_owned(), *oid)))
        .collect()
}

/// Each file and link of the tar in `input` (one folder, its first path
/// component the folder's own name), a `.git` anywhere skipped. Every byte
/// and entry read is taken from `budget`; past it, the read stops.
pub fn read_folder(input: &mut dyn Read, budget: &mut Budget) -> Result<Seen, String> {
    let (capped, read, hit) = Capped::new(input, budget.bytes_left);
    let result = read_entries(capped, budget);
    budget.bytes_left = budget.bytes_left.saturating_sub(read.get());
    match result {
        Err(_) if hit.get() => Err(budget.spent()),
        other => other,
    }
}

fn read_entries(input: impl Read, budget: &mut Budget) -> Result<Seen, String> {
    let mut seen = Seen::new();
    let mut archive = tar::Archive::new(input);
    // Raw: GNU long names and pax records come as entries of their own and
    // are read here within a cap, never whole by the tar reader.
    let entries = archive.entries().map_err(|e| e.to_string())?.raw(true);
    let mut names = LongNames::default();
    for entry in entries {
        let mut entry = entry.map_err(|e| e.to_string())?;
        budget.entries_left = budget.entries_left.checked_sub(1).ok_or_else(|| budget.spent())?;
        if names.take_in(&mut entry).map_err(|e| e.to_string())? {
            continue;
        }
        let Some((path, link)) = names.for_entry(&entry) else {
            continue;
        };
        let parts: Vec<&[u8]> = path
            .split(|b| *b == b'/')
            .filter(|p| !p.is_empty() && *p != b".")
            .collect();
        if parts.len() < 2
            || parts.len() > budget.limits.depth + 1
            || parts.iter().any(|p| *p == b".git" || *p == b"..")
        {
            continue;
        }
        let path = String::from_utf8_lossy(&parts[1..].join(&b'/')).into_owned();
        let oid = match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                blob_id(entry.size(), &mut entry).map_err(|e| e.to_string())?
            }
            tar::EntryType::Symlink => {
                Oid::hash_object(git2::ObjectType::Blob, &link).map_err(|e| e.message().to_owned())?
            }
            _ => continue,
        };
        seen.insert(path, oid);
    }
    Ok(seen)
}

/// The long path and link target the entries before a member give it.
#[derive(Default)]
struct LongNames {
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    /// One of them was over [`MAX_NAME_BYTES`]: the member is skipped.
    too_long: bool,
}

impl LongNames {
    /// Takes in `entry` if it describes the next member (a GNU long name
    /// or link, a pax record); whether it did.
    fn take_in<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> std::io::Result<bool> {
        let kind = entry.header().entry_type();
        if kind.is_pax_global_extensions() {
            return Ok(true);
        }
        if !(kind.is_gnu_longname() || kind.is_gnu_longlink() || kind.is_pax_local_extensions()) {
            return Ok(false);
        }
        if entry.size() > MAX_NAME_BYTES {
            self.too_long = true;
            return Ok(true);
        }
        let mut text = Vec::new();
        entry.read_to_end(&mut text)?;
        let name = |mut text: Vec<u8>| {
            while text.last() == Some(&0) {
                text.pop();
            }
            text
        };
        if kind.is_gnu_longname() {
            self.path = Some(name(text));
        } else if kind.is_gnu_longlink() {
            self.link = Some(name(text));
        } else {
            for record in tar::PaxExtensions::new(&text).flatten() {
                match record.key_bytes() {
                    b"path" => self.path = Some(record.value_bytes().to_vec()),
                    b"linkpath" => self.link = Some(record.value_bytes().to_vec()),
                    _ => {}
                }
            }
        }
        Ok(true)
    }

    /// The path and link target of member `entry` (and forgets them for
    /// the next); `None` when a name was too long to read.
    fn for_entry<R: Read>(&mut self, entry: &tar::Entry<'_, R>) -> Option<(Vec<u8>, Vec<u8>)> {
        let taken = std::mem::take(self);
        if taken.too_long {
            return None;
        }
        let path = taken.path.unwrap_or_else(|| entry.path_bytes().into_owned());
        let link = taken
            .link
            .or_else(|| entry.link_name_bytes().map(|l| l.into_owned()))
            .unwrap_or_default();
        Some((path, link))
    }
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
        let mut budget = Budget::new(&CopyOutLimits::default());
        let seen = read_folder(&mut &bytes[..], &mut budget).unwrap();
        let edits = compare(&seen, &present, &[]).unwrap();
        assert_eq!(
            edits,
            Edits {
                modified: vec!["a.txt".into()],
                added: vec!["new.txt".into()],
                deleted: vec!["b.txt".into()],
            }
        );
    }

    fn tar_of(files: &[(&str, &str)]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, text) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(text.len() as u64);
            header.set_mode(0o644);
            tar.append_data(&mut header, path, text.as_bytes()).unwrap();
        }
        tar.into_inner().unwrap()
    }

    #[test]
    fn a_name_over_the_cap_is_skipped_unread_and_a_long_one_under_it_is_kept() {
        let huge = format!("sub/{}", "x".repeat(5000));
        let long = format!("sub/{}", "n".repeat(300));
        let bytes = tar_of(&[(&huge, "x"), (&long, "y"), ("sub/short.txt", "z")]);
        let seen = read_folder(&mut &bytes[..], &mut Budget::new(&CopyOutLimits::default())).unwrap();
        let names: Vec<&str> = seen.keys().map(String::as_str).collect();
        assert_eq!(names, vec!["n".repeat(300).as_str(), "short.txt"]);
    }

    #[test]
    fn one_budget_holds_for_all_the_folders_read() {
        let bytes = tar_of(&[("sub/a.txt", "a"), ("sub/b.txt", "b")]);
        let limits = CopyOutLimits {
            bytes: bytes.len() as u64 + 1024,
            ..CopyOutLimits::default()
        };
        let mut budget = Budget::new(&limits);
        assert_eq!(read_folder(&mut &bytes[..], &mut budget).unwrap().len(), 2);
        let err = read_folder(&mut &bytes[..], &mut budget).unwrap_err();
        assert!(err.contains("together"), "{err}");
        let mut budget = Budget::new(&CopyOutLimits {
            entries: 3,
            ..CopyOutLimits::default()
        });
        assert!(read_folder(&mut &bytes[..], &mut budget).is_ok());
        assert!(read_folder(&mut &bytes[..], &mut budget).is_err());
    }

    #[test]
    fn a_nested_folder_is_cut_out_of_its_parents_files() {
        let bytes = tar_of(&[("sub/a.txt", "a"), ("sub/inner/b.txt", "b")]);
        let seen = read_folder(&mut &bytes[..], &mut Budget::new(&CopyOutLimits::default())).unwrap();
        assert_eq!(within(&seen, "inner").keys().collect::<Vec<_>>(), vec!["b.txt"]);
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
