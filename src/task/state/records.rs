//! Where one task's records are kept (the phases' outputs of
//! phase_records.rs, and the agent's checkpoint):
//!
//! - by default in this daemon's journal (one row per task and phase);
//! - among replicas with `cluster.checkpoint_dir` (a folder every replica
//!   mounts) as `<checkpoint_dir>/<task>/<phase>.json`, so the replica that
//!   takes a task over reads them. Each is written whole or not at all (a
//!   temporary file of this writer's own, flushed, renamed over the last)
//!   and only while the task's claim holds: a replica whose claim runs out
//!   stops before another may take the task over, and writes nothing
//!   within a margin of that moment.

use crate::config::{ClusterMode, Config};
use crate::forge::{Delivery, ItemRef};
use crate::journal::{Journal, JournalError, PhaseRecord};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// No shared record is written this close to the claim's end.
const CLAIM_MARGIN: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("the journal: {0}")]
    Journal(#[from] JournalError),
    #[error("the shared record {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The task's claim runs out: the next holder's records are not touched.
    #[error("the task's claim is no longer held")]
    Fenced,
}

/// One task's records.
#[derive(Clone)]
pub(in crate::task) struct TaskRecords {
    journal: Arc<Journal>,
    key: String,
    shared: Option<Shared>,
    /// This run's name among the task's writers (a random one): names its
    /// temporary files (every replica may be process 1) and its checkpoints'
    /// folders, so a writer left behind never writes another's.
    writer: String,
}

/// When the task's claim runs out (`None`: never).
type Deadline = Arc<dyn Fn() -> Option<Instant> + Send + Sync>;

/// The task's folder in the store the replicas share.
#[derive(Clone)]
struct Shared {
    dir: PathBuf,
    /// Its claim's end, through the fenced forge.
    deadline: Deadline,
}

impl TaskRecords {
    /// Task `item`'s records as `config` places them; `forge` is the one
    /// the task writes through (among replicas, fenced by its claim).
    pub fn for_task(
        config: &Config,
        item: &ItemRef,
        journal: Arc<Journal>,
        forge: Arc<dyn Delivery>,
    ) -> TaskRecords {
        let shared = shared_root(config).map(|root| Shared {
            dir: root.join(folder_name(item)),
            deadline: Arc::new(move || forge.write_deadline()),
        });
        TaskRecords {
            journal,
            key: item.key(),
            shared,
            writer: format!("{:016x}", fastrand::u64(..)),
        }
    }

    /// The task's folder in the shared store, if the records are kept there.
    pub fn shared_dir(&self) -> Option<&Path> {
        self.shared.as_ref().map(|s| s.dir.as_path())
    }

    /// This run's name among the task's writers.
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// Whether this replica may still write the task's shared records
    /// (always, outside a shared store).
    pub fn held(&self) -> bool {
        let deadline = self.shared.as_ref().and_then(|s| (s.deadline)());
        deadline.is_none_or(|end| Instant::now() + CLAIM_MARGIN < end)
    }

    /// The task's last record of phase `R`, if it has one (one that cannot
    /// be read is none, said in the log: the phase is done again).
    pub fn read<R: PhaseRecord>(&self) -> Option<R> {
        let read = match &self.shared {
            None => self.journal.record::<R>(&self.key).map_err(RecordError::from),
            Some(shared) => shared.read::<R>(),
        };
        read.unwrap_or_else(|e| {
            tracing::warn!(task = %self.key, phase = R::PHASE, "cannot read the phase's record ({e}); the phase is done again");
            None
        })
    }

    /// Saves `record` in place of its phase's last one when it weighs at
    /// most `max_bytes`; its weight (over the limit: nothing is written).
    pub fn save<R: PhaseRecord>(&self, record: &R, max_bytes: usize) -> Result<usize, RecordError> {
        let Some(shared) = &self.shared else {
            return Ok(self.journal.save_record(&self.key, record, max_bytes)?);
        };
        // Records are strings, numbers and JSON values: they always serialise.
        let text = serde_json::to_vec(record).unwrap_or_default();
        if text.len() <= max_bytes {
            shared.write((R::PHASE, &self.writer), &text, || self.held())?;
        }
        Ok(text.len())
    }

