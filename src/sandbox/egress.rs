//! The egress tunnel's host end: every connection the sandbox's proxy port
//! accepts arrives here over the supervisor's session, as an HTTP proxy
//! request. The host is checked against the allowlist of the task's current
//! phase (setup or agent), resolved here, and refused when an address is
//! private (unless `sandbox.egress.allow_private`), the daemon's loopback
//! (unless `sandbox.egress.allow_loopback`), or link-local or reserved
//! (never: that is where cloud metadata services answer), so a public name
//! cannot point inside. CONNECT is tunnelled without TLS
//! interception; plain HTTP is forwarded one request per connection. Each
//! decision goes to the log, to `/metrics` and to the phase's summary.

use crate::config::HostPattern;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest request head read from the sandbox.
const MAX_HEAD: usize = 16 << 10;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections one sandbox may have open through the relay at once: one
/// sandbox must not use up the daemon's file descriptors.
pub const MAX_CONNECTIONS: usize = 256;

/// What the sandbox may reach now.
#[derive(Debug, Clone, Default)]
struct Policy {
    /// `setup` or `agent`; empty before the task says.
    phase: String,
    hosts: Vec<HostPattern>,
    /// Cancelled when the phase ends: its connections end with it (a setup
    /// process that escaped its process group keeps no tunnel into the
    /// agent phase).
    ends: tokio_util::sync::CancellationToken,
}

/// One connection's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub phase: String,
    pub host: String,
    pub port: u16,
    /// `None`: allowed; else why not.
    pub denied: Option<String>,
    pub bytes: u64,
}

/// Told of every decision as it is made (a run's transcript).
pub type DecisionObserver = Arc<dyn Fn(&Decision) + Send + Sync>;

/// The decisions made so far, and who is told of the next ones.
#[derive(Default)]
struct Record {
    made: Vec<Decision>,
    observer: Option<DecisionObserver>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("made", &self.made)
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

/// Which internal addresses an operator opened, besides the public internet.
/// Link-local and reserved addresses stay closed whatever is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach {
    /// Private networks: 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7.
    pub private: bool,
    /// The daemon host's own loopback.
    pub loopback: bool,
}

/// The host end of one sandbox's tunnel.
#[derive(Debug)]
pub struct Egress {
    policy: Mutex<Policy>,
    reach: Reach,
    decisions: Mutex<Record>,
    /// One permit per open connection ([`MAX_CONNECTIONS`]).
    open: tokio::sync::Semaphore,
    /// Where each decision is counted (the daemon's metrics).
    metrics: Arc<crate::metrics::Metrics>,
}

impl Default for Egress {
    fn default() -> Self {
        Egress {
            policy: Mutex::default(),
            reach: Reach::default(),
            decisions: Mutex::default(),
            open: tokio::sync::Semaphore::new(MAX_CONNECTIONS),
            metrics: Arc::default(),
        }
    }
}

impl Egress {
    /// A tunnel end that opens `reach` besides the public internet and
    /// counts its decisions in `metrics`.
    pub fn new(reach: Reach, metrics: Arc<crate::metrics::Metrics>) -> Arc<Egress> {
        Arc::new(Egress {
            reach,
            metrics,
            ..Egress::default()
        })
    }

