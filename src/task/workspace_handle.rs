//! The task's host-side git work ([`Workspace`]) as the async phases hold
//! it: each operation runs on a blocking thread under the handle's lock,
//! so the async threads never wait on git.

use super::error::TaskError;
use super::workspace::Workspace;
use crate::git::history_pack::HistoryPack;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub(super) struct WorkspaceHandle {
    inner: Arc<Mutex<Workspace>>,
    history: HistoryPack,
    checkout: PathBuf,
    branch: String,
}

impl WorkspaceHandle {
    pub fn new(ws: Workspace, history: HistoryPack) -> WorkspaceHandle {
        WorkspaceHandle {
            history,
            checkout: ws.checkout_dir(),
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

    /// The history the sandbox gets beside the project.
    pub fn history(&self) -> &HistoryPack {
        &self.history
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