    /// Saves `record` for a restart. Only the journal failing is an error
    /// (as every journal write is); a record too large, or a shared store
    /// that fails or is fenced, is logged: a restart does the phase again.
    pub fn keep<R: PhaseRecord>(&self, record: &R) -> Result<(), JournalError> {
        match self.save(record, MAX_RECORD_BYTES) {
            Err(RecordError::Journal(e)) => return Err(e),
            Ok(weight) if weight > MAX_RECORD_BYTES => {
                tracing::warn!(task = %self.key, phase = R::PHASE, weight, "the phase's record is too large to keep; a restart does the phase again")
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(task = %self.key, phase = R::PHASE, "cannot keep the phase's record ({e}); a restart does the phase again")
            }
        }
        Ok(())
    }

    /// Forgets the task's record of phase `R`.
    pub fn forget<R: PhaseRecord>(&self) {
        let forgot = match &self.shared {
            None => self
                .journal
                .forget_record::<R>(&self.key)
                .map_err(RecordError::from),
            Some(_) if !self.held() => Ok(()),
            Some(shared) => shared.remove(R::PHASE),
        };
        if let Err(e) = forgot {
            tracing::warn!(task = %self.key, phase = R::PHASE, "cannot forget the phase's record: {e}");
        }
    }

    /// Forgets every record of the task (it ended): the journal forgets
    /// them with the task; a shared folder is removed while the claim holds
    /// (once it is lost they are the next holder's).
    pub fn forget_all(&self) {
        if let Some(shared) = &self.shared {
            if self.held() {
                self.remove_now(&shared.dir);
            }
        }
    }

    /// Removes `dir` as of now: renamed aside in one step (while the claim
    /// holds), then deleted, however long that takes; what the next holder
    /// writes there meanwhile is its own.
    pub fn remove_now(&self, dir: &Path) {
        let Some(name) = dir.file_name() else {
            return;
        };
        let aside = dir.with_file_name(format!(".{}.{}.gone", name.to_string_lossy(), self.writer));
        match std::fs::rename(dir, &aside) {
            Ok(()) => remove_folder(&aside),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("cannot remove {}: {e}", dir.display()),
        }
    }
}

/// Most a phase's record may weigh (a larger one is not kept: the phase is
/// done again after a restart).
pub(in crate::task) const MAX_RECORD_BYTES: usize = 4 << 20;

impl Shared {
    fn path(&self, phase: &str) -> PathBuf {
        self.dir.join(format!("{phase}.json"))
    }

    fn read<R: PhaseRecord>(&self) -> Result<Option<R>, RecordError> {
        let path = self.path(R::PHASE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(RecordError::Io { path, source }),
        };
        match serde_json::from_slice(&bytes) {
            Ok(record) => Ok(Some(record)),
            Err(e) => {
                tracing::warn!(
                    phase = R::PHASE,
                    "the record {} cannot be read ({e}); the phase is done again",
                    path.display()
                );
                Ok(None)
            }
        }
    }

    /// Writes the record whole or not at all: a temporary file of this
    /// writer's, flushed to the disk, renamed over the last one; the claim
    /// checked last (`held`).
    fn write(
        &self,
        (phase, writer): (&str, &str),
        text: &[u8],
        held: impl Fn() -> bool,
    ) -> Result<(), RecordError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| RecordError::Io { path, source }
        };
        if !held() {
            return Err(RecordError::Fenced);
        }
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let temporary = self.dir.join(format!(".{phase}.json.{writer}.new"));
        let mut file = std::fs::File::create(&temporary).map_err(io(&temporary))?;
        file.write_all(text).map_err(io(&temporary))?;
        file.sync_all().map_err(io(&temporary))?;
        if !held() {
            let _ = std::fs::remove_file(&temporary);
            return Err(RecordError::Fenced);
        }
        let path = self.path(phase);
        std::fs::rename(&temporary, &path).map_err(io(&path))?;
        // The rename itself reaches the disk with the folder's entry.
        if let Ok(folder) = std::fs::File::open(&self.dir) {
            let _ = folder.sync_all();
        }
        Ok(())
    }

    fn remove(&self, phase: &str) -> Result<(), RecordError> {
        let path = self.path(phase);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(RecordError::Io { path, source: e }),
            _ => Ok(()),
        }
    }
}

