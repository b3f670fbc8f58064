//! `sandbox.egress.credentials` and `sandbox.egress.extra_ca_file`: the
//! credentials the egress relay adds on the host to requests for a private
//! registry, so that none ever enters a sandbox. Each value is read from
//! the daemon's environment when the config loads; a missing variable, an
//! unknown scheme or a header that cannot carry the value stops the load
//! with the key named (never the value).

use super::secrets::Secret;
use super::ConfigError;
use serde::Deserialize;
use std::path::Path;

/// One entry of `sandbox.egress.credentials`, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawCredential {
    /// `name` (port 443) or `name:port`.
    pub host: String,
    /// Only requests whose path starts with this get the credential.
    pub path_prefix: Option<String>,
    /// Default `Authorization`.
    pub header: Option<String>,
    /// The daemon's environment variable holding the value.
    pub value_from: String,
    /// `basic` (the value is `user:password`), `bearer`, or `header`
    /// (the value is the header's whole value).
    pub scheme: String,
    /// `owner/name` patterns (`*` for any run of characters).
    pub repositories: Vec<String>,
    /// Default `[setup]`; `[setup, agent]` lets the agent's commands use it.
    pub phases: Option<Vec<String>>,
}

/// The relay's credentials and the extra roots it trusts for real hosts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EgressCredentials {
    pub credentials: Vec<EgressCredential>,
    /// `sandbox.egress.extra_ca_file`, parsed: DER certificates added to the
    /// host's roots when the relay verifies a registry it adds a
    /// credential for.
    pub extra_roots: Vec<Vec<u8>>,
}

impl EgressCredentials {
    /// The credentials `repository` may use, in the order written.
    pub fn for_repository(&self, repository: &str) -> Vec<EgressCredential> {
        self.credentials
            .iter()
            .filter(|c| c.repositories.iter().any(|p| pattern_matches(p, repository)))
            .cloned()
            .collect()
    }

    /// Every value the daemon must never show (the value as given and the
    /// header value made of it), for masking.
    pub fn secret_values(&self) -> Vec<Secret> {
        self.credentials
            .iter()
            .flat_map(|c| [c.value.clone(), c.header_value.clone()])
            .collect()
    }
}

/// How the value becomes the header's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialScheme {
    Basic,
    Bearer,
    Header,
}

/// A resolved credential.
#[derive(Debug, Clone, PartialEq)]
pub struct EgressCredential {
    /// The environment variable it came from: the name transcripts show.
    pub name: String,
    /// Lower case, no trailing dot.
    pub host: String,
    pub port: u16,
    pub path_prefix: Option<String>,
    pub header: http::HeaderName,
    pub scheme: CredentialScheme,
    /// The value as the environment gave it.
    pub value: Secret,
    /// What the header is set to.
    pub header_value: Secret,
    pub repositories: Vec<String>,
    pub setup: bool,
    pub agent: bool,
}

impl EgressCredential {
    /// Whether this credential may be used in `phase` (`setup`, `agent`).
    pub fn in_phase(&self, phase: &str) -> bool {
        match phase {
            "setup" => self.setup,
            "agent" => self.agent,
            _ => false,
        }
    }

    /// Whether it is for `host`:`port`.
    pub fn for_host(&self, host: &str, port: u16) -> bool {
        self.port == port && self.host.eq_ignore_ascii_case(host.trim_end_matches('.'))
    }

    /// Whether a request for `path` gets it.
    pub fn covers_path(&self, path: &str) -> bool {
        self.path_prefix
            .as_deref()
            .is_none_or(|prefix| path.starts_with(prefix))
    }
}

