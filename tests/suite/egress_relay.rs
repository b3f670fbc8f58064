//! The egress relay against a real sandbox: setup's Python talks to the
//! proxy on its loopback the way tools do, and the way an attacker would.
//! HTTPS naming the allowed host goes through; TLS naming another host, a
//! second Host behind a bare LF, and CONNECT to a port that is not a TLS
//! port are refused, each logged and in the run's transcript with its
//! reason.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::github_world;
use forgehand_test_support::scripted_model;

use github_world::{Ended, World, MODEL_KEY, TOKEN};
use rustls::pki_types::PrivatePkcs8KeyDer;
use scripted_model::{run, text};
use std::sync::Arc;

/// A stand-in for an HTTPS host on the internet, on 127.0.0.1 with a
/// certificate for `localhost` made here: answers every request with
/// `body`. Returns its port.
async fn tls_web_server(body: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let mut buf = vec![0u8; 8192];
                let _ = tls.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

/// A plain-HTTP stand-in, answering `body`; returns its port.
async fn web_server(body: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = socket.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

/// What setup runs: each attempt prints one line.
const PROBE: &str = r#"import socket, ssl, sys, urllib.request
TLS, PLAIN = int(sys.argv[1]), int(sys.argv[2])
unverified = ssl._create_unverified_context()

def proxy():
    return socket.create_connection(("127.0.0.1", 3128), timeout=20)

def status(s):
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n")[0].decode()

try:
    page = urllib.request.urlopen(f"https://localhost:{TLS}/", context=unverified, timeout=20).read()
    print("https:", page.decode())
except Exception as e:
    print("https failed:", e)

s = proxy()
s.sendall(f"CONNECT localhost:{TLS} HTTP/1.1\r\nHost: localhost:{TLS}\r\n\r\n".encode())
print("connect:", status(s))
try:
    unverified.wrap_socket(s, server_hostname="fronted.example")
    print("fronted-sni: through")
except Exception as e:
    print("fronted-sni refused:", e)

s = proxy()
s.sendall(f"GET http://127.0.0.1:{PLAIN}/ HTTP/1.1\r\nHost: 127.0.0.1:{PLAIN}\r\nX-Pad: 1\nHost: fronted.example\r\n\r\n".encode())
print("bare-lf:", status(s))

s = proxy()
s.sendall(f"CONNECT 127.0.0.1:{PLAIN} HTTP/1.1\r\n\r\n".encode())
print("connect-plain:", status(s))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_reaches_https_by_its_name_and_fronting_smuggling_and_raw_tunnels_are_refused() {
    let tls = tls_web_server("tls-body-5521").await;
    let plain = web_server("plain-body-6632").await;
    let settings = format!(
        "image: python\nsetup:\n  - python3 probe.py {tls} {plain} > \"$HOME/probe.txt\" 2>&1\nnetwork:\n  setup: ['localhost:{tls}', '127.0.0.1:{plain}']\n"
    );
    let world = World::with_repository(
        vec![
            (run("cat \"$HOME/probe.txt\""), None),
            (text("Nothing to change."), None),
        ],
        &[("probe.py", PROBE), (".forgehand.yaml", &settings)],
        &format!("sandbox:\n  egress:\n    allow_loopback: true\n    tls_ports: [{tls}]\n"),
    )
    .await;
    let Ended { issue, daemon } = world.run_to_end("Probe the network").await;
    let log = daemon.log_text();
    let comment = world.progress_comment(issue);
    assert!(comment.contains("Setup: done"), "{comment}\n{log}");
    let probe = world.model.requests().await[1].to_string();
    for line in [
        "https: tls-body-5521",
        "connect: HTTP/1.1 200 Connection Established",
        "fronted-sni refused:",
        "ACCESS_DENIED",
        "bare-lf: HTTP/1.1 400 Bad Request",
        "connect-plain: HTTP/1.1 403 Forbidden",
    ] {
        assert!(probe.contains(line), "{line} in:\n{probe}");
    }
    assert!(!probe.contains("fronted-sni: through"), "{probe}");
    // Each refusal is in the transcript with its reason, and in the log.
    let transcript = world.transcript(issue);
    for line in [
        format!("network, setup: localhost:{tls} allowed"),
        format!("network, setup: localhost:{tls} denied: the TLS ClientHello names fronted.example"),
        format!("network, setup: 127.0.0.1:{plain} denied: a line of the request head ends in a bare LF"),
        format!("network, setup: 127.0.0.1:{plain} denied: CONNECT carries TLS only"),
    ] {
        assert!(transcript.contains(&line), "{line} in:\n{transcript}");
    }
    assert!(
        log.contains("egress denied") && log.contains("fronted.example"),
        "{log}"
    );
    assert!(!log.contains(TOKEN) && !log.contains(MODEL_KEY));
}
