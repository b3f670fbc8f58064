//! What the relay forwards inside a connection it intercepted for a
//! credential, decided before any credential is added, and how the
//! request is made plain before it goes on. The request must name nothing
//! but the connection's own host: an origin-form target (a path; never a
//! URL or `host:port`, which a front end routing by the request line
//! would send to another virtual host), and a `Host` that is the
//! connection's host and port when it has one (the relay then writes
//! `Host` itself). Its path is normalised as servers normalise it (dot
//! segments resolved) so that the prefix check sees the path the server
//! will serve, and what servers decode in more than one way is refused:
//! a percent-encoding of anything but an ordinary character (`.`, `\`,
//! `%`, `;`, a control byte, bytes that are not UTF-8, `%u`), a
//! backslash, a dot segment with parameters (`..;`) or behind an encoded
//! slash (`..%2f`), a path that climbs above the root or starts with `//`.
//! TRACE and CONNECT are never forwarded; GET, HEAD, OPTIONS and DELETE
//! carry no body. Headers that let a server read another method, path or
//! host (`X-HTTP-Method-Override`, `X-Original-URL`, `Forwarded`, ...),
//! the sandbox's framing (hyper frames the request again), cookies, and
//! what lets the answer come encoded or in pieces (`Accept-Encoding`,
//! `Range`) are removed, so the answer can be screened for the credential.

use http::uri::PathAndQuery;
use http::{HeaderMap, Method, StatusCode, Uri};

/// Why a request is not forwarded: the status the sandbox gets and the
/// reason, which the transcript records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused {
    pub status: StatusCode,
    pub reason: String,
}

impl Refused {
    fn bad(reason: String) -> Refused {
        Refused {
            status: StatusCode::BAD_REQUEST,
            reason,
        }
    }
}

/// A request that may be forwarded: its normalised target, and the path
/// alone for the prefix check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Checked {
    pub target: PathAndQuery,
    pub path: String,
}

/// Checks one request for the connection to `host`:`port`. `body` is
/// the body's exact length when it is known.
pub(super) fn check(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Option<u64>,
    host: &str,
    port: u16,
) -> Result<Checked, Refused> {
    if method == Method::TRACE || method == Method::CONNECT {
        return Err(Refused {
            status: StatusCode::METHOD_NOT_ALLOWED,
            reason: format!("{method} is never forwarded on a connection that carries a credential"),
        });
    }
    let bodiless = [Method::GET, Method::HEAD, Method::OPTIONS, Method::DELETE];
    if bodiless.contains(method) && body != Some(0) {
        return Err(Refused::bad(format!(
            "a {method} request with a body is not forwarded (servers that ignore it would read it as another request)"
        )));
    }
    if uri.scheme().is_some() || uri.authority().is_some() {
        return Err(Refused::bad(format!(
            "the request names {}; on this connection to {} send a path (origin-form) only",
            clipped(&uri.to_string()),
            host_value(host, port)
        )));
    }
    check_host_headers(headers, host, port)?;
    let raw = uri.path();
    if !raw.starts_with('/') {
        return Err(Refused::bad(format!(
            "the request target {:?} is not a path; send one that starts with \"/\"",
            clipped(raw)
        )));
    }
    let path = normalised_path(raw)?;
    let target = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.clone(),
    };
    let target = target
        .parse::<PathAndQuery>()
        .map_err(|e| Refused::bad(format!("the request target cannot be sent on ({e})")))?;
    Ok(Checked { target, path })
}

