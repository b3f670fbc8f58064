//! The task's host-side git work ([`Workspace`]) as the async phases hold
//! it: each operation runs on a blocking thread under the handle's lock,
//! so the async threads never wait on git. The work tree's files are
//! written in the background on a repository handle of their own; what
//! reads them (the planners' pack, the copy into the sandbox, setup's
//! snapshot key) waits for [`CheckedOut`], and the task's start does not.

use crate::git::history_pack::HistoryPack;
use crate::git::submodules::{LeftOut, Present};
use crate::git::workspace::{DeliveryError, Workspace};
use crate::task::state::error::TaskError;
use futures_util::future::{BoxFuture, FutureExt, Shared};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub(in crate::task) struct WorkspaceHandle {
    inner: Arc<Mutex<Workspace>>,
    history: HistoryReady,
    checkout: PathBuf,
    branch: String,
    checked_out: CheckedOut,
    /// Set when the handle goes: a checkout still running stops.
    cancel: Arc<AtomicBool>,
    /// What the checkout got of its Git LFS files, once it is written
    /// (`None`: the branch has none, or LFS is off).
    lfs: Option<Arc<Mutex<Option<crate::git::lfs::checkout::Fetched>>>>,
    /// The submodules whose files the work tree gets; one whose files
    /// could not be written moves to `unwritten`.
    submodules: Arc<Mutex<Submodules>>,
}

/// The fetched submodules, and those whose files could not be written.
#[derive(Default)]
struct Submodules {
    written: Vec<Present>,
    unwritten: Vec<LeftOut>,
}

/// The work tree's files being written; resolves once they are, or with why not.
pub(in crate::task) type CheckedOut = Shared<BoxFuture<'static, Result<(), String>>>;

/// The sandbox's history being packed; resolves to the pack, or with why not.
pub(in crate::task) type HistoryReady = Shared<BoxFuture<'static, Result<HistoryPack, String>>>;

/// `job` on a blocking thread, started now, as a future any number of
/// readers can wait for.
fn in_background<T: Clone + Send + Sync + 'static>(
    job: impl FnOnce() -> Result<T, DeliveryError> + Send + 'static,
) -> Shared<BoxFuture<'static, Result<T, String>>> {
    let running = tokio::task::spawn_blocking(job);
    async move {
        match running.await {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("the job stopped: {e}")),
        }
    }
    .boxed()
    .shared()
}

impl Drop for WorkspaceHandle {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

impl WorkspaceHandle {
    /// Holds `ws` and starts, in the background, writing its work tree's
    /// files (then those of the fetched `submodules`) and packing the
    /// sandbox's history (`depth` commits): what reads them waits for
    /// [`WorkspaceHandle::checked_out`] and [`WorkspaceHandle::history`].
    pub fn new(ws: Workspace, depth: Option<u32>, submodules: Vec<Present>) -> WorkspaceHandle {
        let checkout = ws.checkout_dir();
        let cancel = Arc::new(AtomicBool::new(false));
        let (dir, stop) = (checkout.clone(), cancel.clone());
        let lfs_job = ws.lfs_checkout_job();
        let lfs = lfs_job.is_some().then(|| Arc::new(Mutex::new(None)));
        let lfs_slot = lfs.clone();
        let submodules = Arc::new(Mutex::new(Submodules {
            written: submodules,
            unwritten: Vec::new(),
        }));
        let (shared, scratch) = (submodules.clone(), ws.root.join("submodules"));
        let checked_out = in_background(move || {
            Workspace::check_out(&dir, &stop)?;
            let present = shared.lock().unwrap_or_else(|p| p.into_inner()).written.clone();
            let failed = crate::git::submodules::check_out(&dir, &scratch, &present)?;
            {
                let mut shared = shared.lock().unwrap_or_else(|p| p.into_inner());
                shared
                    .written
                    .retain(|p| !failed.iter().any(|f| f.path == p.path));
                shared.unwritten = failed;
            }
            if let (Some(job), Some(slot)) = (lfs_job, lfs_slot) {
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(job()?);
            }
            Ok(())
        });
        let history = in_background(ws.start_history(depth));
        WorkspaceHandle {
            history,
            checkout,
            branch: ws.branch.clone(),
            inner: Arc::new(Mutex::new(ws)),
            checked_out,
            cancel,
            lfs,
            submodules,
        }
    }

    /// The same workspace for another attempt at the change (best of N):
    /// its going does not stop the checkout (only the task's own does).
    pub fn share(&self) -> WorkspaceHandle {
        WorkspaceHandle {
            inner: self.inner.clone(),
            history: self.history.clone(),
            checkout: self.checkout.clone(),
            branch: self.branch.clone(),
            checked_out: self.checked_out.clone(),
            cancel: Arc::new(AtomicBool::new(false)),
            lfs: self.lfs.clone(),
            submodules: self.submodules.clone(),
        }
    }

    /// What the checkout got of its Git LFS files, once written; at
    /// once `None` when the branch has none (nothing is waited for).
    pub async fn lfs_fetched(&self) -> Result<Option<crate::git::lfs::checkout::Fetched>, TaskError> {
        let Some(slot) = &self.lfs else {
            return Ok(None);
        };
        self.checked_out.clone().await.map_err(checkout_failed)?;
        Ok(slot.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// Whether the branch has Git LFS files, whose content the checkout
    /// fetches (what the commit holds of them is a pointer).
    pub fn has_lfs_files(&self) -> bool {
        self.lfs.is_some()
    }

    /// The submodules whose files the work tree holds.
    pub fn submodules(&self) -> Vec<Present> {
        self.submodules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .written
            .clone()
    }

    /// The submodules whose files could not be written, and why.
    pub fn unwritten_submodules(&self) -> Vec<LeftOut> {
        self.submodules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwritten
            .clone()
    }

    /// Runs `f` on the workspace off the async threads.
    pub async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Workspace) -> T + Send + 'static,
    ) -> Result<T, TaskError> {
        let inner = self.inner.clone();
        blocking(move || f(&mut inner.lock().unwrap_or_else(|p| p.into_inner()))).await
    }

    /// The trusted clone's working tree (read, never run), once its files
    /// are written.
    pub async fn checked_out(&self) -> Result<&Path, TaskError> {
        self.checked_out.clone().await.map_err(checkout_failed)?;
        Ok(&self.checkout)
    }

    /// The work tree's folder and what says when its files are there, for
    /// a job of its own that reads them.
    pub fn checkout(&self) -> (PathBuf, CheckedOut) {
        (self.checkout.clone(), self.checked_out.clone())
    }

    /// The history the sandbox gets beside the project, once packed.
    pub async fn history(&self) -> Result<HistoryPack, TaskError> {
        self.history
            .clone()
            .await
            .map_err(|e| TaskError::Other(format!("cannot pack the sandbox's history: {e}")))
    }

    /// The same, for a job of its own.
    pub fn history_ready(&self) -> HistoryReady {
        self.history.clone()
    }

    /// The task branch.
    pub fn branch(&self) -> &str {
        &self.branch
    }
}

/// The task's error for a work tree whose files could not be written.
pub(in crate::task) fn checkout_failed(detail: String) -> TaskError {
    TaskError::Other(format!("cannot check out the work tree: {detail}"))
}

/// Runs `f` on a blocking thread.
pub(in crate::task) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, TaskError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TaskError::Other(format!("a background job failed: {e}")))
}
