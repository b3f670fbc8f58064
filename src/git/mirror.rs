//! One bare mirror per repository under the state folder, the only place
//! forgehand fetches a repository into. Fetches are incremental (the
//! mirror's refs are the "haves"), shallow to `git.history_depth` commits,
//! made with the daemon's credentials to the forge's own address only,
//! and serialised per mirror (a lock file, so two processes sharing a
//! state folder wait for each other too). A task's workspace borrows the
//! mirror's objects read-only (alternates) and writes its own; nothing
//! from a sandbox or a quarantine is ever written here.
//!
//! A mirror that cannot be opened or read after a fetch (a kill during a
//! write, a full disk) is removed and made again by the same call.

use super::{callbacks, remote_error, Credentials, GitError};
use git2::{AutotagOption, FetchOptions, Oid, Repository};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// libgit2's "fetch the whole history" depth (`GIT_FETCH_DEPTH_UNSHALLOW`).
const UNSHALLOW: i32 = i32::MAX;
/// The file whose modification time says when a task last used a mirror.
const USED_MARKER: &str = "forgehand-used";
/// The config key recording which address a mirror holds.
const URL_KEY: &str = "forgehand.url";

/// The mirrors of one state folder.
#[derive(Debug, Clone)]
pub struct Mirrors {
    root: PathBuf,
    depth: Option<u32>,
    /// A fetch that receives more bytes than this is stopped.
    max_bytes: Option<u64>,
}

/// What a fetch found: the tips of the branches asked for that exist on
/// the forge (a missing one is absent), in the mirror at `git_dir`.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub git_dir: PathBuf,
    pub tips: BTreeMap<String, Oid>,
    /// The commits whose parents the mirror does not hold (empty: whole).
    pub shallow: Vec<Oid>,
    /// What this fetch brought: objects and bytes received.
    pub received_objects: usize,
    pub received_bytes: usize,
}

impl Fetched {
    /// The mirror's object folder, for a workspace's alternates.
    pub fn objects_dir(&self) -> PathBuf {
        self.git_dir.join("objects")
    }
}

/// One mirror as `forgehand mirrors list` and `doctor` show it.
#[derive(Debug, Clone)]
pub struct MirrorInfo {
    pub url: String,
    pub path: PathBuf,
    pub bytes: u64,
    pub last_used: Option<SystemTime>,
    pub shallow: bool,
}

impl Mirrors {
    /// The mirrors under `root` (`<state_dir>/mirrors`), fetched
    /// `depth` commits deep (`None`: the whole history).
    pub fn new(root: PathBuf, depth: Option<u32>) -> Mirrors {
        Mirrors {
            root,
            depth,
            max_bytes: None,
        }
    }

    /// The same mirrors, each fetch stopped once it received more than
    /// `bytes` (an untrusted repository's size is not known beforehand).
    pub fn capped(&self, bytes: u64) -> Mirrors {
        Mirrors {
            max_bytes: Some(bytes),
            ..self.clone()
        }
    }

    /// The mirrors of `config`'s state folder.
    pub fn for_config(config: &crate::config::Config) -> Mirrors {
        Mirrors::new(config.daemon.state_dir.join("mirrors"), config.git.history_depth)
    }

    /// The same mirrors, fetched with their whole history.
    pub fn whole_history(&self) -> Mirrors {
        Mirrors {
            depth: None,
            ..self.clone()
        }
    }

    /// Where the mirrors are.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder of the mirror of `url`: the repository's name for people
    /// reading the folder, a hash of the whole address so two repositories
    /// (or two forges) never share one.
    pub fn dir_for(&self, url: &str) -> PathBuf {
        use sha2::Digest;
        let digest = hex::encode(sha2::Sha256::digest(url.as_bytes()));
        let name: String = url
            .trim_end_matches('/')
            .trim_end_matches(".git")
            .rsplit('/')
            .next()
            .unwrap_or("repository")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        self.root.join(format!("{name}-{}.git", &digest[..16]))
    }

    /// Fetches `branches` of `url` into its mirror (made when missing,
    /// made again when damaged) and returns their tips.
    pub fn fetch(
        &self,
        url: &str,
        branches: &[&str],
        credentials: Option<&Credentials>,
    ) -> Result<Fetched, GitError> {
        let dir = self.dir_for(url);
        let _lock = MirrorLock::take(&self.root, &dir)?;
        match self.fetch_locked(&dir, url, branches, credentials) {
            Err(GitError::Failed { action, detail }) => {
                tracing::warn!(
                    mirror = %dir.display(),
                    "the mirror cannot be used ({action}: {detail}); making it again"
                );
                remove(&dir)?;
                self.fetch_locked(&dir, url, branches, credentials)
            }
            other => other,
        }
    }