    /// A sandbox's tunnel end, opening what `config` opens
    /// (`sandbox.egress.allow_private`, `allow_loopback`).
    pub fn for_sandbox(
        config: &crate::config::SandboxConfig,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Arc<Egress> {
        Egress::new(
            Reach {
                private: config.egress_allow_private,
                loopback: config.egress_allow_loopback,
            },
            metrics,
        )
    }

    /// From now on, connections are decided for `phase` against `hosts`.
    /// The connections of the phase before are closed.
    pub fn set_phase(&self, phase: &str, hosts: Vec<HostPattern>) {
        let mut policy = self.policy.lock().unwrap_or_else(|p| p.into_inner());
        policy.ends.cancel();
        *policy = Policy {
            phase: phase.to_owned(),
            hosts,
            ends: tokio_util::sync::CancellationToken::new(),
        };
    }

    pub fn decisions(&self) -> Vec<Decision> {
        self.decisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .made
            .clone()
    }

    /// From now on `observer` is told of each decision; the decisions made
    /// so far (none is in both).
    pub fn observe(&self, observer: DecisionObserver) -> Vec<Decision> {
        let mut record = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
        record.observer = Some(observer);
        record.made.clone()
    }

    /// "setup reached 3 hosts; denied 1: evil.example", or `None` when the
    /// phase made no connection.
    pub fn summary(&self, phase: &str) -> Option<String> {
        let decisions = self.decisions();
        let of_phase: Vec<&Decision> = decisions.iter().filter(|d| d.phase == phase).collect();
        if of_phase.is_empty() {
            return None;
        }
        let mut reached: Vec<&str> = of_phase
            .iter()
            .filter(|d| d.denied.is_none())
            .map(|d| d.host.as_str())
            .collect();
        reached.sort_unstable();
        reached.dedup();
        let mut denied: Vec<&str> = of_phase
            .iter()
            .filter(|d| d.denied.is_some())
            .map(|d| d.host.as_str())
            .collect();
        denied.sort_unstable();
        denied.dedup();
        let mut line = format!("{phase} reached {} host(s)", reached.len());
        if !denied.is_empty() {
            line.push_str(&format!("; denied {}: {}", denied.len(), denied.join(", ")));
        }
        Some(line)
    }

    /// Serves one tunnelled connection from the sandbox.
    pub async fn handle<S: AsyncRead + AsyncWrite + Unpin>(&self, mut client: S) {
        let Ok(_permit) = self.open.try_acquire() else {
            let phase = self
                .policy
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .phase
                .clone();
            tracing::warn!(phase = %phase, "egress refused a connection: {MAX_CONNECTIONS} are open already");
            self.metrics.egress(&phase, "too_many", 0);
            let why = format!("this sandbox has {MAX_CONNECTIONS} connections open already");
            let _ = respond(&mut client, 503, &why).await;
            return;
        };
        let Some((mut upstream, mut decision, ends)) = self.open_tunnel(&mut client).await else {
            return;
        };
        let copied = tokio::io::copy_bidirectional_with_sizes(
            &mut client,
            &mut upstream,
            forgehand_editor::supervisor::TUNNEL_BUFFER,
            forgehand_editor::supervisor::TUNNEL_BUFFER,
        );
        tokio::select! {
            copied = copied => {
                if let Ok((up, down)) = copied {
                    decision.bytes += up + down;
                }
            }
            () = ends.cancelled() => {
                tracing::info!(phase = %decision.phase, host = %decision.host, port = decision.port, "egress connection closed: its phase ended");
            }
        }
        self.record(&decision);
    }

    /// Reads the proxy request, decides, connects and answers; the open
    /// upstream and the decision so far, or `None` when the client has
    /// been answered (a refusal is recorded here).
    async fn open_tunnel<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        client: &mut S,
    ) -> Option<(
        tokio::net::TcpStream,
        Decision,
        tokio_util::sync::CancellationToken,
    )> {
        let policy = self.policy.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let parsed = match tokio::time::timeout(HEAD_TIMEOUT, read_head(client)).await {
            Ok(Ok((head, rest))) => ProxyRequest::parse(&head).map(|request| (request, head, rest)),
            Ok(Err(message)) => Err(message),
            Err(_) => Err(format!(
                "the request head did not arrive within {} s",
                HEAD_TIMEOUT.as_secs()
            )),
        };
        let (request, head, rest) = match parsed {
            Ok(parsed) => parsed,
            Err(message) => {
                tracing::warn!(phase = %policy.phase, "egress refused a malformed request: {message}");
                self.metrics.egress(&policy.phase, "malformed", 0);
                let _ = respond(client, 400, &message).await;
                return None;
            }
        };
        let mut decision = Decision {
            phase: if policy.phase.is_empty() {
                "sandbox".into()
            } else {
                policy.phase.clone()
            },
            host: request.host.clone(),
            port: request.port,
            denied: None,
            bytes: rest.len() as u64,
        };
        let mut upstream = match self.open(&policy, &request).await {
            Ok(upstream) => upstream,
            Err((status, reason)) => {
                decision.denied = Some(reason.clone());
                self.record(&decision);
                let _ = respond(client, status, &reason).await;
                return None;
            }
        };
        tracing::info!(phase = %decision.phase, host = %decision.host, port = decision.port, "egress allowed: connected");
        let started = if request.connect {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await
                .and(upstream.write_all(&rest).await)
        } else {
            upstream
                .write_all(&request.forwarded_head(&head))
                .await
                .and(upstream.write_all(&rest).await)
        };
        match started {
            // Ended already (the phase changed while this one connected): closed at once.
            Ok(()) => Some((upstream, decision, policy.ends.clone())),
            Err(_) => {
                self.record(&decision);
                None
            }
        }
    }

