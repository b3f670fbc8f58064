//! CONNECT tunnels with real TLS: rustls clients in the sandbox's place,
//! a rustls server (with a certificate the test makes) or a plain socket
//! that records what reaches it on loopback.

use super::*;
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName};

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection Established\r\n\r\n";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn client_config(roots: rustls::RootCertStore) -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// The ClientHello rustls sends for `name` (with no SNI for an address).
pub(super) fn client_hello(name: &str) -> Vec<u8> {
    let server_name = ServerName::try_from(name.to_owned()).unwrap();
    let mut client = rustls::ClientConnection::new(
        Arc::new(client_config(rustls::RootCertStore::empty())),
        server_name,
    )
    .unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    hello
}

/// A relay for the setup phase that may reach `localhost:port`, with
/// `port` a TLS port.
fn relay_to_localhost(port: u16) -> Arc<Egress> {
    let egress = Egress::with_tls_ports(
        Reach {
            private: false,
            loopback: true,
        },
        vec![port],
        Default::default(),
    );
    egress.set_phase(
        "setup",
        vec![HostPattern::parse(&format!("localhost:{port}")).unwrap()],
    );
    egress
}

/// Opens a CONNECT tunnel to `localhost:port` through `egress`; the
/// sandbox's end, past the 200 answer.
async fn tunnel(egress: &Arc<Egress>, port: u16) -> (tokio::io::DuplexStream, tokio::task::JoinHandle<()>) {
    let (mut near, far) = tokio::io::duplex(64 << 10);
    let serve = tokio::spawn({
        let egress = egress.clone();
        async move { egress.handle(far).await }
    });
    near.write_all(format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = vec![0u8; ESTABLISHED.len()];
    near.read_exact(&mut answer).await.unwrap();
    assert_eq!(answer, ESTABLISHED, "{}", String::from_utf8_lossy(&answer));
    (near, serve)
}

/// A server on loopback that returns every byte that reached it.
async fn recording_server() -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let _ = socket.read_to_end(&mut got).await;
        got
    });
    (port, server)
}

#[tokio::test]
async fn a_client_hello_naming_the_tunnels_host_passes_and_tls_runs_end_to_end() {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let certificate: CertificateDer<'static> = made.cert.der().clone();
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    let server_config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certificate.clone()], key.into())
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(socket).await.unwrap();
        let named = tls.get_ref().1.server_name().map(str::to_owned);
        let mut ping = [0u8; 4];
        tls.read_exact(&mut ping).await.unwrap();
        tls.write_all(b"pong").await.unwrap();
        tls.shutdown().await.unwrap();
        (named, ping)
    });
    let egress = relay_to_localhost(port);
    let (near, serve) = tunnel(&egress, port).await;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(certificate).unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(roots)));
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), near)
        .await
        .unwrap();
    tls.write_all(b"ping").await.unwrap();
    let mut answer = Vec::new();
    tls.read_to_end(&mut answer).await.unwrap();
    assert_eq!(answer, b"pong");
    drop(tls);
    serve.await.unwrap();
    let (named, ping) = server.await.unwrap();
    assert_eq!((named.as_deref(), &ping), (Some("localhost"), b"ping"));
    let decisions = egress.decisions();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].denied, None, "{decisions:?}");
    assert!(decisions[0].bytes > 0);
}

#[tokio::test]
async fn a_client_hello_naming_another_host_or_none_never_reaches_the_server() {
    for (sni, enable_sni, words) in [
        (
            "fronted.example",
            true,
            "names fronted.example, but the tunnel was allowed for localhost",
        ),
        ("localhost", false, "names no server (SNI)"),
    ] {
        let (port, server) = recording_server().await;
        let egress = relay_to_localhost(port);
        let (near, serve) = tunnel(&egress, port).await;
        let mut config = client_config(rustls::RootCertStore::empty());
        config.enable_sni = enable_sni;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let err = connector
            .connect(ServerName::try_from(sni).unwrap(), near)
            .await
            .map(|_| ())
            .unwrap_err();
        // The client hears a fatal access_denied alert.
        assert!(err.to_string().contains("AccessDenied"), "{err}");
        serve.await.unwrap();
        assert_eq!(server.await.unwrap(), b"", "nothing of the hello went upstream");
        let decisions = egress.decisions();
        assert_eq!(decisions.len(), 1);
        let why = decisions[0].denied.as_deref().unwrap_or_default();
        assert!(why.contains(words), "{why}");
    }
}

#[tokio::test]
async fn plain_http_inside_a_tunnel_is_answered_400_and_never_forwarded() {
    let (port, server) = recording_server().await;
    let egress = relay_to_localhost(port);
    let (mut near, serve) = tunnel(&egress, port).await;
    near.write_all(b"GET / HTTP/1.1\r\nHost: fronted.example\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    near.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("CONNECT carries TLS only"),
        "{answer}"
    );
    serve.await.unwrap();
    assert_eq!(server.await.unwrap(), b"");
    let decisions = egress.decisions();
    assert!(decisions[0]
        .denied
        .as_deref()
        .unwrap()
        .contains("other than a TLS ClientHello"));
}

#[tokio::test(start_paused = true)]
async fn a_hello_that_never_completes_is_given_up_after_its_time() {
    let (mut near, mut far) = tokio::io::duplex(1024);
    // A record header that promises a hello which never comes.
    near.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    let refusal = tls_sni::read_client_hello(&mut far, Vec::new())
        .await
        .unwrap_err();
    assert!(refusal.reason.contains("within 10 s"), "{refusal:?}");
    assert_eq!(
        refusal.answer,
        tls_sni::HelloAnswer::Alert(&tls_sni::DECODE_ERROR_ALERT)
    );
    drop(near);
}

#[tokio::test]
async fn a_hello_longer_than_the_cap_is_refused_and_nothing_goes_upstream() {
    let (port, server) = recording_server().await;
    let egress = relay_to_localhost(port);
    let (mut near, serve) = tunnel(&egress, port).await;
    // One ClientHello of 60 KiB (within what TLS and rustls allow), in
    // records of 16 KiB: past the relay's cap.
    let endless = tokio::spawn(async move {
        let first = [
            &[0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0x00, 0xf0, 0x00][..],
            &[0u8; 0x4000 - 4],
        ]
        .concat();
        let more = [&[0x16, 0x03, 0x01, 0x40, 0x00][..], &[0u8; 0x4000]].concat();
        let _ = near.write_all(&first).await;
        while near.write_all(&more).await.is_ok() {}
    });
    serve.await.unwrap();
    endless.abort();
    assert_eq!(server.await.unwrap(), b"");
    let why = egress.decisions()[0].denied.clone().unwrap();
    assert!(why.contains("longer than 32768 bytes"), "{why}");
}

#[test]
fn a_server_name_must_be_the_tunnels_own() {
    use tls_sni::server_name_refusal as refusal;
    assert_eq!(refusal("pkgs.example.org", Some("pkgs.example.org")), None);
    assert_eq!(refusal("pkgs.example.org", Some("PKGS.example.org.")), None);
    assert!(refusal("a.pkgs.example.org", Some("b.pkgs.example.org")).is_some());
    assert!(refusal("pkgs.example.org", None).is_some());
    // To an address, TLS clients name nothing; a name would choose a site.
    assert_eq!(refusal("127.0.0.1", None), None);
    assert!(refusal("127.0.0.1", Some("fronted.example")).is_some());
    assert!(refusal("::1", Some("fronted.example")).is_some());
}
