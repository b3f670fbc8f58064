//! Submodules on the host. After the superproject's mirror is fetched, the
//! submodules its task branch names in `.gitmodules` are fetched too,
//! each into a mirror of its own (later tasks fetch only what is new),
//! recursively to `git.submodules.depth` levels, and their files written
//! into the work tree the sandbox gets. Their `.git` is not given to the
//! sandbox: the superproject's index keeps the gitlink, so git in the
//! sandbox sees an uninitialised submodule and never commits its files.
//!
//! Each submodule that is not fetched (a host the operator did not allow,
//! a refused URL, the depth limit, a failed fetch) is said in a note and
//! the task goes on without it.

pub mod edits;
mod gitmodules;
pub mod urls;

use super::mirror::Mirrors;
use super::{Credentials, GitError};
use crate::config::SubmodulesConfig;
use git2::{Oid, Repository};
use std::path::{Path, PathBuf};

/// Most submodules fetched for one task (all levels together).
const MAX_SUBMODULES: usize = 64;

/// A submodule whose commit is in a mirror on the host.
#[derive(Debug, Clone)]
pub struct Present {
    /// Its folder in the superproject's work tree.
    pub path: String,
    /// The commit the gitlink names.
    pub commit: Oid,
    /// Where it was fetched from (no credential in it).
    pub url: String,
    /// Its mirror's git folder (read, never written here).
    pub mirror: PathBuf,
}

/// What fetching the submodules gave.
#[derive(Debug, Clone, Default)]
pub struct Submodules {
    pub present: Vec<Present>,
    /// One entry per submodule that was left out, and why.
    pub left_out: Vec<String>,
}

/// Where submodules come from and with what.
pub struct Source<'a> {
    /// The superproject's address on the forge.
    pub forge_url: &'a str,
    pub mirrors: &'a Mirrors,
    pub credentials: &'a Credentials,
    pub rules: &'a SubmodulesConfig,
}

/// Fetches the submodules `commit` of `repo` names (and theirs, to the
/// depth limit) into their mirrors. Never fails: what is not fetched is
/// in [`Submodules::left_out`].
pub fn fetch_all(repo: &Repository, commit: Oid, source: &Source<'_>) -> Submodules {
    let mut found = Submodules::default();
    if source.rules.enabled {
        visit(repo, commit, (source.forge_url, ""), 1, source, &mut found);
    }
    found
}

/// Most submodules named on one progress line.
const LISTED: usize = 10;

/// [`fetch_all`] for the work tree at `dir` (the task branch at `commit`),
/// and the progress lines that say which submodules it gets and which it
/// does not, and why.
pub fn for_work_tree(dir: &Path, commit: Oid, source: &Source<'_>) -> (Submodules, Vec<String>) {
    let found = match Repository::open(dir) {
        Ok(repo) => fetch_all(&repo, commit, source),
        Err(e) => Submodules {
            present: Vec::new(),
            left_out: vec![format!("all: the work tree cannot be opened ({})", e.message())],
        },
    };
    let mut lines = Vec::new();
    let present: Vec<String> = found
        .present
        .iter()
        .map(|p| format!("`{}` at {:.10}", p.path, p.commit.to_string()))
        .collect();
    if !present.is_empty() {
        lines.push(format!(
            "Submodules checked out: {} (edits inside them are not pushed)",
            listed(&present)
        ));
    }
    if !found.left_out.is_empty() {
        lines.push(format!("Submodules not fetched: {}", listed(&found.left_out)));
    }
    (found, lines)
}

/// At most [`LISTED`] of `items`, and how many more.
fn listed(items: &[String]) -> String {
    let mut shown: Vec<String> = items.iter().take(LISTED).cloned().collect();
    if items.len() > LISTED {
        shown.push(format!("and {} more", items.len() - LISTED));
    }
    shown.join("; ")
}

/// The submodules of `commit` in `repo`, a superproject at `base` (its
/// address) whose work-tree folder is `prefix`, at `level`.
fn visit(
    repo: &Repository,
    commit: Oid,
    (base, prefix): (&str, &str),
    level: u32,
    source: &Source<'_>,
    found: &mut Submodules,
) {
    for (declared, gitlink) in declared_gitlinks(repo, commit) {
        let path = format!("{prefix}{}", declared.path);
        let mut leave_out = |why: String| found.left_out.push(format!("`{path}`: {why}"));
        if declared.skipped {
            leave_out("`.gitmodules` says `update = none`".into());
            continue;
        }
        if level > source.rules.depth {
            leave_out(format!(
                "deeper than `git.submodules.depth` ({})",
                source.rules.depth
            ));
            continue;
        }
        if found.present.len() >= MAX_SUBMODULES {
            leave_out(format!("the task already has {MAX_SUBMODULES} submodules"));
            continue;
        }
        let url = match urls::resolve(&declared.url, base) {
            Ok(url) => url,
            Err(why) => {
                leave_out(why);
                continue;
            }
        };
        let credentials = match urls::access(&url, source.forge_url, &source.rules.allowed_hosts) {
            Ok(urls::Access::Forge) => Some(source.credentials),
            Ok(urls::Access::Anonymous) => None,
            Err(why) => {
                leave_out(why);
                continue;
            }
        };
        let fetched = match fetch_one(url.as_str(), gitlink, source.mirrors, credentials) {
            Ok(fetched) => fetched,
            Err(why) => {
                leave_out(why);
                continue;
            }
        };
        found.present.push(Present {
            path: path.clone(),
            commit: gitlink,
            url: url.to_string(),
            mirror: fetched.path().to_owned(),
        });
        visit(
            &fetched,
            gitlink,
            (url.as_str(), &format!("{path}/")),
            level + 1,
            source,
            found,
        );
    }
}

