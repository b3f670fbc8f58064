//! Setup snapshots: what a successful setup wrote in the sandbox's home
//! folder (toolchain caches, user installs) and in the project folder (the
//! dependency folders such as `.venv`, `node_modules`, `target`), kept on the
//! host so the next task with the same inputs restores it instead of running
//! setup.
//!
//! A snapshot is a folder `<sandbox.snapshots.dir>/<key>/` holding
//! `home.tar`, `project.tar` and `snapshot.json`. The project part leaves out
//! `.git` and every path the clone put there: the repository's files always
//! come from the fresh clone, and a restore never writes over a file that is
//! already there. The key is computed by [`key`]. Both
//! parts are packed and unpacked inside the sandbox by forgehand's own binary
//! (`forgehand-editor pack` / `unpack`), since the home folder is a tmpfs the
//! engine's archive API cannot see. Storage stays under `max_bytes`, least
//! recently used removed first. A part that holds one of forgehand's secrets
//! is never kept.

pub mod key;

use crate::config::SnapshotsConfig;
use crate::sandbox::Sandbox;
use memchr::memmem::Finder;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const INFO_FILE: &str = "snapshot.json";
const HOME_PART: &str = "home.tar";
const PROJECT_PART: &str = "project.tar";
/// Partial folders older than this belong to a save that died.
const STALE_PARTIAL: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot storage {path}: {detail}; check sandbox.snapshots.dir and its free space")]
    Storage { path: PathBuf, detail: String },
    #[error("the sandbox could not {action}: {detail}")]
    Sandbox { action: String, detail: String },
    #[error(
        "the sandbox has no forgehand binary to pack or unpack with (an image without forgehand's editor)"
    )]
    NoHelper,
    #[error("what setup wrote in the {part} holds one of forgehand's secrets; no snapshot was kept")]
    HoldsSecret { part: &'static str },
    #[error(
        "the snapshot would take {bytes} bytes, over sandbox.snapshots.max_bytes ({max}); none was kept"
    )]
    TooLarge { bytes: u64, max: u64 },
}

fn storage(path: &Path, err: impl std::fmt::Display) -> SnapshotError {
    SnapshotError::Storage {
        path: path.to_owned(),
        detail: err.to_string(),
    }
}

/// What a snapshot holds and where it came from (`snapshot.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    pub key: String,
    pub repository: String,
    pub image: String,
    pub image_id: String,
    /// The repository's files whose contents are in the key.
    pub inputs: Vec<String>,
    pub setup_commands: Vec<String>,
    /// How long the setup it replaces took.
    pub setup_seconds: f64,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
    pub last_used_at: u64,
    pub bytes: u64,
}

impl SnapshotInfo {
    pub fn short_key(&self) -> &str {
        &self.key[..12.min(self.key.len())]
    }

    /// One line for `images list`, `snapshots list` and logs.
    pub fn describe(&self) -> String {
        let ago = |at: u64| humantime::format_duration(Duration::from_secs(now_secs().saturating_sub(at)));
        format!(
            "{}  {}  {}  image {}  made {} ago, last used {} ago  inputs: {}",
            self.short_key(),
            self.repository,
            human_bytes(self.bytes),
            self.image,
            ago(self.created_at),
            ago(self.last_used_at),
            if self.inputs.is_empty() {
                "(none)".to_owned()
            } else {
                self.inputs.join(", ")
            }
        )
    }
}

