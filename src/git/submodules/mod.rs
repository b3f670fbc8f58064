//! Submodules on the host. After the superproject's mirror is fetched, the
//! submodules its default branch names in `.gitmodules` (never the task
//! branch's, which the model may have pushed on an earlier run), at the
//! commits the task branch's gitlinks name, are fetched too,
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
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Most submodules tried for one task (all levels together): each one
/// whose URL passes the checks counts, fetched or not.
const MAX_SUBMODULES: usize = 64;

/// Most files written into the work tree for all submodules together.
const MAX_FILES: u64 = 100_000;

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

/// A submodule that was left out, and why (both the repository's text,
/// to be made safe before they are shown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub path: String,
    pub why: String,
}

/// What fetching the submodules gave.
#[derive(Debug, Clone, Default)]
pub struct Submodules {
    pub present: Vec<Present>,
    /// One entry per submodule that was left out.
    pub left_out: Vec<LeftOut>,
}

/// Where submodules come from and with what.
pub struct Source<'a> {
    /// The superproject's address on the forge.
    pub forge_url: &'a str,
    pub mirrors: &'a Mirrors,
    pub credentials: &'a Credentials,
    pub rules: &'a SubmodulesConfig,
}

/// The superproject's commits a task reads: the gitlinks are `checkout`'s
/// (the task branch's), which submodules exist and where they come from
/// is `declared_in`'s `.gitmodules` (the default branch's).
#[derive(Debug, Clone, Copy)]
pub struct Superproject {
    pub checkout: Oid,
    pub declared_in: Oid,
}

/// Fetches the submodules of `repo` at `commits` (and theirs, to the
/// depth limit) into their mirrors. Never fails: what is not fetched is
/// in [`Submodules::left_out`].
pub fn fetch_all(repo: &Repository, commits: Superproject, source: &Source<'_>) -> Submodules {
    let mut walk = Walk {
        source,
        found: Submodules::default(),
        tried: 0,
        fetched: HashMap::new(),
        received: 0,
        bytes: 0,
        files: 0,
    };
    if source.rules.enabled {
        walk.visit(repo, commits, (source.forge_url, ""), (1, true));
    }
    walk.found
}

/// [`fetch_all`] for the work tree at `dir`.
pub fn for_work_tree(dir: &Path, commits: Superproject, source: &Source<'_>) -> Submodules {
    match Repository::open(dir) {
        Ok(repo) => fetch_all(&repo, commits, source),
        Err(e) => Submodules {
            present: Vec::new(),
            left_out: vec![LeftOut {
                path: "all".into(),
                why: format!("the work tree cannot be opened ({})", e.message()),
            }],
        },
    }
}

/// One task's walk through its submodules, and what it has spent.
struct Walk<'s, 'a> {
    source: &'s Source<'a>,
    found: Submodules,
    /// Submodules tried (fetched, reused or failed).
    tried: usize,
    /// Each URL tried: its mirror, or why it failed (tried once a task).
    fetched: HashMap<String, Result<PathBuf, String>>,
    /// Bytes received by the fetches.
    received: u64,
    /// Files and bytes of the trees to be written.
    bytes: u64,
    files: u64,
}

impl Walk<'_, '_> {
    /// The submodules of `commits` in `repo`, a superproject at `base` (its
    /// address) whose work-tree folder is `prefix`, at `level`. `trusted`:
    /// whether `commits.declared_in`'s `.gitmodules` is one the default
    /// branch vouches for; only then may its URLs get the forge's token.
    fn visit(
        &mut self,
        repo: &Repository,
        commits: Superproject,
        (base, prefix): (&str, &str),
        (level, trusted): (u32, bool),
    ) {
        for (declared, gitlink) in declared_gitlinks(repo, commits) {
            let path = format!("{prefix}{}", declared.path);
            if self.found.present.iter().any(|p| p.path == path) {
                continue; // declared twice: the first one holds
            }
            let fetched = self.take(&declared, (base, level, trusted), gitlink);
            let mirror = match fetched {
                Ok(fetched) => fetched,
                Err(why) => {
                    self.found.left_out.push(LeftOut { path, why });
                    continue;
                }
            };
            self.found.present.push(Present {
                path: path.clone(),
                commit: gitlink,
                url: mirror.1.clone(),
                mirror: mirror.0.path().to_owned(),
            });
            // A submodule's own `.gitmodules` is its repository's, at the
            // commit the gitlink names. The default branch vouches for it
            // only when it names that same commit: a gitlink the model
            // moved (on a follow-up) could point at a commit of anyone's
            // whose `.gitmodules` names a private repository, so what it
            // declares is fetched without the forge's token.
            let vouched = trusted && gitlink_at(repo, commits.declared_in, &declared.path) == Some(gitlink);
            let inner = Superproject {
                checkout: gitlink,
                declared_in: gitlink,
            };
            self.visit(
                &mirror.0,
                inner,
                (mirror.1.as_str(), &format!("{path}/")),
                (level + 1, vouched),
            );
        }
    }