/// Reads `sandbox.egress.credentials` and `extra_ca_file`, each value from
/// `lookup` (the daemon's environment).
pub fn resolve(
    raw: &[RawCredential],
    extra_ca_file: &str,
    base_dir: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<EgressCredentials, ConfigError> {
    let credentials = raw
        .iter()
        .enumerate()
        .map(|(index, entry)| resolve_one(&format!("sandbox.egress.credentials[{index}]"), entry, lookup))
        .collect::<Result<Vec<_>, _>>()?;
    let extra_roots = match extra_ca_file.trim() {
        "" => Vec::new(),
        path => read_roots(&base_dir.join(path))?,
    };
    Ok(EgressCredentials {
        credentials,
        extra_roots,
    })
}

fn resolve_one(
    key: &str,
    raw: &RawCredential,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<EgressCredential, ConfigError> {
    let (host, port) = host_and_port(key, &raw.host)?;
    let scheme = scheme(key, &raw.scheme)?;
    let header = header_name(key, raw.header.as_deref())?;
    let var = raw.value_from.trim();
    let value = read_value(key, var, lookup)?;
    let header_value = header_value(key, var, scheme, &value)?;
    if raw.repositories.is_empty() {
        return Err(ConfigError::invalid(
            &format!("{key}.repositories"),
            r#"is empty; list the repositories that may use this credential ("owner/name", "owner/*", or "*" for all)"#,
        ));
    }
    if let Some(prefix) = &raw.path_prefix {
        if !prefix.starts_with('/') {
            return Err(ConfigError::invalid(
                &format!("{key}.path_prefix"),
                format!(r#""{prefix}" must start with "/""#),
            ));
        }
    }
    let phases = raw.phases.clone().unwrap_or_else(|| vec!["setup".into()]);
    if let Some(other) = phases.iter().find(|p| !matches!(p.as_str(), "setup" | "agent")) {
        return Err(ConfigError::invalid(
            &format!("{key}.phases"),
            format!(r#"lists "{other}"; use setup (the default) and agent"#),
        ));
    }
    Ok(EgressCredential {
        name: var.to_owned(),
        host,
        port,
        path_prefix: raw.path_prefix.clone(),
        header,
        scheme,
        value: Secret::new(value),
        header_value: Secret::new(header_value),
        repositories: raw.repositories.clone(),
        setup: phases.iter().any(|p| p == "setup"),
        agent: phases.iter().any(|p| p == "agent"),
    })
}

fn scheme(key: &str, text: &str) -> Result<CredentialScheme, ConfigError> {
    match text {
        "basic" => Ok(CredentialScheme::Basic),
        "bearer" => Ok(CredentialScheme::Bearer),
        "header" => Ok(CredentialScheme::Header),
        other => Err(ConfigError::invalid(
            &format!("{key}.scheme"),
            format!(
                r#"is "{other}"; use basic (the value is user:password), bearer or header (the value is the header's whole value)"#
            ),
        )),
    }
}

/// The header the relay sets; `Authorization` unless named.
fn header_name(key: &str, name: Option<&str>) -> Result<http::HeaderName, ConfigError> {
    let name = name.unwrap_or("Authorization");
    http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        ConfigError::invalid(
            &format!("{key}.header"),
            format!(r#""{name}" is not an HTTP header name"#),
        )
    })
}

/// The credential from the daemon's environment variable `var`. Errors
/// name the variable, never the value.
fn read_value(key: &str, var: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    if var.is_empty() {
        return Err(ConfigError::invalid(
            &format!("{key}.value_from"),
            "is empty; name the daemon's environment variable that holds the credential",
        ));
    }
    lookup(var)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            ConfigError::invalid(
                &format!("{key}.value_from"),
                format!("environment variable {var} is not set (or empty) in the daemon's environment; set it, or remove this credential"),
            )
        })
}

/// What the header is set to, checked to be sendable: a value with a line
/// break would let it write further headers.
fn header_value(key: &str, var: &str, scheme: CredentialScheme, value: &str) -> Result<String, ConfigError> {
    let header_value = match scheme {
        CredentialScheme::Basic if !value.contains(':') => {
            return Err(ConfigError::invalid(
                &format!("{key}.value_from"),
                format!("{var} holds no ':'; with scheme basic it must be user:password"),
            ))
        }
        CredentialScheme::Basic => {
            use base64::Engine;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(value)
            )
        }
        CredentialScheme::Bearer => format!("Bearer {value}"),
        CredentialScheme::Header => value.to_owned(),
    };
    if http::HeaderValue::from_str(&header_value).is_err() {
        return Err(ConfigError::invalid(
            &format!("{key}.value_from"),
            format!("{var} holds characters an HTTP header cannot carry (a line break or control character)"),
        ));
    }
    Ok(header_value)
}

