//! The egress relay's decisions, on in-memory streams (the sandbox's side)
//! and real sockets on loopback (the servers).

use super::*;
use tokio::io::AsyncReadExt;

mod credentials;
mod tls;

#[test]
fn internal_addresses_are_recognised() {
    for ip in [
        "127.0.0.1",
        "10.1.2.3",
        "172.20.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fd00::1",
        "fe80::1",
        "::ffff:10.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
        "fec0::1",
        "198.18.0.1",
        "198.19.255.254",
        "192.0.0.8",
        "240.0.0.1",
        "255.255.255.254",
        "100.100.100.200",
        "fd00:ec2::254",
        "168.63.129.16",
    ] {
        assert!(is_internal(ip.parse().unwrap()), "{ip}");
    }
    for ip in [
        "93.184.216.34",
        "2606:2800:220:1::1",
        "100.128.0.1",
        "198.20.0.1",
        "192.0.2.1",
    ] {
        assert!(!is_internal(ip.parse().unwrap()), "{ip}");
    }
}

#[tokio::test]
async fn a_phases_connections_close_when_it_ends() {
    // A server that never closes its side.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        socket.write_all(b"hello").await.unwrap();
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
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
        vec![HostPattern::parse(&format!("127.0.0.1:{port}")).unwrap()],
    );
    let (mut near, far) = tokio::io::duplex(64 << 10);
    let serve = tokio::spawn({
        let egress = egress.clone();
        async move { egress.handle(far).await }
    });
    near.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    near.write_all(&tls::client_hello("127.0.0.1")).await.unwrap();
    let mut got = [0u8; 64];
    let mut read = 0;
    while !String::from_utf8_lossy(&got[..read]).ends_with("hello") {
        read += near.read(&mut got[read..]).await.unwrap();
    }
    // The agent phase begins: the setup's tunnel is closed.
    egress.set_phase("agent", Vec::new());
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), near.read_to_end(&mut rest))
        .await
        .expect("the tunnel closed")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), serve)
        .await
        .unwrap()
        .unwrap();
    server.abort();
}

#[tokio::test]
async fn metadata_addresses_stay_closed_whatever_is_opened() {
    let egress = Egress::new(
        Reach {
            private: true,
            loopback: true,
        },
        Default::default(),
    );
    egress.set_phase(
        "setup",
        ["169.254.169.254", "fe80::1", "10.0.0.1"]
            .map(|h| HostPattern::parse(h).unwrap())
            .to_vec(),
    );
    for (request, words) in [
        (
            &b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n\r\n"[..],
            "which no setting opens",
        ),
        (
            &b"CONNECT [fe80::1]:443 HTTP/1.1\r\n\r\n"[..],
            "which no setting opens",
        ),
    ] {
        let (mut near, far) = tokio::io::duplex(64 << 10);
        let serve = tokio::spawn({
            let egress = egress.clone();
            async move { egress.handle(far).await }
        });
        near.write_all(request).await.unwrap();
        let mut answer = String::new();
        near.read_to_string(&mut answer).await.unwrap();
        serve.await.unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 403") && answer.contains(words),
            "{answer}"
        );
    }
    assert_eq!(
        address::address_class("10.0.0.1".parse().unwrap()),
        address::AddressClass::Private
    );
    assert_eq!(
        address::address_class("127.0.0.1".parse().unwrap()),
        address::AddressClass::Loopback
    );
    assert_eq!(
        address::address_class("::ffff:169.254.169.254".parse().unwrap()),
        address::AddressClass::Metadata
    );
    assert_eq!(
        address::address_class("fe80::1".parse().unwrap()),
        address::AddressClass::Closed
    );
}