    fn fetch_locked(
        &self,
        dir: &Path,
        url: &str,
        branches: &[&str],
        credentials: Option<&Credentials>,
    ) -> Result<Fetched, GitError> {
        let repo = open_or_init(dir, url)?;
        clear_leftovers(dir);
        let started = Instant::now();
        let refspecs: Vec<String> = branches
            .iter()
            .map(|b| format!("+refs/heads/{b}:refs/heads/{b}"))
            .collect();
        let attempts = Cell::new(0);
        let over = Cell::new(false);
        let mut remote = repo
            .remote_anonymous(url)
            .map_err(|e| GitError::failed("set up the remote", e))?;
        let mut options = FetchOptions::new();
        let mut remote_callbacks = callbacks(credentials, &attempts, url);
        // libgit2 counts the bytes received only while someone listens;
        // past the cap, the fetch is stopped.
        remote_callbacks.transfer_progress(|stats| {
            let past = self
                .max_bytes
                .is_some_and(|cap| stats.received_bytes() as u64 > cap);
            over.set(over.get() || past);
            !past
        });
        options.remote_callbacks(remote_callbacks);
        options.download_tags(AutotagOption::None);
        options.update_fetchhead(false);
        if !is_local(url) {
            match self.depth {
                Some(depth) => options.depth(i32::try_from(depth).unwrap_or(UNSHALLOW)),
                None if repo.is_shallow() => options.depth(UNSHALLOW),
                None => &mut options,
            };
        }
        remote
            .fetch(&refspecs, Some(&mut options), None)
            .map_err(|e| match self.max_bytes {
                Some(cap) if over.get() => GitError::TooLarge {
                    url: display_url(url),
                    cap,
                },
                _ => remote_error("fetch", url, e, attempts.get()),
            })?;
        let advertised: HashMap<String, Oid> = remote
            .list()
            .map_err(|e| GitError::failed("read the remote's branches", e))?
            .iter()
            .map(|head| (head.name().to_owned(), head.oid()))
            .collect();
        let stats = remote.stats();
        let (received_objects, received_bytes) = (stats.received_objects(), stats.received_bytes());
        tracing::info!(
            repository = %display_url(url),
            bytes = received_bytes,
            objects = received_objects,
            ms = started.elapsed().as_millis() as u64,
            depth = self.depth.map_or_else(|| "all".to_owned(), |d| d.to_string()),
            "fetched into the mirror"
        );
        drop(options);
        drop(remote);
        let tips = settle_refs(&repo, branches, &advertised)?;
        mark_used(dir);
        Ok(Fetched {
            git_dir: dir.to_owned(),
            tips,
            shallow: super::shallow::read(dir),
            received_objects,
            received_bytes,
        })
    }

    /// Every mirror, for `forgehand mirrors list` and `doctor`.
    pub fn list(&self) -> std::io::Result<Vec<MirrorInfo>> {
        let mut found = Vec::new();
        let entries = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "git") || !path.is_dir() {
                continue;
            }
            let url = Repository::open_bare(&path)
                .and_then(|r| r.config()?.get_string(URL_KEY))
                .unwrap_or_else(|_| "(unreadable: made again by its next fetch)".into());
            found.push(MirrorInfo {
                url,
                bytes: folder_bytes(&path),
                last_used: std::fs::metadata(path.join(USED_MARKER))
                    .and_then(|m| m.modified())
                    .ok(),
                shallow: path.join("shallow").is_file(),
                path,
            });
        }
        found.sort_by(|a, b| a.url.cmp(&b.url));
        Ok(found)
    }

    /// Removes the mirrors no task used for `retention`; returns them.
    pub fn prune(&self, retention: Duration) -> std::io::Result<Vec<MirrorInfo>> {
        let mut removed = Vec::new();
        for mirror in self.list()? {
            let idle = mirror
                .last_used
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .unwrap_or(Duration::MAX);
            if idle < retention {
                continue;
            }
            // A task that takes the lock meanwhile keeps it.
            let Ok(_lock) = MirrorLock::take(&self.root, &mirror.path) else {
                continue;
            };
            let used_since = std::fs::metadata(mirror.path.join(USED_MARKER))
                .and_then(|m| m.modified())
                .ok()
                != mirror.last_used;
            if used_since {
                continue;
            }
            std::fs::remove_dir_all(&mirror.path)?;
            tracing::info!(mirror = %mirror.path.display(), repository = %display_url(&mirror.url), "removed a mirror no task used for {}", humantime::format_duration(retention));
            removed.push(mirror);
        }
        Ok(removed)
    }
}

/// Removes what a fetch killed half-way left in the mirror's pack folder
/// (libgit2 writes an incoming pack under a temporary name and renames it
/// once whole). Called under the mirror's lock: no fetch is under way.
fn clear_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir.join("objects/pack")) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("pack-") {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => tracing::info!(
                mirror = %dir.display(),
                file = %name.to_string_lossy(),
                "removed what an interrupted fetch left in the mirror"
            ),
            Err(e) => {
                tracing::warn!(mirror = %dir.display(), "cannot remove {}: {e}", entry.path().display())
            }
        }
    }
}

