//! Where a task's checkpoints are kept: the record (the conversation, the
//! steps, the commit and the slot) and the two quarantine repositories the
//! commit is in.
//!
//! - By default in this daemon's own state: the record in the journal, the
//!   quarantines under `<daemon.state_dir>/checkpoints/<task>/`. A restart
//!   of this daemon resumes from them.
//! - Among replicas with `cluster.checkpoint_dir` (a volume every replica
//!   mounts): both under `<checkpoint_dir>/<task>/`, the record as
//!   `record.json`, so the replica that takes a task over resumes it. Only
//!   the claim's holder writes there: nothing is written once its claim is
//!   lost (the holder stops at its renew deadline, before anyone else may
//!   take the task over).

use crate::config::{ClusterMode, Config};
use crate::forge::ItemRef;
use crate::journal::{AgentCheckpoint, Journal, JournalError};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The record's file in a shared store.
const RECORD_FILE: &str = "record.json";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the journal: {0}")]
    Journal(#[from] JournalError),
    #[error("the checkpoint store {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The claim was lost (or the daemon stops): the record is not written.
    #[error("the task's claim is no longer held")]
    Fenced,
}

/// Where the record is kept.
#[derive(Clone)]
enum Records {
    Journal(Arc<Journal>),
    /// `record.json` in the task's folder of the shared store.
    Shared,
}

/// One task's checkpoints.
#[derive(Clone)]
pub(in crate::task) struct Store {
    pub dir: PathBuf,
    records: Records,
    pub key: String,
    /// Cancelled when the task stops (its claim lost, the daemon stopping):
    /// a shared store gets no record after that.
    fence: Option<CancellationToken>,
}

impl Store {
    /// Task `item`'s store as `config` places it; `stop` is the task's stop
    /// signal (the claim's among replicas).
    pub fn for_task(
        config: &Config,
        item: &ItemRef,
        journal: Arc<Journal>,
        stop: CancellationToken,
    ) -> Store {
        match shared_root(config) {
            Some(root) => Store {
                dir: root.join(folder_name(item)),
                records: Records::Shared,
                key: item.key(),
                fence: Some(stop),
            },
            None => Store {
                dir: local_root(&config.daemon.state_dir).join(folder_name(item)),
                records: Records::Journal(journal),
                key: item.key(),
                fence: None,
            },
        }
    }

    pub fn slot_dir(&self, slot: u8) -> PathBuf {
        self.dir.join(format!("slot-{slot}.git"))
    }

    /// Whether the task still holds its claim (always, outside a shared store).
    pub fn held(&self) -> bool {
        self.fence.as_ref().is_none_or(|stop| !stop.is_cancelled())
    }

    /// The task's last checkpoint, if its run has one.
    pub fn saved(&self) -> Option<AgentCheckpoint> {
        let read = match &self.records {
            Records::Journal(journal) => journal
                .record::<AgentCheckpoint>(&self.key)
                .map_err(StoreError::from),
            Records::Shared => self.read_record(),
        };
        match read {
            Ok(saved) => saved,
            Err(e) => {
                tracing::warn!(task = %self.key, "cannot read the agent's checkpoint ({e}); the run starts over");
                None
            }
        }
    }

    /// Records `checkpoint` in place of the one before when it weighs at
    /// most `max_bytes`; its weight (over the limit: nothing is written).
    pub fn save(&self, checkpoint: &AgentCheckpoint, max_bytes: usize) -> Result<usize, StoreError> {
        match &self.records {
            Records::Journal(journal) => Ok(journal.save_record(&self.key, checkpoint, max_bytes)?),
            Records::Shared => {
                // A conversation is strings and JSON values: it always serialises.
                let record = serde_json::to_vec(checkpoint).unwrap_or_default();
                if record.len() <= max_bytes {
                    self.write_record(&record)?;
                }
                Ok(record.len())
            }
        }
    }

    /// Forgets the task's checkpoints (its change is pushed, or it ended);
    /// a shared store's only while the task holds its claim (once it is
    /// lost they are the next holder's).
    pub fn forget(&self) {
        if !self.held() {
            return;
        }
        if let Records::Journal(journal) = &self.records {
            if let Err(e) = journal.forget_record::<AgentCheckpoint>(&self.key) {
                tracing::warn!(task = %self.key, "cannot forget the agent's checkpoint: {e}");
            }
        }
        remove_folder(&self.dir);
    }

