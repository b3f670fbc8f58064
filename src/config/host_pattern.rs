//! Host patterns of the egress allowlists (`network.setup`,
//! `network.agent`, `repositories.allowed_hosts`): a name, `*.suffix` or an
//! address, with an optional port. Without a port a pattern allows the web's
//! two ports, 80 and 443; any other port must be named (`host:8080`), so an
//! allowlisted name is not also an open door to its SSH, database or admin
//! ports.

use super::ConfigError;

/// Ports a pattern without `:port` allows.
pub const WEB_PORTS: [u16; 2] = [80, 443];

/// The name part of a pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostName {
    /// One name or address.
    Exact(String),
    /// Every name below the suffix, not the suffix itself.
    Suffix(String),
}

/// A host the egress tunnel may connect to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPattern {
    pub name: HostName,
    /// `None`: 80 and 443 ([`WEB_PORTS`]).
    pub port: Option<u16>,
}

const ACCEPTED: &str = r#"write a host name such as "registry.example.org", "*.example.org" for every name below it, or an IP address, each with ":port" when the port is not 80 or 443"#;

impl HostPattern {
    /// Parses `name`, `*.suffix`, an address (`[v6]` when it has a port),
    /// each optionally followed by `:port`. The error says what is accepted.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let trimmed = text.trim().to_ascii_lowercase();
        if trimmed.is_empty() {
            return Err(format!("an empty host; {ACCEPTED}"));
        }
        if trimmed.contains("://") || trimmed.contains('/') {
            return Err(format!("\"{text}\" is a URL, not a host; {ACCEPTED}"));
        }
        let (host, port) = split_port(text, &trimmed)?;
        if host.parse::<std::net::IpAddr>().is_ok() {
            return Ok(HostPattern {
                name: HostName::Exact(host.to_owned()),
                port,
            });
        }
        let (suffix, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        let name = name.trim_end_matches('.');
        if name.contains('*') {
            return Err(format!(
                "\"{text}\": a wildcard may only stand first, as \"*.\" before a name; {ACCEPTED}"
            ));
        }
        if !name.split('.').all(label_ok) {
            return Err(format!("\"{text}\" is not a host name; {ACCEPTED}"));
        }
        if suffix && !name.contains('.') {
            return Err(format!(
                "\"{text}\" would allow a whole top-level domain; name at least two labels, e.g. \"*.example.org\""
            ));
        }
        let name = if suffix {
            HostName::Suffix(name.to_owned())
        } else {
            HostName::Exact(name.to_owned())
        };
        Ok(HostPattern { name, port })
    }

    /// Whether `host` (a name or address as the client wrote it) matches
    /// the name part, whatever the port.
    pub fn matches_name(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match &self.name {
            HostName::Exact(name) => host == *name,
            HostName::Suffix(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
        }
    }

    /// Whether a connection to `host:port` is allowed by this pattern.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.matches_name(host) && self.allows_port(port)
    }

    pub fn allows_port(&self, port: u16) -> bool {
        match self.port {
            Some(own) => own == port,
            None => WEB_PORTS.contains(&port),
        }
    }

    /// Whether everything `inner` allows, this pattern allows too (how an
    /// operator's `repositories.allowed_hosts` limits a repository's list).
    pub fn covers(&self, inner: &HostPattern) -> bool {
        if self.port != inner.port {
            return false;
        }
        match (&self.name, &inner.name) {
            (_, HostName::Exact(name)) => self.matches_name(name),
            (HostName::Suffix(outer), HostName::Suffix(inner)) => {
                inner == outer || inner.ends_with(&format!(".{outer}"))
            }
            (HostName::Exact(_), HostName::Suffix(_)) => false,
        }
    }
}

/// Splits `host:port` (or `[v6]:port`); a bare IPv6 address has no port.
fn split_port<'a>(text: &str, trimmed: &'a str) -> Result<(&'a str, Option<u16>), String> {
    let bad_port = |port: &str| format!("\"{text}\": \"{port}\" is not a port (1 to 65535); {ACCEPTED}");
    let parse_port = |port: &str| match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad_port(port)),
        Ok(port) => Ok(Some(port)),
    };
    if let Some(rest) = trimmed.strip_prefix('[') {
        let Some((address, after)) = rest.split_once(']') else {
            return Err(format!("\"{text}\" opens \"[\" without closing it; {ACCEPTED}"));
        };
        return match after.strip_prefix(':') {
            Some(port) => Ok((address, parse_port(port)?)),
            None if after.is_empty() => Ok((address, None)),
            None => Err(format!("\"{text}\" has text after \"]\"; {ACCEPTED}")),
        };
    }
    if trimmed.parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok((trimmed, None));
    }
    match trimmed.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Ok((host, parse_port(port)?)),
        _ => Ok((trimmed, None)),
    }
}

