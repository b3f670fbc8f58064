//! How the MCP servers are reached: one session over stdin/stdout, or
//! Streamable HTTP at `/mcp`. Over HTTP the `Host` header is checked
//! against [`AllowedHosts`] (a page in a browser can reach a server on
//! loopback through a DNS name that points there: the check stops that);
//! any other name is answered 403.

use rmcp::{ServerHandler, ServiceExt};
use std::net::IpAddr;
use std::sync::Arc;

/// Names a server on loopback is always reached by.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The `Host` names the HTTP transport answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    /// Any name: only behind a proxy that checks the name itself.
    Any,
    /// These names (`host` or `host:port`).
    Only(Vec<String>),
}

impl Default for AllowedHosts {
    fn default() -> AllowedHosts {
        AllowedHosts::Only(LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("--allowed-host {given:?} is not a host name, an IP address or host:port (e.g. mcp.example.com or mcp.example.com:8765; \"*\" allows any name)")]
pub struct BadHost {
    pub given: String,
}

impl AllowedHosts {
    /// The loopback names and `extra` (each a host name, an IP address or
    /// `host:port`); `*` among them allows any name.
    pub fn with(extra: &[String]) -> Result<AllowedHosts, BadHost> {
        let mut hosts = match AllowedHosts::default() {
            AllowedHosts::Only(hosts) => hosts,
            AllowedHosts::Any => Vec::new(),
        };
        for name in extra {
            let name = name.trim();
            if name == "*" {
                return Ok(AllowedHosts::Any);
            }
            if !is_host(name) {
                return Err(BadHost {
                    given: name.to_owned(),
                });
            }
            hosts.push(name.to_ascii_lowercase());
        }
        Ok(AllowedHosts::Only(hosts))
    }
}

impl AllowedHosts {
    /// The names, for the log: "localhost, 127.0.0.1, ::1" or "any name".
    pub fn describe(&self) -> String {
        match self {
            AllowedHosts::Any => "any name".to_owned(),
            AllowedHosts::Only(names) => names.join(", "),
        }
    }
}

/// A host name, an IP address (IPv6 bare or in brackets) or either with a port.
fn is_host(name: &str) -> bool {
    if name.is_empty() || name.contains(['/', '@', '?', '#']) || name.chars().any(char::is_whitespace) {
        return false;
    }
    name.parse::<IpAddr>().is_ok() || http::uri::Authority::try_from(name).is_ok()
}

/// Serves one MCP session over stdin/stdout until the client leaves.
pub async fn serve_stdio<S: ServerHandler>(server: S) -> Result<(), String> {
    let running = server
        .serve(rmcp::transport::io::stdio_pipes())
        .await
        .map_err(|e| format!("MCP session did not start: {e}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("MCP session ended abnormally: {e}"))
}

/// Serves MCP over Streamable HTTP at `/mcp`, to requests whose `Host`
/// header `hosts` allows, until `shutdown` is cancelled.
pub async fn serve_http<S: ServerHandler + Clone + Send + Sync + 'static>(
    server: S,
    listener: tokio::net::TcpListener,
    hosts: &AllowedHosts,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), String> {
    use rmcp::transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    };
    let config = StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
    let config = match hosts {
        AllowedHosts::Any => {
            tracing::warn!("the MCP server answers any Host header (--allowed-host \"*\"): keep it behind a proxy that checks the name");
            config.disable_allowed_hosts()
        }
        AllowedHosts::Only(names) => config.with_allowed_hosts(names.clone()),
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(|e| format!("the HTTP server stopped: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn loopback_names_are_always_allowed_and_others_only_when_given() {
        assert_eq!(
            AllowedHosts::with(&[]).unwrap(),
            AllowedHosts::Only(names(&["localhost", "127.0.0.1", "::1"]))
        );
        assert_eq!(
            AllowedHosts::with(&names(&[
                "MCP.example.com",
                "203.0.113.7:8765",
                "[fd00::1]:80",
                "fd00::2"
            ]))
            .unwrap(),
            AllowedHosts::Only(names(&[
                "localhost",
                "127.0.0.1",
                "::1",
                "mcp.example.com",
                "203.0.113.7:8765",
                "[fd00::1]:80",
                "fd00::2"
            ]))
        );
        assert_eq!(
            AllowedHosts::with(&names(&["a.example", "*"])).unwrap(),
            AllowedHosts::Any
        );
    }

    #[test]
    fn a_name_that_is_not_a_host_is_refused_with_examples() {
        for bad in [
            "",
            "http://mcp.example.com",
            "mcp.example.com/mcp",
            "user@host",
            "two words",
        ] {
            let err = AllowedHosts::with(&names(&[bad])).unwrap_err().to_string();
            assert!(err.contains("mcp.example.com:8765"), "{bad}: {err}");
        }
    }
}
