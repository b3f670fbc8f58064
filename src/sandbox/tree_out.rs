//! A folder coming out of a sandbox: a tar stream handed to a reader as
//! data, entry by entry. Nothing of it is unpacked onto the host's disk,
//! so no link the sandbox made has a host path to point at.

use super::SandboxError;
use futures_util::future::BoxFuture;
use std::io::Read;
use std::pin::Pin;
use std::time::Duration;
use tokio::io::AsyncRead;
use tokio_util::io::SyncIoBridge;

/// How long the sandbox's side may take to say how it ended once the
/// reader is done (a reader stopped at a cap does not wait for the copy).
const AFTER_READ: Duration = Duration::from_secs(30);

/// A tar of one folder of a sandbox, whose first path component is the
/// folder's own name.
pub struct TreeStream {
    pub tar: Pin<Box<dyn AsyncRead + Send>>,
    /// Resolves once the sandbox's side ended; it may fail after the stream
    /// began (a path that vanished, a dead tar).
    pub done: BoxFuture<'static, Result<(), SandboxError>>,
}

/// What reading a [`TreeStream`] gave: the reader's own result, and how the
/// sandbox's side ended (which explains a broken stream best).
pub struct TreeRead<T> {
    pub read: T,
    pub sandbox: Result<(), SandboxError>,
}

/// Runs `read` over `tree`'s tar on a blocking thread, beside the wait for
/// the sandbox's side. A reader that stops early drops the stream, which
/// ends the copy.
pub async fn read_tree<T: Send + 'static>(
    tree: TreeStream,
    read: impl FnOnce(&mut dyn Read) -> T + Send + 'static,
) -> Result<TreeRead<T>, SandboxError> {
    let TreeStream { tar, done } = tree;
    let mut reader = tokio::task::spawn_blocking(move || {
        let mut bridge = SyncIoBridge::new(tar);
        read(&mut bridge)
    });
    tokio::pin!(done);
    let mut ended = None;
    let read = loop {
        tokio::select! {
            read = &mut reader => break read,
            result = &mut done, if ended.is_none() => ended = Some(result),
        }
    };
    let read = read.map_err(|e| SandboxError::Io {
        action: "read a tree from the sandbox".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let sandbox = match ended {
        Some(ended) => ended,
        None => tokio::time::timeout(AFTER_READ, done).await.unwrap_or(Ok(())),
    };
    Ok(TreeRead { read, sandbox })
}
