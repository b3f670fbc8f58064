//! Credentials added on the host. For a host the operator gave a
//! credential for (`sandbox.egress.credentials`), and only in the phases
//! and for the repositories named there, the relay ends the sandbox's TLS
//! itself: it shows a certificate for that host issued by the sandbox's
//! own CA ([`Authority`]), reads the HTTP/1.1 requests inside, forwards
//! only those that name nothing but that host ([`request_check`]), sets
//! the credential's header on those under its path and of its methods,
//! and sends them on over its own TLS to the real host, verified with the
//! host's roots and `sandbox.egress.extra_ca_file`. Nothing is sent to a
//! host whose certificate does not verify. Answers come back without
//! `WWW-Authenticate`, and never with a credential's value in them
//! ([`screen`]). Every other host stays a plain tunnel ([`super::tls_sni`]).
//!
//! [`request_check`]: super::request_check
//! [`screen`]: super::screen

use super::authority::{Authority, AuthorityError};
use super::http_head::ProxyRequest;
use super::replay::Replay;
use super::request_check::{self, Checked};
use super::screen::{Finding, Needles, Screened};
use super::{tls_sni, Decision, Egress, Policy};
use crate::config::{EgressCredential, EgressCredentials};
use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_rustls::client::TlsStream;

/// How long the real host may take to finish its TLS handshake.
const UPSTREAM_HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(30);

type Body = Either<Screened, Full<Bytes>>;

/// One sandbox's credentials: those its repository may use, its CA, and
/// how the relay verifies the real hosts.
pub struct SandboxCredentials {
    credentials: Vec<EgressCredential>,
    authority: Authority,
    upstream: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for SandboxCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.credentials.iter().map(|c| c.name.as_str()).collect();
        f.debug_struct("SandboxCredentials")
            .field("credentials", &names)
            .finish_non_exhaustive()
    }
}

impl SandboxCredentials {
    /// The credentials of `config` that `repository` may use, with a new
    /// CA; `None` when it may use none (its sandbox gets no CA).
    pub fn for_repository(
        config: &EgressCredentials,
        repository: &str,
    ) -> Result<Option<SandboxCredentials>, AuthorityError> {
        let credentials = config.for_repository(repository);
        if credentials.is_empty() {
            return Ok(None);
        }
        Ok(Some(SandboxCredentials {
            credentials,
            authority: Authority::new()?,
            upstream: upstream_config(&config.extra_roots)?,
        }))
    }

    /// The sandbox's CA certificate (PEM): public, for its trust store.
    pub fn ca_pem(&self) -> &str {
        self.authority.certificate_pem()
    }

    /// Whether a tunnel to `host`:`port` in `phase` is to be opened here.
    fn applies(&self, phase: &str, host: &str, port: u16) -> bool {
        self.credentials
            .iter()
            .any(|c| c.in_phase(phase) && c.for_host(host, port))
    }

    /// The credential a request for `path` with `method` gets (the
    /// longest prefix wins). `path` is normalised.
    fn for_request(
        &self,
        phase: &str,
        host: &str,
        port: u16,
        method: &http::Method,
        path: &str,
    ) -> Option<&EgressCredential> {
        self.credentials
            .iter()
            .filter(|c| c.in_phase(phase) && c.for_host(host, port))
            .filter(|c| c.allows_method(method) && c.covers_path(path))
            .max_by_key(|c| c.path_prefix.as_deref().map_or(0, str::len))
    }
}

/// The relay's TLS client: the host's roots and the operator's extra ones.
fn upstream_config(extra_roots: &[Vec<u8>]) -> Result<Arc<rustls::ClientConfig>, AuthorityError> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::warn!("the egress relay could not read one of the host's root certificates: {error}");
    }
    roots.add_parsable_certificates(native.certs);
    roots.add_parsable_certificates(
        extra_roots
            .iter()
            .map(|der| rustls::pki_types::CertificateDer::from(der.clone())),
    );
    let mut config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

impl Egress {
    /// Whether this CONNECT is answered here, with the credential added.
    pub(super) fn intercepts(&self, policy: &Policy, host: &str, port: u16) -> bool {
        self.credentials
            .as_ref()
            .is_some_and(|c| c.applies(&policy.phase, host, port))
    }

