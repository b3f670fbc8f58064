//! The whole checkout, read and packed for the planners in the background
//! from the moment it is cloned (from the object database, beside the
//! checkout that writes the same files; from the files once written when
//! the branch has Git LFS files or a submodule): started when the task is
//! prepared (or a plan is made for approval), taken by the planning phase. A pack that
//! planning turns out not to need (no debate fits any window, the plan is
//! kept or was approved) is stopped when it is dropped, so it does not
//! hold the two cores the sandbox's copy and the agent's start share.

use crate::config::PlanningConfig;
use crate::planning::committed;
use crate::planning::pack::{self, Corpus, PackError, PackOptions};
use crate::planning::select;
use crate::task::workbench::workspace_handle::WorkspaceHandle;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The whole checkout, being read and packed for the planners in the
/// background from the moment it is cloned (the sandbox starts meanwhile).
pub(in crate::task) struct PackedCode {
    /// The checkout, for what a failed read says.
    root: PathBuf,
    reading: tokio::task::JoinHandle<Result<select::Whole, PackError>>,
    /// Set when the pack is no longer wanted: the blocking read, which an
    /// abort cannot reach, stops before the count (most of its time).
    stopped: Arc<AtomicBool>,
}

impl PackedCode {
    /// Starts packing the workspace's files unless planning is off: the
    /// files its HEAD commits, read from the object database at once, or
    /// (with Git LFS files or a submodule, which the checkout fetches) the
    /// checkout's once they are written.
    pub(in crate::task) fn start(config: &PlanningConfig, workspace: &WorkspaceHandle) -> Option<PackedCode> {
        if config.mode == crate::config::PlanningMode::Off {
            return None;
        }
        let options = PackOptions {
            max_file_bytes: config.max_file_bytes,
        };
        let (checkout, checked_out) = workspace.checkout();
        let committed_will_do = !workspace.has_lfs_files();
        let root = checkout.clone();
        let stopped = Arc::new(AtomicBool::new(false));
        let stop_seen = stopped.clone();
        let reading = tokio::spawn(async move {
            let begun = std::time::Instant::now();
            let failed = |detail: String| PackError::Root {
                root: checkout.clone(),
                detail,
            };
            let committed = match committed_will_do {
                true => {
                    let (dir, stop) = (checkout.clone(), stop_seen.clone());
                    tokio::task::spawn_blocking(move || read_committed(&dir, options, &stop))
                        .await
                        .map_err(|e| failed(format!("the pack stopped: {e}")))??
                }
                false => None,
            };
            let from_objects = committed.is_some();
            let corpus = match committed {
                Some(corpus) => corpus,
                None => {
                    checked_out.await.map_err(&failed)?;
                    let (dir, stop) = (checkout.clone(), stop_seen.clone());
                    tokio::task::spawn_blocking(move || read_checkout(&dir, options, &stop))
                        .await
                        .map_err(|e| failed(format!("the pack stopped: {e}")))??
                }
            };
            let read_ms = begun.elapsed().as_millis() as u64;
            let dir = checkout.clone();
            let whole = tokio::task::spawn_blocking(move || {
                unwanted(&stop_seen, &dir).map(|()| select::Whole::from_corpus(corpus))
            })
            .await
            .map_err(|e| failed(format!("the pack stopped: {e}")))??;
            tracing::debug!(
                from_objects,
                read_ms,
                counted_ms = (begun.elapsed().as_millis() as u64).saturating_sub(read_ms),
                "the planners' files are read and counted"
            );
            Ok(whole)
        });
        Some(PackedCode {
            root,
            reading,
            stopped,
        })
    }

    /// The whole checkout, packed: waits for the read to finish.
    pub(in crate::task) async fn whole(mut self) -> Result<select::Whole, PackError> {
        match (&mut self.reading).await {
            Ok(whole) => whole,
            Err(e) => Err(PackError::Root {
                root: self.root.clone(),
                detail: format!("the pack stopped: {e}"),
            }),
        }
    }
}

impl Drop for PackedCode {
    fn drop(&mut self) {
        // Nothing once the read has finished; otherwise its result would
        // go unread, so the work stops.
        self.stopped.store(true, Ordering::Relaxed);
        self.reading.abort();
    }
}

/// What the pack was asked for when it is no longer wanted.
fn unwanted(stopped: &AtomicBool, checkout: &Path) -> Result<(), PackError> {
    match stopped.load(Ordering::Relaxed) {
        true => Err(PackError::Root {
            root: checkout.to_owned(),
            detail: "the pack was no longer wanted".to_owned(),
        }),
        false => Ok(()),
    }
}

/// The files HEAD commits, unless the pack is no longer wanted or a
/// submodule's files are wanted too (`None`: the checkout has them).
fn read_committed(
    checkout: &Path,
    options: PackOptions,
    stopped: &AtomicBool,
) -> Result<Option<Corpus>, PackError> {
    unwanted(stopped, checkout)?;
    committed::read(checkout, options)
}

/// The checkout's files, once written, unless the pack is no longer wanted.
fn read_checkout(checkout: &Path, options: PackOptions, stopped: &AtomicBool) -> Result<Corpus, PackError> {
    unwanted(stopped, checkout)?;
    pack::read(checkout, &[".".to_owned()], options)
}
