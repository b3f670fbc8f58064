//! Leaving files out of the task's commits: each commit of `base..head`
//! written again with the withheld paths as the base has them, so no
//! pushed commit adds or changes them; their diff kept for the PR/MR, for
//! a maintainer to apply. Runs on the trusted clone, on data only.

use git2::{Oid, Repository};
use std::collections::HashMap;

/// The most of the withheld files' diff the PR/MR body carries.
const DIFF_CAP: usize = 20_000;

#[derive(Debug, thiserror::Error)]
#[error("cannot leave files out of the task's commits: git failed to {action}: {detail}")]
pub struct WithholdError {
    action: String,
    detail: String,
}

fn git(action: &'static str) -> impl Fn(git2::Error) -> WithholdError {
    move |e| WithholdError {
        action: action.to_owned(),
        detail: e.message().to_owned(),
    }
}

/// Every path a commit of `base..head` adds, changes or removes against
/// any of its parents: a file added in one commit and removed in a later
/// one is in none of the net diff, yet the first commit would carry it.
pub fn touched_by_any_commit(
    repo: &Repository,
    (base, head): (Oid, Oid),
) -> Result<Vec<String>, WithholdError> {
    let mut walk = repo.revwalk().map_err(git("walk the task's commits"))?;
    walk.push(head).map_err(git("walk the task's commits"))?;
    walk.hide(base).map_err(git("walk the task's commits"))?;
    let mut paths: Vec<String> = Vec::new();
    for oid in walk {
        let commit = oid
            .and_then(|oid| repo.find_commit(oid))
            .map_err(git("read a task commit"))?;
        let tree = commit.tree().map_err(git("read a commit's tree"))?;
        for parent in commit.parents() {
            let parent_tree = parent.tree().map_err(git("read a commit's tree"))?;
            let diff = repo
                .diff_tree_to_tree(Some(&parent_tree), Some(&tree), None)
                .map_err(git("diff a task commit"))?;
            for delta in diff.deltas() {
                for file in [delta.old_file(), delta.new_file()] {
                    let Some(path) = file.path().map(|p| p.to_string_lossy().into_owned()) else {
                        continue;
                    };
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                }
            }
        }
    }
    Ok(paths)
}