#[tokio::test(start_paused = true)]
async fn idle_connections_time_out_and_one_sandbox_cannot_open_too_many() {
    let egress = Egress::new(Reach::default(), Default::default());
    egress.set_phase("agent", vec![HostPattern::parse("localhost").unwrap()]);
    // MAX_CONNECTIONS connections that never send a head.
    let mut idle = Vec::new();
    let mut serving = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        let (near, far) = tokio::io::duplex(1024);
        let egress = egress.clone();
        serving.push(tokio::spawn(async move { egress.handle(far).await }));
        idle.push(near);
    }
    // Every one of them is waiting for its head now.
    tokio::time::sleep(Duration::from_millis(1)).await;
    // One more is refused at once, without waiting for its head.
    let (mut near, far) = tokio::io::duplex(1024);
    egress.handle(far).await;
    let mut answer = String::new();
    near.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 503") && answer.contains("256 connections open"),
        "{answer}"
    );
    // The idle ones are answered when their head does not come.
    for task in serving {
        task.await.unwrap();
    }
    let mut answer = String::new();
    idle[0].read_to_string(&mut answer).await.unwrap();
    assert!(answer.contains("did not arrive within 10 s"), "{answer}");
    // And their permits are back.
    assert_eq!(egress.open.available_permits(), MAX_CONNECTIONS);
}

#[tokio::test]
async fn hosts_off_the_list_and_internal_addresses_are_refused_with_a_reason() {
    let egress = Egress::new(Reach::default(), Default::default());
    egress.set_phase("setup", vec![HostPattern::parse("localhost").unwrap()]);
    let ask = |request: &'static [u8]| {
        let egress = egress.clone();
        async move {
            let (mut near, far) = tokio::io::duplex(64 << 10);
            let serve = tokio::spawn(async move { egress.handle(far).await });
            near.write_all(request).await.unwrap();
            let mut answer = String::new();
            near.read_to_string(&mut answer).await.unwrap();
            serve.await.unwrap();
            answer
        }
    };
    let off_list = ask(b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n").await;
    assert!(
        off_list.starts_with("HTTP/1.1 403") && off_list.contains("not on the setup allowlist"),
        "{off_list}"
    );
    for request in [
        &b"CONNECT localhost:22 HTTP/1.1\r\n\r\n"[..],
        &b"GET http://localhost:6379/ HTTP/1.1\r\nHost: localhost:6379\r\n\r\n"[..],
    ] {
        let port = ask(request).await;
        assert!(
            port.starts_with("HTTP/1.1 403")
                && port.contains("only 80 and 443 are open unless a port is named"),
            "{port}"
        );
    }
    let inside = ask(b"GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    assert!(
        inside.starts_with("HTTP/1.1 403") && inside.contains("sandbox.egress.allow_loopback"),
        "{inside}"
    );
    egress.set_phase("agent", Vec::new());
    let agent = ask(b"CONNECT localhost:443 HTTP/1.1\r\n\r\n").await;
    assert!(agent.contains("egress is off for the agent"), "{agent}");
    assert_eq!(
        egress.summary("setup").unwrap(),
        "setup reached 0 host(s); denied 2: evil.example, localhost"
    );
    assert!(egress.summary("agent").unwrap().contains("denied 1: localhost"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_connections_from_one_sandbox_leave_another_sandbox_served() {
    // A server the second sandbox may reach, answering at once.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let _ = socket.write_all(b"pong").await;
            });
        }
    });
    let reach = Reach {
        private: false,
        loopback: true,
    };
    let greedy = Egress::new(reach, Default::default());
    greedy.set_phase(
        "agent",
        vec![HostPattern::parse(&format!("127.0.0.1:{port}")).unwrap()],
    );
    let mut idle = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..10_000 {
        let (near, far) = tokio::io::duplex(4096);
        let egress = greedy.clone();
        refused.push(tokio::spawn(async move { egress.handle(far).await }));
        idle.push(near);
    }
    // All but MAX_CONNECTIONS are answered 503 at once; those wait for
    // their request head.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while refused.iter().filter(|t| t.is_finished()).count() < 10_000 - MAX_CONNECTIONS {
        assert!(
            std::time::Instant::now() < deadline,
            "the flood was not refused at once"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        refused.iter().filter(|t| t.is_finished()).count(),
        10_000 - MAX_CONNECTIONS
    );
    // Another sandbox's relay is untouched by the first one's flood.
    let other = Egress::with_tls_ports(reach, vec![port], Default::default());
    other.set_phase(
        "agent",
        vec![HostPattern::parse(&format!("127.0.0.1:{port}")).unwrap()],
    );
    let started = std::time::Instant::now();
    let (mut near, far) = tokio::io::duplex(64 << 10);
    let serve = tokio::spawn({
        let other = other.clone();
        async move { other.handle(far).await }
    });
    near.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    near.write_all(&tls::client_hello("127.0.0.1")).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), near.read_to_end(&mut got))
        .await
        .expect("the other sandbox is served")
        .unwrap();
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 200") && got.ends_with("pong"), "{got}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    drop(near);
    serve.await.unwrap();
    // The flood holds no more than its cap.
    assert_eq!(greedy.open.available_permits(), 0);
    drop(idle);
    for task in refused {
        task.await.unwrap();
    }
    assert_eq!(greedy.open.available_permits(), MAX_CONNECTIONS);
    server.abort();
}

