//! What adding a credential on the host costs: 50 MB downloaded over HTTPS
//! from a server on the host's loopback, by Python inside a real Docker
//! sandbox, through the relay that ends the TLS and adds the credential
//! (two TLS sessions, HTTP/1.1 read in between) against the plain tunnel
//! (the sandbox's TLS end to end); and `pip install` of 20 packages from
//! a private index (pypiserver with a password, behind TLS) with the
//! credential added by the relay against the same pip given the password
//! in its URL through the plain tunnel. Both pips trust the same number
//! of certificates (the image's roots and the index's or the sandbox's
//! CA): pip reads its trust file again for each connection, about 28 ms
//! for 149 certificates here, so a one-certificate file on one side
//! only would measure the files, not the relay.
//!
//! Run: `cargo bench --bench egress_credentials` (needs the engine, the
//! `python` image and the static editor: `scripts/dev-env.sh`,
//! `forgehand images build python`, `FORGEHAND_EDITOR_BINARY`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand::config::{Config, HostPattern};
use forgehand::images;
use forgehand::sandbox::docker::{connect, DockerBackend};
use forgehand::sandbox::helper::EditorBinary;
use forgehand::sandbox::{Sandbox, SandboxBackend, SandboxSpec};
use forgehand_test_support::private_registry::{add_wheel, private_pypi_with, TestCa, TlsFront};
use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SIZE: usize = 50_000_000;

#[tokio::main]
async fn main() {
    let ca = TestCa::new("bench registry CA");
    let plain_port = https_server(&ca).await;
    let credential_port = https_server(&ca).await;
    let index = private_pypi_with("fhbench0", "1.0", "VALUE = 0\n", "bench", "bench-pass-7313");
    for i in 1..20 {
        add_wheel(&index, &format!("fhbench{i}"), "1.0", &format!("VALUE = {i}\n"));
    }
    let index_plain = TlsFront::start(&ca, index.port).await;
    let index_credential = TlsFront::start(&ca, index.port).await;
    let (ip, ic) = (index_plain.port, index_credential.port);
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.pem).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let base = std::fs::read_to_string(root.join("config.yaml")).unwrap();
    let yaml = base
        .replace(
        "    tls_ports: [443]\n",
        &format!("    tls_ports: [{plain_port}, {credential_port}, {ip}, {ic}]\n"),
    )
    .replace("    allow_loopback: false\n", "    allow_loopback: true\n")
    .replace(
        "    credentials: []\n",
        &format!("    credentials:\n      - host: \"localhost:{credential_port}\"\n        scheme: bearer\n        value_from: BENCH_REGISTRY_TOKEN\n        repositories: [\"*\"]\n      - host: \"localhost:{ic}\"\n        scheme: basic\n        value_from: BENCH_INDEX_USER\n        repositories: [\"*\"]\n"),
    )
    .replace(
        "    extra_ca_file: \"\"\n",
        &format!("    extra_ca_file: {}\n", ca_file.display()),
    );
    let config = Config::from_yaml(&yaml, &root.join("config.yaml"), root, &|name| match name {
        "BENCH_REGISTRY_TOKEN" => Some("bench-token-value".into()),
        "BENCH_INDEX_USER" => Some("bench:bench-pass-7313".into()),
        other => std::env::var(other).ok(),
    })
    .expect("the bench's config loads");
    assert_eq!(config.sandbox.egress_credentials.credentials.len(), 2);
    let docker = connect(&config.docker)
        .await
        .expect("Docker is reachable (run scripts/dev-env.sh)");
    let image = images::image_tag(&config.images, "python");
    assert!(
        images::image_present(&docker, &image).await.unwrap(),
        "{image} is missing; run `cargo run -- images build python`"
    );
    let editor = EditorBinary::locate(config.text_editor_mcp.editor_binary.as_deref())
        .expect("forgehand-editor is built (scripts/build-editor; FORGEHAND_EDITOR_BINARY)");
    let backend = DockerBackend::new(
        docker,
        config.sandbox.clone(),
        format!("bench-{}", std::process::id()),
    )
    .with_editor(editor);
    let spec = SandboxSpec {
        task_id: "bench-credentials".into(),
        forge: "local".into(),
        repository: "bench/registry".into(),
        image,
        env: Vec::new(),
    };
    let sandbox = backend.prepare(&spec, None).await.unwrap();
    sandbox.egress().unwrap().set_phase(
        "setup",
        vec![
            HostPattern::parse(&format!("localhost:{plain_port}")).unwrap(),
            HostPattern::parse(&format!("localhost:{credential_port}")).unwrap(),
            HostPattern::parse(&format!("localhost:{ip}")).unwrap(),
            HostPattern::parse(&format!("localhost:{ic}")).unwrap(),
        ],
    );
    println!(
        "forgehand egress credential benchmark ({} cores); reproduce with: cargo bench --bench egress_credentials",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
    );
    let plain = median_download(sandbox.as_ref(), plain_port, false).await;
    let added = median_download(sandbox.as_ref(), credential_port, true).await;
    println!(
        "50 MB over HTTPS (median of 7, timed by Python in the sandbox): plain tunnel {:.0} ms ({:.0} MB/s), credential added (TLS ended and opened again) {:.0} ms ({:.0} MB/s): {:.0} % of the plain tunnel's throughput",
        plain * 1e3,
        50.0 / plain,
        added * 1e3,
        50.0 / added,
        100.0 * plain / added
    );
    pip_twenty(sandbox.as_ref(), &ca.pem, ip, ic).await;
    let decisions = sandbox.egress().unwrap().decisions();
    assert!(decisions
        .iter()
        .any(|d| d.port == credential_port && d.credential.is_some()));
    sandbox.remove().await.unwrap();
}

