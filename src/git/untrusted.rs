//! Taking a result out of a repository the sandbox wrote, without trusting
//! anything in it but object bytes. A `.git` that came out of a sandbox is
//! never opened as a repository: its config could point `core.worktree` at
//! any host folder, its `objects/info/alternates` at another task's objects,
//! a gitfile or a symlink anywhere. Instead its objects (and nothing else)
//! are copied, capped, into a bare repository forgehand makes itself, and
//! the one branch the task works on is read from its HEAD and refs by hand.
//! What the model left uncommitted is committed on the host from the file
//! tree alone.

use git2::{Index, IndexEntry, IndexTime, Oid, Repository, Signature};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Most bytes of objects taken from a sandbox's repository.
pub const MAX_OBJECT_BYTES: u64 = 4 << 30;
/// Most object files (loose objects and pack files) taken.
pub const MAX_OBJECT_FILES: u64 = 1_000_000;
/// Largest HEAD, ref or packed-refs file read.
const MAX_REF_FILE_BYTES: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum UntrustedError {
    #[error("the sandbox's repository cannot be used: {0}")]
    Refused(String),
    /// HEAD names another branch than the task's (or none).
    #[error("the sandbox's HEAD is {head}")]
    OtherHead { head: String },
    #[error("the sandbox's repository holds more than {what}; nothing was taken")]
    TooLarge { what: String },
    #[error("cannot read the sandbox's copy at {path}: {source}")]
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

fn io(path: &Path) -> impl Fn(std::io::Error) -> UntrustedError + '_ {
    move |source| UntrustedError::Io {
        path: path.to_owned(),
        source,
    }
}

fn git(action: &str) -> impl Fn(git2::Error) -> UntrustedError + '_ {
    move |source| UntrustedError::Git {
        action: action.to_owned(),
        source,
    }
}

/// A bare repository forgehand made, holding a sandbox's objects and the
/// task branch.
pub struct Quarantined {
    pub repo: Repository,
    pub path: PathBuf,
    /// The task branch's tip.
    pub head: Oid,
    /// The sandbox's other local branches: (name, tip).
    pub other_branches: Vec<(String, Oid)>,
}

/// Copies `git_dir`'s objects into a new bare repository at `into` and sets
/// `branch` there to the tip the sandbox's refs give it. HEAD must name
/// `branch`.
pub fn quarantine(git_dir: &Path, branch: &str, into: &Path) -> Result<Quarantined, UntrustedError> {
    let meta = fs::symlink_metadata(git_dir).map_err(io(git_dir))?;
    if !meta.is_dir() {
        return Err(UntrustedError::Refused(format!(
            "{} is a {}, not a folder (a gitfile or a link is never followed)",
            git_dir.display(),
            if meta.file_type().is_symlink() {
                "symlink"
            } else {
                "file"
            }
        )));
    }
    let head = read_small(&git_dir.join("HEAD"))?;
    let wanted = format!("refs/heads/{branch}");
    match head.trim().strip_prefix("ref: ") {
        Some(name) if name == wanted => {}
        Some(name) => {
            return Err(UntrustedError::OtherHead {
                head: name.to_owned(),
            })
        }
        None => {
            return Err(UntrustedError::OtherHead {
                head: "(detached)".into(),
            })
        }
    }
    let refs = local_branches(git_dir)?;
    let tip = refs
        .iter()
        .find(|(name, _)| name == branch)
        .map(|(_, oid)| *oid)
        .ok_or_else(|| UntrustedError::Refused(format!("the branch `{branch}` has no commit")))?;
    if into.exists() {
        fs::remove_dir_all(into).map_err(io(into))?;
    }
    let repo = Repository::init_bare(into).map_err(git("make the quarantine repository"))?;
    copy_objects(&git_dir.join("objects"), &into.join("objects"))?;
    repo.find_commit(tip).map_err(|_| {
        UntrustedError::Refused(format!(
            "the branch `{branch}` points at {tip}, which its own objects do not hold (objects elsewhere, such as alternates, are not read)"
        ))
    })?;
    repo.reference(&wanted, tip, true, "forgehand: the sandbox's result")
        .map_err(git("set the result branch"))?;
    let other_branches = refs.into_iter().filter(|(name, _)| name != branch).collect();
    Ok(Quarantined {
        repo,
        path: into.to_owned(),
        head: tip,
        other_branches,
    })
}

