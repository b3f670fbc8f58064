//! Request heads from the sandbox's proxy clients, parsed strictly with
//! `httparse`: every line ends in CRLF (no bare LF or CR), no obsolete line
//! folding, at most one Host header and naming the request's own host, and
//! for plain HTTP a body of known length. Where two servers could read one
//! head differently (a second Host behind a bare LF, a second request in a
//! body), the relay refuses it rather than forward it for the server to
//! guess. Plain HTTP goes upstream as a head rebuilt from what was checked.

use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// Longest request head read from the sandbox.
pub(super) const MAX_HEAD: usize = 16 << 10;
/// Most header lines one head may have.
const MAX_HEADERS: usize = 100;
/// Headers that belong to one hop, never forwarded (RFC 9110 §7.6.1);
/// `Connection: close` is added instead.
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Why a head was refused: the status, the reason, and the host and port
/// it was for once the request line said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub target: Option<(String, u16)>,
    pub status: u16,
    pub reason: String,
}

impl Refusal {
    fn bad_request(target: Option<(String, u16)>, reason: String) -> Refusal {
        Refusal {
            target,
            status: 400,
            reason,
        }
    }
}

/// A request head from the sandbox's proxy client, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ProxyRequest {
    pub connect: bool,
    /// Lower case, without a trailing dot.
    pub host: String,
    pub port: u16,
    /// Plain HTTP: the head sent upstream (origin-form target, the Host
    /// of the target, no hop-by-hop or proxy headers, `Connection: close`
    /// so one connection carries one request).
    pub forwarded: Vec<u8>,
    /// Plain HTTP: how many bytes of body follow the head
    /// (`Content-Length`, 0 without one).
    pub body_length: u64,
}

impl ProxyRequest {
    pub(super) fn parse(head: &[u8]) -> Result<ProxyRequest, Refusal> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        let parsed = request.parse(head);
        // httparse reads the request line before the headers, so the
        // target is known even when a header is what is wrong.
        let (Some(method), Some(target)) = (request.method, request.path) else {
            let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
            let line = String::from_utf8_lossy(line);
            return Err(Refusal::bad_request(
                None,
                format!("not an HTTP proxy request: {:?}", line.trim_end()),
            ));
        };
        let connect = method == "CONNECT";
        let (host, port, origin) =
            target_of(connect, target).map_err(|reason| Refusal::bad_request(None, reason))?;
        let refuse = |reason: String| Refusal::bad_request(Some((host.clone(), port)), reason);
        check_line_breaks(head).map_err(refuse)?;
        match parsed {
            Ok(httparse::Status::Complete(end)) if end == head.len() => {}
            Ok(_) => return Err(refuse("the request head ends before its blank line".into())),
            Err(e) => return Err(refuse(format!("the request head is not valid HTTP/1.1: {e}"))),
        }
        let headers = &*request.headers;
        check_host_headers(headers, &host, if connect { 443 } else { 80 }).map_err(refuse)?;
        if connect {
            return Ok(ProxyRequest {
                connect,
                host,
                port,
                forwarded: Vec::new(),
                body_length: 0,
            });
        }
        let body_length = body_length(headers).map_err(|(status, reason)| Refusal {
            target: Some((host.clone(), port)),
            status,
            reason,
        })?;
        let version = request.version.unwrap_or(1);
        let forwarded = forwarded_head(method, &origin, version, &authority(&host, port), headers);
        Ok(ProxyRequest {
            connect,
            host,
            port,
            forwarded,
            body_length,
        })
    }
}

/// The host, port and origin-form path (empty for CONNECT) of a request
/// target: `host:port` for CONNECT, `http://authority/path` otherwise.
fn target_of(connect: bool, target: &str) -> Result<(String, u16, String), String> {
    if connect {
        let (host, port) = split_host_port(target, 443)?;
        return Ok((host, port, String::new()));
    }
    let rest = match target.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("http://") => &target[7..],
        _ => {
            return Err(format!(
                "the proxy takes CONNECT for TLS and absolute http:// targets; got {target:?}"
            ))
        }
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.contains('@') {
        return Err(format!(
            "{target:?} carries user information before the host; put credentials in a header"
        ));
    }
    let (host, port) = split_host_port(authority, 80)?;
    let path = match path.split('#').next().unwrap_or_default() {
        "" => "/".to_owned(),
        query if query.starts_with('?') => format!("/{query}"),
        path => path.to_owned(),
    };
    Ok((host, port, path))
}

/// Refuses a bare LF, a bare CR and obsolete line folding (a header line
/// that starts with a space or tab): servers disagree on each, so what
/// one takes for a header value another takes for a new header.
fn check_line_breaks(head: &[u8]) -> Result<(), String> {
    for (i, byte) in head.iter().enumerate() {
        let before = i.checked_sub(1).and_then(|j| head.get(j));
        match byte {
            b'\n' if before != Some(&b'\r') => {
                return Err(
                    "a line of the request head ends in a bare LF; every line must end in CRLF".into(),
                )
            }
            b'\r' if head.get(i + 1) != Some(&b'\n') => {
                return Err(
                    "the request head has a CR that does not end a line; every line must end in CRLF".into(),
                )
            }
            _ => {}
        }
    }
    if head
        .windows(3)
        .any(|w| w.starts_with(b"\r\n") && (w[2] == b' ' || w[2] == b'\t'))
    {
        return Err(
            "a header line starts with a space or tab (obsolete line folding); write each header on one line"
                .into(),
        );
    }
    Ok(())
}