/// Seconds for one 50 MB download, the median of 7. `verified`: the
/// sandbox's own trust (the relay's certificate); else the test CA is not
/// known in the sandbox and the plain tunnel is read unverified.
async fn median_download(sandbox: &dyn Sandbox, port: u16, verified: bool) -> f64 {
    let context = if verified {
        "ssl.create_default_context()"
    } else {
        "ssl._create_unverified_context()"
    };
    let script = format!(
        "import ssl, time, urllib.request\nctx = {context}\nstart = time.perf_counter()\nbody = urllib.request.urlopen('https://localhost:{port}/big', context=ctx).read()\nprint(len(body), time.perf_counter() - start)\n"
    );
    let command = format!(
        "python3 -c \"$(printf '%s' '{}' | base64 -d)\"",
        base64_of(&script)
    );
    let mut took = Vec::new();
    for _ in 0..7 {
        let out = sandbox.exec(&command, None).await.unwrap();
        let fields: Vec<&str> = out.stdout.split_whitespace().collect();
        assert_eq!(fields.len(), 2, "{} {}", out.stdout, out.stderr);
        assert_eq!(fields[0].parse::<usize>().unwrap(), SIZE);
        took.push(fields[1].parse::<f64>().unwrap());
    }
    took.sort_by(f64::total_cmp);
    took[3]
}

