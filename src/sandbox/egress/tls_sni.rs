//! The first bytes of a CONNECT tunnel: they must be a TLS ClientHello that
//! names (SNI) the host the tunnel was allowed for. A server on an address
//! shared with other sites (a CDN) picks the site by that name, so a
//! ClientHello naming another host, or none, would reach a site nobody
//! allowed. The hello is read whole (rustls parses it) before any of it goes
//! upstream, within a cap on its size and on the time it may take. What the
//! TLS session carries after that is end to end: the relay does not
//! intercept it.

use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Most bytes read while waiting for a whole ClientHello (a usual one is
/// under 2 KiB; one with post-quantum key shares and a ticket under 8 KiB).
pub(super) const MAX_HELLO: usize = 32 << 10;
/// How long the client may take to send its ClientHello once the tunnel is
/// open.
pub(super) const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// The TLS record type of handshake messages.
const HANDSHAKE_RECORD: u8 = 0x16;

/// A fatal TLS alert, `access_denied` (RFC 8446 §6.2), answered to a
/// ClientHello that names the wrong host or none.
pub(super) const ACCESS_DENIED_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49];
/// A fatal TLS alert, `decode_error`, answered to a ClientHello that does
/// not parse.
pub(super) const DECODE_ERROR_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 50];

/// Why a tunnel's first bytes were refused, and how the client is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HelloRefusal {
    pub reason: String,
    pub answer: HelloAnswer,
}

/// What the client gets back: it spoke plain text (an HTTP answer reaches
/// it), or TLS (an alert does), or nothing can be said (it closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HelloAnswer {
    Http,
    Alert(&'static [u8; 7]),
    Nothing,
}

/// The ClientHello as it came (to be sent upstream unchanged) and the
/// server name it carries.
#[derive(Debug)]
pub(super) struct ClientHello {
    pub bytes: Vec<u8>,
    pub server_name: Option<String>,
}

/// Reads the tunnel's first bytes (`already`: those that came with the
/// request head) until they hold a whole ClientHello.
pub(super) async fn read_client_hello<S: AsyncRead + Unpin>(
    client: &mut S,
    already: Vec<u8>,
) -> Result<ClientHello, HelloRefusal> {
    match tokio::time::timeout(HELLO_TIMEOUT, read_until_hello(client, already)).await {
        Ok(read) => read,
        Err(_) => Err(HelloRefusal {
            reason: format!(
                "no TLS ClientHello came through the tunnel within {} s",
                HELLO_TIMEOUT.as_secs()
            ),
            answer: HelloAnswer::Alert(&DECODE_ERROR_ALERT),
        }),
    }
}

async fn read_until_hello<S: AsyncRead + Unpin>(
    client: &mut S,
    mut seen: Vec<u8>,
) -> Result<ClientHello, HelloRefusal> {
    let malformed = |reason: String| HelloRefusal {
        reason,
        answer: HelloAnswer::Alert(&DECODE_ERROR_ALERT),
    };
    let mut acceptor = rustls::server::Acceptor::default();
    let mut fed = 0;
    let mut chunk = [0u8; 4096];
    loop {
        if seen.first().is_some_and(|b| *b != HANDSHAKE_RECORD) {
            return Err(HelloRefusal {
                reason: "the tunnel began with something other than a TLS ClientHello; CONNECT carries TLS only (send plain HTTP to the proxy as an http:// request)".into(),
                answer: HelloAnswer::Http,
            });
        }
        // rustls takes a record's worth at a time: it sees each piece
        // before it is given the next.
        while fed < seen.len() {
            let mut unread = &seen[fed..];
            let taken = match acceptor.read_tls(&mut unread) {
                Ok(0) => break,
                Ok(taken) => taken,
                Err(e) => return Err(malformed(format!("the TLS ClientHello could not be read: {e}"))),
            };
            fed += taken;
            match acceptor.accept() {
                Ok(Some(accepted)) => {
                    let server_name = accepted.client_hello().server_name().map(str::to_owned);
                    return Ok(ClientHello {
                        bytes: seen,
                        server_name,
                    });
                }
                Ok(None) => {}
                Err((e, _)) => return Err(malformed(format!("the TLS ClientHello is malformed: {e}"))),
            }
        }
        if seen.len() >= MAX_HELLO {
            return Err(malformed(format!(
                "the TLS ClientHello is longer than {MAX_HELLO} bytes"
            )));
        }
        let n = client.read(&mut chunk).await.map_err(|e| HelloRefusal {
            reason: format!("cannot read the tunnel: {e}"),
            answer: HelloAnswer::Nothing,
        })?;
        if n == 0 {
            return Err(HelloRefusal {
                reason: "the tunnel closed before a whole TLS ClientHello".into(),
                answer: HelloAnswer::Nothing,
            });
        }
        seen.extend_from_slice(&chunk[..n]);
    }
}

/// Why a ClientHello naming `server_name` may not go to `host`, or `None`
/// when it may. A tunnel to a name needs that very name (a wildcard on
/// the allowlist does not widen it). A tunnel to an address needs none:
/// TLS clients send no name for an address (RFC 6066 §3), and a name
/// there would choose another site on that address.
pub(super) fn server_name_refusal(host: &str, server_name: Option<&str>) -> Option<String> {
    let host = host.trim_end_matches('.');
    let is_address = host.parse::<std::net::IpAddr>().is_ok();
    match server_name.map(|name| name.trim_end_matches('.')) {
        None if is_address => None,
        None => Some(format!(
            "the TLS ClientHello names no server (SNI); a tunnel to {host} must name {host}"
        )),
        Some(name) if is_address => Some(format!(
            "the TLS ClientHello names {name}, but the tunnel is to the address {host}, which takes no name; TLS reaches the host it was allowed for only"
        )),
        Some(name) if name.eq_ignore_ascii_case(host) => None,
        Some(name) => Some(format!(
            "the TLS ClientHello names {name}, but the tunnel was allowed for {host}; TLS reaches the host it was allowed for only"
        )),
    }
}
