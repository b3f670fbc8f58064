//! The task's commits with their LFS files as pointers. Without an LFS
//! filter in the sandbox, `git add` stores an LFS file's content as a
//! plain blob, the unchanged ones included (the work tree holds their
//! content, the index their pointers). Each commit of `base..head` is
//! written again with every such blob replaced by its pointer: an
//! unchanged file maps back to the very pointer blob its parent has,
//! a changed or new one gets a new pointer and its content is queued for
//! the upload before the push.

use super::pointer::{Pointer, MAX_POINTER_BYTES};
use super::{git, LfsError, LfsPaths};
use git2::build::TreeUpdateBuilder;
use git2::{Commit, ObjectType, Oid, Repository, Sort, Tree, TreeWalkMode, TreeWalkResult};
use std::collections::{BTreeMap, HashMap};

/// What the conversion remembers across rounds of the same task.
#[derive(Debug, Default)]
pub struct Converted {
    /// Commits as the sandbox made them, to their ids with pointers.
    commits: HashMap<Oid, Oid>,
    /// Content blobs to their pointer (each is hashed once).
    hashed: HashMap<Oid, Pointer>,
    /// Content blobs to the new pointer blob written for them.
    blobs: HashMap<Oid, Oid>,
    /// Objects the server must get before the push: sha256 to the blob
    /// holding the content.
    pub pending: BTreeMap<Pointer, Oid>,
}

impl Converted {
    /// Writes `base..head` again with LFS files as pointers; returns the new head.
    pub fn rewrite(&mut self, repo: &Repository, (base, head): (Oid, Oid)) -> Result<Oid, LfsError> {
        let mut walk = repo.revwalk().map_err(git("walk the task's commits"))?;
        walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)
            .map_err(git("walk the task's commits"))?;
        walk.push(head).map_err(git("walk the task's commits"))?;
        walk.hide(base).map_err(git("walk the task's commits"))?;
        for oid in walk {
            let oid = oid.map_err(git("walk the task's commits"))?;
            if self.commits.contains_key(&oid) {
                continue;
            }
            let commit = repo.find_commit(oid).map_err(git("read a task commit"))?;
            let written = self.commit(repo, &commit)?;
            self.commits.insert(oid, written);
        }
        Ok(self.commits.get(&head).copied().unwrap_or(head))
    }

    /// One commit with pointers, on its parents' new ids.
    fn commit(&mut self, repo: &Repository, commit: &Commit<'_>) -> Result<Oid, LfsError> {
        let parents: Vec<Oid> = commit
            .parent_ids()
            .map(|p| self.commits.get(&p).copied().unwrap_or(p))
            .collect();
        let tree = commit.tree().map_err(git("read a commit's tree"))?;
        let parent_tree = match parents.first() {
            Some(p) => Some(
                repo.find_commit(*p)
                    .and_then(|c| c.tree())
                    .map_err(git("read a parent's tree"))?,
            ),
            None => None,
        };
        let new_tree = self.tree(repo, &tree, parent_tree.as_ref())?;
        // A commit that only re-added LFS content (unchanged files the
        // sandbox's git saw as modified) is empty once mapped back: left out.
        let was_empty = commit.parents().next().map(|p| p.tree_id()) == Some(tree.id());
        if let (Some(parent), Some(parent_tree)) = (parents.first(), &parent_tree) {
            if new_tree == parent_tree.id() && !was_empty && commit.parent_count() == 1 {
                return Ok(*parent);
            }
        }
        if new_tree == tree.id() && parents.iter().eq(commit.parent_ids().collect::<Vec<_>>().iter()) {
            return Ok(commit.id());
        }
        let new_tree = repo.find_tree(new_tree).map_err(git("read the new tree"))?;
        let parents = parents
            .iter()
            .map(|p| repo.find_commit(*p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(git("read a parent commit"))?;
        let parents: Vec<&Commit<'_>> = parents.iter().collect();
        let message = String::from_utf8_lossy(commit.message_raw_bytes());
        let buffer = repo
            .commit_create_buffer(
                &commit.author(),
                &commit.committer(),
                &message,
                &new_tree,
                &parents,
            )
            .map_err(git("write a commit"))?;
        repo.odb()
            .and_then(|odb| odb.write(ObjectType::Commit, &buffer))
            .map_err(git("write a commit"))
    }

    /// `tree` with each LFS file's content blob replaced by its pointer.
    fn tree(
        &mut self,
        repo: &Repository,
        tree: &Tree<'_>,
        parent: Option<&Tree<'_>>,
    ) -> Result<Oid, LfsError> {
        let paths = LfsPaths::of_tree(repo, tree).map_err(git("read .gitattributes"))?;
        if !paths.any() {
            return Ok(tree.id());
        }
        let mut found = Vec::new();
        tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
            let mode = entry.filemode();
            if entry.kind() == Some(ObjectType::Blob) && matches!(mode, 0o100644 | 0o100755) {
                let path = format!("{dir}{}", String::from_utf8_lossy(entry.name_bytes()));
                if paths.is_lfs(&path) {
                    found.push((path, entry.id(), mode));
                }
            }
            TreeWalkResult::Ok
        })
        .map_err(git("list a tree"))?;
        let odb = repo.odb().map_err(git("open the objects"))?;
        let mut updates = TreeUpdateBuilder::new();
        let mut changed = false;
        for (path, id, mode) in found {
            let (size, _) = odb.read_header(id).map_err(git("read a blob's size"))?;
            if size <= MAX_POINTER_BYTES {
                let blob = repo.find_blob(id).map_err(git("read a blob"))?;
                if Pointer::parse(blob.content()).is_some() {
                    continue;
                }
            }
            let (pointer, pointer_blob, reused) = self.pointer_for(repo, id, parent, &path)?;
            if !reused {
                self.pending.entry(pointer).or_insert(id);
            }
            updates.upsert(path.as_str(), pointer_blob, mode_of(mode));
            changed = true;
        }
        if !changed {
            return Ok(tree.id());
        }
        updates
            .create_updated(repo, tree)
            .map_err(git("write a tree with LFS pointers"))
    }

    /// The pointer of content blob `id`, as the parent's blob at `path`
    /// when that is the same object (byte for byte the pointer the forge
    /// has; `true` then: nothing new to upload).
    fn pointer_for(
        &mut self,
        repo: &Repository,
        id: Oid,
        parent: Option<&Tree<'_>>,
        path: &str,
    ) -> Result<(Pointer, Oid, bool), LfsError> {
        let pointer = match self.hashed.get(&id) {
            Some(pointer) => pointer.clone(),
            None => {
                let pointer = Pointer::of(repo.find_blob(id).map_err(git("read an LFS file"))?.content());
                self.hashed.insert(id, pointer.clone());
                pointer
            }
        };
        let existing = parent
            .and_then(|t| t.get_path(std::path::Path::new(path)).ok())
            .and_then(|entry| repo.find_blob(entry.id()).ok())
            .filter(|blob| Pointer::parse(blob.content()).as_ref() == Some(&pointer))
            .map(|blob| blob.id());
        let reused = existing.is_some();
        let blob = match existing {
            Some(blob) => blob,
            None => match self.blobs.get(&id) {
                Some(blob) => *blob,
                None => {
                    let blob = repo
                        .blob(pointer.text().as_bytes())
                        .map_err(git("write a pointer"))?;
                    self.blobs.insert(id, blob);
                    blob
                }
            },
        };
        Ok((pointer, blob, reused))
    }
}