/// `pip install` of the 20 packages into a fresh folder, 3 times each
/// way; prints the medians.
async fn pip_twenty(sandbox: &dyn Sandbox, ca_pem: &str, plain: u16, credential: u16) {
    let setup = format!(
        "python3 -m venv /tmp/v && printf '%s\\n' '{}' > /tmp/index-ca.pem && cat /etc/ssl/certs/ca-certificates.crt /tmp/index-ca.pem > /tmp/index-bundle.pem && grep -c 'BEGIN CERT' /tmp/index-bundle.pem \"$SSL_CERT_FILE\"",
        ca_pem.trim_end()
    );
    let out = sandbox.exec(&setup, None).await.unwrap();
    assert!(out.success(), "{}", out.stderr);
    println!("trust bundles (certificates): {}", out.stdout.replace('\n', " "));
    let names: Vec<String> = (0..20).map(|i| format!("fhbench{i}")).collect();
    let names = names.join(" ");
    let mut ways = Vec::new();
    for (label, url, extra) in [
        (
            "password in the URL, plain tunnel",
            format!("https://bench:bench-pass-7313@localhost:{plain}/simple/"),
            "--cert /tmp/index-bundle.pem",
        ),
        (
            "credential added by the relay",
            format!("https://localhost:{credential}/simple/"),
            "",
        ),
    ] {
        let mut took = Vec::new();
        for run in 0..3 {
            let command = format!(
                "env -u REQUESTS_CA_BUNDLE -u CURL_CA_BUNDLE /tmp/v/bin/python -m pip install -q --no-cache-dir --disable-pip-version-check --no-deps {extra} --index-url {url} --target /tmp/t-{}-{run} {names}",
                ways.len()
            );
            let started = std::time::Instant::now();
            let out = sandbox.exec(&command, None).await.unwrap();
            took.push(started.elapsed().as_secs_f64());
            assert!(out.success(), "{label}: {} {}", out.stdout, out.stderr);
        }
        took.sort_by(f64::total_cmp);
        ways.push((label, took[1]));
    }
    let probe = format!(
        "cat > /tmp/phases.py <<'PY'\n{PHASES}PY\n/tmp/v/bin/python /tmp/phases.py {plain} {credential}"
    );
    let out = sandbox.exec(&probe, None).await.unwrap();
    assert!(out.success(), "{}", out.stderr);
    print!("{}", out.stdout);
    println!(
        "pip install of 20 packages from a private index (median of 3): {} {:.2} s, {} {:.2} s",
        ways[0].0, ways[0].1, ways[1].0, ways[1].1
    );
}

/// One connection's phases through each way, three times, timed by the
/// client: the CONNECT, the TLS handshake (loading the trust file
/// included, as pip does for each connection) and the first byte of the
/// index's answer. Arguments: the plain and the credential port.
const PHASES: &str = r#"import base64, os, socket, ssl, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
basic = "Basic " + base64.b64encode(b"bench:bench-pass-7313").decode()
for label, port, cafile, auth in (("plain tunnel", int(sys.argv[1]), "/tmp/index-bundle.pem", basic), ("relay", int(sys.argv[2]), os.environ["SSL_CERT_FILE"], None)):
    for _ in range(3):
        t0 = time.perf_counter()
        s = socket.create_connection((proxy.hostname, proxy.port))
        s.sendall(f"CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(4096)
        t1 = time.perf_counter()
        tls = ssl.create_default_context(cafile=cafile).wrap_socket(s, server_hostname="localhost")
        t2 = time.perf_counter()
        head = f"GET /simple/fhbench0/ HTTP/1.1\r\nHost: localhost:{port}\r\n" + (f"Authorization: {auth}\r\n" if auth else "") + "\r\n"
        tls.sendall(head.encode())
        tls.recv(65536)
        t3 = time.perf_counter()
        print(f"one connection, {label}: CONNECT {(t1 - t0) * 1e3:.1f} ms, TLS (trust file loaded) {(t2 - t1) * 1e3:.1f} ms, first byte {(t3 - t2) * 1e3:.1f} ms")
        tls.close()
"#;

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// An HTTPS server for `localhost` on 127.0.0.1 that answers each request
/// with 50 MB; returns its port.
async fn https_server(ca: &TestCa) -> u16 {
    let acceptor = tokio_rustls::TlsAcceptor::from(ca.server_config("localhost"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = Arc::new(vec![b'x'; SIZE]);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let body = body.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
                );
                if tls.write_all(answer.as_bytes()).await.is_ok() {
                    let _ = tls.write_all(&body).await;
                }
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}