#[test]
fn an_observer_hears_each_decision_once_those_before_it_as_returned() {
    let egress = Egress::default();
    let decision = |host: &str| Decision {
        phase: "setup".into(),
        host: host.into(),
        port: 443,
        denied: None,
        bytes: 0,
        credential: None,
    };
    egress.record(&decision("before.example"));
    let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = heard.clone();
    let earlier = egress.observe(Arc::new(move |d: &Decision| {
        sink.lock().unwrap().push(d.host.clone())
    }));
    egress.record(&decision("after.example"));
    assert_eq!(earlier, vec![decision("before.example")]);
    assert_eq!(*heard.lock().unwrap(), vec!["after.example"]);
    assert_eq!(egress.decisions().len(), 2);
}

/// Sends `request` through `egress` as the sandbox would and returns all
/// it answers.
async fn ask(egress: &Arc<Egress>, request: &[u8]) -> String {
    let (mut near, far) = tokio::io::duplex(64 << 10);
    let serve = tokio::spawn({
        let egress = egress.clone();
        async move { egress.handle(far).await }
    });
    near.write_all(request).await.unwrap();
    let mut answer = String::new();
    near.read_to_string(&mut answer).await.unwrap();
    serve.await.unwrap();
    answer
}

/// The decisions `egress` makes from now on, as the transcript hears them.
fn heard(egress: &Egress) -> Arc<std::sync::Mutex<Vec<Decision>>> {
    let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = heard.clone();
    egress.observe(Arc::new(move |d: &Decision| sink.lock().unwrap().push(d.clone())));
    heard
}

#[tokio::test]
async fn a_second_host_smuggled_past_the_line_parser_is_refused_and_recorded() {
    let egress = Egress::new(Reach::default(), Default::default());
    egress.set_phase("setup", vec![HostPattern::parse("localhost").unwrap()]);
    let heard = heard(&egress);
    for (request, words) in [
        (
            &b"GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\nX-Pad: 1\nHost: fronted.example\r\n\r\n"[..],
            "bare LF",
        ),
        (
            b"GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\nX-Pad: 1\r\n Host: fronted.example\r\n\r\n",
            "obsolete line folding",
        ),
        (
            b"GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\nHost: fronted.example\r\n\r\n",
            "2 Host headers",
        ),
    ] {
        let answer = ask(&egress, request).await;
        assert!(
            answer.starts_with("HTTP/1.1 400") && answer.contains(words),
            "{words}: {answer}"
        );
    }
    // Each is a decision with its reason, heard by the transcript.
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 3, "{heard:?}");
    for (decision, words) in heard
        .iter()
        .zip(["bare LF", "obsolete line folding", "2 Host headers"])
    {
        assert_eq!((decision.host.as_str(), decision.port), ("localhost", 80));
        assert!(
            decision.denied.as_deref().is_some_and(|why| why.contains(words)),
            "{decision:?}"
        );
    }
    assert_eq!(
        egress.summary("setup").unwrap(),
        "setup reached 0 host(s); denied 1: localhost"
    );
}

