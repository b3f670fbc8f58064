//! The task's host-side git work ([`Workspace`]) as the async phases hold
//! it: each operation runs on a blocking thread under the handle's lock,
//! so the async threads never wait on git.

use super::error::TaskError;
use super::workspace::Workspace;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub(super) struct WorkspaceHandle {
    inner: Arc<Mutex<Workspace>>,
    checkout: PathBuf,
    git_dir: PathBuf,
    branch: String,
}

impl WorkspaceHandle {
    pub fn new(ws: Workspace) -> WorkspaceHandle {
        WorkspaceHandle {
            checkout: ws.checkout_dir(),
            git_dir: ws.git_dir(),
            branch: ws.branch.clone(),
            inner: Arc::new(Mutex::new(ws)),
        }
    }

    /// Runs `f` on the workspace off the async threads.
    pub async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Workspace) -> T + Send + 'static,
    ) -> Result<T, TaskError> {
        let inner = self.inner.clone();
        blocking(move || f(&mut inner.lock().unwrap_or_else(|p| p.into_inner()))).await
    }

    /// The trusted clone's working tree (read, never run).
    pub fn checkout_dir(&self) -> &Path {
        &self.checkout
    }

    /// Its git folder (copied into the sandbox when the remote moved).
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The task branch.
    pub fn branch(&self) -> &str {
        &self.branch
    }
}

/// Runs `f` on a blocking thread.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, TaskError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TaskError::Other(format!("a background job failed: {e}")))
}