/// Writes the commits of `base..head` again (same authors, committers and
/// messages) with every path of `paths` as `base` has it (absent there:
/// removed); a commit left with no change of its own is dropped. Returns
/// the new head (`base` when nothing else was changed).
pub fn without(repo: &Repository, (base, head): (Oid, Oid), paths: &[String]) -> Result<Oid, WithholdError> {
    let base_tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(git("read the base's tree"))?;
    let mut walk = repo.revwalk().map_err(git("walk the task's commits"))?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
        .map_err(git("walk the task's commits"))?;
    walk.push(head).map_err(git("walk the task's commits"))?;
    walk.hide(base).map_err(git("walk the task's commits"))?;
    let mut done: HashMap<Oid, Oid> = HashMap::new();
    for oid in walk {
        let oid = oid.map_err(git("walk the task's commits"))?;
        let commit = repo.find_commit(oid).map_err(git("read a task commit"))?;
        let tree = commit.tree().map_err(git("read a commit's tree"))?;
        let mut update = git2::build::TreeUpdateBuilder::new();
        for path in paths {
            let at = std::path::Path::new(path);
            match base_tree.get_path(at) {
                Ok(entry) => {
                    update.upsert(path.as_str(), entry.id(), file_mode(entry.filemode()));
                }
                Err(_) if tree.get_path(at).is_ok() => {
                    update.remove(path.as_str());
                }
                Err(_) => {}
            }
        }
        let new_tree = update
            .create_updated(repo, &tree)
            .map_err(git("write a tree without the withheld files"))?;
        let parents: Vec<Oid> = commit
            .parent_ids()
            .map(|p| done.get(&p).copied().unwrap_or(p))
            .collect();
        let first_tree = match parents.first() {
            Some(p) => Some(repo.find_commit(*p).map_err(git("read a parent"))?.tree_id()),
            None => None,
        };
        if parents.len() == 1 && first_tree == Some(new_tree) {
            done.insert(oid, parents[0]);
            continue;
        }
        let parents = parents
            .iter()
            .map(|p| repo.find_commit(*p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(git("read a parent"))?;
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        let new_tree = repo.find_tree(new_tree).map_err(git("read the new tree"))?;
        let message = String::from_utf8_lossy(commit.message_raw_bytes()).into_owned();
        let written = repo
            .commit(
                None,
                &commit.author(),
                &commit.committer(),
                &message,
                &new_tree,
                &parents,
            )
            .map_err(git("write a commit without the withheld files"))?;
        done.insert(oid, written);
    }
    Ok(done.get(&head).copied().unwrap_or(head))
}

fn file_mode(mode: i32) -> git2::FileMode {
    match mode {
        0o100755 => git2::FileMode::BlobExecutable,
        0o120000 => git2::FileMode::Link,
        0o040000 => git2::FileMode::Tree,
        0o160000 => git2::FileMode::Commit,
        _ => git2::FileMode::Blob,
    }
}

/// The diff of `paths` from `base` to `head`, as `git diff` prints it (cut
/// at [`DIFF_CAP`] characters, which it then says).
pub fn diff_of(
    repo: &Repository,
    (base, head): (Oid, Oid),
    paths: &[String],
) -> Result<String, WithholdError> {
    let tree = |oid: Oid| {
        repo.find_commit(oid)
            .and_then(|c| c.tree())
            .map_err(git("read a tree"))
    };
    let (old, new) = (tree(base)?, tree(head)?);
    let mut options = git2::DiffOptions::new();
    for path in paths {
        options.pathspec(path);
    }
    options.disable_pathspec_match(true);
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut options))
        .map_err(git("diff the withheld files"))?;
    let mut text = String::new();
    diff.print(git2::DiffFormat::Patch, |_, _, line| {
        if let '+' | '-' | ' ' = line.origin() {
            text.push(line.origin());
        }
        text.push_str(&String::from_utf8_lossy(line.content()));
        true
    })
    .map_err(git("print the withheld files' diff"))?;
    if text.chars().count() > DIFF_CAP {
        text = text.chars().take(DIFF_CAP).collect();
        text.push_str("\n... (cut here; the whole diff is too long for the description)\n");
    }
    Ok(text)
}