    fn read_record(&self) -> Result<Option<AgentCheckpoint>, StoreError> {
        let path = self.dir.join(RECORD_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        match serde_json::from_slice(&bytes) {
            Ok(checkpoint) => Ok(Some(checkpoint)),
            Err(e) => {
                tracing::warn!(task = %self.key, "the agent's checkpoint {} cannot be read ({e}); the run starts over", path.display());
                Ok(None)
            }
        }
    }

    /// Writes the record whole or not at all: a temporary file, flushed to
    /// the disk, renamed over the last one; checked against the claim last.
    fn write_record(&self, record: &[u8]) -> Result<(), StoreError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { path, source }
        };
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let temporary = self.dir.join(format!("{RECORD_FILE}.{}.new", std::process::id()));
        let mut file = std::fs::File::create(&temporary).map_err(io(&temporary))?;
        file.write_all(record).map_err(io(&temporary))?;
        file.sync_all().map_err(io(&temporary))?;
        if !self.held() {
            let _ = std::fs::remove_file(&temporary);
            return Err(StoreError::Fenced);
        }
        let path = self.dir.join(RECORD_FILE);
        std::fs::rename(&temporary, &path).map_err(io(&path))?;
        // The rename itself reaches the disk with the folder's entry.
        if let Ok(folder) = std::fs::File::open(&self.dir) {
            let _ = folder.sync_all();
        }
        Ok(())
    }
}

/// The quarantines being written in this process. A run cancelled while it
/// takes a checkpoint out leaves its blocking reader going on; the next
/// run's checkpoint into the same folder waits for it.
static WRITING: std::sync::LazyLock<std::sync::Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> =
    std::sync::LazyLock::new(Default::default);

/// Held while quarantine `dir` is written: each blocking part of the write
/// keeps a clone, so the folder is free only once all of them have ended.
pub(super) type Writing = Arc<tokio::sync::OwnedMutexGuard<()>>;

/// Waits until no one writes quarantine `dir`, and holds it.
pub(super) async fn writing(dir: &Path) -> Writing {
    let lock = {
        let mut locks = WRITING.lock().unwrap_or_else(|p| p.into_inner());
        // Folders no one holds or waits for are forgotten.
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        locks.entry(dir.to_owned()).or_default().clone()
    };
    Arc::new(lock.lock_owned().await)
}

/// The shared store's folder, when checkpoints are kept among replicas.
fn shared_root(config: &Config) -> Option<&Path> {
    match (&config.cluster.mode, &config.cluster.checkpoint_dir) {
        (ClusterMode::Kubernetes, Some(dir)) => Some(dir.as_path()),
        _ => None,
    }
}

fn local_root(state_dir: &Path) -> PathBuf {
    state_dir.join("checkpoints")
}

/// The task's folder: its slug, for a person reading the folder, and a
/// digest of its key, since two repositories whose names differ only in
/// `.` and `-` have the same slug.
fn folder_name(item: &ItemRef) -> String {
    let digest = Sha256::digest(item.key().as_bytes());
    let short: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{short}", item.slug())
}

/// Task `item`'s folder name, its checkpoints moved there from a folder
/// named by the slug alone (as earlier versions named it).
fn adopt_slug_folder(root: &Path, item: &ItemRef) -> String {
    let name = folder_name(item);
    let (old, new) = (root.join(item.slug()), root.join(&name));
    if old.is_dir() && !new.exists() {
        if let Err(e) = std::fs::rename(&old, &new) {
            tracing::warn!(task = %item, "cannot move the checkpoints {} to {}: {e}", old.display(), new.display());
        }
    }
    name
}

fn remove_folder(dir: &Path) {
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            tracing::warn!("cannot remove the checkpoints {}: {e}", dir.display());
        }
    }
}

