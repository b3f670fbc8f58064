//! The egress tunnel's host end: every connection the sandbox's proxy port
//! accepts arrives here over the supervisor's session, as an HTTP proxy
//! request. The head is parsed strictly ([`http_head`]); the host is
//! checked against the allowlist of the task's current phase (setup or
//! agent), resolved here, and refused when an address is private (unless
//! `sandbox.egress.allow_private`), the daemon's loopback (unless
//! `sandbox.egress.allow_loopback`), or a cloud metadata, link-local or
//! reserved one (never, whatever is set: [`address`]), so a public name
//! cannot point inside. CONNECT goes to TLS ports only
//! (`sandbox.egress.tls_ports`) and must begin with a ClientHello naming
//! the allowed host ([`tls_sni`]); the TLS inside is not intercepted.
//! Plain HTTP is forwarded one request per connection. Each decision goes
//! to the log, to `/metrics`, to the observer (the run's transcript) and to
//! the phase's summary. For the hosts an operator gave a credential for,
//! the relay ends the TLS itself and adds the credential ([`intercept`]).

mod address;
mod authority;
mod http_head;
mod intercept;
mod replay;
mod request_check;
mod screen;
mod tls_sni;
pub mod trust;

pub use authority::AuthorityError;
pub use intercept::SandboxCredentials;

pub use address::is_internal;

use crate::config::HostPattern;
use http_head::{OneRequest, ProxyRequest, Refusal};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tls_sni::HelloAnswer;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections one sandbox may have open through the relay at once: one
/// sandbox must not use up the daemon's file descriptors.
pub const MAX_CONNECTIONS: usize = 256;
/// The ports CONNECT may reach unless the operator names others
/// (`sandbox.egress.tls_ports`).
pub const DEFAULT_TLS_PORTS: [u16; 1] = [443];

/// What the sandbox may reach now.
#[derive(Debug, Clone, Default)]
struct Policy {
    /// `setup` or `agent`; empty before the task says.
    phase: String,
    hosts: Vec<HostPattern>,
    /// No credential is added in this phase, whatever
    /// `sandbox.egress.credentials` says (setup running code forgehand
    /// does not trust: [`Egress::set_phase_without_credentials`]).
    withhold_credentials: bool,
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
    /// The name of the credential the relay added (never its value).
    pub credential: Option<String>,
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
/// Cloud metadata, link-local and reserved addresses stay closed whatever
/// is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach {
    /// Private networks: 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7
    /// (the metadata services inside them excepted).
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
    /// The ports CONNECT may reach ([`DEFAULT_TLS_PORTS`]).
    tls_ports: Vec<u16>,
    /// The credentials this sandbox's repository may use, and its CA.
    credentials: Option<Arc<SandboxCredentials>>,
}