    /// Serves a CONNECT tunnel to a host with a credential: the ClientHello
    /// is checked as for any tunnel, the real host's certificate verified,
    /// then requests relayed until either side closes or the phase ends.
    /// The decision is recorded here.
    pub(super) async fn intercept<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        policy: &Policy,
        client: &mut S,
        target: &ProxyRequest,
        upstream: tokio::net::TcpStream,
        mut decision: Decision,
        rest: Vec<u8>,
    ) {
        let Some(credentials) = self.credentials.as_deref() else {
            return;
        };
        let hello = match checked_hello(client, rest, &decision.host).await {
            Ok(hello) => hello,
            Err(reason) => {
                decision.denied = reason;
                self.record(&decision);
                return;
            }
        };
        let upstream = verified_upstream(credentials, &decision.host, upstream).await;
        let (tls, counted) = match accept_sandbox(credentials, &decision.host, hello, client).await {
            Ok(accepted) => accepted,
            Err(reason) => {
                decision.denied = Some(reason);
                self.record(&decision);
                return;
            }
        };
        let mut relay = Relay {
            egress: self,
            policy,
            target,
            credentials,
            phase: policy.phase.clone(),
            host: decision.host.clone(),
            port: decision.port,
            upstream: tokio::sync::Mutex::new(None),
            refused: None,
            used: std::sync::Mutex::new(Vec::new()),
            needles: Arc::new(Needles::of(&credentials.credentials)),
            finding: Finding::default(),
        };
        match upstream {
            Ok(tls) => match speak_http(tls, &decision.host).await {
                Ok(connection) => *relay.upstream.get_mut() = Some(connection),
                Err(reason) => relay.refused = Some(reason),
            },
            Err(reason) => relay.refused = Some(reason),
        }
        let served = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .serve_connection(
                TokioIo::new(tls),
                hyper::service::service_fn(|request| relay.forward(request)),
            );
        tokio::select! {
            _ = served => {}
            () = policy.ends.cancelled() => {
                tracing::info!(phase = %decision.phase, host = %decision.host, port = decision.port, "egress connection closed: its phase ended");
            }
        }
        decision.bytes = counted.load(Ordering::Relaxed);
        let used = relay.used.lock().unwrap_or_else(|p| p.into_inner()).join(", ");
        decision.credential = (!used.is_empty()).then_some(used);
        let found = relay.finding.lock().unwrap_or_else(|p| p.into_inner()).take();
        decision.denied = relay.refused.or(found);
        self.record(&decision);
    }
}

/// Answers the CONNECT and reads the ClientHello, which must name `host`
/// as for any tunnel; its bytes, or why not (`None`: the client left).
async fn checked_hello<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut S,
    rest: Vec<u8>,
    host: &str,
) -> Result<Vec<u8>, Option<String>> {
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .map_err(|_| None)?;
    let hello = tls_sni::read_client_hello(client, rest)
        .await
        .map_err(|refusal| Some(refusal.reason))?;
    if let Some(reason) = tls_sni::server_name_refusal(host, hello.server_name.as_deref()) {
        let _ = client.write_all(&tls_sni::ACCESS_DENIED_ALERT).await;
        return Err(Some(reason));
    }
    Ok(hello.bytes)
}

/// The sandbox's TLS, ended here with the certificate for `host` from the
/// sandbox's CA, and the counter of the bytes it carries.
async fn accept_sandbox<'c, S: AsyncRead + AsyncWrite + Unpin>(
    credentials: &SandboxCredentials,
    host: &str,
    hello: Vec<u8>,
    client: &'c mut S,
) -> Result<
    (
        tokio_rustls::server::TlsStream<Replay<'c, S>>,
        Arc<std::sync::atomic::AtomicU64>,
    ),
    String,
> {
    let server = credentials
        .authority
        .server_config(host)
        .map_err(|e| format!("the relay could not make a certificate for {host}: {e}"))?;
    let replay = Replay::new(hello, client);
    let counted = replay.counter();
    match tokio_rustls::TlsAcceptor::from(server).accept(replay).await {
        Ok(tls) => Ok((tls, counted)),
        Err(e) => Err(format!(
            "the sandbox's TLS client did not accept the relay's certificate for {host} ({e}); it must trust the CA in $SSL_CERT_FILE"
        )),
    }
}

