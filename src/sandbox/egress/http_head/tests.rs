//! Request heads as the sandbox's proxy clients send them, and as an
//! attacker would: each smuggling or fronting trick is refused, naming
//! where the request was going.

use super::*;

fn refused(head: &[u8]) -> Refusal {
    match ProxyRequest::parse(head) {
        Ok(request) => panic!("accepted {request:?}"),
        Err(refusal) => refusal,
    }
}

fn for_a_example(refusal: &Refusal) -> bool {
    refusal.target == Some(("a.example".to_owned(), 80))
}

#[test]
fn proxy_requests_parse_and_forward_in_origin_form() {
    let connect =
        ProxyRequest::parse(b"CONNECT Pkgs.Example.org:443 HTTP/1.1\r\nHost: pkgs.example.org:443\r\n\r\n")
            .unwrap();
    assert_eq!(
        (connect.connect, connect.host.as_str(), connect.port),
        (true, "pkgs.example.org", 443)
    );
    let head = b"GET http://127.0.0.1:8080/simple/x/?a=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n";
    let plain = ProxyRequest::parse(head).unwrap();
    assert_eq!(
        (plain.host.as_str(), plain.port, plain.body_length),
        ("127.0.0.1", 8080, 0)
    );
    assert_eq!(
        String::from_utf8(plain.forwarded).unwrap(),
        "GET /simple/x/?a=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    assert!(ProxyRequest::parse(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
    assert!(ProxyRequest::parse(b"GET https://x/ HTTP/1.1\r\n\r\n").is_err());
    let v6 = ProxyRequest::parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!((v6.host.as_str(), v6.port), ("::1", 8443));
}

#[test]
fn the_forwarded_head_carries_the_targets_host_and_no_hop_by_hop_headers() {
    // No Host from the client: the target's is added (RFC 9112 §3.2.2).
    let plain = ProxyRequest::parse(
        b"POST http://A.example./upload?x=1#frag HTTP/1.0\r\nConnection: X-Secret, keep-alive\r\nX-Secret: 1\r\nTE: trailers\r\nProxy-Authorization: Basic eA==\r\nContent-Length: 5\r\nUser-Agent: pip\r\n\r\n",
    )
    .unwrap();
    assert_eq!((plain.host.as_str(), plain.body_length), ("a.example", 5));
    assert_eq!(
        String::from_utf8(plain.forwarded).unwrap(),
        "POST /upload?x=1 HTTP/1.0\r\nHost: a.example\r\nContent-Length: 5\r\nUser-Agent: pip\r\nConnection: close\r\n\r\n"
    );
    let query = ProxyRequest::parse(b"GET http://[::1]:8080?q HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n").unwrap();
    assert_eq!(
        String::from_utf8(query.forwarded).unwrap(),
        "GET /?q HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn a_host_header_naming_another_site_is_refused() {
    // An allowed name's address shared with other sites (a CDN) must not
    // reach them through the Host header.
    let refusal =
        refused(b"GET http://pkgs.example.org/simple/ HTTP/1.1\r\nHost: internal.example.com\r\n\r\n");
    assert!(
        refusal.reason.contains("Host header names internal.example.com"),
        "{refusal:?}"
    );
    assert_eq!(refusal.target, Some(("pkgs.example.org".to_owned(), 80)));
    let refusal = refused(b"CONNECT pkgs.example.org:443 HTTP/1.1\r\nHost: other.example:443\r\n\r\n");
    assert!(refusal.reason.contains("other.example"), "{refusal:?}");
    assert!(ProxyRequest::parse(b"GET http://A.example:80/ HTTP/1.1\r\nHost: a.EXAMPLE.\r\n\r\n").is_ok());
}

#[test]
fn a_host_header_behind_a_bare_lf_is_refused() {
    // Split on CRLF this is one header, `X-Pad`; a server that accepts a
    // bare LF reads a second Host.
    let refusal = refused(
        b"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nX-Pad: 1\nHost: fronted.example\r\n\r\n",
    );
    assert!(for_a_example(&refusal) && refusal.status == 400, "{refusal:?}");
    assert!(refusal.reason.contains("bare LF"), "{refusal:?}");
    // A head whose every line ends in a bare LF.
    let refusal = refused(b"GET http://a.example/ HTTP/1.1\nHost: fronted.example\n\n");
    assert!(
        for_a_example(&refusal) && refusal.reason.contains("bare LF"),
        "{refusal:?}"
    );
    // A CR alone ends a line for some servers too.
    let refusal = refused(b"GET http://a.example/ HTTP/1.1\r\nX-Pad: 1\rHost: fronted.example\r\n\r\n");
    assert!(
        for_a_example(&refusal) && refusal.reason.contains("CR"),
        "{refusal:?}"
    );
}

#[test]
fn a_host_header_in_an_obsolete_line_fold_is_refused() {
    // Unfolded, `X-Pad` has the value "1 Host: fronted.example"; a server
    // that trims the line instead reads a second Host.
    for fold in [&b" "[..], b"\t"] {
        let head = [
            &b"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nX-Pad: 1\r\n"[..],
            fold,
            b"Host: fronted.example\r\n\r\n",
        ]
        .concat();
        let refusal = refused(&head);
        assert!(for_a_example(&refusal), "{refusal:?}");
        assert!(refusal.reason.contains("obsolete line folding"), "{refusal:?}");
    }
}

#[test]
fn two_host_headers_are_refused_even_when_they_agree() {
    for head in [
        &b"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nhost: b.example\r\n\r\n"[..],
        b"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nHost: a.example\r\n\r\n",
    ] {
        let refusal = refused(head);
        assert!(
            for_a_example(&refusal) && refusal.reason.contains("2 Host headers"),
            "{refusal:?}"
        );
    }
    let refusal =
        refused(b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\nHost: a.example:443\r\n\r\n");
    assert!(refusal.reason.contains("2 Host headers"), "{refusal:?}");
}

#[test]
fn a_body_of_unknown_length_or_a_malformed_head_is_refused() {
    let chunked =
        refused(b"POST http://a.example/ HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(chunked.status, 411, "{chunked:?}");
    assert!(chunked.reason.contains("Content-Length"), "{chunked:?}");
    for (head, words) in [
        (
            &b"POST http://a.example/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\n"[..],
            "several Content-Length",
        ),
        (
            b"POST http://a.example/ HTTP/1.1\r\nContent-Length: +3\r\n\r\n",
            "not a number",
        ),
        (
            b"GET http://a.example/ HTTP/1.1\r\nHost : a.example\r\n\r\n",
            "not valid HTTP/1.1",
        ),
    ] {
        let refusal = refused(head);
        assert!(
            for_a_example(&refusal) && refusal.status == 400 && refusal.reason.contains(words),
            "{words}: {refusal:?}"
        );
    }
    for head in [
        &b"GET http://user:pw@a.example/ HTTP/1.1\r\n\r\n"[..],
        b"GET http://a.ex%61mple/ HTTP/1.1\r\n\r\n",
        b"GET http://a.example:0/ HTTP/1.1\r\n\r\n",
        b"not http at all\r\n\r\n",
    ] {
        let refusal = refused(head);
        assert_eq!(refusal.target, None, "{refusal:?}");
    }
}

#[tokio::test]
async fn reading_a_head_stops_at_a_bare_lf_without_waiting_for_more() {
    // The client never sends the blank line: the head is refused at once.
    let (mut near, mut far) = tokio::io::duplex(1024);
    tokio::io::AsyncWriteExt::write_all(&mut near, b"GET http://a.example/ HTTP/1.1\nHost: b\n")
        .await
        .unwrap();
    let (head, rest) = read_head(&mut far).await.unwrap();
    assert!(rest.is_empty());
    assert!(refused(&head).reason.contains("bare LF"));
    drop(near);
}

#[tokio::test]
async fn one_request_forwards_its_body_and_drops_what_follows() {
    let (mut near, far) = tokio::io::duplex(1024);
    let mut one = OneRequest::new(far, 5);
    tokio::io::AsyncWriteExt::write_all(&mut near, b"helloGET / HTTP/1.1\r\nHost: b.example\r\n\r\n")
        .await
        .unwrap();
    drop(near);
    let mut forwarded = Vec::new();
    one.read_to_end(&mut forwarded).await.unwrap();
    assert_eq!(forwarded, b"hello");
    assert_eq!(one.dropped, 35);
}