fn mode_of(mode: i32) -> git2::FileMode {
    if mode == 0o100755 {
        git2::FileMode::BlobExecutable
    } else {
        git2::FileMode::Blob
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(repo: &Repository, parent: Option<Oid>, files: &[(&str, &[u8])]) -> Oid {
        let mut builder = TreeUpdateBuilder::new();
        for (path, content) in files {
            let blob = repo.blob(content).unwrap();
            builder.upsert(*path, blob, git2::FileMode::Blob);
        }
        let base_tree = match parent {
            Some(p) => repo.find_commit(p).unwrap().tree().unwrap(),
            None => repo
                .find_tree(repo.treebuilder(None).unwrap().write().unwrap())
                .unwrap(),
        };
        let tree = repo
            .find_tree(builder.create_updated(repo, &base_tree).unwrap())
            .unwrap();
        let who = git2::Signature::now("t", "t@localhost").unwrap();
        let parents: Vec<git2::Commit<'_>> =
            parent.map(|p| repo.find_commit(p).unwrap()).into_iter().collect();
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        repo.commit(None, &who, &who, "c", &tree, &parents).unwrap()
    }

    fn blob_at(repo: &Repository, commit: Oid, path: &str) -> (Oid, Vec<u8>) {
        let tree = repo.find_commit(commit).unwrap().tree().unwrap();
        let id = tree.get_path(std::path::Path::new(path)).unwrap().id();
        (id, repo.find_blob(id).unwrap().content().to_vec())
    }

    #[test]
    fn content_becomes_pointers_and_unchanged_files_keep_their_blobs() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        // The forge's pointer for same.bin is not canonical (an extension key): kept byte for byte.
        let same = Pointer::of(b"same content");
        let same_text = format!(
            "version https://git-lfs.github.com/spec/v1\next-0-foo sha256:{}\noid sha256:{}\nsize {}\n",
            "0".repeat(64),
            same.oid,
            same.size
        );
        let base = commit(
            &repo,
            None,
            &[
                (".gitattributes", b"*.bin filter=lfs\n"),
                ("same.bin", same_text.as_bytes()),
                ("edit.bin", Pointer::of(b"old").text().as_bytes()),
                ("plain.txt", b"text"),
            ],
        );
        // The sandbox's git stored contents: unchanged, edited, new.
        let first = commit(
            &repo,
            Some(base),
            &[
                ("edit.bin", b"new"),
                ("added.bin", b"added"),
                ("plain.txt", b"text 2"),
            ],
        );
        // A commit that only adds an unchanged file's content (`git add -A` after the agent's commit).
        let second = commit(&repo, Some(first), &[("same.bin", b"same content")]);
        let mut converted = Converted::default();
        let head = converted.rewrite(&repo, (base, second)).unwrap();
        assert_eq!(
            repo.find_commit(head).unwrap().parent_id(0).unwrap(),
            base,
            "one commit left"
        );
        assert_eq!(
            blob_at(&repo, head, "same.bin").0,
            blob_at(&repo, base, "same.bin").0
        );
        assert_eq!(
            blob_at(&repo, head, "edit.bin").1,
            Pointer::of(b"new").text().into_bytes()
        );
        assert_eq!(
            blob_at(&repo, head, "added.bin").1,
            Pointer::of(b"added").text().into_bytes()
        );
        assert_eq!(blob_at(&repo, head, "plain.txt").1, b"text 2".to_vec());
        let pending: Vec<Pointer> = converted.pending.keys().cloned().collect();
        let mut expected = vec![Pointer::of(b"new"), Pointer::of(b"added")];
        expected.sort();
        assert_eq!(pending, expected);
        // A later round maps the same commits the same way.
        assert_eq!(converted.rewrite(&repo, (base, second)).unwrap(), head);
    }
}