/// `n` bytes for people: `12.3 MB`.
pub fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GB", n as f64 / f64::from(1u32 << 30)),
        n if n >= 1 << 20 => format!("{:.1} MB", n as f64 / f64::from(1u32 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The snapshots on this host, in `sandbox.snapshots.dir`.
#[derive(Debug, Clone)]
pub struct SnapshotStore {
    dir: PathBuf,
    max_bytes: u64,
}

impl SnapshotStore {
    pub fn new(config: &SnapshotsConfig) -> SnapshotStore {
        SnapshotStore {
            dir: config.dir.clone(),
            max_bytes: config.max_bytes,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    fn folder(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    /// The snapshot for `key`, when one is kept and whole.
    pub fn find(&self, key: &str) -> Option<SnapshotInfo> {
        if !is_key(key) {
            return None;
        }
        let folder = self.folder(key);
        let info = read_info(&folder.join(INFO_FILE)).ok()?;
        (info.key == key && folder.join(HOME_PART).is_file() && folder.join(PROJECT_PART).is_file())
            .then_some(info)
    }

    /// Every kept snapshot, most recently used first.
    pub fn list(&self) -> Result<Vec<SnapshotInfo>, SnapshotError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(storage(&self.dir, e)),
        };
        let mut all = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_key(&name) {
                continue;
            }
            match read_info(&entry.path().join(INFO_FILE)) {
                Ok(info) => all.push(info),
                Err(err) => {
                    tracing::warn!(snapshot = %name, error = %err, "unreadable snapshot; `forgehand snapshots remove` clears it")
                }
            }
        }
        all.sort_by(|a, b| b.last_used_at.cmp(&a.last_used_at).then(a.key.cmp(&b.key)));
        Ok(all)
    }

    /// Removes the snapshots `which` selects; returns what was removed.
    pub fn remove_where(
        &self,
        which: impl Fn(&SnapshotInfo) -> bool,
    ) -> Result<Vec<SnapshotInfo>, SnapshotError> {
        let mut removed = Vec::new();
        for info in self.list()? {
            if which(&info) {
                let folder = self.folder(&info.key);
                std::fs::remove_dir_all(&folder).map_err(|e| storage(&folder, e))?;
                removed.push(info);
            }
        }
        Ok(removed)
    }

    /// Marks a snapshot as used now, for the least-recently-used order.
    pub fn touch(&self, info: &SnapshotInfo) -> Result<(), SnapshotError> {
        let mut info = info.clone();
        info.last_used_at = now_secs();
        write_info(&self.folder(&info.key), &info)
    }

    /// Removes the least recently used snapshots until the rest fit in
    /// `max_bytes`, and what died half-saved. Returns the keys removed.
    pub fn evict(&self) -> Result<Vec<String>, SnapshotError> {
        self.remove_stale_partials();
        let mut all = self.list()?;
        let mut total: u64 = all.iter().map(|i| i.bytes).sum();
        let mut removed = Vec::new();
        while total > self.max_bytes {
            let Some(oldest) = all.pop() else { break };
            let folder = self.folder(&oldest.key);
            std::fs::remove_dir_all(&folder).map_err(|e| storage(&folder, e))?;
            total = total.saturating_sub(oldest.bytes);
            tracing::info!(snapshot = %oldest.short_key(), repository = %oldest.repository, bytes = oldest.bytes, "snapshot removed to stay within sandbox.snapshots.max_bytes");
            removed.push(oldest.key);
        }
        Ok(removed)
    }

    fn remove_stale_partials(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let stale = entry.file_name().to_string_lossy().starts_with(".partial-")
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STALE_PARTIAL);
            if stale {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    /// Packs what setup wrote in `sandbox` into a new snapshot. `checkout`
    /// is the host folder that was copied into the project folder: its
    /// paths are left out. `secrets` are the values no snapshot may hold.
    pub async fn save(
        &self,
        sandbox: &dyn Sandbox,
        home_dir: &str,
        checkout: &Path,
        mut info: SnapshotInfo,
        secrets: &[&str],
    ) -> Result<SnapshotInfo, SnapshotError> {
        let helper = sandbox.editor_path().ok_or(SnapshotError::NoHelper)?.to_owned();
        std::fs::create_dir_all(&self.dir).map_err(|e| storage(&self.dir, e))?;
        let partial = self.partial_folder(&info);
        std::fs::create_dir(&partial).map_err(|e| storage(&partial, e))?;
        let saved = async {
            info.bytes = self
                .pack(sandbox, &helper, home_dir, checkout, &partial, secrets)
                .await?;
            if info.bytes > self.max_bytes {
                return Err(SnapshotError::TooLarge {
                    bytes: info.bytes,
                    max: self.max_bytes,
                });
            }
            info.created_at = now_secs();
            info.last_used_at = info.created_at;
            write_info(&partial, &info)
        }
        .await;
        if let Err(err) = saved {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(err);
        }
        let folder = self.folder(&info.key);
        if let Err(err) = std::fs::rename(&partial, &folder) {
            let _ = std::fs::remove_dir_all(&partial);
            // Another task with the same inputs saved it first.
            if let Some(existing) = self.find(&info.key) {
                return Ok(existing);
            }
            return Err(storage(&folder, err));
        }
        // The new snapshot is the most recently used and alone fits in
        // max_bytes (checked above), so only older ones are removed.
        self.evict()?;
        Ok(info)
    }

    /// A new folder name for a snapshot being written: unique per process
    /// and moment, and cleaned up as stale if the process dies.
    fn partial_folder(&self, info: &SnapshotInfo) -> PathBuf {
        self.dir.join(format!(
            ".partial-{}-{}-{}",
            info.short_key(),
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ))
    }

    /// Packs the home and project folders into `partial`; returns the
    /// bytes written. Each part stops being written the moment the whole
    /// would pass max_bytes: a sandbox cannot fill the host's disk through it.
    async fn pack(
        &self,
        sandbox: &dyn Sandbox,
        helper: &str,
        home_dir: &str,
        checkout: &Path,
        partial: &Path,
        secrets: &[&str],
    ) -> Result<u64, SnapshotError> {
        let home = partial.join(HOME_PART);
        let room = Room {
            left: self.max_bytes,
            max: self.max_bytes,
        };
        pack_part(
            sandbox,
            helper,
            home_dir,
            &home,
            None,
            secrets,
            "home folder",
            room,
        )
        .await?;
        let project = partial.join(PROJECT_PART);
        let skip = Some(checkout.to_owned());
        let room = Room {
            left: self.max_bytes.saturating_sub(file_size(&home)),
            max: self.max_bytes,
        };
        pack_part(
            sandbox,
            helper,
            sandbox.project_dir(),
            &project,
            skip,
            secrets,
            "project folder",
            room,
        )
        .await?;
        Ok(file_size(&home) + file_size(&project))
    }

    /// Unpacks `info` into `sandbox`'s home and project folders (never over
    /// a file the clone put there) and marks it used.
    pub async fn restore(
        &self,
        sandbox: &dyn Sandbox,
        home_dir: &str,
        info: &SnapshotInfo,
    ) -> Result<(), SnapshotError> {
        let helper = sandbox.editor_path().ok_or(SnapshotError::NoHelper)?.to_owned();
        let folder = self.folder(&info.key);
        unpack_part(sandbox, &helper, home_dir, &folder.join(HOME_PART)).await?;
        unpack_part(
            sandbox,
            &helper,
            sandbox.project_dir(),
            &folder.join(PROJECT_PART),
        )
        .await?;
        self.touch(info)
    }
}

/// Keys are lower-case hex: nothing else is ever a snapshot folder.
fn is_key(name: &str) -> bool {
    name.len() >= 16
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn read_info(path: &Path) -> Result<SnapshotInfo, SnapshotError> {
    let text = std::fs::read_to_string(path).map_err(|e| storage(path, e))?;
    serde_json::from_str(&text).map_err(|e| storage(path, e))
}

/// Writes `snapshot.json` whole or not at all.
fn write_info(folder: &Path, info: &SnapshotInfo) -> Result<(), SnapshotError> {
    let path = folder.join(INFO_FILE);
    let temporary = folder.join(format!("{INFO_FILE}.new"));
    let text = serde_json::to_string_pretty(info).map_err(|e| storage(&path, e))?;
    std::fs::write(&temporary, text).map_err(|e| storage(&temporary, e))?;
    std::fs::rename(&temporary, &path).map_err(|e| storage(&path, e))
}

/// How many bytes a part may still take, and the store's bound.
#[derive(Clone, Copy)]
struct Room {
    left: u64,
    max: u64,
}

/// Runs `forgehand-editor pack dir` in the sandbox and writes its tar to
/// `to`, without the paths of `skip` (a host folder mirrored there) and
/// `.git`, refusing any secret and stopping past `room`.
#[allow(clippy::too_many_arguments)]
async fn pack_part(
    sandbox: &dyn Sandbox,
    helper: &str,
    dir: &str,
    to: &Path,
    skip: Option<PathBuf>,
    secrets: &[&str],
    part: &'static str,
    room: Room,
) -> Result<(), SnapshotError> {
    let (action, mut stream) = run_helper(sandbox, helper, "pack", dir).await?;
    let _ = stream.stdin.shutdown().await;
    let stderr = tokio::spawn(read_all(stream.stderr));
    let reader = tokio_util::io::SyncIoBridge::new(stream.stdout);
    let file = std::fs::File::create(to).map_err(|e| storage(to, e))?;
    let secrets: Vec<String> = secrets.iter().map(|s| (*s).to_owned()).collect();
    let target = to.to_owned();
    let copied = tokio::task::spawn_blocking(move || {
        let mut out = Scanning::new(std::io::BufWriter::with_capacity(1 << 16, file), &secrets);
        out.limit = room.left;
        let filtered = filter_tar(reader, &mut out, skip.as_deref());
        if out.written > out.limit {
            return Err(SnapshotError::TooLarge {
                bytes: room.max - room.left + out.written,
                max: room.max,
            });
        }
        filtered.map_err(|e| storage(&target, e))?;
        let found = out.found;
        out.inner.flush().map_err(|e| storage(&target, e))?;
        Ok::<bool, SnapshotError>(found)
    })
    .await
    .map_err(|e| SnapshotError::Sandbox {
        action: action.clone(),
        detail: e.to_string(),
    });
    let complaint = stderr.await.unwrap_or_default();
    let holds_secret = match copied {
        Ok(Ok(found)) => found,
        Ok(Err(err)) | Err(err) => {
            return Err(match exited(sandbox, &stream.id).await {
                Some(0) | None if complaint.is_empty() => err,
                _ => SnapshotError::Sandbox {
                    action,
                    detail: complaint,
                },
            })
        }
    };
    if holds_secret {
        return Err(SnapshotError::HoldsSecret { part });
    }
    match exited(sandbox, &stream.id).await {
        Some(0) => Ok(()),
        code => Err(SnapshotError::Sandbox {
            action,
            detail: format!("exit code {code:?}: {}", complaint.trim()),
        }),
    }
}

/// Streams `from` into `forgehand-editor unpack dir` in the sandbox.
async fn unpack_part(
    sandbox: &dyn Sandbox,
    helper: &str,
    dir: &str,
    from: &Path,
) -> Result<(), SnapshotError> {
    let (action, mut stream) = run_helper(sandbox, helper, "unpack", dir).await?;
    let stderr = tokio::spawn(read_all(stream.stderr));
    let stdout = tokio::spawn(read_all(stream.stdout));
    let mut file = tokio::fs::File::open(from).await.map_err(|e| storage(from, e))?;
    let sent = tokio::io::copy(&mut file, &mut stream.stdin).await;
    let _ = stream.stdin.shutdown().await;
    drop(stream.stdin);
    let _ = stdout.await;
    let complaint = stderr.await.unwrap_or_default();
    match (exited(sandbox, &stream.id).await, sent) {
        (Some(0), Ok(_)) => Ok(()),
        (code, sent) => Err(SnapshotError::Sandbox {
            action,
            detail: format!(
                "exit code {code:?}{}: {}",
                sent.err()
                    .map(|e| format!(", sending failed: {e}"))
                    .unwrap_or_default(),
                complaint.trim()
            ),
        }),
    }
}

/// Starts `forgehand-editor VERB dir` in the sandbox as a byte stream;
/// returns what it does, for errors, and the stream.
async fn run_helper(
    sandbox: &dyn Sandbox,
    helper: &str,
    verb: &str,
    dir: &str,
) -> Result<(String, crate::sandbox::ExecStream), SnapshotError> {
    let action = format!("{verb} {dir}");
    let argv = [helper.to_owned(), verb.to_owned(), dir.to_owned()];
    match sandbox.exec_stream(&argv).await {
        Ok(stream) => Ok((action, stream)),
        Err(e) => Err(SnapshotError::Sandbox {
            action,
            detail: e.to_string(),
        }),
    }
}

async fn read_all(mut reader: std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>) -> String {
    let mut bytes = Vec::new();
    let _ = reader.read_to_end(&mut bytes).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The exit code of a streamed process once it has ended (within a few
/// seconds of its output closing).
async fn exited(sandbox: &dyn Sandbox, id: &str) -> Option<i64> {
    for _ in 0..100 {
        match sandbox.exec_status(id).await {
            Ok(status) if !status.running => return status.exit_code,
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(_) => return None,
        }
    }
    None
}

/// Copies a tar stream, leaving out `.git` and every path that exists in
/// `skip` as anything but a folder.
fn filter_tar(input: impl std::io::Read, out: impl Write, skip: Option<&Path>) -> std::io::Result<()> {
    let mut archive = tar::Archive::new(input);
    let mut builder = tar::Builder::new(out);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        if let Some(skip) = skip {
            let first = path.components().find(|c| !matches!(c, Component::CurDir));
            if first == Some(Component::Normal(".git".as_ref())) {
                continue;
            }
            if std::fs::symlink_metadata(skip.join(&path)).is_ok_and(|m| !m.is_dir()) {
                continue;
            }
        }
        let mut header = entry.header().clone();
        match entry.link_name()? {
            Some(target) if header.entry_type().is_symlink() || header.entry_type().is_hard_link() => {
                let target = target.into_owned();
                builder.append_link(&mut header, &path, target)?;
            }
            _ => builder.append_data(&mut header, &path, &mut entry)?,
        }
    }
    builder.into_inner()?.flush()
}

/// A writer that notes whether any secret passes through it, across chunk
/// boundaries too, and refuses to write past `limit` bytes.
struct Scanning<W> {
    inner: W,
    finders: Vec<Finder<'static>>,
    carry: Vec<u8>,
    keep: usize,
    found: bool,
    written: u64,
    limit: u64,
}

impl<W: Write> Scanning<W> {
    fn new(inner: W, secrets: &[String]) -> Scanning<W> {
        // Values shorter than 8 bytes would match by chance; none of
        // forgehand's secrets is that short.
        let finders: Vec<Finder<'static>> = secrets
            .iter()
            .filter(|s| s.len() >= 8)
            .map(|s| Finder::new(s.as_bytes()).into_owned())
            .collect();
        let keep = finders.iter().map(|f| f.needle().len()).max().unwrap_or(1) - 1;
        Scanning {
            inner,
            finders,
            carry: Vec::new(),
            keep,
            found: false,
            written: 0,
            limit: u64::MAX,
        }
    }

    fn scan(&mut self, chunk: &[u8]) {
        if self.found || self.finders.is_empty() {
            return;
        }
        let head = &chunk[..chunk.len().min(self.keep)];
        let mut seam = self.carry.clone();
        seam.extend_from_slice(head);
        if self
            .finders
            .iter()
            .any(|f| f.find(chunk).is_some() || f.find(&seam).is_some())
        {
            self.found = true;
            return;
        }
        let joined_len = self.carry.len() + chunk.len();
        let from = joined_len.saturating_sub(self.keep);
        let mut next = Vec::with_capacity(self.keep);
        if from < self.carry.len() {
            next.extend_from_slice(&self.carry[from..]);
            next.extend_from_slice(chunk);
        } else {
            next.extend_from_slice(&chunk[from - self.carry.len()..]);
        }
        self.carry = next;
    }
}

impl<W: Write> Write for Scanning<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written + buf.len() as u64 > self.limit {
            self.written += buf.len() as u64;
            return Err(std::io::Error::other("the snapshot is larger than its room"));
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        self.scan(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_part_stops_being_written_at_its_room() {
        let mut out = Scanning::new(Vec::new(), &[]);
        out.limit = 10;
        out.write_all(b"12345678").unwrap();
        assert!(out.write_all(b"9abc").is_err());
        assert_eq!(out.inner, b"12345678", "nothing past the room reached the file");
        assert!(out.written > out.limit);
    }

    fn info(key: &str, last_used_at: u64, bytes: u64) -> SnapshotInfo {
        SnapshotInfo {
            key: key.to_owned(),
            repository: "o/r".into(),
            image: "img".into(),
            image_id: "sha256:1".into(),
            inputs: vec![],
            setup_commands: vec!["true".into()],
            setup_seconds: 1.0,
            created_at: last_used_at,
            last_used_at,
            bytes,
        }
    }

    fn store_with(dir: &Path, max_bytes: u64, snapshots: &[SnapshotInfo]) -> SnapshotStore {
        for s in snapshots {
            let folder = dir.join(&s.key);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join(HOME_PART), vec![0u8; s.bytes as usize / 2]).unwrap();
            std::fs::write(folder.join(PROJECT_PART), vec![0u8; s.bytes as usize / 2]).unwrap();
            write_info(&folder, s).unwrap();
        }
        SnapshotStore {
            dir: dir.to_owned(),
            max_bytes,
        }
    }

    #[test]
    fn the_least_recently_used_go_first_until_the_rest_fit() {
        let dir = tempfile::tempdir().unwrap();
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let c = "c".repeat(64);
        let store = store_with(
            dir.path(),
            250,
            &[info(&a, 10, 100), info(&b, 30, 100), info(&c, 20, 100)],
        );
        assert_eq!(store.evict().unwrap(), vec![a.clone()]);
        assert!(store.find(&a).is_none() && store.find(&b).is_some());
        // Using c makes b the oldest.
        store.touch(&store.find(&c).unwrap()).unwrap();
        let store = SnapshotStore {
            max_bytes: 150,
            ..store
        };
        assert_eq!(store.evict().unwrap(), vec![b]);
        assert_eq!(store.list().unwrap().len(), 1);
    }

    #[test]
    fn a_folder_that_is_no_key_or_is_half_written_is_never_found() {
        let dir = tempfile::tempdir().unwrap();
        let key = "d".repeat(64);
        let store = store_with(dir.path(), 1000, &[info(&key, 1, 10)]);
        std::fs::remove_file(dir.path().join(&key).join(PROJECT_PART)).unwrap();
        assert!(store.find(&key).is_none());
        assert!(store.find("../etc").is_none());
        let removed = store.remove_where(|_| true).unwrap();
        assert_eq!(removed.len(), 1);
        assert!(!dir.path().join(&key).exists());
    }

    #[test]
    fn a_secret_is_seen_even_across_a_chunk_seam() {
        let secrets = vec!["ghp_secretvalue123".to_owned()];
        let mut out = Scanning::new(Vec::new(), &secrets);
        out.write_all(b"lots of text ghp_secr").unwrap();
        assert!(!out.found);
        out.write_all(b"etvalue123 and more").unwrap();
        assert!(out.found);
        let mut clean = Scanning::new(Vec::new(), &secrets);
        for chunk in [&b"ghp_"[..], b"secret", b"value12", b"4"] {
            clean.write_all(chunk).unwrap();
        }
        assert!(!clean.found);
    }

    #[test]
    fn the_project_part_leaves_out_git_and_the_clones_files() {
        let sandbox_side = tempfile::tempdir().unwrap();
        let p = sandbox_side.path();
        std::fs::create_dir_all(p.join(".git/objects")).unwrap();
        std::fs::write(p.join(".git/config"), "x").unwrap();
        std::fs::create_dir_all(p.join("src")).unwrap();
        std::fs::write(p.join("src/app.py"), "tracked").unwrap();
        std::fs::create_dir_all(p.join(".venv/lib")).unwrap();
        std::fs::write(p.join(".venv/lib/dep.py"), "installed").unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", p.join(".venv/python")).unwrap();
        let long = format!("node_modules/{}/index.js", "n".repeat(150));
        std::fs::create_dir_all(p.join(&long).parent().unwrap()).unwrap();
        std::fs::write(p.join(&long), "module").unwrap();
        let clone = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(clone.path().join("src")).unwrap();
        std::fs::write(clone.path().join("src/app.py"), "tracked").unwrap();

        let mut packed = Vec::new();
        forgehand_editor::folder_tar::pack(p, &mut packed).unwrap();
        let mut kept = Vec::new();
        filter_tar(packed.as_slice(), &mut kept, Some(clone.path())).unwrap();
        let out = tempfile::tempdir().unwrap();
        forgehand_editor::folder_tar::unpack(kept.as_slice(), out.path()).unwrap();
        assert!(out.path().join(".venv/lib/dep.py").is_file());
        assert_eq!(
            std::fs::read_link(out.path().join(".venv/python")).unwrap(),
            Path::new("/usr/bin/python3")
        );
        assert_eq!(std::fs::read_to_string(out.path().join(&long)).unwrap(), "module");
        assert!(!out.path().join("src/app.py").exists());
        assert!(!out.path().join(".git").exists());
    }
}