/// The real host's TLS, verified; else why not (the sandbox is told, and
/// nothing is sent).
async fn verified_upstream(
    credentials: &SandboxCredentials,
    host: &str,
    upstream: tokio::net::TcpStream,
) -> Result<TlsStream<tokio::net::TcpStream>, String> {
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|e| format!("{host} is not a name TLS can verify: {e}"))?;
    // Requests are small writes answered at once: Nagle's algorithm would
    // hold each behind the server's delayed acknowledgement.
    let _ = upstream.set_nodelay(true);
    let connector = tokio_rustls::TlsConnector::from(credentials.upstream.clone());
    match tokio::time::timeout(UPSTREAM_HANDSHAKE, connector.connect(name, upstream)).await {
        Ok(Ok(tls)) => Ok(tls),
        Ok(Err(e)) => Err(format!(
            "the certificate of {host} does not verify ({e}); no credential was sent. An operator may add its CA in sandbox.egress.extra_ca_file"
        )),
        Err(_) => Err(format!(
            "{host} did not finish its TLS handshake in {} s",
            UPSTREAM_HANDSHAKE.as_secs()
        )),
    }
}

/// The requests of one terminated tunnel and the real host's connection.
struct Relay<'a> {
    egress: &'a Egress,
    policy: &'a Policy,
    /// The CONNECT request, to connect again when the host closes.
    target: &'a ProxyRequest,
    credentials: &'a SandboxCredentials,
    phase: String,
    host: String,
    port: u16,
    upstream: tokio::sync::Mutex<Option<Upstream>>,
    /// Set when the real host was refused: every request is answered so.
    refused: Option<String>,
    /// The names of the credentials added, each once.
    used: std::sync::Mutex<Vec<String>>,
    /// What no answer may carry.
    needles: Arc<Needles>,
    /// Why the connection was closed early: a request refused, or an
    /// answer that carried a credential (the first reason).
    finding: Finding,
}

/// An HTTP/1.1 client connection over the verified TLS, driven by a task
/// that ends with it.
struct Upstream {
    sender: hyper::client::conn::http1::SendRequest<Incoming>,
    driver: tokio_util::task::AbortOnDropHandle<()>,
}

impl Upstream {
    /// Takes no further request: its driver alone is kept, by the answer
    /// under way, which it reads to its end; then the connection closes.
    fn retire(self) -> tokio_util::task::AbortOnDropHandle<()> {
        drop(self.sender);
        self.driver
    }
}

