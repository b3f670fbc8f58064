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
        repositories: vec![crate::config::RepositoryPattern::parse("k", "acme/*").unwrap()],
        methods: vec![http::Method::GET, http::Method::HEAD],
        setup: true,
        agent: false,
    }
}

/// A server for `localhost` that answers each request with a challenge;
/// a path naming `header-echo` gets its Authorization back in a header,
/// one naming `body-echo` in the body, split across two writes. Sends
/// each request head it read.
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
            let line = head.lines().next().unwrap_or("").to_owned();
            let _ = heads.send(head);
            let mut header = if line.contains("header-echo") {
                format!("X-Echo: {echo}\r\n")
            } else {
                String::new()
            };
            if line.contains("gzip-answer") {
                header.push_str("Content-Encoding: gzip\r\n");
            }
            let body = if line.contains("body-echo") {
                format!("{}{echo}", "x".repeat(5000))
            } else {
                "ok".into()
            };
            let answer = format!(
                "HTTP/1.1 200 Fine {echo}\r\nWWW-Authenticate: Basic realm=\"corp\"\r\nSet-Cookie: session=s3ss10n\r\n{header}Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = tls.write_all(answer.as_bytes()).await;
            let cut = if line.contains("body-echo") {
                body.len() - echo.len() / 2
            } else {
                body.len()
            };
            let (first, second) = body.split_at(cut);
            let _ = tls.write_all(first.as_bytes()).await;
            let _ = tls.flush().await;
            let _ = tls.write_all(second.as_bytes()).await;
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
    relay_with_config(port, &config)
}

fn relay_with_config(port: u16, config: &EgressCredentials) -> Arc<Egress> {
    let credentials = SandboxCredentials::for_repository(config, "acme/app").unwrap();
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
    let heads: Vec<String> = paths
        .iter()
        .map(|path| format!("GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\n"))
        .collect();
    send_all_through(egress, port, &heads).await
}

