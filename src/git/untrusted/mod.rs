//! Taking a result out of a sandbox. The rule: **the host never resolves a
//! path inside a tree the sandbox wrote.** What leaves a sandbox is a tar
//! stream, read here entry by entry as data: a `.git` folder's object files
//! become objects of a bare quarantine repository forgehand makes itself
//! (loose objects inflated and hashed again, packs indexed by libgit2), its
//! HEAD and branch refs are read as text, and, when the model left work
//! uncommitted, each work-tree file becomes a blob, each link a link blob
//! holding its target's text. Nothing is unpacked onto the host's disk and
//! read back, so no link, hard link, FIFO or device the sandbox planted has
//! a host path to redirect; caps on bytes, entries and depth apply while
//! the stream is read, so a sparse terabyte stops at its header.

mod history;
mod intake;
mod leftovers;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trusted_tests;

use git2::{Oid, Repository, Signature};
use std::path::{Path, PathBuf};

pub(crate) use intake::Capped;
pub use intake::Layout;

/// Largest HEAD, ref or packed-refs file read.
const MAX_REF_FILE_BYTES: u64 = 16 << 20;

pub use crate::config::CopyOutLimits as Limits;

#[derive(Debug, thiserror::Error)]
pub enum UntrustedError {
    #[error("the sandbox's repository cannot be used: {0}")]
    Refused(String),
    /// HEAD names another branch than the task's (or none).
    #[error("the sandbox's HEAD is {head}")]
    OtherHead { head: String },
    #[error(
        "what the sandbox sent holds more than {what}; nothing was taken (the copy stopped at that cap)"
    )]
    TooLarge { what: String },
    #[error("cannot read the tree the sandbox sent: {0}")]
    Stream(#[source] std::io::Error),
    #[error("cannot prepare the quarantine at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{action} failed: {source}")]
    Git {
        action: String,
        #[source]
        source: git2::Error,
    },
}

/// The quarantine re-opened with forgehand's own `alternates` file naming
/// the trusted object folders, once everything the sandbox sent is in:
/// its objects are read from there, and the fetch into the trusted clone
/// sends only what they lack.
fn borrow_trusted(repo: Repository, into: &Path, trusted: &[PathBuf]) -> Result<Repository, UntrustedError> {
    if trusted.is_empty() {
        return Ok(repo);
    }
    drop(repo);
    let info = into.join("objects").join("info");
    let io = |source| UntrustedError::Io {
        path: info.clone(),
        source,
    };
    std::fs::create_dir_all(&info).map_err(io)?;
    let list: String = trusted.iter().map(|p| format!("{}\n", p.display())).collect();
    std::fs::write(info.join("alternates"), list).map_err(io)?;
    // The trusted repositories' shallow edges, so no walk (the fetch's
    // negotiation) looks for parents they never had.
    let shallow: Vec<Oid> = trusted
        .iter()
        .filter_map(|objects| objects.parent())
        .flat_map(crate::git::shallow::read)
        .collect();
    crate::git::shallow::write(into, &shallow).map_err(|source| UntrustedError::Io {
        path: into.join("shallow"),
        source,
    })?;
    Repository::open_bare(into).map_err(git("re-open the quarantine repository"))
}

/// The trusted object folders as one read-only object database.
fn trusted_objects(trusted: &[PathBuf]) -> Result<git2::Odb<'static>, UntrustedError> {
    let odb = git2::Odb::new().map_err(git("open the trusted objects"))?;
    for dir in trusted {
        odb.add_disk_alternate(&dir.to_string_lossy())
            .map_err(git("open the trusted objects"))?;
    }
    Ok(odb)
}

fn git(action: &str) -> impl Fn(git2::Error) -> UntrustedError + '_ {
    move |source| UntrustedError::Git {
        action: action.to_owned(),
        source,
    }
}

/// Who commits what the model left uncommitted, and with which message.
pub struct LeftoverCommit<'a> {
    pub message: &'a str,
    pub author: &'a Signature<'a>,
}

/// The sandbox's result, in a bare repository forgehand made.
pub struct Quarantined {
    pub repo: Repository,
    pub path: PathBuf,
    /// The task branch's tip (with the leftovers' commit, when one was made).
    pub head: Oid,
    /// The sandbox's other local branches: (name, tip).
    pub other_branches: Vec<(String, Oid)>,
    /// Whether forgehand made the last commit on the host from the tree.
    pub committed_on_host: bool,
    /// Work-tree entries that were not taken (FIFOs, devices, sockets,
    /// hard links to nothing in the stream, repositories nested in the
    /// tree that are no submodule of the parent).
    pub left_out: Vec<String>,
}