/// The files of the commits of `base..head` whose message is `message`
/// (the commits forgehand made of what the model left uncommitted).
pub fn files_of_commits_titled(repo: &Repository, (base, head): (Oid, Oid), message: &str) -> Vec<String> {
    let mut files = Vec::new();
    let Ok(mut walk) = repo.revwalk() else {
        return files;
    };
    if walk.push(head).is_err() || walk.hide(base).is_err() {
        return files;
    }
    for oid in walk.flatten() {
        let Ok(commit) = repo.find_commit(oid) else {
            continue;
        };
        if commit.message().ok().map(str::trim) != Some(message.trim()) {
            continue;
        }
        let (Ok(tree), Some(parent)) = (commit.tree(), commit.parents().next()) else {
            continue;
        };
        let Ok(parent_tree) = parent.tree() else { continue };
        let Ok(diff) = repo.diff_tree_to_tree(Some(&parent_tree), Some(&tree), None) else {
            continue;
        };
        for delta in diff.deltas() {
            let path = delta.new_file().path().or(delta.old_file().path());
            if let Some(path) = path.map(|p| p.to_string_lossy().into_owned()) {
                if !files.contains(&path) {
                    files.push(path);
                }
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(repo: &Repository, parent: Option<Oid>, files: &[(&str, &str)], message: &str) -> Oid {
        let mut index = git2::Index::new().unwrap();
        if let Some(parent) = parent {
            index
                .read_tree(&repo.find_commit(parent).unwrap().tree().unwrap())
                .unwrap();
        }
        for (path, text) in files {
            let blob = repo.blob(text.as_bytes()).unwrap();
            let mut entry = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: 0o100644,
                uid: 0,
                gid: 0,
                file_size: 0,
                id: blob,
                flags: 0,
                flags_extended: 0,
                path: path.as_bytes().to_vec(),
            };
            entry.flags = (path.len() as u16) & 0xfff;
            index.add(&entry).unwrap();
        }
        let tree = repo.find_tree(index.write_tree_to(repo).unwrap()).unwrap();
        let who = git2::Signature::now("t", "t@example.com").unwrap();
        let parents: Vec<git2::Commit<'_>> =
            parent.map(|p| repo.find_commit(p).unwrap()).into_iter().collect();
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        repo.commit(None, &who, &who, message, &tree, &parents).unwrap()
    }

    #[test]
    fn a_file_added_then_removed_is_touched_and_leaves_every_commit() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let base = commit(&repo, None, &[("README.md", "old\n")], "base");
        let added = commit(
            &repo,
            Some(base),
            &[("README.md", "new\n"), (".github/workflows/x.yml", "run: evil\n")],
            "add",
        );
        let mut index = git2::Index::new().unwrap();
        index
            .read_tree(&repo.find_commit(added).unwrap().tree().unwrap())
            .unwrap();
        index
            .remove_path(std::path::Path::new(".github/workflows/x.yml"))
            .unwrap();
        let tree = repo.find_tree(index.write_tree_to(&repo).unwrap()).unwrap();
        let who = git2::Signature::now("t", "t@example.com").unwrap();
        let parent = repo.find_commit(added).unwrap();
        let removed = repo
            .commit(None, &who, &who, "remove", &tree, &[&parent])
            .unwrap();

        let touched = touched_by_any_commit(&repo, (base, removed)).unwrap();
        assert!(
            touched.contains(&".github/workflows/x.yml".to_owned()),
            "{touched:?}"
        );
        let kept = without(&repo, (base, removed), &[".github/workflows/x.yml".to_owned()]).unwrap();
        let mut walk = repo.revwalk().unwrap();
        walk.push(kept).unwrap();
        walk.hide(base).unwrap();
        for oid in walk {
            let tree = repo.find_commit(oid.unwrap()).unwrap().tree().unwrap();
            assert!(tree
                .get_path(std::path::Path::new(".github/workflows/x.yml"))
                .is_err());
        }
    }

    #[test]
    fn withheld_files_leave_every_commit_and_their_diff_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let base = commit(
            &repo,
            None,
            &[("README.md", "old\n"), (".github/workflows/ci.yml", "a\n")],
            "base",
        );
        let one = commit(
            &repo,
            Some(base),
            &[("README.md", "new\n"), (".github/workflows/ci.yml", "b\n")],
            "both",
        );
        let two = commit(
            &repo,
            Some(one),
            &[(".github/workflows/new.yml", "n\n")],
            "only the workflow",
        );
        let paths = vec![
            ".github/workflows/ci.yml".to_owned(),
            ".github/workflows/new.yml".to_owned(),
        ];
        let head = without(&repo, (base, two), &paths).unwrap();
        let tree = repo.find_commit(head).unwrap().tree().unwrap();
        let text = |p: &str| {
            let blob = repo
                .find_blob(tree.get_path(std::path::Path::new(p)).unwrap().id())
                .unwrap();
            String::from_utf8_lossy(blob.content()).into_owned()
        };
        assert_eq!(text("README.md"), "new\n");
        assert_eq!(text(".github/workflows/ci.yml"), "a\n");
        assert!(tree
            .get_path(std::path::Path::new(".github/workflows/new.yml"))
            .is_err());
        // The commit that held only the workflow is gone; the other stays on the base.
        let kept = repo.find_commit(head).unwrap();
        assert_eq!(kept.message().ok(), Some("both"));
        assert_eq!(kept.parent_id(0).unwrap(), base);
        let diff = diff_of(&repo, (base, two), &paths).unwrap();
        assert!(
            diff.contains("-a\n+b\n") && diff.contains("+n\n") && !diff.contains("README"),
            "{diff}"
        );
    }
}