/// The mirror at `dir`, or a new one. A folder that is no repository (a
/// kill during its making) is made again.
fn open_or_init(dir: &Path, url: &str) -> Result<Repository, GitError> {
    if dir.exists() {
        match Repository::open_bare(dir) {
            Ok(repo) => return Ok(repo),
            Err(e) => {
                tracing::warn!(mirror = %dir.display(), "the mirror cannot be opened ({}); making it again", e.message());
                remove(dir)?;
            }
        }
    }
    let repo = Repository::init_bare(dir).map_err(|e| GitError::failed("make the mirror", e))?;
    repo.config()
        .and_then(|mut c| c.set_str(URL_KEY, &display_url(url)))
        .map_err(|e| GitError::failed("write the mirror's config", e))?;
    Ok(repo)
}

/// Points the mirror's branches at what the forge advertised (a branch it
/// no longer has is deleted) and checks each tip can be read.
fn settle_refs(
    repo: &Repository,
    branches: &[&str],
    advertised: &HashMap<String, Oid>,
) -> Result<BTreeMap<String, Oid>, GitError> {
    let mut tips = BTreeMap::new();
    for branch in branches {
        let refname = format!("refs/heads/{branch}");
        let Some(&oid) = advertised.get(&refname) else {
            if let Ok(mut stale) = repo.find_reference(&refname) {
                stale
                    .delete()
                    .map_err(|e| GitError::failed("forget a deleted branch", e))?;
            }
            continue;
        };
        repo.find_commit(oid)
            .and_then(|c| c.tree())
            .map_err(|e| GitError::failed(&format!("read {branch} in the mirror"), e))?;
        repo.reference(&refname, oid, true, "forgehand: fetched")
            .map_err(|e| GitError::failed("move a mirror branch", e))?;
        tips.insert((*branch).to_owned(), oid);
    }
    Ok(tips)
}

fn mark_used(dir: &Path) {
    let marker = dir.join(USED_MARKER);
    if let Err(e) = std::fs::write(&marker, b"") {
        tracing::debug!("cannot mark {} as used: {e}", marker.display());
    }
}

fn remove(dir: &Path) -> Result<(), GitError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(GitError::Failed {
            action: format!("remove the damaged mirror {}", dir.display()),
            detail: e.to_string(),
        }),
    }
}

fn is_local(url: &str) -> bool {
    url.starts_with("file://") || url.starts_with('/')
}

/// `url` without any user or password it may carry.
fn display_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.has_host() => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

fn folder_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => total += entry.metadata().map_or(0, |m| m.len()),
                _ => {}
            }
        }
    }
    total
}

/// Held while a mirror is fetched or removed: a lock within the process
/// (tasks on one repository run side by side) and an exclusive lock on a
/// file beside the mirror (other processes on the same state folder).
struct MirrorLock {
    _file: std::fs::File,
    _guard: std::sync::MutexGuard<'static, ()>,
}

impl MirrorLock {
    fn take(root: &Path, dir: &Path) -> Result<MirrorLock, GitError> {
        // One mutex per mirror path for the process's life (a handful per
        // daemon), so a guard needs no borrow of the map.
        static LOCKS: std::sync::LazyLock<Mutex<HashMap<PathBuf, &'static Mutex<()>>>> =
            std::sync::LazyLock::new(Mutex::default);
        let io = |e: std::io::Error| GitError::Failed {
            action: format!("lock the mirror {}", dir.display()),
            detail: e.to_string(),
        };
        std::fs::create_dir_all(root).map_err(io)?;
        let mutex: &'static Mutex<()> = LOCKS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(dir.to_owned())
            .or_insert_with(|| Box::leak(Box::default()));
        let guard = mutex.lock().unwrap_or_else(|p| p.into_inner());
        let mut lock_path = dir.as_os_str().to_owned();
        lock_path.push(".lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(PathBuf::from(lock_path))
            .map_err(io)?;
        file.lock().map_err(io)?;
        Ok(MirrorLock {
            _file: file,
            _guard: guard,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A repository whose one commit holds `size` bytes that do not compress.
    fn repository_of(dir: &Path, size: usize) -> String {
        let repo = Repository::init_bare(dir).unwrap();
        let mut state = 0x2545_f491_u32;
        let bytes: Vec<u8> = (0..size)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect();
        let blob = repo.blob(&bytes).unwrap();
        let mut tree = repo.treebuilder(None).unwrap();
        tree.insert("noise.bin", blob, 0o100644).unwrap();
        let tree = repo.find_tree(tree.write().unwrap()).unwrap();
        let who = git2::Signature::now("t", "t@localhost").unwrap();
        repo.commit(Some("refs/heads/main"), &who, &who, "noise", &tree, &[])
            .unwrap();
        dir.to_string_lossy().into_owned()
    }

    #[test]
    fn a_capped_fetch_stops_past_its_bytes_and_is_not_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let url = repository_of(&dir.path().join("big.git"), 2 << 20);
        let mirrors = Mirrors::new(dir.path().join("mirrors"), None);
        match mirrors.capped(256 << 10).fetch(&url, &["main"], None) {
            Err(GitError::TooLarge { cap, .. }) => assert_eq!(cap, 256 << 10),
            other => panic!("not stopped: {other:?}"),
        }
        let fetched = mirrors.capped(8 << 20).fetch(&url, &["main"], None).unwrap();
        assert!(fetched.tips.contains_key("main"));
    }
}