/// Every branch of `url` into its mirror (whole history: a gitlink may
/// name any commit); the mirror, once it holds `commit`.
fn fetch_one(
    url: &str,
    commit: Oid,
    mirrors: &Mirrors,
    credentials: Option<&Credentials>,
) -> Result<Repository, String> {
    let fetched = mirrors
        .whole_history()
        .fetch(url, &["*"], credentials)
        .map_err(|e| format!("the fetch from {url} failed ({e})"))?;
    let mirror = Repository::open_bare(&fetched.git_dir)
        .map_err(|e| format!("its mirror cannot be opened ({})", e.message()))?;
    if mirror.find_commit(commit).is_err() {
        return Err(format!(
            "{url} has no branch holding the commit {commit} the superproject names"
        ));
    }
    Ok(mirror)
}

/// The `.gitmodules` entries of `commit` whose path is a gitlink in its
/// tree, with the gitlink's commit (git ignores the others too).
fn declared_gitlinks(repo: &Repository, commit: Oid) -> Vec<(gitmodules::Declared, Oid)> {
    let Ok(tree) = repo.find_commit(commit).and_then(|c| c.tree()) else {
        return Vec::new();
    };
    let Some(text) = tree
        .get_path(Path::new(".gitmodules"))
        .ok()
        .and_then(|entry| repo.find_blob(entry.id()).ok())
        .filter(|blob| blob.size() <= gitmodules::MAX_BYTES)
        .map(|blob| String::from_utf8_lossy(blob.content()).into_owned())
    else {
        return Vec::new();
    };
    gitmodules::parse(&text)
        .into_iter()
        .filter(|declared| is_plain_path(&declared.path))
        .filter_map(|declared| {
            let entry = tree.get_path(Path::new(&declared.path)).ok()?;
            (entry.kind() == Some(git2::ObjectType::Commit)).then(|| (declared, entry.id()))
        })
        .collect()
}

/// A relative path of plain names, which stays inside the work tree when
/// joined to it (no leading `/`, no `.`, `..` or `.git` component).
fn is_plain_path(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\\')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != ".." && !part.eq_ignore_ascii_case(".git"))
}

/// Writes each submodule's files into its folder of the work tree at
/// `workdir`, parents before the submodules inside them. `scratch` holds
/// the small repositories the checkouts run in (borrowing the mirrors'
/// objects, so nothing is written to a mirror). A submodule that cannot
/// be written is logged and left empty.
pub fn check_out(workdir: &Path, scratch: &Path, present: &[Present]) -> Result<(), GitError> {
    for (n, submodule) in present.iter().enumerate() {
        if let Err(e) = check_out_one(workdir, &scratch.join(format!("{n}.git")), submodule) {
            tracing::warn!(submodule = %submodule.path, "cannot write the submodule's files: {e}");
        }
    }
    if scratch.exists() {
        std::fs::remove_dir_all(scratch).map_err(|e| GitError::Failed {
            action: format!("remove {}", scratch.display()),
            detail: e.to_string(),
        })?;
    }
    Ok(())
}

fn check_out_one(workdir: &Path, scratch: &Path, submodule: &Present) -> Result<(), GitError> {
    let repo =
        Repository::init_bare(scratch).map_err(|e| GitError::failed("make a checkout repository", e))?;
    let info = scratch.join("objects/info");
    std::fs::create_dir_all(&info)
        .and_then(|()| {
            std::fs::write(
                info.join("alternates"),
                format!("{}\n", submodule.mirror.join("objects").display()),
            )
        })
        .map_err(|e| GitError::Failed {
            action: "point the checkout repository at the mirror".into(),
            detail: e.to_string(),
        })?;
    drop(repo);
    let repo =
        Repository::open_bare(scratch).map_err(|e| GitError::failed("open the checkout repository", e))?;
    let tree = repo
        .find_commit(submodule.commit)
        .and_then(|c| c.tree())
        .map_err(|e| GitError::failed("read the submodule's commit", e))?;
    let dest = workdir.join(&submodule.path);
    // The folder is the superproject's (or a parent submodule's) own; a
    // link on the way would lead the files elsewhere.
    let mut walked = workdir.to_owned();
    for part in Path::new(&submodule.path).components() {
        walked.push(part);
        if std::fs::symlink_metadata(&walked).is_ok_and(|m| !m.is_dir()) {
            return Err(GitError::Failed {
                action: format!("write the submodule's files into {}", submodule.path),
                detail: format!("{} is not a folder", walked.display()),
            });
        }
    }
    let mut options = git2::build::CheckoutBuilder::new();
    options.force().target_dir(&dest);
    repo.checkout_tree(tree.as_object(), Some(&mut options))
        .map_err(|e| GitError::failed("write the submodule's files", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_name_a_submodule_folder() {
        assert!(is_plain_path("vendored/lib"));
        for bad in [
            "/etc/cron.d",
            "../outside",
            "a/../../b",
            "a//b",
            "./a",
            ".git/hooks",
            "a\\b",
            "",
        ] {
            assert!(!is_plain_path(bad), "{bad}");
        }
    }
}