/// Headers that make a server read another method, path or host than the
/// request line's, or that carry what the relay does not vouch for.
const REMOVED: [&str; 13] = [
    "content-length",
    "transfer-encoding",
    "expect",
    "cookie",
    "range",
    "if-range",
    "forwarded",
    "x-host",
    "x-original-url",
    "x-rewrite-url",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Makes a checked request's headers plain: see the module's comment.
/// `Host` is the connection's; the answer must come unencoded.
pub(super) fn plain_headers(headers: &mut HeaderMap, host: &str, port: u16) -> Result<(), Refused> {
    // `X-Forwarded-Host`, `-Prefix`, `-Proto`, ...: all of them.
    let forwarded: Vec<http::HeaderName> = headers
        .keys()
        .filter(|name| name.as_str().starts_with("x-forwarded-"))
        .cloned()
        .collect();
    for name in forwarded {
        headers.remove(name);
    }
    for name in REMOVED {
        headers.remove(name);
    }
    let value = http::HeaderValue::from_str(&host_value(host, port))
        .map_err(|_| Refused::bad("the host is not a header value".into()))?;
    headers.insert(http::header::HOST, value);
    headers.insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    Ok(())
}

/// Attacker-chosen text cut to what a reason needs.
pub(super) fn clipped(text: &str) -> String {
    const MOST: usize = 200;
    match text.char_indices().nth(MOST) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// The `Host` value the relay writes: the name, with the port unless 443.
pub(super) fn host_value(host: &str, port: u16) -> String {
    if port == 443 {
        host.to_owned()
    } else {
        format!("{host}:{port}")
    }
}

/// At most one `Host`, naming this connection's host and port (443 when
/// it names none). None at all is fine: the relay writes its own.
fn check_host_headers(headers: &HeaderMap, host: &str, port: u16) -> Result<(), Refused> {
    let mut values = headers.get_all(http::header::HOST).iter();
    let Some(value) = values.next() else {
        return Ok(());
    };
    if values.next().is_some() {
        return Err(Refused::bad("the request has more than one Host header".into()));
    }
    let text = value.to_str().unwrap_or("");
    match super::http_head::split_host_port(text, 443) {
        Ok((name, named_port)) if name.eq_ignore_ascii_case(host) && named_port == port => Ok(()),
        _ => Err(Refused::bad(format!(
            "the request's Host names {:?}; this connection is to {}",
            clipped(text),
            host_value(host, port)
        ))),
    }
}

/// `raw` with its dot segments resolved (RFC 3986 §5.2.4), or why it is
/// refused.
fn normalised_path(raw: &str) -> Result<String, Refused> {
    check_encoding(raw)?;
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = raw.get(1..).unwrap_or("").split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." | ".." => {
                if *segment == ".." && kept.pop().is_none() {
                    return Err(Refused::bad("the path climbs above the root".into()));
                }
                if i == last {
                    kept.push("");
                }
            }
            other if hides_dot_segment(other) => {
                return Err(Refused::bad(format!(
                    "the path segment {:?} is a dot segment to some servers (dots alone, with parameters or behind an encoded \"/\"); send the path without it",
                    clipped(other)
                )));
            }
            other => kept.push(other),
        }
    }
    let path = format!("/{}", kept.join("/"));
    if path.starts_with("//") {
        return Err(Refused::bad(
            "the path starts with \"//\", which some servers read as a host".into(),
        ));
    }
    Ok(path)
}

/// Refuses what servers decode in more than one way: a backslash, a `%`
/// not followed by two hex digits (`%u002e`), the encoding of `.`, `\`,
/// `%`, `;` or a control byte, and encoded bytes that are not UTF-8
/// (overlong forms of `.` or `/`).
fn check_encoding(raw: &str) -> Result<(), Refused> {
    if raw.contains('\\') {
        return Err(Refused::bad(
            "the path holds a backslash, which some servers read as \"/\"".into(),
        ));
    }
    let bytes = raw.as_bytes();
    let mut at = 0;
    while let Some(offset) = bytes[at..].iter().position(|b| *b == b'%') {
        at += offset;
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        let decoded = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
        match decoded {
            Some(b) if !matches!(b, b'.' | b'\\' | b'%' | b';') && !b.is_ascii_control() => at += 3,
            _ => {
                let shown: String = raw[at..].chars().take(3).collect();
                return Err(Refused::bad(format!(
                    "the path holds {shown:?}, which servers decode in different ways; send the character plainly"
                )));
            }
        }
    }
    if std::str::from_utf8(&percent_encoding::percent_decode_str(raw).collect::<Vec<u8>>()).is_err() {
        return Err(Refused::bad(
            "the path's percent-encoded bytes are not UTF-8 (an overlong form of \".\" or \"/\" among them, perhaps)".into(),
        ));
    }
    Ok(())
}