    /// Checks `request` against the policy and connects; the error is the
    /// status and reason the sandbox gets.
    async fn open(
        &self,
        policy: &Policy,
        request: &ProxyRequest,
    ) -> Result<tokio::net::TcpStream, (u16, String)> {
        let host = request.host.as_str();
        let port = request.port;
        if !policy.hosts.iter().any(|p| p.allows(host, port)) {
            let named = policy.hosts.iter().any(|p| p.matches_name(host));
            let why = match policy.phase.as_str() {
                "agent" if policy.hosts.is_empty() => {
                    "egress is off for the agent (network.agent in .forgehand.yaml)".to_owned()
                }
                "" => "no network before the repository's settings are read".to_owned(),
                phase if named => format!(
                    "port {port} of {host} is not on the {phase} allowlist: only 80 and 443 are open unless a port is named, as \"{host}:{port}\" (network.{phase} in .forgehand.yaml)"
                ),
                phase => {
                    format!("{host} is not on the {phase} allowlist (network.{phase} in .forgehand.yaml)")
                }
            };
            return Err((403, why));
        }
        let addresses: Vec<SocketAddr> = match tokio::net::lookup_host((host, request.port)).await {
            Ok(found) => found.collect(),
            Err(e) => return Err((502, format!("cannot resolve {host}: {e}"))),
        };
        for address in &addresses {
            let refused = match address_class(address.ip()) {
                AddressClass::Public => None,
                AddressClass::Private if self.reach.private => None,
                AddressClass::Loopback if self.reach.loopback => None,
                AddressClass::Private => {
                    Some("a private address; an operator may allow those with sandbox.egress.allow_private")
                }
                AddressClass::Loopback => {
                    Some("the daemon's loopback; an operator may allow it with sandbox.egress.allow_loopback")
                }
                AddressClass::Closed => Some(
                    "a link-local or reserved address (where cloud metadata answers), which no setting opens",
                ),
            };
            if let Some(why) = refused {
                return Err((403, format!("{host} resolves to {}, {why}", address.ip())));
            }
        }
        let mut last = format!("{host} has no address");
        for address in addresses {
            match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(address)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last = format!("cannot connect to {host} ({address}): {e}"),
                Err(_) => last = format!("{host} ({address}) did not answer in {CONNECT_TIMEOUT:?}"),
            }
        }
        Err((502, last))
    }

    fn record(&self, decision: &Decision) {
        let outcome = if decision.denied.is_some() {
            "denied"
        } else {
            "allowed"
        };
        match &decision.denied {
            None => {
                tracing::info!(phase = %decision.phase, host = %decision.host, port = decision.port, bytes = decision.bytes, "egress connection closed")
            }
            Some(why) => {
                tracing::warn!(phase = %decision.phase, host = %decision.host, port = decision.port, "egress denied: {why}")
            }
        }
        self.metrics.egress(&decision.phase, outcome, decision.bytes);
        let observer = {
            let mut record = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
            record.made.push(decision.clone());
            record.observer.clone()
        };
        if let Some(observer) = observer {
            observer(decision);
        }
    }
}

/// The environment that points a sandbox's tools at the proxy on its
/// loopback. Most tools read `HTTP(S)_PROXY` (pip, npm, cargo, go, curl,
/// git); Java's (Maven, Gradle) read the JVM's properties.
pub fn proxy_env(port: u16) -> Vec<String> {
    let url = format!("http://127.0.0.1:{port}");
    let java = format!(
        "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={port} -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort={port} -Dhttp.nonProxyHosts="
    );
    vec![
        format!("HTTP_PROXY={url}"),
        format!("HTTPS_PROXY={url}"),
        format!("http_proxy={url}"),
        format!("https_proxy={url}"),
        "NO_PROXY=".into(),
        "no_proxy=".into(),
        format!("npm_config_proxy={url}"),
        format!("npm_config_https_proxy={url}"),
        format!("CARGO_HTTP_PROXY={url}"),
        format!("JAVA_TOOL_OPTIONS={java}"),
    ]
}

/// What an address is, for the egress decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AddressClass {
    Public,
    /// The daemon host's own loopback.
    Loopback,
    /// Private networks: RFC 1918, shared (CGNAT), unique local.
    Private,
    /// Link-local (cloud metadata), unspecified, multicast, broadcast,
    /// reserved, benchmarking, IETF-assigned, and IPv6 translators into
    /// IPv4 (NAT64, 6to4) and the old site-local: never reached.
    Closed,
}