/// A ref-sized file, read only when it is a regular file (never a link).
fn read_small(path: &Path) -> Result<String, UntrustedError> {
    let meta = fs::symlink_metadata(path).map_err(io(path))?;
    if !meta.is_file() || meta.len() > MAX_REF_FILE_BYTES {
        return Err(UntrustedError::Refused(format!(
            "{} is not a regular file of at most {MAX_REF_FILE_BYTES} bytes",
            path.display()
        )));
    }
    fs::read_to_string(path).map_err(io(path))
}

/// Local branches from loose refs and `packed-refs` (loose wins), each
/// checked to be a branch name and an object id; links are skipped.
fn local_branches(git_dir: &Path) -> Result<Vec<(String, Oid)>, UntrustedError> {
    let mut found: Vec<(String, Oid)> = Vec::new();
    let packed = git_dir.join("packed-refs");
    if fs::symlink_metadata(&packed).is_ok_and(|m| m.is_file()) {
        for line in read_small(&packed)?.lines() {
            let Some((oid, name)) = line.split_once(' ') else {
                continue;
            };
            if let (Some(name), Ok(oid)) = (name.strip_prefix("refs/heads/"), Oid::from_str(oid)) {
                found.push((name.to_owned(), oid));
            }
        }
    }
    let heads = git_dir.join("refs/heads");
    let mut stack = vec![(heads.clone(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let Ok(meta) = fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if meta.is_dir() {
                stack.push((entry.path(), format!("{name}/")));
            } else if meta.is_file() && git2::Reference::is_valid_name(&format!("refs/heads/{name}")) {
                if let Ok(oid) = Oid::from_str(read_small(&entry.path())?.trim()) {
                    found.retain(|(n, _)| *n != name);
                    found.push((name, oid));
                }
            }
        }
    }
    Ok(found)
}

/// Copies loose objects (`xx/yyyy…`) and pack files (`pack/pack-*.{pack,idx,rev}`),
/// regular files only, within the caps. `objects/info` (alternates) and
/// anything else is left behind.
fn copy_objects(from: &Path, to: &Path) -> Result<(), UntrustedError> {
    let (mut bytes, mut files) = (0u64, 0u64);
    let mut take = |source: &Path, target: &Path| -> Result<(), UntrustedError> {
        let meta = fs::symlink_metadata(source).map_err(io(source))?;
        if !meta.is_file() {
            return Ok(());
        }
        bytes += meta.len();
        files += 1;
        if bytes > MAX_OBJECT_BYTES {
            return Err(UntrustedError::TooLarge {
                what: format!("{MAX_OBJECT_BYTES} bytes of objects"),
            });
        }
        if files > MAX_OBJECT_FILES {
            return Err(UntrustedError::TooLarge {
                what: format!("{MAX_OBJECT_FILES} object files"),
            });
        }
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        fs::copy(source, target).map_err(io(source))?;
        Ok(())
    };
    let Ok(entries) = fs::read_dir(from) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = fs::symlink_metadata(entry.path()).is_ok_and(|m| m.is_dir());
        if !is_dir {
            continue;
        }
        let fan_out = name.len() == 2 && name.chars().all(|c| c.is_ascii_hexdigit());
        if !fan_out && name != "pack" {
            continue;
        }
        for object in fs::read_dir(entry.path()).map_err(io(&entry.path()))?.flatten() {
            let file = object.file_name().to_string_lossy().into_owned();
            let wanted = if fan_out {
                file.len() >= 38 && file.chars().all(|c| c.is_ascii_hexdigit())
            } else {
                file.starts_with("pack-")
                    && [".pack", ".idx", ".rev"].iter().any(|ext| file.ends_with(ext))
                    && !file.contains('/')
            };
            if wanted {
                take(&object.path(), &to.join(&name).join(&file))?;
            }
        }
    }
    Ok(())
}