    /// The mirror (and URL) holding `declared`'s commit `gitlink`, once
    /// every check passed; or why it is left out.
    fn take(
        &mut self,
        declared: &gitmodules::Declared,
        (base, level, trusted): (&str, u32, bool),
        gitlink: Oid,
    ) -> Result<(Repository, String), String> {
        let rules = self.source.rules;
        if declared.skipped {
            return Err("`.gitmodules` says `update = none`".into());
        }
        if level > rules.depth {
            return Err(format!("deeper than `git.submodules.depth` ({})", rules.depth));
        }
        let url = urls::resolve(&declared.url, base)?;
        if urls::same_repository(url.as_str(), self.source.forge_url) {
            return Err("its URL names the superproject itself; refused".into());
        }
        let credentials = match urls::access(&url, self.source.forge_url, &rules.allowed_hosts)? {
            urls::Access::Forge if trusted => Some(self.source.credentials),
            urls::Access::Forge | urls::Access::Anonymous => None,
        };
        if self.tried >= MAX_SUBMODULES {
            return Err(format!("the task already tried {MAX_SUBMODULES} submodules"));
        }
        self.tried += 1;
        let url = url.to_string();
        // Tried once a task for each way: with the token and without.
        let key = format!("{url} {}", credentials.is_some());
        let mirror = match self.fetched.get(&key) {
            Some(earlier) => earlier.clone()?,
            None => {
                let cap = rules.max_bytes.saturating_sub(self.received);
                let fetched = fetch_one(&url, self.source.mirrors.capped(cap), credentials);
                if let Ok((_, received)) = &fetched {
                    self.received += received;
                }
                let fetched = fetched.map(|(path, _)| path).map_err(|why| match credentials {
                    None if !trusted => format!(
                        "fetched without the forge's token, as the commit that names it is not one the default branch names: {why}"
                    ),
                    _ => why,
                });
                self.fetched.insert(key, fetched.clone());
                fetched?
            }
        };
        let mirror = Repository::open_bare(&mirror)
            .map_err(|e| format!("its mirror cannot be opened ({})", e.message()))?;
        if mirror.find_commit(gitlink).is_err() {
            return Err(format!(
                "{url} has no branch holding the commit {gitlink} the superproject names"
            ));
        }
        self.count_tree(&mirror, gitlink)?;
        Ok((mirror, url))
    }

    /// Adds the files of `commit`'s tree to what the task writes; an error
    /// when that would pass [`MAX_FILES`] or `git.submodules.max_bytes`.
    fn count_tree(&mut self, mirror: &Repository, commit: Oid) -> Result<(), String> {
        let max_bytes = self.source.rules.max_bytes;
        let (mut files, mut bytes) = (self.files, self.bytes);
        let odb = mirror.odb().map_err(|e| e.message().to_owned())?;
        let tree = mirror
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(|e| e.message().to_owned())?;
        let mut over = false;
        let _ = tree.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob) {
                files += 1;
                bytes += odb.read_header(entry.id()).map_or(0, |(size, _)| size as u64);
                if files > MAX_FILES || bytes > max_bytes {
                    over = true;
                    return git2::TreeWalkResult::Abort;
                }
            }
            git2::TreeWalkResult::Ok
        });
        if over {
            return Err(format!(
                "its files, with the other submodules', pass {MAX_FILES} files or `git.submodules.max_bytes` ({max_bytes} bytes); not written"
            ));
        }
        (self.files, self.bytes) = (files, bytes);
        Ok(())
    }
}

/// Every branch of `url` into its mirror (whole history: a gitlink may
/// name any commit), stopped past the mirrors' byte cap; the mirror's
/// folder and the bytes received.
fn fetch_one(
    url: &str,
    mirrors: Mirrors,
    credentials: Option<&Credentials>,
) -> Result<(PathBuf, u64), String> {
    let fetched = mirrors
        .whole_history()
        .fetch(url, &["*"], credentials)
        .map_err(|e| format!("the fetch from {url} failed ({e})"))?;
    Ok((fetched.git_dir, fetched.received_bytes as u64))
}

