//! Checking the task branch's objects before libgit2 walks them. libgit2
//! recurses through trees (a fetch, a tree walk), so a tree nested 100,000
//! deep would overflow the stack and abort the daemon; and a pack can
//! inflate far past the stream's byte cap. Here every commit and tree the
//! branch reaches is read with an explicit heap stack, each object's size
//! taken from its header before it is loaded, and the caps on depth,
//! objects and bytes applied.

use super::{git, Limits, UntrustedError};
use git2::{ObjectType, Odb, Oid, Repository};
use std::collections::{HashMap, HashSet};

/// Largest single object taken, whatever the byte cap.
const MAX_OBJECT_BYTES: u64 = 512 << 20;

/// Checks everything reachable from `tip`, stopping at `known` commits
/// (which the trusted clone already holds, with their history) and at
/// any object `trusted` holds: only what the task made is counted.
pub(super) fn check(
    repo: &Repository,
    tip: Oid,
    known: &[Oid],
    trusted: &Odb<'_>,
    limits: &Limits,
) -> Result<(), UntrustedError> {
    let odb = repo.odb().map_err(git("open the quarantine's objects"))?;
    let mut walk = Walk {
        repo,
        odb,
        trusted,
        limits,
        object_cap: MAX_OBJECT_BYTES.min(limits.bytes / 4),
        objects: 0,
        bytes: 0,
        seen: HashSet::new(),
        tree_heights: HashMap::new(),
    };
    let mut commits = vec![tip];
    while let Some(oid) = commits.pop() {
        if known.contains(&oid) || walk.trusted_has(oid, ObjectType::Commit) || !walk.seen.insert(oid) {
            continue;
        }
        walk.count(oid, ObjectType::Commit)?;
        let commit = repo.find_commit(oid).map_err(|_| missing(oid))?;
        walk.tree(commit.tree_id())?;
        commits.extend(commit.parent_ids());
    }
    Ok(())
}

fn missing(oid: Oid) -> UntrustedError {
    UntrustedError::Refused(format!(
        "the branch's history names {oid}, which is missing or of the wrong kind"
    ))
}

struct Walk<'r> {
    repo: &'r Repository,
    odb: Odb<'r>,
    /// The trusted clone's objects: already the repository's, not counted.
    trusted: &'r Odb<'r>,
    limits: &'r Limits,
    object_cap: u64,
    objects: u64,
    bytes: u64,
    /// Commits and blobs already counted.
    seen: HashSet<Oid>,
    /// Trees already checked: how many path components their deepest
    /// entry adds.
    tree_heights: HashMap<Oid, usize>,
}

/// A tree being read: its subtrees still to visit and its height so far.
struct Frame {
    subtrees: Vec<Oid>,
    height: usize,
}

impl Walk<'_> {
    /// Whether the trusted stores hold `oid` as a `kind` (a blob named
    /// where a tree belongs is no trusted tree).
    fn trusted_has(&self, oid: Oid, kind: ObjectType) -> bool {
        self.trusted
            .read_header(oid)
            .is_ok_and(|(_, found)| found == kind)
    }

    /// Reads `oid`'s header (never its content) and counts it.
    fn count(&mut self, oid: Oid, kind: ObjectType) -> Result<(), UntrustedError> {
        let (size, found) = self.odb.read_header(oid).map_err(|_| missing(oid))?;
        if found != kind {
            return Err(missing(oid));
        }
        self.objects += 1;
        if self.objects > self.limits.entries {
            return Err(UntrustedError::TooLarge {
                what: format!("{} objects in the branch's history", self.limits.entries),
            });
        }
        let size = size as u64;
        if size > self.object_cap {
            return Err(UntrustedError::TooLarge {
                what: format!("{} bytes in one object ({oid})", self.object_cap),
            });
        }
        self.bytes += size;
        if self.bytes > self.limits.bytes {
            return Err(UntrustedError::TooLarge {
                what: format!("{} bytes of objects in the branch's history", self.limits.bytes),
            });
        }
        Ok(())
    }

    fn too_deep(&self) -> UntrustedError {
        UntrustedError::TooLarge {
            what: format!("{} folders deep", self.limits.depth),
        }
    }

    /// Reads `oid`'s tree depth first; the stack is as deep as the
    /// nesting, which is refused past `limits.depth`.
    fn tree(&mut self, root: Oid) -> Result<(), UntrustedError> {
        if self.tree_heights.contains_key(&root) {
            return Ok(());
        }
        let mut stack = vec![(root, self.open(root, 1)?)];
        loop {
            // The next child's entries sit this many components down.
            let at = stack.len() + 1;
            let Some((oid, frame)) = stack.last_mut() else {
                break;
            };
            let Some(child) = frame.subtrees.pop() else {
                let (oid, height) = (*oid, frame.height);
                self.tree_heights.insert(oid, height);
                stack.pop();
                if let Some((_, parent)) = stack.last_mut() {
                    parent.height = parent.height.max(height + 1);
                }
                continue;
            };
            if self.trusted_has(child, ObjectType::Tree) {
                // The repository's own folder: no new level below it.
                continue;
            }
            match self.tree_heights.get(&child) {
                Some(height) if at - 1 + height > self.limits.depth => return Err(self.too_deep()),
                Some(height) => frame.height = frame.height.max(height + 1),
                None => {
                    let opened = self.open(child, at)?;
                    stack.push((child, opened));
                }
            }
        }
        Ok(())
    }

    /// Counts a tree and its new blobs; `at` is its entries' depth.
    fn open(&mut self, oid: Oid, at: usize) -> Result<Frame, UntrustedError> {
        self.count(oid, ObjectType::Tree)?;
        let tree = self.repo.find_tree(oid).map_err(|_| missing(oid))?;
        if !tree.is_empty() && at > self.limits.depth {
            return Err(self.too_deep());
        }
        let mut frame = Frame {
            subtrees: Vec::new(),
            height: usize::from(!tree.is_empty()),
        };
        for entry in tree.iter() {
            match entry.kind() {
                Some(ObjectType::Tree) => frame.subtrees.push(entry.id()),
                Some(ObjectType::Blob)
                    if !self.trusted.exists(entry.id()) && self.seen.insert(entry.id()) =>
                {
                    self.count(entry.id(), ObjectType::Blob)?;
                }
                // Gitlinks name commits of other repositories.
                _ => {}
            }
        }
        Ok(frame)
    }
}
