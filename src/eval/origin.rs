//! Each instance's repository, as the pipeline sees it: a bare "origin"
//! whose default branch `base` is the instance's base commit, sharing the
//! objects of one mirror per source repository (fetched once, whatever the
//! number of instances on it). The task clones from it and pushes its
//! branch back; the model's patch is the difference between the two.

use crate::git::{self, GitError};
use git2::{Oid, Repository};
use std::path::{Path, PathBuf};

/// The origin's default branch: the base commit.
pub const BASE_BRANCH: &str = "base";

#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("base_commit {commit} is not in {repo} (fetched its branches, tags and the commit itself)")]
    NoBaseCommit { commit: String, repo: String },
    #[error("cannot prepare {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn failed(action: &str) -> impl Fn(git2::Error) -> OriginError + '_ {
    move |e| OriginError::Git(GitError::failed(action, e))
}

/// The mirror of `source` (fetched with `credentials`, when given) under
/// `mirrors`, holding `commit`: fetched when new, and again when it lacks
/// the commit. The full commit id.
pub fn mirror(
    mirrors: &Path,
    (source, credentials): (&str, Option<&git::Credentials>),
    commit: &str,
) -> Result<(PathBuf, Oid), OriginError> {
    let path = mirrors.join(format!("{}.git", folder_name(source)));
    let repo = match Repository::open_bare(&path) {
        Ok(repo) => repo,
        Err(_) => {
            std::fs::create_dir_all(&path).map_err(|source| OriginError::Io {
                path: path.clone(),
                source,
            })?;
            Repository::init_bare(&path).map_err(failed("create the mirror"))?
        }
    };
    if let Some(oid) = find_commit(&repo, commit) {
        return Ok((path, oid));
    }
    git::fetch(
        &repo,
        source,
        &["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
        credentials,
    )?;
    if let Some(oid) = find_commit(&repo, commit) {
        return Ok((path, oid));
    }
    // A commit on no branch (a pull request's): servers that allow it hand it out by id.
    if commit.len() == 40 {
        let wanted = format!("+{commit}:refs/forgehand-eval/{commit}");
        if git::fetch(&repo, source, &[wanted.as_str()], credentials).is_ok() {
            if let Some(oid) = find_commit(&repo, commit) {
                return Ok((path, oid));
            }
        }
    }
    Err(OriginError::NoBaseCommit {
        commit: commit.to_owned(),
        repo: source.to_owned(),
    })
}

/// The commit `commit` (a full or abbreviated id) names, if present.
fn find_commit(repo: &Repository, commit: &str) -> Option<Oid> {
    repo.revparse_single(commit)
        .ok()
        .and_then(|o| o.peel_to_commit().ok())
        .map(|c| c.id())
}

/// A folder name for a source path or URL: readable (its last 60
/// characters), and unique to the whole source (a hash of it), so two
/// hosts' repositories of one path never share a mirror.
fn folder_name(source: &str) -> String {
    let cleaned: String = source
        .trim_end_matches('/')
        .trim_end_matches(".git")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let short: String = cleaned.trim_matches('-').chars().rev().take(60).collect();
    let short: String = short.chars().rev().collect();
    // FNV-1a: stable across runs and builds, unlike the std hasher.
    let hash = source.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{short}-{hash:016x}")
}

/// A fresh bare origin at `path` over `mirror`'s objects, whose branch
/// `base` (its HEAD) is `base`.
pub fn make(path: &Path, mirror: &Path, base: Oid) -> Result<(), OriginError> {
    let io = |source| OriginError::Io {
        path: path.to_owned(),
        source,
    };
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(io)?;
    }
    std::fs::create_dir_all(path).map_err(io)?;
    let repo = Repository::init_bare(path).map_err(failed("create the origin"))?;
    let objects = std::fs::canonicalize(mirror.join("objects")).map_err(io)?;
    std::fs::write(
        path.join("objects/info/alternates"),
        format!("{}\n", objects.display()),
    )
    .map_err(io)?;
    // Opened again: the alternates are read when the repository is opened.
    let repo = Repository::open_bare(repo.path()).map_err(failed("open the origin"))?;
    repo.reference(&format!("refs/heads/{BASE_BRANCH}"), base, true, "base commit")
        .map_err(failed("create the base branch"))?;
    repo.set_head(&format!("refs/heads/{BASE_BRANCH}"))
        .map_err(failed("point HEAD at the base branch"))?;
    Ok(())
}

/// The address clones take `origin` from: a `file://` URL, so git fetches
/// what it needs through the origin's alternates instead of copying its
/// (nearly empty) object folder.
pub fn url(origin: &Path) -> String {
    format!("file://{}", origin.display())
}

/// The model's patch: what the task pushed to `origin` (any branch but
/// `base`) against `base`, as a unified diff `git apply` takes; empty when
/// nothing was pushed.
pub fn patch(origin: &Path, base: Oid) -> Result<String, OriginError> {
    let repo = Repository::open_bare(origin).map_err(failed("open the origin"))?;
    let mut pushed = None;
    for branch in repo
        .branches(Some(git2::BranchType::Local))
        .map_err(failed("list the branches"))?
    {
        let (branch, _) = branch.map_err(failed("list the branches"))?;
        if branch.name().ok().flatten() == Some(BASE_BRANCH) {
            continue;
        }
        pushed = branch.get().target();
    }
    let Some(head) = pushed else {
        return Ok(String::new());
    };
    diff(&repo, base, head)
}

