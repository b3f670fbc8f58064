//! What the relay forwards inside a connection it intercepted for a
//! credential, decided before any credential is added. The request must
//! name nothing but the connection's own host: an origin-form target (a
//! path; never a URL or `host:port`, which a front end routing by the
//! request line would send to another virtual host), and a `Host` that is
//! the connection's host and port when it has one (the relay then writes
//! `Host` itself). Its path is normalised as servers normalise it (dot
//! segments resolved) so that the prefix check sees the path the server
//! will serve; what servers read in more than one way is refused: a
//! percent-encoded `.`, `\` or `%`, a backslash, a dot segment with
//! parameters (`..;`) or one hidden behind an encoded slash (`..%2f`).
//! TRACE (which echoes the request) and CONNECT are never forwarded.

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

/// Checks one request for the connection to `host`:`port`.
pub(super) fn check(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    host: &str,
    port: u16,
) -> Result<Checked, Refused> {
    if method == Method::TRACE || method == Method::CONNECT {
        return Err(Refused {
            status: StatusCode::METHOD_NOT_ALLOWED,
            reason: format!("{method} is never forwarded on a connection that carries a credential"),
        });
    }
    if uri.scheme().is_some() || uri.authority().is_some() {
        return Err(Refused::bad(format!(
            "the request names {uri}; on this connection to {} send a path (origin-form) only",
            host_value(host, port)
        )));
    }
    check_host_headers(headers, host, port)?;
    let raw = uri.path();
    if !raw.starts_with('/') {
        return Err(Refused::bad(format!(
            "the request target {raw:?} is not a path; send one that starts with \"/\""
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
    // `name:port`, `name` (443), `[v6]:port` or `[v6]`; a port that is not
    // a number names no port this connection has.
    let (name, named_port) = match text.rsplit_once(':') {
        Some((name, p)) if !p.contains(']') => (name, p.parse::<u16>().unwrap_or(0)),
        _ => (text, 443),
    };
    let same = name.trim_end_matches('.').eq_ignore_ascii_case(host) && named_port == port;
    if same {
        Ok(())
    } else {
        Err(Refused::bad(format!(
            "the request's Host names {text:?}; this connection is to {}",
            host_value(host, port)
        )))
    }
}

/// `raw` with its dot segments resolved (RFC 3986 §5.2.4), or why it is
/// refused.
fn normalised_path(raw: &str) -> Result<String, Refused> {
    let lower = raw.to_ascii_lowercase();
    for (encoded, what) in [
        ("%2e", "an encoded \".\""),
        ("%5c", "an encoded \"\\\""),
        ("%25", "an encoded \"%\""),
    ] {
        if lower.contains(encoded) {
            return Err(Refused::bad(format!(
                "the path holds {what} ({encoded}), which servers decode in different ways; send it plainly"
            )));
        }
    }
    if raw.contains('\\') {
        return Err(Refused::bad(
            "the path holds a backslash, which some servers read as \"/\"".into(),
        ));
    }
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = raw[1..].split('/').collect();
    let last = segments.len() - 1;
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." | ".." => {
                if *segment == ".." {
                    kept.pop();
                }
                if i == last {
                    kept.push("");
                }
            }
            other if hides_dot_segment(other) => {
                return Err(Refused::bad(format!(
                    "the path segment {other:?} is a dot segment to some servers (with parameters or an encoded \"/\"); send the path without it"
                )));
            }
            other => kept.push(other),
        }
    }
    Ok(format!("/{}", kept.join("/")))
}

/// Whether a segment that is not `.` or `..` becomes one for a server that
/// drops `;` parameters (Tomcat) or decodes `%2F` before it resolves.
fn hides_dot_segment(segment: &str) -> bool {
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
        assert_eq!(path("/simple/../../api/x?y=1"), "/api/x?y=1");
        assert_eq!(path("/simple/./a/."), "/simple/a/");
        assert_eq!(path("/simple/.."), "/");
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
        ] {
            let refused = run("GET", target, None).unwrap_err();
            assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{target}");
        }
        let uri = Uri::builder().path_and_query("/simple\\..\\admin").build();
        if let Ok(uri) = uri {
            let refused = check(&Method::GET, &uri, &HeaderMap::new(), "h", 443).unwrap_err();
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
    fn the_relay_writes_the_port_unless_it_is_443() {
        assert_eq!(host_value("h", 443), "h");
        assert_eq!(host_value("h", 8443), "h:8443");
    }
}