/// Reads a tar stream of `layout` from a sandbox into a new bare
/// repository at `into`, sets `branch` there to the tip the sandbox's refs
/// give it (HEAD must name it), and, with `leftovers`, commits the work
/// tree the stream holds on top of it. The branch's whole history is
/// checked against the caps; [`take_since`] checks only what is new.
#[cfg(test)]
pub fn take(
    input: impl std::io::Read,
    layout: Layout,
    branch: &str,
    into: &Path,
    limits: &Limits,
    leftovers: Option<LeftoverCommit<'_>>,
) -> Result<Quarantined, UntrustedError> {
    take_since(input, layout, branch, into, limits, leftovers, (&[], &[]))
}

/// [`take`], where the `known` commits (and their history) are already
/// in the trusted clone, whose object folders are `trusted`: the sandbox
/// sends only what it made (its history stays beside the project), the
/// quarantine reads the rest from the trusted folders (never written),
/// and only the commits, trees and blobs they lack are checked and
/// counted against the caps.
pub fn take_since(
    input: impl std::io::Read,
    layout: Layout,
    branch: &str,
    into: &Path,
    limits: &Limits,
    leftovers: Option<LeftoverCommit<'_>>,
    (known, trusted): (&[Oid], &[PathBuf]),
) -> Result<Quarantined, UntrustedError> {
    let repo = fresh_quarantine(into)?;
    let read = intake::read(input, layout, &repo, limits)?;
    let repo = borrow_trusted(repo, into, trusted)?;
    let tip = read.refs.branch_tip(branch)?;
    repo.find_commit(tip).map_err(|_| {
        UntrustedError::Refused(format!(
            "the branch `{branch}` points at {tip}, which neither what the sandbox sent nor the repository holds (the sandbox's own alternates are not read)"
        ))
    })?;
    // Before libgit2 walks a tree of it (the leftovers, the fetch).
    history::check(&repo, tip, known, &trusted_objects(trusted)?, limits)?;
    let mut head = tip;
    let mut committed_on_host = false;
    let mut left_out = read.left_out;
    if let (Some(commit), Some(tree)) = (leftovers, read.tree) {
        let made = leftovers::commit(&repo, &tree, tip, &commit)?;
        left_out.extend(made.left_out);
        if let Some(oid) = made.commit {
            head = oid;
            committed_on_host = true;
        }
    }
    repo.reference(
        &format!("refs/heads/{branch}"),
        head,
        true,
        "forgehand: the sandbox's result",
    )
    .map_err(git("set the result branch"))?;
    let other_branches = read
        .refs
        .branches
        .into_iter()
        .filter(|(name, _)| name != branch)
        .collect();
    Ok(Quarantined {
        repo,
        path: into.to_owned(),
        head,
        other_branches,
        committed_on_host,
        left_out,
    })
}

/// An empty bare repository at `into` (what was there is removed).
fn fresh_quarantine(into: &Path) -> Result<Repository, UntrustedError> {
    if into.exists() {
        std::fs::remove_dir_all(into).map_err(|source| UntrustedError::Io {
            path: into.to_owned(),
            source,
        })?;
    }
    Repository::init_bare(into).map_err(git("make the quarantine repository"))
}

/// The ref a checkpoint's commit is kept under in its quarantine.
pub const CHECKPOINT_REF: &str = "refs/forgehand/checkpoint";

/// Reads a tar stream of a sandbox's git folder (its `objects` alone are
/// read; HEAD and branches are not) into the bare repository at `into`:
/// made anew when `fresh`, else added to (a second folder of objects).
/// Each stream is held to `limits`.
pub fn take_objects(
    input: impl std::io::Read,
    into: &Path,
    limits: &Limits,
    fresh: bool,
) -> Result<(), UntrustedError> {
    let repo = match fresh {
        true => fresh_quarantine(into)?,
        false => Repository::open_bare(into).map_err(git("open the quarantine repository"))?,
    };
    intake::read(input, Layout::GitDir, &repo, limits)?;
    Ok(())
}

/// Keeps `commit` in the quarantine at `into` (filled by [`take_objects`])
/// as [`CHECKPOINT_REF`]: a commit the sandbox made of its tree, so it
/// must be among what the sandbox sent; its history is checked as
/// [`take_since`] checks a branch's, only what the `known` commits lack
/// counted against the caps.
pub fn keep_commit(
    into: &Path,
    commit: Oid,
    limits: &Limits,
    (known, trusted): (&[Oid], &[PathBuf]),
) -> Result<(), UntrustedError> {
    let repo = Repository::open_bare(into).map_err(git("open the quarantine repository"))?;
    // Looked up before the trusted folders are borrowed: never one the
    // trusted repositories alone hold.
    repo.find_commit(commit).map_err(|_| {
        UntrustedError::Refused(format!(
            "the checkpoint commit {commit} is not in what the sandbox sent"
        ))
    })?;
    let repo = borrow_trusted(repo, into, trusted)?;
    history::check(&repo, commit, known, &trusted_objects(trusted)?, limits)?;
    repo.reference(CHECKPOINT_REF, commit, true, "forgehand: checkpoint")
        .map_err(git("keep the checkpoint"))?;
    Ok(())
}