fn address_class(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            if v4.is_loopback() {
                AddressClass::Loopback
            } else if v4.is_private() || (a == 100 && (64..128).contains(&b)) {
                AddressClass::Private
            } else if v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240
            {
                AddressClass::Closed
            } else {
                AddressClass::Public
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return address_class(IpAddr::V4(v4));
            }
            let segments = v6.segments();
            let first = segments[0];
            if v6.is_loopback() {
                AddressClass::Loopback
            } else if (first & 0xfe00) == 0xfc00 {
                AddressClass::Private
            } else if v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xffc0) == 0xfe80
                || (first & 0xffc0) == 0xfec0
                || segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
                || first == 0x2002
            {
                AddressClass::Closed
            } else {
                AddressClass::Public
            }
        }
    }
}

/// Everything that is not the public internet.
pub fn is_internal(ip: IpAddr) -> bool {
    address_class(ip) != AddressClass::Public
}

/// A request head from the sandbox's proxy client.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProxyRequest {
    connect: bool,
    host: String,
    port: u16,
    /// The request line's target in origin form (`/path?q`), for plain HTTP.
    path: String,
}

impl ProxyRequest {
    fn parse(head: &[u8]) -> Result<ProxyRequest, String> {
        let text = std::str::from_utf8(head).map_err(|_| "the request head is not text".to_owned())?;
        let line = text.lines().next().unwrap_or_default();
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target), Some(_version)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("not an HTTP proxy request: {line:?}"));
        };
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = split_host_port(target, 443)?;
            check_host_header(text, &host, 443)?;
            return Ok(ProxyRequest {
                connect: true,
                host,
                port,
                path: String::new(),
            });
        }
        let Some(rest) = target.strip_prefix("http://") else {
            return Err(format!(
                "the proxy takes CONNECT for TLS and absolute http:// targets; got {target:?}"
            ));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = split_host_port(authority, 80)?;
        // The request goes to `host`; a Host header naming another site
        // would reach it on a shared address (a CDN, a virtual host).
        check_host_header(text, &host, 80)?;
        Ok(ProxyRequest {
            connect: false,
            host,
            port,
            path: path.to_owned(),
        })
    }

    /// The head sent upstream: origin-form target, no proxy headers, and
    /// `Connection: close` so one connection carries one request (a second
    /// request on it could name another host).
    fn forwarded_head(&self, head: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(head);
        let mut lines = text.split("\r\n");
        let first = lines.next().unwrap_or_default();
        let mut words = first.split_whitespace();
        let method = words.next().unwrap_or("GET");
        let _ = words.next();
        let version = words.next().unwrap_or("HTTP/1.1");
        let mut out = format!("{method} {} {version}\r\n", self.path);
        for line in lines {
            if line.is_empty() {
                continue;
            }
            let name = line
                .split(':')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            if name == "connection" || name.starts_with("proxy-") || name == "keep-alive" {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        out.push_str("Connection: close\r\n\r\n");
        out.into_bytes()
    }
}

/// Refuses a request whose `Host` header (any of them) names another host
/// than the one the request is checked and sent for.
fn check_host_header(head: &str, host: &str, default_port: u16) -> Result<(), String> {
    for line in head.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if !name.trim().eq_ignore_ascii_case("host") {
            continue;
        }
        let (named, _) = split_host_port(value.trim(), default_port)?;
        if named != host {
            return Err(format!(
                "the Host header names {named}, but the request is for {host}; a request reaches the host it was allowed for only"
            ));
        }
    }
    Ok(())
}

fn split_host_port(authority: &str, default_port: u16) -> Result<(String, u16), String> {
    let bad = || format!("{authority:?} is not a host with an optional port");
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad())?,
            None => default_port,
        };
        (host.to_owned(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), port.parse().map_err(|_| bad())?),
            None => (authority.to_owned(), default_port),
        }
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// Reads up to the end of the request head; returns the head and the bytes
/// read past it.
async fn read_head<S: AsyncRead + Unpin>(client: &mut S) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
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

async fn respond<S: AsyncWrite + Unpin>(client: &mut S, status: u16, reason: &str) -> std::io::Result<()> {
    let title = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        503 => "Service Unavailable",
        _ => "Bad Gateway",
    };
    let body = format!("forgehand egress: {reason}\n");
    let head = format!(
        "HTTP/1.1 {status} {title}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await?;
    client.write_all(body.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests;