impl Default for Egress {
    fn default() -> Self {
        Egress {
            policy: Mutex::default(),
            reach: Reach::default(),
            decisions: Mutex::default(),
            open: tokio::sync::Semaphore::new(MAX_CONNECTIONS),
            metrics: Arc::default(),
            tls_ports: DEFAULT_TLS_PORTS.to_vec(),
            credentials: None,
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

    /// As [`Egress::new`], with CONNECT open to `tls_ports` rather than
    /// [`DEFAULT_TLS_PORTS`].
    pub fn with_tls_ports(
        reach: Reach,
        tls_ports: Vec<u16>,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Arc<Egress> {
        Arc::new(Egress {
            reach,
            metrics,
            tls_ports,
            ..Egress::default()
        })
    }

    /// A sandbox's tunnel end, opening what `config` opens
    /// (`sandbox.egress.allow_private`, `allow_loopback`, `tls_ports`),
    /// with the credentials `repository` may use (none: `None`).
    pub fn for_sandbox(
        config: &crate::config::SandboxConfig,
        metrics: Arc<crate::metrics::Metrics>,
        repository: Option<&str>,
    ) -> Result<Arc<Egress>, AuthorityError> {
        let credentials = match repository {
            Some(repository) => SandboxCredentials::for_repository(&config.egress_credentials, repository)?,
            None => None,
        };
        Ok(Arc::new(Egress {
            reach: Reach {
                private: config.egress_allow_private,
                loopback: config.egress_allow_loopback,
            },
            metrics,
            tls_ports: config.egress_tls_ports.clone(),
            credentials: credentials.map(Arc::new),
            ..Egress::default()
        }))
    }

    /// The sandbox's CA certificate (PEM) when the relay adds credentials
    /// for it: the sandbox must trust it ([`trust`]).
    pub fn ca_pem(&self) -> Option<&str> {
        self.credentials.as_deref().map(SandboxCredentials::ca_pem)
    }

    /// From now on, connections are decided for `phase` against `hosts`.
    /// The connections of the phase before are closed.
    pub fn set_phase(&self, phase: &str, hosts: Vec<HostPattern>) {
        self.enter(phase, hosts, false);
    }

    /// As [`Egress::set_phase`], but no credential is added in this phase:
    /// the hosts with a credential get a plain tunnel, as any other host.
    pub fn set_phase_without_credentials(&self, phase: &str, hosts: Vec<HostPattern>) {
        self.enter(phase, hosts, true);
    }

    /// Whether the relay adds credentials for this sandbox in some phase.
    pub fn adds_credentials(&self) -> bool {
        self.credentials.is_some()
    }

    fn enter(&self, phase: &str, hosts: Vec<HostPattern>, withhold_credentials: bool) {
        let mut policy = self.policy.lock().unwrap_or_else(|p| p.into_inner());
        policy.ends.cancel();
        *policy = Policy {
            phase: phase.to_owned(),
            hosts,
            withhold_credentials,
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
        let Some(tunnel) = self.open_tunnel(&mut client).await else {
            return;
        };
        let Tunnel {
            mut upstream,
            mut decision,
            ends,
            body_left,
        } = tunnel;
        let (phase, host) = (decision.phase.clone(), decision.host.clone());
        let copied = async {
            let Some(body_left) = body_left else {
                return relay(&mut client, &mut upstream).await;
            };
            let mut one_request = OneRequest::new(&mut client, body_left);
            let copied = relay(&mut one_request, &mut upstream).await;
            if one_request.dropped > 0 {
                tracing::warn!(phase = %phase, host = %host, "egress dropped {} bytes sent after the request: a connection carries one request", one_request.dropped);
            }
            copied
        };
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

    /// Reads the proxy request, decides, connects and starts the exchange
    /// (for CONNECT: checks the ClientHello); `None` when the client has
    /// been answered instead (a refusal is recorded here).
    async fn open_tunnel<S: AsyncRead + AsyncWrite + Unpin>(&self, client: &mut S) -> Option<Tunnel> {
        let policy = self.policy.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let parsed = match tokio::time::timeout(HEAD_TIMEOUT, http_head::read_head(client)).await {
            Ok(Ok((head, rest))) => ProxyRequest::parse(&head).map(|request| (request, rest)),
            Ok(Err(reason)) => Err(Refusal {
                target: None,
                status: 400,
                reason,
            }),
            Err(_) => Err(Refusal {
                target: None,
                status: 400,
                reason: format!(
                    "the request head did not arrive within {} s",
                    HEAD_TIMEOUT.as_secs()
                ),
            }),
        };
        let (request, rest) = match parsed {
            Ok(parsed) => parsed,
            Err(refusal) => {
                self.refuse_head(&policy, client, refusal).await;
                return None;
            }
        };
        let mut decision = Decision {
            phase: phase_name(&policy),
            host: request.host.clone(),
            port: request.port,
            denied: None,
            bytes: 0,
            credential: None,
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
        if request.connect
            && !policy.withhold_credentials
            && self.intercepts(&policy, &request.host, request.port)
        {
            self.intercept(&policy, client, &request, upstream, decision, rest)
                .await;
            return None;
        }
        let body_left = if request.connect {
            if !self.start_tls(client, &mut upstream, &mut decision, rest).await {
                return None;
            }
            None
        } else {
            Some(
                self.start_plain(&mut upstream, &mut decision, &request, &rest)
                    .await?,
            )
        };
        tracing::info!(phase = %decision.phase, host = %decision.host, port = decision.port, "egress allowed: connected");
        // When the phase ended meanwhile, `ends` is cancelled already and
        // the relay closes this at once.
        Some(Tunnel {
            upstream,
            decision,
            ends: policy.ends.clone(),
            body_left,
        })
    }

    /// Sends a plain-HTTP request upstream: the rebuilt head and as much of
    /// the body as came with it. The body bytes still to come, or `None`
    /// when the upstream could not be written (recorded here).
    async fn start_plain(
        &self,
        upstream: &mut tokio::net::TcpStream,
        decision: &mut Decision,
        request: &ProxyRequest,
        rest: &[u8],
    ) -> Option<u64> {
        let body_now = rest
            .len()
            .min(usize::try_from(request.body_length).unwrap_or(usize::MAX));
        if rest.len() > body_now {
            tracing::warn!(phase = %decision.phase, host = %decision.host, "egress dropped {} bytes sent after the request: a connection carries one request", rest.len() - body_now);
        }
        decision.bytes = body_now as u64;
        let sent = upstream.write_all(&request.forwarded).await;
        if sent.and(upstream.write_all(&rest[..body_now]).await).is_err() {
            self.record(decision);
            return None;
        }
        Some(request.body_length - body_now as u64)
    }

    /// Answers a refused request head; recorded as a decision when its
    /// target is known, else counted as malformed.
    async fn refuse_head<S: AsyncWrite + Unpin>(&self, policy: &Policy, client: &mut S, refusal: Refusal) {
        match refusal.target {
            Some((host, port)) => self.record(&Decision {
                phase: phase_name(policy),
                host,
                port,
                denied: Some(refusal.reason.clone()),
                bytes: 0,
                credential: None,
            }),
            None => {
                tracing::warn!(phase = %policy.phase, "egress refused a malformed request: {}", refusal.reason);
                self.metrics.egress(&policy.phase, "malformed", 0);
            }
        }
        let _ = respond(client, refusal.status, &refusal.reason).await;
    }

    /// Opens a CONNECT tunnel to the client, then reads its ClientHello and
    /// sends it upstream when it names the tunnel's host. `false`: the
    /// tunnel ends here (a refusal is recorded and the client told).
    async fn start_tls<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        client: &mut S,
        upstream: &mut tokio::net::TcpStream,
        decision: &mut Decision,
        rest: Vec<u8>,
    ) -> bool {
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_err()
        {
            self.record(decision);
            return false;
        }
        let refusal = match tls_sni::read_client_hello(client, rest).await {
            Ok(hello) => match tls_sni::server_name_refusal(&decision.host, hello.server_name.as_deref()) {
                None => {
                    decision.bytes = hello.bytes.len() as u64;
                    if upstream.write_all(&hello.bytes).await.is_err() {
                        self.record(decision);
                        return false;
                    }
                    return true;
                }
                Some(reason) => tls_sni::HelloRefusal {
                    reason,
                    answer: HelloAnswer::Alert(&tls_sni::ACCESS_DENIED_ALERT),
                },
            },
            Err(refusal) => refusal,
        };
        decision.denied = Some(refusal.reason.clone());
        self.record(decision);
        let _ = match refusal.answer {
            HelloAnswer::Http => respond(client, 400, &refusal.reason).await,
            HelloAnswer::Alert(alert) => match client.write_all(alert).await {
                Ok(()) => client.shutdown().await,
                Err(e) => Err(e),
            },
            HelloAnswer::Nothing => Ok(()),
        };
        false
    }

    /// Checks `request` against the policy and connects; the error is the
    /// status and reason the sandbox gets.
    async fn open(
        &self,
        policy: &Policy,
        request: &ProxyRequest,
    ) -> Result<tokio::net::TcpStream, (u16, String)> {
        self.check_target(policy, request)?;
        let host = request.host.as_str();
        let addresses: Vec<SocketAddr> = match tokio::net::lookup_host((host, request.port)).await {
            Ok(found) => found.collect(),
            Err(e) => return Err((502, format!("cannot resolve {host}: {e}"))),
        };
        for address in &addresses {
            if let Some(why) = self.reach.refusal(address.ip()) {
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

    /// The checks made before a name is resolved: metadata names, the
    /// phase's allowlist, and TLS ports for CONNECT.
    fn check_target(&self, policy: &Policy, request: &ProxyRequest) -> Result<(), (u16, String)> {
        let host = request.host.as_str();
        let port = request.port;
        if address::is_metadata_name(host) {
            return Err((
                403,
                format!("{host} is a cloud metadata service, which no setting opens"),
            ));
        }
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
        if request.connect && !self.tls_ports.contains(&port) {
            let open: Vec<String> = self.tls_ports.iter().map(u16::to_string).collect();
            return Err((
                403,
                format!(
                    "CONNECT carries TLS only, to the ports in sandbox.egress.tls_ports ({}), not {port}: send plain HTTP to the proxy as an http://{host}:{port}/ request, or an operator may add {port} to sandbox.egress.tls_ports",
                    open.join(", ")
                ),
            ));
        }
        Ok(())
    }

    fn record(&self, decision: &Decision) {
        let outcome = if decision.denied.is_some() {
            "denied"
        } else {
            "allowed"
        };
        match &decision.denied {
            None => match &decision.credential {
                Some(name) => {
                    tracing::info!(phase = %decision.phase, host = %decision.host, port = decision.port, bytes = decision.bytes, credential = %name, "egress connection closed: credential added")
                }
                None => {
                    tracing::info!(phase = %decision.phase, host = %decision.host, port = decision.port, bytes = decision.bytes, "egress connection closed")
                }
            },
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

/// An open upstream connection and what is known of it, ready to relay.
struct Tunnel {
    upstream: tokio::net::TcpStream,
    decision: Decision,
    /// Cancelled when the phase that opened it ends.
    ends: tokio_util::sync::CancellationToken,
    /// Plain HTTP: the body bytes still to come from the client, after
    /// which nothing more is forwarded; `None` for a CONNECT tunnel.
    body_left: Option<u64>,
}

/// The phase a decision is recorded for (`sandbox` before the task says).
fn phase_name(policy: &Policy) -> String {
    if policy.phase.is_empty() {
        "sandbox".into()
    } else {
        policy.phase.clone()
    }
}

/// Copies both ways until both ends are done.
async fn relay<C: AsyncRead + AsyncWrite + Unpin>(
    client: &mut C,
    upstream: &mut tokio::net::TcpStream,
) -> std::io::Result<(u64, u64)> {
    tokio::io::copy_bidirectional_with_sizes(
        client,
        upstream,
        forgehand_editor::supervisor::TUNNEL_BUFFER,
        forgehand_editor::supervisor::TUNNEL_BUFFER,
    )
    .await
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

async fn respond<S: AsyncWrite + Unpin>(client: &mut S, status: u16, reason: &str) -> std::io::Result<()> {
    let title = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        411 => "Length Required",
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