impl Relay<'_> {
    /// A connection to the real host that takes a request now: the open
    /// one, or a new one (verified again) when the host closed it.
    async fn ready<'u>(&self, upstream: &'u mut Option<Upstream>) -> Result<&'u mut Upstream, String> {
        let alive = match upstream.as_mut() {
            Some(connection) => connection.sender.ready().await.is_ok(),
            None => false,
        };
        if !alive {
            *upstream = None;
            let tcp = self
                .egress
                .open(self.policy, self.target)
                .await
                .map_err(|(_, why)| why)?;
            let tls = verified_upstream(self.credentials, &self.host, tcp).await?;
            *upstream = Some(speak_http(tls, &self.host).await?);
        }
        upstream
            .as_mut()
            .ok_or_else(|| format!("no connection to {}", self.host))
    }

    /// One request: checked, given the credential when its path and
    /// method are covered, sent on, and its answer screened.
    async fn forward(
        &self,
        mut request: Request<Incoming>,
    ) -> Result<Response<Body>, std::convert::Infallible> {
        if let Some(reason) = &self.refused {
            return Ok(plain(StatusCode::BAD_GATEWAY, reason));
        }
        let body = hyper::body::Body::size_hint(request.body()).exact();
        let checked = request_check::check(
            request.method(),
            request.uri(),
            request.headers(),
            body,
            &self.host,
            self.port,
        );
        let Checked { target, path } = match checked {
            Ok(checked) => checked,
            Err(refused) => return Ok(self.closing(refused.status, &refused.reason)),
        };
        strip_hop_by_hop(request.headers_mut());
        *request.uri_mut() = http::Uri::from(target);
        if let Err(refused) = request_check::plain_headers(request.headers_mut(), &self.host, self.port) {
            return Ok(self.closing(refused.status, &refused.reason));
        }
        if let Err(reason) = self.add_credential(&mut request, &path) {
            return Ok(plain(StatusCode::BAD_GATEWAY, reason));
        }
        let mut upstream = self.upstream.lock().await;
        let connection = match self.ready(&mut upstream).await {
            Ok(connection) => connection,
            Err(reason) => return Ok(plain(StatusCode::BAD_GATEWAY, &reason)),
        };
        let sent = connection.sender.send_request(request).await;
        // A server may answer before it has read a body, or read one
        // differently: the next request, perhaps with the credential, must
        // not follow it on the same connection.
        let retired = match body {
            Some(0) => None,
            _ => upstream.take().map(Upstream::retire),
        };
        match sent {
            Ok(response) => Ok(self.screened(response, retired)),
            Err(e) => Ok(plain(
                StatusCode::BAD_GATEWAY,
                &format!("{} did not answer: {e}", self.host),
            )),
        }
    }

    /// Sets the credential's header when one covers the request.
    fn add_credential(&self, request: &mut Request<Incoming>, path: &str) -> Result<(), &'static str> {
        let Some(credential) =
            self.credentials
                .for_request(&self.phase, &self.host, self.port, request.method(), path)
        else {
            return Ok(());
        };
        let Ok(mut value) = http::HeaderValue::from_str(credential.header_value.expose()) else {
            return Err("the credential is not a header value");
        };
        value.set_sensitive(true);
        request.headers_mut().insert(credential.header.clone(), value);
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        if !used.contains(&credential.name) {
            used.push(credential.name.clone());
        }
        Ok(())
    }

    /// The relay's own answer that ends the connection, its reason kept
    /// for the connection's decision (the transcript) unless one is
    /// already: one refusal per connection, however many requests.
    fn closing(&self, status: StatusCode, reason: &str) -> Response<Body> {
        let reason = request_check::clipped(reason);
        self.finding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| reason.clone());
        let mut answer = plain(status, &reason);
        answer
            .headers_mut()
            .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
        answer
    }

    /// The answer without challenges, cookies or a reason phrase of the
    /// server's, its body screened; the relay's own 502 (closing the
    /// connection) when it comes encoded or a header carries a credential.
    fn screened(
        &self,
        mut response: Response<Incoming>,
        retired: Option<tokio_util::task::AbortOnDropHandle<()>>,
    ) -> Response<Body> {
        response.extensions_mut().remove::<hyper::ext::ReasonPhrase>();
        let headers = response.headers_mut();
        strip_hop_by_hop(headers);
        for name in [
            http::header::WWW_AUTHENTICATE,
            http::header::PROXY_AUTHENTICATE,
            http::header::SET_COOKIE,
        ] {
            headers.remove(name);
        }
        let encoding = headers
            .get(http::header::CONTENT_ENCODING)
            .map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase());
        if let Some(encoding) = encoding.filter(|e| !e.is_empty() && e != "identity") {
            let reason = format!(
                "the answer from {} came encoded ({}) though the relay asked for none, so it cannot be screened for the credential; it was not passed on",
                self.host,
                request_check::clipped(&encoding)
            );
            return self.closing(StatusCode::BAD_GATEWAY, &reason);
        }
        if let Some(name) = self.needles.in_headers(headers) {
            let reason = format!(
                "the answer from {} carried a credential's value in its {name} header; it was not passed on and the connection was closed",
                self.host
            );
            return self.closing(StatusCode::BAD_GATEWAY, &reason);
        }
        let needles = self.needles.clone();
        let finding = self.finding.clone();
        response.map(|body| Either::Left(Screened::new(body, needles, &self.host, finding, retired)))
    }
}

/// HTTP/1.1 over the verified TLS, driven by a task of its own.
async fn speak_http(tls: TlsStream<tokio::net::TcpStream>, host: &str) -> Result<Upstream, String> {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("cannot speak HTTP/1.1 to {host}: {e}"))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(Upstream {
        sender,
        driver: tokio_util::task::AbortOnDropHandle::new(driver),
    })
}

/// Removes the headers that speak of one connection only (RFC 9110
/// §7.6.1): the relay keeps each side's connection on its own, so an
/// upstream that closes after an answer does not close the sandbox's.
fn strip_hop_by_hop(headers: &mut http::HeaderMap) {
    let named: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    for name in named.iter().map(String::as_str).chain([
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    ]) {
        headers.remove(name);
    }
}

/// An answer of the relay's own.
fn plain(status: StatusCode, reason: &str) -> Response<Body> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(format!(
        "forgehand egress: {reason}\n"
    )))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