/// The `.gitmodules` entries of `commits.declared_in` whose path is a
/// gitlink in `commits.checkout`'s tree, with the gitlink's commit (git
/// ignores the others too).
fn declared_gitlinks(repo: &Repository, commits: Superproject) -> Vec<(gitmodules::Declared, Oid)> {
    let tree_of = |commit: Oid| repo.find_commit(commit).and_then(|c| c.tree());
    let (Ok(tree), Ok(declaring)) = (tree_of(commits.checkout), tree_of(commits.declared_in)) else {
        return Vec::new();
    };
    let Some(text) = declaring
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

/// The gitlink at `path` in `commit`'s tree, if there is one.
fn gitlink_at(repo: &Repository, commit: Oid, path: &str) -> Option<Oid> {
    let tree = repo.find_commit(commit).and_then(|c| c.tree()).ok()?;
    let entry = tree.get_path(Path::new(path)).ok()?;
    (entry.kind() == Some(git2::ObjectType::Commit)).then(|| entry.id())
}

/// A relative path of plain names, which stays inside the work tree when
/// joined to it (no leading `/`, no `.`, `..` or `.git` component).
fn is_plain_path(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\\')
        && !path.chars().any(char::is_control)
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != ".." && !part.eq_ignore_ascii_case(".git"))
}

/// Writes each submodule's files into its folder of the work tree at
/// `workdir`, parents before the submodules inside them. `scratch` holds
/// the small repositories the checkouts run in (borrowing the mirrors'
/// objects, so nothing is written to a mirror). Returns the submodules
/// that could not be written (and those inside them), and why.
pub fn check_out(workdir: &Path, scratch: &Path, present: &[Present]) -> Result<Vec<LeftOut>, GitError> {
    let mut failed: Vec<LeftOut> = Vec::new();
    for (n, submodule) in present.iter().enumerate() {
        let inside_failed = failed.iter().any(|f| {
            submodule
                .path
                .strip_prefix(f.path.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
        });
        if inside_failed {
            failed.push(LeftOut {
                path: submodule.path.clone(),
                why: "the submodule around it could not be written".into(),
            });
            continue;
        }
        if let Err(e) = check_out_one(workdir, &scratch.join(format!("{n}.git")), submodule) {
            tracing::warn!(submodule = %submodule.path, "cannot write the submodule's files: {e}");
            failed.push(LeftOut {
                path: submodule.path.clone(),
                why: e.to_string(),
            });
        }
    }
    if scratch.exists() {
        std::fs::remove_dir_all(scratch).map_err(|e| GitError::Failed {
            action: format!("remove {}", scratch.display()),
            detail: e.to_string(),
        })?;
    }
    Ok(failed)
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
                detail: format!(
                    "{} is not a folder",
                    walked.strip_prefix(workdir).unwrap_or(&walked).display()
                ),
            });
        }
    }
    let files = without_gitlinks(&repo, &tree, 0)
        .and_then(|id| repo.find_tree(id))
        .map_err(|e| GitError::failed("read the submodule's tree", e))?;
    let mut options = git2::build::CheckoutBuilder::new();
    options.force().target_dir(&dest);
    repo.checkout_tree(files.as_object(), Some(&mut options))
        .map_err(|e| GitError::failed("write the submodule's files", e))
}

/// Deepest folder nesting of a submodule's tree that is written.
const MAX_TREE_DEPTH: usize = 128;

/// `tree` without its gitlinks (rewritten trees go into `repo`, the
/// scratch repository): libgit2 cannot write a gitlink without a work
/// tree, and the submodules inside are written on their own.
fn without_gitlinks(repo: &Repository, tree: &git2::Tree<'_>, depth: usize) -> Result<Oid, git2::Error> {
    if depth > MAX_TREE_DEPTH {
        return Err(git2::Error::from_str("its folders nest too deep"));
    }
    let mut builder = repo.treebuilder(Some(tree))?;
    let mut changed = false;
    for entry in tree.iter() {
        let name = entry.name_bytes().to_vec();
        match entry.kind() {
            Some(git2::ObjectType::Commit) => {
                builder.remove(name)?;
                changed = true;
            }
            Some(git2::ObjectType::Tree) => {
                let inner = without_gitlinks(repo, &repo.find_tree(entry.id())?, depth + 1)?;
                if inner != entry.id() {
                    builder.insert(name, inner, entry.filemode())?;
                    changed = true;
                }
            }
            _ => {}
        }
    }
    if changed {
        builder.write()
    } else {
        Ok(tree.id())
    }
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
            "a\nb",
            "a\rb",
            "a\u{1b}[31mb",
        ] {
            assert!(!is_plain_path(bad), "{bad}");
        }
    }
}
