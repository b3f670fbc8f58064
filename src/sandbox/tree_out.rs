//! A folder coming out of a sandbox: a tar stream handed to a reader as
//! data, entry by entry. Nothing of it is unpacked onto the host's disk,
//! so no link the sandbox made has a host path to point at.

use super::SandboxError;
use futures_util::future::BoxFuture;
use std::future::Future;
use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::io::SyncIoBridge;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

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
/// ends the copy. A stream that stalls (no bytes for [`IDLE`]), or that
/// keeps the reader waiting once the sandbox's side has ended, fails the
/// reader's next read instead of holding the task.
pub async fn read_tree<T: Send + 'static>(
    tree: TreeStream,
    read: impl FnOnce(&mut dyn Read) -> T + Send + 'static,
) -> Result<TreeRead<T>, SandboxError> {
    read_tree_within(tree, (IDLE, AFTER_READ), read).await
}

/// `read_tree` with its waits: (no bytes for, after the sandbox's side ended).
async fn read_tree_within<T: Send + 'static>(
    tree: TreeStream,
    (idle, grace): (Duration, Duration),
    read: impl FnOnce(&mut dyn Read) -> T + Send + 'static,
) -> Result<TreeRead<T>, SandboxError> {
    let TreeStream { tar, done } = tree;
    let cancel = CancellationToken::new();
    let watched = Watched::new(tar, idle, cancel.clone());
    let mut reader = tokio::task::spawn_blocking(move || {
        let mut bridge = SyncIoBridge::new(watched);
        read(&mut bridge)
    });
    tokio::pin!(done);
    let mut ended = None;
    let read = loop {
        tokio::select! {
            read = &mut reader => break read,
            result = &mut done, if ended.is_none() => {
                ended = Some(result);
                // The stream is whole once its maker ended: the reader gets
                // a while to finish it, then its reads fail.
                let cancel = cancel.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    cancel.cancel();
                });
            }
        }
    };
    cancel.cancel();
    let read = read.map_err(|e| SandboxError::Io {
        action: "read a tree from the sandbox".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let sandbox = match ended {
        Some(ended) => ended,
        None => tokio::time::timeout(grace, done).await.unwrap_or(Ok(())),
    };
    Ok(TreeRead { read, sandbox })
}

/// No bytes from the sandbox for this long fails the copy.
const IDLE: Duration = Duration::from_secs(300);

/// The sandbox's stream, failing a read that waits past `idle` or after
/// `cancel`.
struct Watched {
    inner: Pin<Box<dyn AsyncRead + Send>>,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl Watched {
    fn new(inner: Pin<Box<dyn AsyncRead + Send>>, idle: Duration, cancel: CancellationToken) -> Watched {
        Watched {
            inner,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            cancelled: Box::pin(cancel.cancelled_owned()),
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        if let Poll::Ready(result) = this.inner.as_mut().poll_read(cx, buf) {
            if buf.filled().len() > before {
                let next = tokio::time::Instant::now() + this.idle;
                this.timer.as_mut().reset(next);
            }
            return Poll::Ready(result);
        }
        if this.cancelled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the sandbox's side ended but its stream did not",
            )));
        }
        if this.timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no data came from the sandbox for {} s", this.idle.as_secs()),
            )));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use futures_util::FutureExt;

    /// A stream that sends a few bytes and then nothing, never ending.
    fn stalled() -> Pin<Box<dyn AsyncRead + Send>> {
        let (mut writer, reader) = tokio::io::duplex(64);
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            writer.write_all(b"partial").await.unwrap();
            std::future::pending::<()>().await;
            drop(writer);
        });
        Box::pin(reader)
    }

    #[tokio::test]
    async fn a_stream_that_stalls_fails_the_read_instead_of_holding_the_task() {
        let tree = TreeStream {
            tar: stalled(),
            done: async { Ok(()) }.boxed(),
        };
        let waits = (Duration::from_millis(200), Duration::from_secs(60));
        let read = read_tree_within(tree, waits, |input| {
            let mut all = Vec::new();
            input.read_to_end(&mut all).map(|_| all)
        })
        .await
        .unwrap();
        let err = read.read.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
    }

    #[tokio::test]
    async fn a_stream_that_outlives_its_makers_end_fails_after_the_grace() {
        let tree = TreeStream {
            tar: stalled(),
            done: async {
                Err(SandboxError::CopyOut {
                    path: "/workspace/project".into(),
                    detail: "the copy did not end in time".into(),
                })
            }
            .boxed(),
        };
        let waits = (Duration::from_secs(60), Duration::from_millis(200));
        let read = read_tree_within(tree, waits, |input| {
            let mut all = Vec::new();
            input.read_to_end(&mut all).map(|_| all)
        })
        .await
        .unwrap();
        let err = read.read.unwrap_err();
        assert!(err.to_string().contains("ended but its stream did not"), "{err}");
        assert!(read.sandbox.is_err());
    }
}