/// Commits the files under `work` (a copy of the sandbox's project, `.git`
/// left out) on top of `parent` in `repo`, as `git add -A` would: the
/// parent's files as they now are (ignored or not), deletions, and new files
/// the tree's `.gitignore` files do not exclude. Nothing is read through a
/// link: a symlink is committed as a link. `None` when nothing changed.
pub fn commit_files(
    repo: &Repository,
    work: &Path,
    parent: Oid,
    message: &str,
    author: &Signature<'_>,
) -> Result<Option<Oid>, UntrustedError> {
    let parent = repo
        .find_commit(parent)
        .map_err(git("read the result's commit"))?;
    let mut paths: BTreeSet<String> = BTreeSet::new();
    parent
        .tree()
        .map_err(git("read the result's tree"))?
        .walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) {
                paths.insert(format!("{dir}{}", entry.name().unwrap_or_default()));
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(git("list the result's files"))?;
    let walker = ignore::WalkBuilder::new(work)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .parents(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walker.flatten() {
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if is_dir {
            continue;
        }
        if let Ok(relative) = entry.path().strip_prefix(work) {
            paths.insert(relative.to_string_lossy().into_owned());
        }
    }
    let mut index = Index::new().map_err(git("make an index"))?;
    for path in &paths {
        let full = work.join(path);
        // A file gone from the tree is a deletion; a folder in its place too.
        let Ok(meta) = fs::symlink_metadata(&full) else {
            continue;
        };
        let (mode, data): (u32, Vec<u8>) = if meta.file_type().is_symlink() {
            let target = fs::read_link(&full).map_err(io(&full))?;
            (0o120000, target.to_string_lossy().into_owned().into_bytes())
        } else if meta.is_file() {
            use std::os::unix::fs::PermissionsExt;
            let executable = meta.permissions().mode() & 0o111 != 0;
            (
                if executable { 0o100755 } else { 0o100644 },
                fs::read(&full).map_err(io(&full))?,
            )
        } else {
            continue;
        };
        let entry = IndexEntry {
            ctime: IndexTime::new(0, 0),
            mtime: IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode,
            uid: 0,
            gid: 0,
            file_size: data.len() as u32,
            id: repo.blob(&data).map_err(git("store a file"))?,
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        };
        index.add(&entry).map_err(git("stage a file"))?;
    }
    let tree_id = index.write_tree_to(repo).map_err(git("write the tree"))?;
    if tree_id == parent.tree_id() {
        return Ok(None);
    }
    let tree = repo.find_tree(tree_id).map_err(git("read the tree"))?;
    let commit = repo
        .commit(None, author, author, message, &tree, &[&parent])
        .map_err(git("commit the leftovers"))?;
    Ok(Some(commit))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn sig() -> Signature<'static> {
        Signature::now("t", "t@example.com").unwrap()
    }

    /// A sandbox's project: one commit on `work` with `a.txt`.
    fn sandbox_repo(dir: &Path) -> (Repository, Oid) {
        repo_with(dir, "a\n")
    }

    fn repo_with(dir: &Path, text: &str) -> (Repository, Oid) {
        let repo = Repository::init(dir).unwrap();
        fs::write(dir.join("a.txt"), text).unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("a.txt")).unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let oid = repo
            .commit(Some("refs/heads/work"), &sig(), &sig(), "one", &tree, &[])
            .unwrap();
        drop(tree);
        repo.set_head("refs/heads/work").unwrap();
        (repo, oid)
    }

    fn files_of(repo: &Repository, commit: Oid) -> Vec<String> {
        let mut out = Vec::new();
        repo.find_commit(commit)
            .unwrap()
            .tree()
            .unwrap()
            .walk(git2::TreeWalkMode::PreOrder, |dir, e| {
                if e.kind() == Some(git2::ObjectType::Blob) {
                    out.push(format!("{dir}{}", e.name().unwrap()));
                }
                git2::TreeWalkResult::Ok
            })
            .unwrap();
        out
    }

    #[test]
    fn a_redirected_worktree_and_a_removed_index_commit_nothing_but_the_project() {
        let host = tempfile::tempdir().unwrap();
        fs::write(
            host.path().join("journal.sqlite"),
            "every repository's issue threads",
        )
        .unwrap();
        let project = tempfile::tempdir().unwrap();
        let (_repo, tip) = sandbox_repo(project.path());
        // The model points the worktree at the host and drops the index.
        let config = project.path().join(".git/config");
        let mut text = fs::read_to_string(&config).unwrap();
        text.push_str(&format!("[core]\n\tworktree = {}\n", host.path().display()));
        fs::write(&config, text).unwrap();
        let _ = fs::remove_file(project.path().join(".git/index"));
        fs::write(project.path().join("b.txt"), "b\n").unwrap();

        let q = quarantine(&project.path().join(".git"), "work", &host.path().join("q.git")).unwrap();
        assert_eq!(q.head, tip);
        let commit = commit_files(&q.repo, project.path(), q.head, "leftovers", &sig())
            .unwrap()
            .unwrap();
        assert_eq!(files_of(&q.repo, commit), ["a.txt", "b.txt"]);
        // The quarantine's config is forgehand's own.
        let ours = fs::read_to_string(host.path().join("q.git/config")).unwrap();
        assert!(!ours.contains("worktree"), "{ours}");
    }

    #[test]
    fn alternates_gitfiles_and_linked_refs_are_never_followed() {
        let other = tempfile::tempdir().unwrap();
        let (_other_repo, other_tip) = repo_with(other.path(), "another task's secret\n");
        let project = tempfile::tempdir().unwrap();
        let (repo, _) = sandbox_repo(project.path());
        let git_dir = project.path().join(".git");
        // The branch is moved to another repository's commit, whose objects
        // only an alternate would provide.
        fs::write(
            git_dir.join("objects/info/alternates"),
            format!("{}\n", other.path().join(".git/objects").display()),
        )
        .unwrap();
        drop(repo);
        fs::write(git_dir.join("refs/heads/work"), format!("{other_tip}\n")).unwrap();
        let into = tempfile::tempdir().unwrap();
        let err = quarantine(&git_dir, "work", &into.path().join("q.git"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("not read"), "{err}");

        // A branch ref that is a link to a file elsewhere is not read.
        let project = tempfile::tempdir().unwrap();
        sandbox_repo(project.path());
        let git_dir = project.path().join(".git");
        let elsewhere = into.path().join("planted");
        fs::write(&elsewhere, format!("{other_tip}\n")).unwrap();
        fs::remove_file(git_dir.join("refs/heads/work")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, git_dir.join("refs/heads/work")).unwrap();
        let err = quarantine(&git_dir, "work", &into.path().join("q2.git"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("no commit"), "{err}");

        // A gitfile instead of a folder is refused.
        let gitfile = into.path().join("gitfile");
        fs::write(
            &gitfile,
            format!("gitdir: {}\n", other.path().join(".git").display()),
        )
        .unwrap();
        let err = quarantine(&gitfile, "work", &into.path().join("q3.git"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("gitfile or a link"), "{err}");
    }

    #[test]
    fn leftovers_keep_tracked_files_and_links_and_follow_gitignore_for_new_ones() {
        let project = tempfile::tempdir().unwrap();
        let (_repo, _) = sandbox_repo(project.path());
        fs::write(project.path().join(".gitignore"), "build/\n*.log\n").unwrap();
        fs::create_dir(project.path().join("build")).unwrap();
        fs::write(project.path().join("build/out.bin"), "x").unwrap();
        fs::write(project.path().join("run.log"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", project.path().join("link")).unwrap();
        fs::write(project.path().join("a.txt"), "changed\n").unwrap();
        let into = tempfile::tempdir().unwrap();
        let q = quarantine(&project.path().join(".git"), "work", &into.path().join("q.git")).unwrap();
        let commit = commit_files(&q.repo, project.path(), q.head, "m", &sig())
            .unwrap()
            .unwrap();
        assert_eq!(files_of(&q.repo, commit), [".gitignore", "a.txt", "link"]);
        let tree = q.repo.find_commit(commit).unwrap().tree().unwrap();
        let link = tree.get_name("link").unwrap();
        assert_eq!(link.filemode(), 0o120000);
        let blob = q.repo.find_blob(link.id()).unwrap();
        assert_eq!(
            blob.content(),
            b"/etc/passwd",
            "the link itself, not what it points at"
        );
        // Nothing new: no commit.
        let again = commit_files(&q.repo, project.path(), commit, "m", &sig()).unwrap();
        assert_eq!(again, None);
    }
}