/// At the daemon's start, before any task runs: removes this daemon's
/// checkpoint folders no journalled checkpoint names (tasks that ended
/// while their folder could not be removed, or were never run again).
/// A shared store is not swept: other replicas' runs are in it.
pub fn sweep(state_dir: &Path, journal: &Journal) {
    let root = local_root(state_dir);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return;
    };
    let kept: std::collections::HashSet<String> = match journal.record_keys::<AgentCheckpoint>() {
        Ok(keys) => keys
            .iter()
            .filter_map(|key| ItemRef::parse_key(key))
            .map(|item| adopt_slug_folder(&root, &item))
            .collect(),
        Err(e) => {
            tracing::warn!("cannot list the journalled checkpoints ({e}); none is swept");
            return;
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !kept.contains(&name) {
            remove_folder(&entry.path());
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::info!(count = removed, "removed checkpoints no unfinished task uses");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::{ForgeKind, ItemKind};

    fn item(repo: &str, number: u64) -> ItemRef {
        ItemRef {
            forge: ForgeKind::GitHub,
            repo: repo.into(),
            kind: ItemKind::Issue,
            number,
        }
    }

    fn checkpoint(step: u32) -> AgentCheckpoint {
        AgentCheckpoint {
            step,
            tool_calls: step,
            commit: "a".repeat(40),
            slot: (step % 2) as u8,
            base: "b".repeat(40),
            image: "forgehand-python:3.12".into(),
            messages: vec![crate::llm::Message::User("Fix it".into())],
        }
    }

    fn shared(dir: &Path, item: &ItemRef, stop: CancellationToken) -> Store {
        Store {
            dir: dir.join(folder_name(item)),
            records: Records::Shared,
            key: item.key(),
            fence: Some(stop),
        }
    }

    #[tokio::test]
    async fn a_quarantine_is_written_by_one_at_a_time_until_every_part_of_a_write_has_ended() {
        let dir = Path::new("/state/checkpoints/acme-app-issue-1/slot-0.git");
        let first = writing(dir).await;
        // A blocking part of the first write goes on after its run was dropped.
        let part = first.clone();
        drop(first);
        let second = tokio::spawn(async move { writing(dir).await });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "the folder is still written");
        drop(part);
        let held = tokio::time::timeout(std::time::Duration::from_secs(5), second).await;
        assert!(held.is_ok(), "the next write goes on once the last part ended");
        // Another folder is never held up.
        let _other = writing(Path::new("/state/checkpoints/acme-app-issue-1/slot-1.git")).await;
    }

    #[test]
    fn repositories_whose_slugs_collide_keep_their_checkpoints_apart() {
        let (dotted, dashed) = (item("acme/my.app", 3), item("acme/my-app", 3));
        assert_eq!(dotted.slug(), dashed.slug());
        assert_ne!(folder_name(&dotted), folder_name(&dashed));
        assert!(folder_name(&dotted).starts_with(&dotted.slug()));
    }

    #[test]
    fn a_shared_record_is_read_back_by_another_store_and_none_is_written_after_the_claim_is_lost() {
        let root = tempfile::tempdir().unwrap();
        let task = item("acme/app", 7);
        let stop = CancellationToken::new();
        let holder = shared(root.path(), &task, stop.clone());
        assert_eq!(holder.saved(), None);
        holder.save(&checkpoint(3), 1 << 20).unwrap();
        // Another replica's store for the same task reads it.
        let successor = shared(root.path(), &task, CancellationToken::new());
        assert_eq!(successor.saved(), Some(checkpoint(3)));
        // Over the cap: the one before stays.
        assert!(holder.save(&checkpoint(4), 10).unwrap() > 10);
        assert_eq!(successor.saved().map(|c| c.step), Some(3));
        // The claim lost: nothing more is written, and no temporary is left.
        stop.cancel();
        assert!(matches!(
            holder.save(&checkpoint(5), 1 << 20),
            Err(StoreError::Fenced)
        ));
        assert_eq!(successor.saved().map(|c| c.step), Some(3));
        let names: Vec<_> = std::fs::read_dir(&holder.dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(RECORD_FILE)]);
        // A torn record is none: the run starts over.
        std::fs::write(holder.dir.join(RECORD_FILE), b"{\"step\":").unwrap();
        assert_eq!(successor.saved(), None);
        successor.forget();
        assert!(!holder.dir.exists());
    }

    #[test]
    fn the_sweep_keeps_the_folders_of_journalled_checkpoints_only() {
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(state.path()).unwrap();
        let (kept, orphan) = (item("acme/app", 1), item("acme/app", 2));
        journal.begin(&kept.key()).unwrap();
        journal.save_record(&kept.key(), &checkpoint(1), 1 << 20).unwrap();
        for task in [&kept, &orphan] {
            std::fs::create_dir_all(
                local_root(state.path())
                    .join(folder_name(task))
                    .join("slot-0.git"),
            )
            .unwrap();
        }
        // One of an earlier version, named by the slug alone.
        let earlier = item("acme/app", 3);
        journal.begin(&earlier.key()).unwrap();
        journal
            .save_record(&earlier.key(), &checkpoint(2), 1 << 20)
            .unwrap();
        std::fs::create_dir_all(local_root(state.path()).join(earlier.slug()).join("slot-0.git")).unwrap();
        sweep(state.path(), &journal);
        assert!(local_root(state.path()).join(folder_name(&kept)).exists());
        assert!(!local_root(state.path()).join(folder_name(&orphan)).exists());
        assert!(local_root(state.path())
            .join(folder_name(&earlier))
            .join("slot-0.git")
            .exists());
        assert!(!local_root(state.path()).join(earlier.slug()).exists());
    }
}