fn diff(repo: &Repository, from: Oid, to: Oid) -> Result<String, OriginError> {
    let tree = |oid: Oid| {
        repo.find_commit(oid)
            .and_then(|c| c.tree())
            .map_err(failed("read a commit"))
    };
    let mut options = git2::DiffOptions::new();
    options.show_binary(true);
    let diff = repo
        .diff_tree_to_tree(Some(&tree(from)?), Some(&tree(to)?), Some(&mut options))
        .map_err(failed("compare the commits"))?;
    let mut text = Vec::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            text.push(line.origin() as u8);
        }
        text.extend_from_slice(line.content());
        true
    })
    .map_err(failed("write the patch"))?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// The text of `path` at `origin`'s base branch, if it is a file there.
pub fn base_file(origin: &Path, path: &str) -> Result<Option<String>, OriginError> {
    let repo = Repository::open_bare(origin).map_err(failed("open the origin"))?;
    let Ok(object) = repo.revparse_single(&format!("{BASE_BRANCH}:{path}")) else {
        return Ok(None);
    };
    Ok(object
        .as_blob()
        .map(|blob| String::from_utf8_lossy(blob.content()).into_owned()))
}

/// A working checkout of `origin`'s base at `dest`, with `patches` applied
/// in order (each may be empty). `Err((index, message))`: patch `index`
/// did not apply.
pub fn checkout_with(
    dest: &Path,
    origin: &Path,
    patches: &[&str],
) -> Result<Result<(), (usize, String)>, OriginError> {
    if dest.exists() {
        std::fs::remove_dir_all(dest).map_err(|source| OriginError::Io {
            path: dest.to_owned(),
            source,
        })?;
    }
    let repo = git::clone(&url(origin), dest, Some(BASE_BRANCH), None)?;
    for (index, patch) in patches.iter().enumerate() {
        if patch.trim().is_empty() {
            continue;
        }
        let applied = git2::Diff::from_buffer(patch.as_bytes())
            .and_then(|diff| repo.apply(&diff, git2::ApplyLocation::WorkDir, None));
        if let Err(e) = applied {
            return Ok(Err((index, e.message().to_owned())));
        }
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(repo: &Repository, files: &[(&str, &str)], parent: Option<Oid>) -> Oid {
        let dir = repo.workdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        let mut index = repo.index().unwrap();
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let parents: Vec<git2::Commit> = parent.map(|p| repo.find_commit(p).unwrap()).into_iter().collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &refs).unwrap()
    }

    #[test]
    fn mirrors_of_one_path_on_two_hosts_are_apart() {
        let github = folder_name("https://github.com/acme/app.git");
        let gitlab = folder_name("https://gitlab.example.org/acme/app.git");
        assert!(github.starts_with("https---github-com-acme-app-"), "{github}");
        assert_ne!(github, gitlab);
        let long = "x".repeat(80);
        assert_ne!(
            folder_name(&format!("https://a.example/{long}")),
            folder_name(&format!("https://b.example/{long}")),
            "the readable part alone would be the same"
        );
        assert_eq!(github, folder_name("https://github.com/acme/app.git"), "stable");
    }

    #[test]
    fn an_origin_at_an_old_commit_yields_the_pushed_patch_which_applies() {
        let dir = tempfile::tempdir().unwrap();
        let source = Repository::init(dir.path().join("source")).unwrap();
        let first = commit(&source, &[("a.py", "x = 1\n")], None);
        let _later = commit(&source, &[("a.py", "x = 3\n")], Some(first));
        let source_path = dir.path().join("source").display().to_string();

        let (mirror_path, base) = mirror(
            &dir.path().join("mirrors"),
            (&source_path, None),
            &first.to_string()[..10],
        )
        .unwrap();
        assert_eq!(base, first);
        let origin = dir.path().join("origin.git");
        make(&origin, &mirror_path, base).unwrap();
        assert_eq!(patch(&origin, base).unwrap(), "", "nothing pushed yet");

        // A clone from the origin starts at the base commit; its pushed branch is the patch.
        let work = dir.path().join("work");
        let clone = git::clone(&url(&origin), &work, Some(BASE_BRANCH), None).unwrap();
        assert!(
            !work.join(".git/objects/info/alternates").exists(),
            "the clone holds its objects"
        );
        assert_eq!(std::fs::read_to_string(work.join("a.py")).unwrap(), "x = 1\n");
        let head = commit(&clone, &[("a.py", "x = 2\n")], Some(first));
        Repository::open_bare(&origin)
            .unwrap()
            .remote_anonymous(&work.display().to_string())
            .unwrap()
            .fetch(&["+HEAD:refs/heads/forgehand/issue-1"], None, None)
            .unwrap();
        let _ = head;
        let text = patch(&origin, base).unwrap();
        assert!(text.contains("-x = 1\n+x = 2\n"), "{text}");

        let scored = dir.path().join("scored");
        checkout_with(&scored, &origin, &[&text, ""]).unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(scored.join("a.py")).unwrap(), "x = 2\n");
        let refused = checkout_with(&scored, &origin, &["", &text.replace("x = 1", "y = 9")]).unwrap();
        assert_eq!(refused.unwrap_err().0, 1);

        let err = mirror(&dir.path().join("mirrors"), (&source_path, None), "0123456789").unwrap_err();
        assert!(err.to_string().contains("is not in"), "{err}");
    }
}
