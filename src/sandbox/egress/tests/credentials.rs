//! Credentials added by the relay: a rustls client in the sandbox's place
//! that trusts only the sandbox's CA, and a rustls server on loopback with
//! a certificate the test makes, that records the request it got.

use super::*;
use crate::config::{CredentialScheme, EgressCredential, EgressCredentials, Secret};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer, ServerName};

const TOKEN: &str = "tok-5521-never-in-the-sandbox";

fn credential(port: u16) -> EgressCredential {
    EgressCredential {
        name: "CORP_TOKEN".into(),
        host: "localhost".into(),
        port,
        path_prefix: Some("/simple/".into()),
        header: http::header::AUTHORIZATION,
        scheme: CredentialScheme::Bearer,
        value: Secret::new(TOKEN),
        header_value: Secret::new(format!("Bearer {TOKEN}")),
        repositories: vec!["acme/*".into()],
        setup: true,
        agent: false,
    }
}

/// A server for `localhost` that answers each request with a challenge
/// and an echo of its Authorization; sends each request head it read.
async fn echoing_server() -> (u16, Vec<u8>, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    let config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![made.cert.der().clone()], key.into())
            .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (heads, received) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(socket).await else {
                continue;
            };
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let echo = head
                .lines()
                .find_map(|l| l.strip_prefix("authorization: "))
                .unwrap_or("none")
                .to_owned();
            let _ = heads.send(head);
            let answer = format!("HTTP/1.1 200 OK\r\nWWW-Authenticate: Basic realm=\"corp\"\r\nX-Echo: {echo}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            let _ = tls.write_all(answer.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    (port, made.cert.der().to_vec(), received)
}

fn relay_with(port: u16, extra_roots: Vec<Vec<u8>>) -> Arc<Egress> {
    let config = EgressCredentials {
        credentials: vec![credential(port)],
        extra_roots,
    };
    let credentials = SandboxCredentials::for_repository(&config, "acme/app").unwrap();
    let egress = Arc::new(Egress {
        reach: Reach {
            private: false,
            loopback: true,
        },
        tls_ports: vec![port],
        credentials: credentials.map(Arc::new),
        ..Egress::default()
    });
    egress.set_phase(
        "setup",
        vec![HostPattern::parse(&format!("localhost:{port}")).unwrap()],
    );
    egress
}

/// One GET of `path` through a CONNECT tunnel, by a client that trusts
/// the sandbox's CA alone; the whole answer.
async fn get_through(egress: &Arc<Egress>, port: u16, path: &str) -> String {
    get_all_through(egress, port, &[path]).await.pop().unwrap()
}

/// GETs of `paths` one after the other over one CONNECT tunnel (kept
/// alive between them); each whole answer.
async fn get_all_through(egress: &Arc<Egress>, port: u16, paths: &[&str]) -> Vec<String> {
    let (mut near, far) = tokio::io::duplex(64 << 10);
    let serve = tokio::spawn({
        let egress = egress.clone();
        async move { egress.handle(far).await }
    });
    near.write_all(format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut established = vec![0u8; 39];
    near.read_exact(&mut established).await.unwrap();
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    let pem = egress.ca_pem().unwrap();
    roots
        .add(CertificateDer::from_pem_slice(pem.as_bytes()).unwrap())
        .unwrap();
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), near)
        .await
        .unwrap();
    let mut answers = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let last = i + 1 == paths.len();
        let close = if last { "Connection: close\r\n" } else { "" };
        tls.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\n{close}\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = Vec::new();
        if last {
            let _ = tls.read_to_end(&mut answer).await;
        } else {
            // Every answer here ends with its 2-byte body, "ok" or the
            // relay's own text ending in a newline.
            let mut byte = [0u8; 1];
            while !(answer.ends_with(b"\r\n\r\nok") || answer.ends_with(b"\n\n")) {
                tls.read_exact(&mut byte).await.unwrap();
                answer.push(byte[0]);
            }
        }
        answers.push(String::from_utf8_lossy(&answer).into_owned());
    }
    drop(tls);
    serve.await.unwrap();
    answers
}

#[tokio::test]
async fn the_credential_is_added_on_the_host_and_its_echo_and_challenge_never_come_back() {
    let (port, cert, mut heads) = echoing_server().await;
    let egress = relay_with(port, vec![cert]);
    let answer = get_through(&egress, port, "/simple/pkg/").await;
    let head = heads.recv().await.unwrap();
    assert!(head.contains(&format!("authorization: Bearer {TOKEN}")), "{head}");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(
        !lower.contains("www-authenticate") && !answer.contains(TOKEN),
        "{answer}"
    );
    let decision = egress.decisions().pop().unwrap();
    assert_eq!(decision.credential.as_deref(), Some("CORP_TOKEN"));
    assert_eq!(decision.denied, None);
    assert!(decision.bytes > 0);

    // A path outside the prefix goes without it.
    let answer = get_through(&egress, port, "/other/").await;
    let head = heads.recv().await.unwrap();
    assert!(!head.to_ascii_lowercase().contains("authorization"), "{head}");
    assert!(answer.contains("x-echo: none"), "{answer}");
    assert_eq!(egress.decisions().pop().unwrap().credential, None);
}

#[tokio::test]
async fn a_host_whose_certificate_does_not_verify_gets_nothing_and_the_sandbox_is_told() {
    let (port, _cert, mut heads) = echoing_server().await;
    let egress = relay_with(port, Vec::new());
    let answer = get_through(&egress, port, "/simple/").await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(answer.contains("does not verify"), "{answer}");
    assert!(heads.try_recv().is_err(), "a request reached the host");
    let decision = egress.decisions().pop().unwrap();
    let denied = decision.denied.unwrap();
    assert!(
        denied.contains("certificate of localhost does not verify"),
        "{denied}"
    );
    assert!(!denied.contains(TOKEN));
}

#[tokio::test]
async fn another_repository_or_phase_gets_the_plain_tunnel() {
    let (port, cert, _heads) = echoing_server().await;
    let config = EgressCredentials {
        credentials: vec![credential(port)],
        extra_roots: vec![cert],
    };
    assert!(SandboxCredentials::for_repository(&config, "other/app")
        .unwrap()
        .is_none());
    let egress = relay_with(port, config.extra_roots.clone());
    egress.set_phase(
        "agent",
        vec![HostPattern::parse(&format!("localhost:{port}")).unwrap()],
    );
    let policy = egress.policy.lock().unwrap().clone();
    assert!(!egress.intercepts(&policy, "localhost", port));
    egress.set_phase(
        "setup",
        vec![HostPattern::parse(&format!("localhost:{port}")).unwrap()],
    );
    let policy = egress.policy.lock().unwrap().clone();
    assert!(egress.intercepts(&policy, "LOCALHOST", port));
    assert!(!egress.intercepts(&policy, "localhost", port + 1));
}

#[tokio::test]
async fn a_host_that_closes_after_each_answer_is_reached_again_for_the_next_request() {
    let (port, cert, mut heads) = echoing_server().await;
    let egress = relay_with(port, vec![cert]);
    let answers = get_all_through(&egress, port, &["/simple/a/", "/simple/b/"]).await;
    for answer in &answers {
        assert!(answer.starts_with("HTTP/1.1 200"), "{answers:?}");
    }
    for _ in 0..2 {
        let head = heads.recv().await.unwrap();
        assert!(head.contains(&format!("authorization: Bearer {TOKEN}")), "{head}");
    }
    assert_eq!(egress.decisions().len(), 1);
}
