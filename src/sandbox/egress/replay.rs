//! A client stream whose first bytes were read already (the ClientHello,
//! checked before the tunnel was opened): they are read again first. The
//! bytes that pass either way are counted for the egress decision.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(super) struct Replay<'a, S> {
    first: Vec<u8>,
    at: usize,
    inner: &'a mut S,
    counted: Arc<AtomicU64>,
}

impl<'a, S> Replay<'a, S> {
    pub(super) fn new(first: Vec<u8>, inner: &'a mut S) -> Replay<'a, S> {
        Replay {
            first,
            at: 0,
            inner,
            counted: Arc::default(),
        }
    }

    /// The bytes read and written so far, readable after the stream is gone.
    pub(super) fn counter(&self) -> Arc<AtomicU64> {
        self.counted.clone()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = &mut *self;
        if me.at < me.first.len() {
            let n = buf.remaining().min(me.first.len() - me.at);
            buf.put_slice(&me.first[me.at..me.at + n]);
            me.at += n;
            me.counted.fetch_add(n as u64, Ordering::Relaxed);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut *me.inner).poll_read(cx, buf);
        me.counted
            .fetch_add((buf.filled().len() - before) as u64, Ordering::Relaxed);
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<'_, S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let me = &mut *self;
        let polled = Pin::new(&mut *me.inner).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = &polled {
            me.counted.fetch_add(*n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}