/// One Host header at most, and it names the request's own host: on an
/// address shared with other sites (a CDN, a virtual host), the Host
/// header chooses the site.
fn check_host_headers(headers: &[httparse::Header], host: &str, default_port: u16) -> Result<(), String> {
    let mut named = headers.iter().filter(|h| h.name.eq_ignore_ascii_case("host"));
    let Some(first) = named.next() else {
        return Ok(());
    };
    let more = named.count();
    if more > 0 {
        return Err(format!(
            "the request has {} Host headers; one at most, naming {host}",
            more + 1
        ));
    }
    let value = std::str::from_utf8(first.value)
        .map_err(|_| "the Host header is not text".to_owned())?
        .trim();
    let (named, _) = split_host_port(value, default_port)?;
    if named != host {
        return Err(format!(
            "the Host header names {named}, but the request is for {host}; a request reaches the host it was allowed for only"
        ));
    }
    Ok(())
}

/// The body's length from `Content-Length`; a chunked or otherwise
/// encoded body (whose end the relay would have to find) is refused with
/// 411, as are several or unreadable lengths (400).
fn body_length(headers: &[httparse::Header]) -> Result<u64, (u16, String)> {
    if headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("transfer-encoding"))
    {
        return Err((
            411,
            "a plain-HTTP request through the proxy needs a Content-Length, not Transfer-Encoding (or use https://)"
                .into(),
        ));
    }
    let mut lengths = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-length"));
    let Some(length) = lengths.next() else {
        return Ok(0);
    };
    if lengths.next().is_some() {
        return Err((
            400,
            "the request has several Content-Length headers; send one".into(),
        ));
    }
    let bad = || {
        (
            400,
            "the Content-Length header is not a number of bytes".to_owned(),
        )
    };
    let text = std::str::from_utf8(length.value).map_err(|_| bad())?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    text.parse().map_err(|_| bad())
}

/// The head sent upstream, built from what was checked: the Host is the
/// target's (RFC 9112 §3.2.2), hop-by-hop and proxy headers are dropped
/// (and any the client's `Connection` named), `Connection: close` ends it.
fn forwarded_head(
    method: &str,
    origin: &str,
    version: u8,
    authority: &str,
    headers: &[httparse::Header],
) -> Vec<u8> {
    let mut named_hop: Vec<String> = Vec::new();
    for header in headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
    {
        let tokens = String::from_utf8_lossy(header.value);
        named_hop.extend(tokens.split(',').map(|t| t.trim().to_ascii_lowercase()));
    }
    let mut out = format!("{method} {origin} HTTP/1.{version}\r\nHost: {authority}\r\n").into_bytes();
    for header in headers {
        let name = header.name.to_ascii_lowercase();
        if name == "host"
            || name.starts_with("proxy-")
            || HOP_BY_HOP.contains(&name.as_str())
            || named_hop.contains(&name)
        {
            continue;
        }
        out.extend_from_slice(header.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(header.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// `host` or `host:port` (`[v6]:port`), the port left out when it is 80.
fn authority(host: &str, port: u16) -> String {
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    if port == 80 {
        host
    } else {
        format!("{host}:{port}")
    }
}

/// Splits `host[:port]` or `[v6][:port]`; the host lower case, without a
/// trailing dot, and made of what a name or address may hold.
pub(super) fn split_host_port(authority: &str, default_port: u16) -> Result<(String, u16), String> {
    let bad = || format!("{authority:?} is not a host with an optional port");
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        host.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad())?,
            None if after.is_empty() => default_port,
            None => return Err(bad()),
        };
        (host.to_owned(), port)
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().map_err(|_| bad())?),
            None => (authority, default_port),
        };
        let name_like = host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_');
        if !name_like {
            return Err(bad());
        }
        (host.trim_end_matches('.').to_owned(), port)
    };
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// Reads up to the end of the request head; returns the head and the
/// bytes read past it. A bare LF ends the reading early: the head is
/// refused for it, whatever comes next.
pub(super) async fn read_head<S: AsyncRead + Unpin>(client: &mut S) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if check_line_breaks(&buf).is_err() {
            return Ok((buf, Vec::new()));
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("the request head is longer than {MAX_HEAD} bytes"));
        }
        let n = client
            .read(&mut chunk)
            .await
            .map_err(|e| format!("cannot read the request: {e}"))?;
        if n == 0 {
            return Err("the connection closed before a whole request head".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The client's side of a plain-HTTP exchange: reads give the body its head
/// declared and then end; whatever the client sends after it (a second
/// request, which could name another host) is read and dropped, never
/// forwarded. Writes go to the client unchanged.
pub(super) struct OneRequest<S> {
    inner: S,
    /// Body bytes still to forward.
    remaining: u64,
    /// Bytes dropped after the body.
    pub dropped: u64,
}

impl<S> OneRequest<S> {
    pub(super) fn new(inner: S, body_length: u64) -> OneRequest<S> {
        OneRequest {
            inner,
            remaining: body_length,
            dropped: 0,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for OneRequest<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        if me.remaining == 0 {
            // Past the body: drop what comes, so that the client closing
            // still ends the exchange (and nothing half-closes upstream
            // early: some servers take that for an aborted request).
            let mut scratch = [0u8; 4096];
            loop {
                let mut dropped = ReadBuf::new(&mut scratch);
                ready!(Pin::new(&mut me.inner).poll_read(cx, &mut dropped))?;
                if dropped.filled().is_empty() {
                    return Poll::Ready(Ok(()));
                }
                me.dropped += dropped.filled().len() as u64;
            }
        }
        let room = usize::try_from(me.remaining)
            .unwrap_or(usize::MAX)
            .min(buf.remaining());
        let mut limited = ReadBuf::new(buf.initialize_unfilled_to(room));
        ready!(Pin::new(&mut me.inner).poll_read(cx, &mut limited))?;
        let read = limited.filled().len();
        buf.advance(read);
        me.remaining -= read as u64;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for OneRequest<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