#[tokio::test]
async fn connect_to_a_port_that_is_not_a_tls_port_is_refused_before_it_resolves() {
    // Port 80 is on the allowlist (a name without a port allows 80 and
    // 443), but a CONNECT there would be a raw tunnel for plain HTTP with
    // any Host in it.
    let egress = Egress::new(
        Reach {
            private: false,
            loopback: true,
        },
        Default::default(),
    );
    egress.set_phase("setup", vec![HostPattern::parse("localhost").unwrap()]);
    let heard = heard(&egress);
    let answer = ask(
        &egress,
        b"CONNECT localhost:80 HTTP/1.1\r\nHost: localhost:80\r\n\r\n",
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 403")
            && answer.contains("CONNECT carries TLS only")
            && answer.contains("sandbox.egress.tls_ports (443), not 80"),
        "{answer}"
    );
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 1);
    assert!(heard[0].denied.as_deref().unwrap().contains("tls_ports"));
}

#[test]
fn metadata_addresses_and_names_stay_closed_with_private_networks_open() {
    let open = Reach {
        private: true,
        loopback: true,
    };
    for ip in [
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "169.254.169.123",
        "100.100.100.200",
        "168.63.129.16",
        "fd00:ec2::254",
        "fd00:ec2::123",
        "fd00:ec2::23",
        "fd20:ce::254",
        "::ffff:100.100.100.200",
    ] {
        assert_eq!(
            open.refusal(ip.parse().unwrap()),
            Some("a cloud metadata address, which no setting opens"),
            "{ip}"
        );
    }
    // Their neighbours in the same private ranges are what allow_private opens.
    for ip in [
        "100.100.100.201",
        "100.64.0.1",
        "fd00:ec3::254",
        "fd20:ce::253",
        "10.0.0.1",
    ] {
        assert_eq!(open.refusal(ip.parse().unwrap()), None, "{ip}");
        assert!(Reach::default().refusal(ip.parse().unwrap()).is_some(), "{ip}");
    }
    // GCP's name is refused before it is resolved, even when listed.
    let egress = Egress::new(open, Default::default());
    egress.set_phase(
        "setup",
        vec![HostPattern::parse("metadata.google.internal").unwrap()],
    );
    let policy = egress.policy.lock().unwrap().clone();
    for head in [
        &b"GET http://metadata.google.internal/computeMetadata/v1/ HTTP/1.1\r\nMetadata-Flavor: Google\r\n\r\n"[..],
        b"CONNECT METADATA.google.internal.:443 HTTP/1.1\r\n\r\n",
    ] {
        let request = ProxyRequest::parse(head).unwrap();
        let (status, why) = egress.check_target(&policy, &request).unwrap_err();
        assert_eq!(status, 403);
        assert!(why.contains("cloud metadata service, which no setting opens"), "{why}");
    }
}

#[tokio::test]
async fn a_second_request_after_the_body_never_reaches_the_server() {
    // The server answers once and then reads what else comes until the
    // relay closes its side.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while !got.ends_with(b"hello") {
            let n = socket.read(&mut chunk).await.unwrap();
            assert!(n > 0, "{}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&chunk[..n]);
        }
        socket
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            .await
            .unwrap();
        socket.shutdown().await.unwrap();
        socket.read_to_end(&mut got).await.unwrap();
        String::from_utf8(got).unwrap()
    });
    let egress = Egress::new(
        Reach {
            private: false,
            loopback: true,
        },
        Default::default(),
    );
    egress.set_phase(
        "setup",
        vec![HostPattern::parse(&format!("127.0.0.1:{port}")).unwrap()],
    );
    let (mut near, far) = tokio::io::duplex(64 << 10);
    let serve = tokio::spawn({
        let egress = egress.clone();
        async move { egress.handle(far).await }
    });
    // A body of 5 bytes, a second request right behind it in the same
    // write, and a third once the answer is in.
    let request = format!(
        "POST http://127.0.0.1:{port}/upload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 5\r\n\r\nhelloGET /admin HTTP/1.1\r\nHost: fronted.example\r\n\r\n"
    );
    near.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    near.read_to_end(&mut answer).await.unwrap();
    assert!(String::from_utf8_lossy(&answer).ends_with("\r\n\r\nok"));
    let _ = near
        .write_all(b"GET /other HTTP/1.1\r\nHost: fronted.example\r\n\r\n")
        .await;
    drop(near);
    serve.await.unwrap();
    let got = server.await.unwrap();
    assert_eq!(
        got,
        format!("POST /upload HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
    );
    let decisions = egress.decisions();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].denied, None);
}