/// Request heads (without their closing blank line) sent one after the
/// other over one CONNECT tunnel, the last with `Connection: close`;
/// each whole answer.
async fn send_all_through(egress: &Arc<Egress>, port: u16, heads: &[String]) -> Vec<String> {
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
    for (i, head) in heads.iter().enumerate() {
        let last = i + 1 == heads.len();
        let close = if last { "Connection: close\r\n" } else { "" };
        tls.write_all(format!("{head}{close}\r\n").as_bytes())
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

/// One request head through a tunnel of its own; the whole answer.
async fn send_through(egress: &Arc<Egress>, port: u16, head: &str) -> String {
    send_all_through(egress, port, &[head.to_owned()])
        .await
        .pop()
        .unwrap()
}

#[tokio::test]
async fn the_credential_is_added_on_the_host_and_its_challenge_never_comes_back() {
    let (port, cert, mut heads) = echoing_server().await;
    let egress = relay_with(port, vec![cert]);
    let answer = get_through(&egress, port, "/simple/pkg/").await;
    let head = heads.recv().await.unwrap();
    assert!(head.contains(&format!("authorization: Bearer {TOKEN}")), "{head}");
    assert!(head.contains(&format!("host: localhost:{port}")), "{head}");
    assert!(head.contains("accept-encoding: identity"), "{head}");
    // The server's reason phrase carried the value: hyper's own is sent.
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(
        !lower.contains("www-authenticate") && !lower.contains("set-cookie") && !answer.contains(TOKEN),
        "{answer}"
    );
    let decision = egress.decisions().pop().unwrap();
    assert_eq!(decision.credential.as_deref(), Some("CORP_TOKEN"));
    assert_eq!(decision.denied, None);
    assert!(decision.bytes > 0);

    // A path outside the prefix goes without it.
    let answer = get_through(&egress, port, "/other/header-echo").await;
    let head = heads.recv().await.unwrap();
    assert!(!head.to_ascii_lowercase().contains("authorization"), "{head}");
    assert!(answer.contains("x-echo: none"), "{answer}");
    assert_eq!(egress.decisions().pop().unwrap().credential, None);
}

#[tokio::test]
async fn an_answer_that_carries_the_credential_never_reaches_the_sandbox() {
    let (port, cert, mut heads) = echoing_server().await;
    let egress = relay_with(port, vec![cert]);
    let answer = get_through(&egress, port, "/simple/header-echo").await;
    heads.recv().await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(!answer.contains(TOKEN), "{answer}");
    let denied = egress.decisions().pop().unwrap().denied.unwrap();
    assert!(denied.contains("x-echo header"), "{denied}");

    // In the body, split across two writes of the server: the connection
    // ends before the bytes that hold it go out (hyper may not even have
    // sent the head by then), so no part of the value gets through.
    let answer = get_through(&egress, port, "/simple/body-echo").await;
    heads.recv().await.unwrap();
    assert!(!answer.contains(&TOKEN[..TOKEN.len() / 2]), "{answer}");
    assert!(!answer.contains(&TOKEN[TOKEN.len() / 2..]), "{answer}");
    let denied = egress.decisions().pop().unwrap().denied.unwrap();
    assert!(denied.contains("in its body"), "{denied}");

    // An answer that comes encoded though none was asked for cannot be
    // screened: it is not passed on.
    let answer = get_through(&egress, port, "/simple/gzip-answer").await;
    heads.recv().await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    let denied = egress.decisions().pop().unwrap().denied.unwrap();
    assert!(denied.contains("came encoded (gzip)"), "{denied}");
}

#[tokio::test]
async fn a_body_on_a_get_never_reaches_the_server() {
    // A server that ignores a GET's body would read it as the next
    // request, which the relay never checked (request smuggling).
    let head = "GET /static/x HTTP/1.1\r\nHost: localhost:PORT\r\nContent-Length: 60\r\n";
    let (status, reached, decisions) = attempt(head).await;
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
    assert_eq!(reached, None);
    let denied = decisions.last().unwrap().denied.clone().unwrap();
    assert!(denied.contains("with a body"), "{denied}");
}

/// Each request the operator did not name, in the sandbox's words: the
/// answer's status, and what reached the server (`None`: nothing).
async fn attempt(head: &str) -> (String, Option<String>, Vec<Decision>) {
    let (port, cert, mut heads) = echoing_server().await;
    let egress = relay_with(port, vec![cert]);
    let head = head.replace("PORT", &port.to_string());
    let answer = send_through(&egress, port, &head).await;
    let status = answer.lines().next().unwrap_or("").to_owned();
    (status, heads.try_recv().ok(), egress.decisions())
}

#[tokio::test]
async fn a_target_or_host_naming_anything_else_is_refused_and_recorded() {
    for head in [
        "GET https://other.example/simple/x HTTP/1.1\r\n",
        "GET https://other.example/simple/x HTTP/1.1\r\nHost: localhost:PORT\r\n",
        "GET https://localhost:PORT/simple/x HTTP/1.1\r\nHost: localhost:PORT\r\n",
        "GET /simple/x HTTP/1.1\r\nHost: localhost:1\r\n",
        "GET /simple/x HTTP/1.1\r\nHost: localhost\r\n",
        "GET /simple/x HTTP/1.1\r\nHost: other.example:PORT\r\n",
        "GET /simple/%2e%2e/admin/ HTTP/1.1\r\nHost: localhost:PORT\r\n",
        "GET /simple/..%2fadmin/ HTTP/1.1\r\nHost: localhost:PORT\r\n",
        "GET /simple/..;/admin/ HTTP/1.1\r\nHost: localhost:PORT\r\n",
    ] {
        let (status, reached, decisions) = attempt(head).await;
        assert!(status.starts_with("HTTP/1.1 400"), "{head}: {status}");
        assert_eq!(reached, None, "{head} reached the server");
        assert!(
            decisions
                .iter()
                .any(|d| d.denied.is_some() && d.credential.is_none()),
            "{head}: no refusal recorded: {decisions:?}"
        );
    }
}

#[tokio::test]
async fn trace_is_refused_and_other_methods_go_without_the_credential() {
    let (status, reached, _) = attempt("TRACE /simple/x HTTP/1.1\r\nHost: localhost:PORT\r\n").await;
    assert!(status.starts_with("HTTP/1.1 405"), "{status}");
    assert_eq!(reached, None);
    for method in ["PUT", "DELETE", "POST"] {
        let head = format!("{method} /simple/x HTTP/1.1\r\nHost: localhost:PORT\r\nContent-Length: 0\r\n");
        let (status, reached, decisions) = attempt(&head).await;
        assert!(status.starts_with("HTTP/1.1 200"), "{method}: {status}");
        let reached = reached.unwrap();
        assert!(
            !reached.to_ascii_lowercase().contains("authorization"),
            "{reached}"
        );
        assert_eq!(decisions.last().unwrap().credential, None, "{method}");
    }
}

#[tokio::test]
async fn dot_segments_and_lookalike_prefixes_do_not_get_the_credential() {
    let (status, reached, _) = attempt("GET /simple/../admin/ HTTP/1.1\r\nHost: localhost:PORT\r\n").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let reached = reached.unwrap();
    assert!(reached.starts_with("GET /admin/ HTTP/1.1"), "{reached}");
    assert!(
        !reached.to_ascii_lowercase().contains("authorization"),
        "{reached}"
    );

    // A prefix written without its slash still ends at a segment.
    let (port, cert, mut heads) = echoing_server().await;
    let mut lookalike = credential(port);
    lookalike.path_prefix = Some("/simple".into());
    let config = EgressCredentials {
        credentials: vec![lookalike],
        extra_roots: vec![cert],
    };
    let egress = relay_with_config(port, &config);
    get_through(&egress, port, "/simplefoo").await;
    let head = heads.recv().await.unwrap();
    assert!(!head.to_ascii_lowercase().contains("authorization"), "{head}");
    get_through(&egress, port, "/simple/x").await;
    let head = heads.recv().await.unwrap();
    assert!(head.contains(&format!("authorization: Bearer {TOKEN}")), "{head}");
}

#[tokio::test]
async fn a_credential_named_for_publishing_is_added_to_those_methods() {
    let (port, cert, mut heads) = echoing_server().await;
    let mut publish = credential(port);
    publish.methods.push(http::Method::PUT);
    let config = EgressCredentials {
        credentials: vec![publish],
        extra_roots: vec![cert],
    };
    let egress = relay_with_config(port, &config);
    let head = format!("PUT /simple/x HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Length: 0\r\n");
    let answer = send_through(&egress, port, &head).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let head = heads.recv().await.unwrap();
    assert!(head.contains(&format!("authorization: Bearer {TOKEN}")), "{head}");
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
