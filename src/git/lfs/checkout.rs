//! LFS content into a work tree the host checked out: every file
//! `.gitattributes` hands to LFS whose blob is a pointer gets its object,
//! fetched with the batch API, while the running total stays under the
//! cap; the others keep their pointers and are listed with why, for the
//! agent and the progress comment.

use super::batch::{Client, ObjectAnswer, Operation};
use super::pointer::{Pointer, MAX_POINTER_BYTES};
use super::{git, LfsError, LfsPaths};
use git2::{ObjectType, Repository, Tree, TreeWalkMode, TreeWalkResult};
use std::collections::BTreeMap;
use std::path::Path;
use url::Url;

/// What a checkout got of its LFS files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fetched {
    /// Files that now hold their content.
    pub files: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
    /// Files left as pointers, each with why.
    pub left: Vec<(String, String)>,
}

impl Fetched {
    /// The lines the agent reads before it starts, `None` without LFS files.
    pub fn for_agent(&self) -> Option<String> {
        if self.files.is_empty() && self.left.is_empty() {
            return None;
        }
        let mut out = format!(
            "\n## Git LFS files\n{} LFS file(s) hold their real content in the work tree. `git status` shows LFS files as modified because the sandbox has no LFS filter; that is expected: forgehand commits them as LFS pointers and uploads their content when it delivers, and unchanged ones stay as they were.\n",
            self.files.len()
        );
        if !self.left.is_empty() {
            out.push_str("These LFS files are only pointers here; you cannot see their content:\n");
            for (path, why) in self.left.iter().take(50) {
                out.push_str(&format!("- {path} ({why})\n"));
            }
            if self.left.len() > 50 {
                out.push_str(&format!("- and {} more\n", self.left.len() - 50));
            }
        }
        Some(out)
    }
}

/// The LFS files of `tree`: paths `.gitattributes` marks `filter=lfs`
/// whose blob (a regular file) parses as a pointer.
pub fn lfs_files(repo: &Repository, tree: &Tree<'_>) -> Result<Vec<(String, Pointer)>, LfsError> {
    let paths = LfsPaths::of_tree(repo, tree).map_err(git("read .gitattributes"))?;
    if !paths.any() {
        return Ok(Vec::new());
    }
    let odb = repo.odb().map_err(git("open the objects"))?;
    let mut candidates = Vec::new();
    tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        let regular = matches!(entry.filemode(), 0o100644 | 0o100755);
        if entry.kind() == Some(ObjectType::Blob) && regular {
            let path = format!("{dir}{}", String::from_utf8_lossy(entry.name_bytes()));
            if paths.is_lfs(&path) {
                candidates.push((path, entry.id()));
            }
        }
        TreeWalkResult::Ok
    })
    .map_err(git("list the tree"))?;
    let mut files = Vec::new();
    for (path, id) in candidates {
        let (size, _) = odb.read_header(id).map_err(git("read a blob's size"))?;
        if size > MAX_POINTER_BYTES {
            continue;
        }
        let blob = repo.find_blob(id).map_err(git("read a blob"))?;
        if let Some(pointer) = Pointer::parse(blob.content()) {
            files.push((path, pointer));
        }
    }
    files.sort();
    Ok(files)
}

/// Fetches the objects of `files` into the work tree at `dir` through
/// `client`, at most `max_total` bytes. A server that cannot be used
/// leaves every file a pointer, with the reason; only a file that cannot
/// be written is an error.
pub async fn fetch_into(
    dir: &Path,
    files: Vec<(String, Pointer)>,
    client: Result<Client, LfsError>,
    max_total: u64,
) -> Result<Fetched, LfsError> {
    let mut fetched = Fetched::default();
    let wanted = within_cap(files, max_total, &mut fetched);
    let leave_all = |fetched: &mut Fetched, wanted: BTreeMap<Pointer, Vec<String>>, why: &str| {
        for path in wanted.into_values().flatten() {
            fetched.left.push((path, why.to_owned()));
        }
    };
    if wanted.is_empty() {
        return Ok(fetched);
    }
    let client = match client {
        Ok(client) => client,
        Err(e) => {
            leave_all(&mut fetched, wanted, &e.to_string());
            return Ok(fetched);
        }
    };
    let pointers: Vec<Pointer> = wanted.keys().cloned().collect();
    let answers = match client.batch(Operation::Download, &pointers).await {
        Ok(answers) => answers,
        Err(e) => {
            tracing::warn!(endpoint = %client.endpoint(), "LFS objects could not be fetched: {e}");
            leave_all(&mut fetched, wanted, &e.to_string());
            return Ok(fetched);
        }
    };
    let answers: BTreeMap<String, _> = answers.into_iter().map(|a| (a.oid.clone(), a)).collect();
    for (pointer, paths) in wanted {
        let first = dir.join(&paths[0]);
        match download(&client, answers.get(&pointer.oid), &pointer, &first).await {
            Ok(()) => {
                copy_to_others(dir, &paths)?;
                fetched.bytes += pointer.size * paths.len() as u64;
                fetched.files.extend(paths);
            }
            Err(why) => fetched.left.extend(paths.into_iter().map(|p| (p, why.clone()))),
        }
    }
    fetched.files.sort();
    fetched.left.sort();
    Ok(fetched)
}