/// The shared store's folder, when records are kept among replicas.
pub(in crate::task) fn shared_root(config: &Config) -> Option<&Path> {
    match (&config.cluster.mode, &config.cluster.checkpoint_dir) {
        (ClusterMode::Kubernetes, Some(dir)) => Some(dir.as_path()),
        _ => None,
    }
}

/// The task's folder: its slug, for a person reading the folder, and a
/// digest of its key, since two repositories whose names differ only in
/// `.` and `-` have the same slug.
pub(in crate::task) fn folder_name(item: &ItemRef) -> String {
    let digest = crate::task::state::phase_records::digest(&item.key());
    format!("{}-{}", item.slug(), &digest[..8])
}

pub(in crate::task) fn remove_folder(dir: &Path) {
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            tracing::warn!("cannot remove {}: {e}", dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Probe;
    use std::sync::Mutex;

    fn item(repo: &str) -> ItemRef {
        ItemRef::github_issue(repo, 3)
    }

    /// A task's shared records whose claim ends when `end` says.
    fn shared(root: &Path, journal: &Arc<Journal>, end: &Arc<Mutex<Option<Instant>>>) -> TaskRecords {
        let end = end.clone();
        let task = item("acme/app");
        TaskRecords {
            journal: journal.clone(),
            key: task.key(),
            shared: Some(Shared {
                dir: root.join(folder_name(&task)),
                deadline: Arc::new(move || *end.lock().unwrap()),
            }),
            writer: format!("{:016x}", fastrand::u64(..)),
        }
    }

    #[test]
    fn repositories_whose_slugs_collide_keep_their_folders_apart() {
        let (dotted, dashed) = (item("acme/my.app"), item("acme/my-app"));
        assert_eq!(dotted.slug(), dashed.slug());
        assert_ne!(folder_name(&dotted), folder_name(&dashed));
        assert!(folder_name(&dotted).starts_with(&dotted.slug()));
    }

    #[test]
    fn a_shared_record_is_read_by_the_next_holder_and_none_is_written_near_the_claims_end() {
        let (root, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let journal = Arc::new(Journal::open(state.path()).unwrap());
        let end = Arc::new(Mutex::new(Some(Instant::now() + Duration::from_secs(60))));
        let holder = shared(root.path(), &journal, &end);
        let next = shared(root.path(), &journal, &Arc::new(Mutex::new(None)));
        assert_eq!(next.read::<Probe>(), None);
        holder.save(&Probe { n: 1 }, 1 << 10).unwrap();
        assert_eq!(next.read::<Probe>(), Some(Probe { n: 1 }));
        // Over the cap: the one before stays.
        assert!(holder.save(&Probe { n: 2 }, 5).unwrap() > 5);
        assert_eq!(next.read::<Probe>(), Some(Probe { n: 1 }));
        // Within the margin of the claim's end: nothing is written or removed.
        *end.lock().unwrap() = Some(Instant::now() + Duration::from_millis(500));
        assert!(!holder.held());
        assert!(matches!(
            holder.save(&Probe { n: 3 }, 1 << 10),
            Err(RecordError::Fenced)
        ));
        holder.forget::<Probe>();
        holder.forget_all();
        assert_eq!(next.read::<Probe>(), Some(Probe { n: 1 }));
        let names: Vec<_> = std::fs::read_dir(next.shared_dir().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("probe.json")],
            "no temporary file left"
        );
        // Nothing of it went to the journal.
        assert_eq!(journal.record::<Probe>(&item("acme/app").key()).unwrap(), None);
        // A torn record is none: the phase is done again.
        std::fs::write(next.shared_dir().unwrap().join("probe.json"), b"{\"n\":").unwrap();
        assert_eq!(next.read::<Probe>(), None);
        next.forget_all();
        assert!(!next.shared_dir().unwrap().exists());
    }
}