fn label_ok(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match &self.name {
            HostName::Exact(name) if name.contains(':') && self.port.is_some() => format!("[{name}]"),
            HostName::Exact(name) => name.clone(),
            HostName::Suffix(suffix) => format!("*.{suffix}"),
        };
        match self.port {
            Some(port) => write!(f, "{name}:{port}"),
            None => f.write_str(&name),
        }
    }
}

/// Parses a list of host patterns found under `key`.
pub fn host_patterns(key: &str, hosts: &[String]) -> Result<Vec<HostPattern>, ConfigError> {
    hosts
        .iter()
        .map(|h| HostPattern::parse(h).map_err(|message| ConfigError::invalid(key, message)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(name: &str, port: Option<u16>) -> HostPattern {
        HostPattern {
            name: HostName::Exact(name.into()),
            port,
        }
    }

    #[test]
    fn patterns_accept_names_suffixes_addresses_and_ports() {
        assert_eq!(
            HostPattern::parse("Registry.Example.org"),
            Ok(exact("registry.example.org", None))
        );
        assert_eq!(
            HostPattern::parse("*.example.org:8443"),
            Ok(HostPattern {
                name: HostName::Suffix("example.org".into()),
                port: Some(8443)
            })
        );
        assert_eq!(
            HostPattern::parse("127.0.0.1:8080"),
            Ok(exact("127.0.0.1", Some(8080)))
        );
        assert_eq!(HostPattern::parse("::1"), Ok(exact("::1", None)));
        assert_eq!(HostPattern::parse("[::1]:5000"), Ok(exact("::1", Some(5000))));
        for (text, shown) in [
            ("[::1]:5000", "[::1]:5000"),
            ("*.example.org", "*.example.org"),
            ("a.example:22", "a.example:22"),
        ] {
            assert_eq!(HostPattern::parse(text).unwrap().to_string(), shown);
        }
        for bad in [
            "",
            "*",
            "*.org",
            "https://example.org",
            "exa mple.org",
            "ex*.org",
            "a.*.org",
            "example.org:0",
            "example.org:99999",
            "example.org:http",
            "[::1",
            "[::1]x",
        ] {
            let err = HostPattern::parse(bad).unwrap_err();
            assert!(err.contains("example.org"), "{bad}: {err}");
        }
    }

    #[test]
    fn suffixes_match_names_below_only() {
        let suffix = HostPattern::parse("*.example.org").unwrap();
        assert!(suffix.allows("files.example.org", 443));
        assert!(suffix.allows("a.b.example.org.", 80));
        assert!(!suffix.allows("example.org", 443));
        assert!(!suffix.allows("badexample.org", 443));
        let exact = HostPattern::parse("example.org").unwrap();
        assert!(exact.allows("EXAMPLE.org", 443));
        assert!(!exact.allows("www.example.org", 443));
    }

    #[test]
    fn only_the_web_ports_are_open_unless_a_port_is_named() {
        let web = HostPattern::parse("example.org").unwrap();
        assert!(web.allows("example.org", 80) && web.allows("example.org", 443));
        for port in [22, 25, 3306, 5432, 6379, 8080] {
            assert!(!web.allows("example.org", port), "{port}");
        }
        let named = HostPattern::parse("example.org:8080").unwrap();
        assert!(named.allows("example.org", 8080));
        assert!(!named.allows("example.org", 443));
    }

    #[test]
    fn an_operator_limit_covers_only_the_same_ports_and_narrower_names() {
        let limit = HostPattern::parse("*.example.org").unwrap();
        let p = |t: &str| HostPattern::parse(t).unwrap();
        assert!(limit.covers(&p("files.example.org")));
        assert!(limit.covers(&p("*.cdn.example.org")));
        assert!(limit.covers(&p("*.example.org")));
        assert!(!limit.covers(&p("files.example.org:22")));
        assert!(!limit.covers(&p("example.org")));
        assert!(!p("files.example.org").covers(&p("*.example.org")));
        assert!(p("db.example.org:5432").covers(&p("db.example.org:5432")));
    }
}