/// `name` or `name:port` (default 443).
fn host_and_port(key: &str, text: &str) -> Result<(String, u16), ConfigError> {
    let bad = |why: &str| {
        ConfigError::invalid(
            &format!("{key}.host"),
            format!(
                r#""{text}" {why}; write a host name, optionally with a port, as "pypi.corp.example" or "pypi.corp.example:8443""#
            ),
        )
    };
    let (name, port) = match text.trim().rsplit_once(':') {
        Some((name, port)) => (
            name,
            port.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad("has no valid port"))?,
        ),
        None => (text.trim(), 443),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name.is_empty() || name.contains(['/', '*', ' ', '@']) {
        return Err(bad("is not a host name"));
    }
    Ok((name, port))
}

/// The PEM certificates in `path`, as DER.
fn read_roots(path: &Path) -> Result<Vec<Vec<u8>>, ConfigError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let key = "sandbox.egress.extra_ca_file";
    let bytes = std::fs::read(path)
        .map_err(|e| ConfigError::invalid(key, format!("cannot read {}: {e}", path.display())))?;
    let roots = CertificateDer::pem_slice_iter(&bytes)
        .map(|cert| cert.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::invalid(key, format!("{} is not PEM certificates: {e}", path.display())))?;
    if roots.is_empty() {
        return Err(ConfigError::invalid(
            key,
            format!("{} holds no PEM certificate", path.display()),
        ));
    }
    Ok(roots)
}

/// `*` stands for any run of characters; the rest is compared without case
/// (forges treat `owner/name` so).
pub fn pattern_matches(pattern: &str, text: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let text = text.to_ascii_lowercase();
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return false;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = parts.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn raw(scheme: &str, var: &str) -> RawCredential {
        RawCredential {
            host: "Pypi.Corp.Example:8443".into(),
            value_from: var.into(),
            scheme: scheme.into(),
            repositories: vec!["acme/*".into()],
            ..RawCredential::default()
        }
    }

    fn lookup(name: &str) -> Option<String> {
        (name == "CORP_TOKEN").then(|| "reader:s3cret-value".to_owned())
    }

    #[test]
    fn a_basic_credential_is_encoded_and_never_formatted() {
        let all = resolve(&[raw("basic", "CORP_TOKEN")], "", Path::new("/"), &lookup).unwrap();
        let c = &all.credentials[0];
        assert_eq!((c.host.as_str(), c.port), ("pypi.corp.example", 8443));
        assert_eq!(c.header_value.expose(), "Basic cmVhZGVyOnMzY3JldC12YWx1ZQ==");
        assert!(c.setup && !c.agent && c.in_phase("setup") && !c.in_phase("agent"));
        assert!(!format!("{all:?}").contains("s3cret"));
        assert_eq!(all.for_repository("acme/app").len(), 1);
        assert!(all.for_repository("other/app").is_empty());
    }

    #[test]
    fn bad_entries_are_refused_naming_the_key_and_never_the_value() {
        let err = resolve(&[raw("digest", "CORP_TOKEN")], "", Path::new("/"), &lookup).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("sandbox.egress.credentials[0].scheme"),
            "{err}"
        );
        let err = resolve(&[raw("bearer", "NOT_SET")], "", Path::new("/"), &lookup).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("value_from") && text.contains("NOT_SET"), "{text}");
        let mut no_repos = raw("bearer", "CORP_TOKEN");
        no_repos.repositories.clear();
        let err = resolve(&[no_repos], "", Path::new("/"), &lookup).unwrap_err();
        assert!(err.to_string().contains("repositories"), "{err}");
        let err = resolve(&[], "missing.pem", Path::new("/nonexistent"), &lookup).unwrap_err();
        assert!(
            err.to_string().starts_with("sandbox.egress.extra_ca_file"),
            "{err}"
        );
        let newline = |_: &str| Some("abc\ndef".to_owned());
        let err = resolve(&[raw("header", "X")], "", Path::new("/"), &newline).unwrap_err();
        assert!(!err.to_string().contains("abc"), "{err}");
    }

    #[test]
    fn repository_patterns() {
        assert!(pattern_matches("*", "a/b"));
        assert!(pattern_matches("Acme/*", "acme/app"));
        assert!(pattern_matches("acme/app", "ACME/App"));
        assert!(!pattern_matches("acme/app", "acme/app2"));
        assert!(pattern_matches("*/app-*", "acme/app-web"));
        assert!(!pattern_matches("acme/*", "other/acme/x"));
    }
}