/// The objects to fetch, each with the paths that hold it, while their
/// total stays under `max_total`; files past it stay pointers in `fetched`.
fn within_cap(
    files: Vec<(String, Pointer)>,
    max_total: u64,
    fetched: &mut Fetched,
) -> BTreeMap<Pointer, Vec<String>> {
    let mut wanted: BTreeMap<Pointer, Vec<String>> = BTreeMap::new();
    let mut total = 0u64;
    for (path, pointer) in files {
        if !wanted.contains_key(&pointer) {
            if total.saturating_add(pointer.size) > max_total {
                fetched.left.push((
                    path,
                    format!(
                        "{} bytes; over git.lfs.max_total_bytes ({max_total})",
                        pointer.size
                    ),
                ));
                continue;
            }
            total += pointer.size;
        }
        wanted.entry(pointer).or_default().push(path);
    }
    wanted
}

/// Downloads one object to `dest` as the server's `answer` directs; the
/// error says why the file stays a pointer.
async fn download(
    client: &Client,
    answer: Option<&ObjectAnswer>,
    pointer: &Pointer,
    dest: &Path,
) -> Result<(), String> {
    match answer {
        None => Err("the LFS server did not answer for this object".to_owned()),
        Some(answer) => match (&answer.error, answer.actions.get("download")) {
            (Some(e), _) => Err(format!(
                "the LFS server has no such object: {} {}",
                e.code, e.message
            )),
            (None, None) => Err("the LFS server gave no download for this object".to_owned()),
            (None, Some(action)) => client
                .download(action, pointer, dest)
                .await
                .map_err(|e| e.to_string()),
        },
    }
}

/// The same object at several paths: the first got it, the others copy it.
fn copy_to_others(dir: &Path, paths: &[String]) -> Result<(), LfsError> {
    for other in &paths[1..] {
        let dest = dir.join(other);
        let partial = dest.with_extension("forgehand-lfs-partial");
        std::fs::copy(dir.join(&paths[0]), &partial)
            .and_then(|_| std::fs::rename(&partial, &dest))
            .map_err(|source| LfsError::Io { path: dest, source })?;
    }
    Ok(())
}

/// The whole checkout step on a blocking thread: HEAD's LFS files of the
/// work tree at `dir`, fetched from `endpoint` (the default branch's, or
/// why it cannot be used: then every file stays a pointer, with that).
pub fn fetch_head(
    dir: &Path,
    endpoint: Result<Url, LfsError>,
    access: &super::Access,
    max_total: u64,
) -> Result<Fetched, LfsError> {
    let repo = Repository::open(dir).map_err(git("open the work tree"))?;
    let tree = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .map_err(git("read HEAD"))?;
    let files = lfs_files(&repo, &tree)?;
    if files.is_empty() {
        return Ok(Fetched::default());
    }
    let client = endpoint.and_then(|endpoint| Client::new(endpoint, access.clone()));
    let started = std::time::Instant::now();
    let fetched = super::block_on(fetch_into(dir, files, client, max_total))?;
    tracing::info!(
        files = fetched.files.len(),
        bytes = fetched.bytes,
        left = fetched.left.len(),
        ms = started.elapsed().as_millis() as u64,
        "LFS objects fetched into the work tree"
    );
    Ok(fetched)
}

/// The endpoint `tree`'s `.lfsconfig` names, else the clone URL's. The
/// tree must be one forgehand trusts (the default branch's).
pub fn endpoint_of(repo: &Repository, tree: &Tree<'_>, clone_url: &str) -> Result<Url, LfsError> {
    let lfsconfig = tree
        .get_name(".lfsconfig")
        .and_then(|entry| repo.find_blob(entry.id()).ok())
        .map(|blob| String::from_utf8_lossy(blob.content()).into_owned());
    super::remote::endpoint(clone_url, lfsconfig.as_deref())
}
