//! Answers that would hand a credential to the sandbox are not passed on.
//! A server may echo the request (an error page, a debug endpoint, a
//! misrouted virtual host): every header and every byte of the body of an
//! answer on an intercepted connection is looked through for the
//! credentials' values, in each form the relay sends them. A header that
//! carries one replaces the answer with the relay's own 502; a body that
//! carries one ends the connection before the bytes that hold it go out.
//! The body is held back by one needle's length less one, so a value split
//! across two reads is seen whole before any of it is sent. Bytes are read
//! as they come; the relay asks for them unencoded and refuses an answer
//! that comes encoded all the same.

use crate::config::{CredentialScheme, EgressCredential};
use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, Incoming};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// The byte strings an answer must not carry.
#[derive(Default)]
pub(super) struct Needles {
    values: Vec<Vec<u8>>,
    longest: usize,
}

/// Counts only: the values are the credentials themselves.
impl std::fmt::Debug for Needles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Needles")
            .field("count", &self.values.len())
            .finish_non_exhaustive()
    }
}

impl Needles {
    /// Each credential's value, the header made of it, and for basic the
    /// password alone and the base64 form; each percent-encoded too.
    pub fn of(credentials: &[EgressCredential]) -> Needles {
        use base64::Engine;
        let mut values: Vec<Vec<u8>> = Vec::new();
        for credential in credentials {
            let value = credential.value.expose();
            values.push(value.as_bytes().to_vec());
            values.push(credential.header_value.expose().as_bytes().to_vec());
            if credential.scheme == CredentialScheme::Basic {
                let encoded = base64::engine::general_purpose::STANDARD.encode(value);
                values.push(encoded.into_bytes());
                if let Some((_, password)) = value.split_once(':') {
                    values.push(password.as_bytes().to_vec());
                }
            }
        }
        let encoded: Vec<Vec<u8>> = values
            .iter()
            .map(|v| {
                percent_encoding::percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
                    .to_string()
                    .into_bytes()
            })
            .collect();
        values.extend(encoded);
        values.retain(|v| !v.is_empty());
        values.sort();
        values.dedup();
        let longest = values.iter().map(Vec::len).max().unwrap_or(0);
        Needles { values, longest }
    }

    pub fn found_in(&self, haystack: &[u8]) -> bool {
        self.values
            .iter()
            .any(|needle| memchr::memmem::find(haystack, needle).is_some())
    }

    /// The header that carries a credential, if any.
    pub fn in_headers(&self, headers: &http::HeaderMap) -> Option<http::HeaderName> {
        headers
            .iter()
            .find(|(_, value)| self.found_in(value.as_bytes()))
            .map(|(name, _)| name.clone())
    }
}

/// Where a screened body says why it ended the connection.
pub(super) type Finding = Arc<Mutex<Option<String>>>;

/// A body passed on only up to what cannot hold a credential.
pub(super) struct Screened {
    inner: Incoming,
    needles: Arc<Needles>,
    held: BytesMut,
    trailers: Option<http::HeaderMap>,
    ended: bool,
    host: String,
    finding: Finding,
    /// The driver of a connection that takes no further request: it lives
    /// as long as the answer it reads.
    _connection: Option<tokio_util::task::AbortOnDropHandle<()>>,
}

impl Screened {
    pub fn new(
        inner: Incoming,
        needles: Arc<Needles>,
        host: &str,
        finding: Finding,
        connection: Option<tokio_util::task::AbortOnDropHandle<()>>,
    ) -> Screened {
        Screened {
            _connection: connection,
            inner,
            needles,
            held: BytesMut::new(),
            trailers: None,
            ended: false,
            host: host.to_owned(),
            finding,
        }
    }

    fn refuse(&mut self, part: &str) -> BoxError {
        self.ended = true;
        self.held.clear();
        let reason = format!(
            "the answer from {} carried a credential's value in its {part}; the connection was closed before it reached the sandbox",
            self.host
        );
        self.finding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| reason.clone());
        reason.into()
    }

    /// Takes one frame's data: the part that may go out now, if any.
    fn take(&mut self, data: Bytes) -> Result<Option<Bytes>, BoxError> {
        self.held.extend_from_slice(&data);
        if self.needles.found_in(&self.held) {
            return Err(self.refuse("body"));
        }
        let keep = self.needles.longest.saturating_sub(1);
        if self.held.len() <= keep {
            return Ok(None);
        }
        let out = self.held.split_to(self.held.len() - keep).freeze();
        Ok(Some(out))
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Body for Screened {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if this.ended {
                if !this.held.is_empty() {
                    return Poll::Ready(Some(Ok(Frame::data(this.held.split().freeze()))));
                }
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.ended = true;
                    continue;
                }
                Poll::Ready(Some(Err(e))) => {
                    this.ended = true;
                    this.held.clear();
                    return Poll::Ready(Some(Err(e.into())));
                }
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            match frame.into_data() {
                Ok(data) => match this.take(data) {
                    Ok(Some(out)) => return Poll::Ready(Some(Ok(Frame::data(out)))),
                    Ok(None) => continue,
                    Err(e) => return Poll::Ready(Some(Err(e))),
                },
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        if this.needles.in_headers(&trailers).is_some() {
                            return Poll::Ready(Some(Err(this.refuse("trailers"))));
                        }
                        this.trailers = Some(trailers);
                    }
                    this.ended = true;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.held.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        // The same bytes go out, only later: the length stays as the
        // server said, so `Content-Length` answers keep their framing.
        let mut hint = self.inner.size_hint();
        let held = self.held.len() as u64;
        // The upper bound first: a lower bound above it would panic.
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper + held);
        }
        hint.set_lower(hint.lower() + held);
        hint
    }
}