/// Whether a segment that is not `.` or `..` is one to some server: dots
/// alone (`...`), or `.`/`..` once `;` parameters are dropped (Tomcat) or
/// `%2F` is decoded before resolving.
fn hides_dot_segment(segment: &str) -> bool {
    if segment.len() > 2 && segment.bytes().all(|b| b == b'.') {
        return true;
    }
    let lower = segment.to_ascii_lowercase();
    lower
        .split("%2f")
        .map(|piece| piece.split(';').next().unwrap_or(""))
        .any(|core| core == "." || core == "..")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn run(method: &str, target: &str, host: Option<&str>) -> Result<Checked, Refused> {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(http::header::HOST, host.parse().unwrap());
        }
        let uri: Uri = target.parse().unwrap();
        check(
            &method.parse().unwrap(),
            &uri,
            &headers,
            Some(0),
            "pypi.corp.example",
            8443,
        )
    }

    fn path(target: &str) -> String {
        run("GET", target, None).unwrap().target.to_string()
    }

    #[test]
    fn dot_segments_are_resolved_before_the_prefix_is_checked() {
        assert_eq!(path("/simple/pkg/"), "/simple/pkg/");
        assert_eq!(path("/simple/../admin/"), "/admin/");
        assert_eq!(path("/simple/a/../../api/x?y=1"), "/api/x?y=1");
        assert_eq!(path("/simple/./a/."), "/simple/a/");
        assert_eq!(path("/simple/.."), "/");
        assert_eq!(path("/simple//../admin"), "/simple/admin");
        assert_eq!(path("/simple/%40scope/a%20b"), "/simple/%40scope/a%20b");
        assert_eq!(path("/"), "/");
        // npm's scoped packages: an encoded slash alone is kept as it is.
        assert_eq!(path("/@corp%2flib"), "/@corp%2flib");
    }

    #[test]
    fn what_servers_read_in_more_than_one_way_is_refused() {
        for target in [
            "/simple/%2e%2e/admin/",
            "/simple/%2E./admin/",
            "/simple/..%2fadmin/",
            "/simple/..%2Fadmin/",
            "/simple/..;/admin/",
            "/simple/.;x/admin",
            "/simple/%5c..%5cadmin",
            "/simple/%252e%252e/admin",
            "/simple/..%00/admin",
            "/simple/%u002e%u002e/admin",
            "/simple/%c0%ae%c0%ae/admin",
            "/simple/..%09/admin",
            "/simple/.../admin",
            "/simple/%3b/x",
            "/simple/%zz",
            "/simple/%2",
            "/../../x",
            "/../..//evil",
            "//evil/simple/",
        ] {
            let refused = run("GET", target, None).unwrap_err();
            assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{target}");
        }
        let uri = Uri::builder().path_and_query("/simple\\..\\admin").build();
        if let Ok(uri) = uri {
            let refused = check(&Method::GET, &uri, &HeaderMap::new(), Some(0), "h", 443).unwrap_err();
            assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn only_origin_form_targets_naming_this_host_and_port_go_on() {
        let refused = run("GET", "https://echo.corp.example/simple/", None).unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert!(refused.reason.contains("echo.corp.example"), "{}", refused.reason);
        let refused = run(
            "GET",
            "https://pypi.corp.example:8443/simple/",
            Some("pypi.corp.example:8443"),
        )
        .unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert!(run("CONNECT", "echo.corp.example:443", None).is_err());
        assert!(run("OPTIONS", "*", None).is_err());
        assert!(run("GET", "/simple/", Some("pypi.corp.example:8443")).is_ok());
        assert!(run("GET", "/simple/", Some("PYPI.corp.example.:8443")).is_ok());
        for other in [
            "pypi.corp.example",
            "pypi.corp.example:443",
            "pypi.corp.example:9000",
            "echo.corp.example:8443",
            "pypi.corp.example:x",
        ] {
            let refused = run("GET", "/simple/", Some(other)).unwrap_err();
            assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{other}");
        }
        let mut two = HeaderMap::new();
        two.append(http::header::HOST, "pypi.corp.example:8443".parse().unwrap());
        two.append(http::header::HOST, "echo.corp.example".parse().unwrap());
        assert!(check(
            &Method::GET,
            &"/simple/".parse().unwrap(),
            &two,
            Some(0),
            "pypi.corp.example",
            8443
        )
        .is_err());
    }

    #[test]
    fn trace_and_connect_are_never_forwarded() {
        for method in ["TRACE", "CONNECT"] {
            let target = if method == "CONNECT" {
                "pypi.corp.example:8443"
            } else {
                "/simple/"
            };
            assert_eq!(
                run(method, target, None).unwrap_err().status,
                StatusCode::METHOD_NOT_ALLOWED
            );
        }
        assert!(run("PUT", "/simple/x", None).is_ok());
    }

    #[test]
    fn bodies_only_where_a_method_takes_one() {
        let uri: Uri = "/simple/x".parse().unwrap();
        let check_with = |method: Method, body| check(&method, &uri, &HeaderMap::new(), body, "h", 443);
        assert!(check_with(Method::GET, Some(60)).is_err());
        assert!(check_with(Method::GET, None).is_err());
        assert!(check_with(Method::DELETE, Some(1)).is_err());
        assert!(check_with(Method::PUT, Some(60)).is_ok());
        assert!(check_with(Method::POST, None).is_ok());
    }

    #[test]
    fn headers_that_reroute_or_reframe_the_request_are_removed() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("x-http-method-override", "DELETE"),
            ("x-http-method", "DELETE"),
            ("x-original-url", "/admin"),
            ("x-forwarded-host", "other"),
            ("x-forwarded-anything", "x"),
            ("forwarded", "host=other"),
            ("content-length", "60"),
            ("transfer-encoding", "chunked"),
            ("expect", "100-continue"),
            ("cookie", "JSESSIONID=1"),
            ("range", "bytes=1-1"),
            ("accept-encoding", "gzip"),
            ("host", "h:8443"),
            ("user-agent", "pip"),
        ] {
            headers.insert(http::HeaderName::from_static(name), value.parse().unwrap());
        }
        plain_headers(&mut headers, "h", 8443).unwrap();
        let mut left: Vec<String> = headers
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["accept-encoding: identity", "host: h:8443", "user-agent: pip"]
        );
    }

    #[test]
    fn reasons_quote_at_most_a_little_of_what_the_sandbox_sent() {
        let long = format!("/{}", "a".repeat(5000));
        let uri: Uri = format!("https://other{long}").parse().unwrap();
        let refused = check(&Method::GET, &uri, &HeaderMap::new(), Some(0), "h", 443).unwrap_err();
        assert!(refused.reason.len() < 400, "{}", refused.reason.len());
    }

    #[test]
    fn the_relay_writes_the_port_unless_it_is_443() {
        assert_eq!(host_value("h", 443), "h");
        assert_eq!(host_value("h", 8443), "h:8443");
    }
}
