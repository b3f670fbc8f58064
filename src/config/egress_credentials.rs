//! `sandbox.egress.credentials` and `sandbox.egress.extra_ca_file`: the
//! credentials the egress relay adds on the host to requests for a private
//! registry, so that none ever enters a sandbox. Each value is read from
//! the daemon's environment when the config loads; a missing variable, an
//! unknown scheme or a header that cannot carry the value stops the load
//! with the key named (never the value).

use super::repository_pattern::RepositoryPattern;
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
    /// `owner/name` patterns (`*` within one segment, `**` across them).
    pub repositories: Vec<String>,
    /// Default `[setup]`; `[setup, agent]` lets the agent's commands use it.
    pub phases: Option<Vec<String>>,
    /// The request methods that get it; default `[GET, HEAD]`.
    pub methods: Option<Vec<String>>,
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
            .filter(|c| c.repositories.iter().any(|p| p.matches(repository)))
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
    pub repositories: Vec<RepositoryPattern>,
    /// The request methods that get it (never TRACE or CONNECT).
    pub methods: Vec<http::Method>,
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

    /// Whether a request for `path` gets it: `path` is the prefix or lies
    /// under it, at a segment boundary (`/simple` covers `/simple/x`, not
    /// `/simplefoo`). `path` must be normalised already (dot segments
    /// resolved, as the relay does before it asks).
    pub fn covers_path(&self, path: &str) -> bool {
        let Some(prefix) = self.path_prefix.as_deref() else {
            return true;
        };
        let prefix = prefix.trim_end_matches('/');
        prefix.is_empty()
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// Whether a request with `method` gets it.
    pub fn allows_method(&self, method: &http::Method) -> bool {
        self.methods.contains(method)
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
            r#"is empty; list the repositories that may use this credential ("owner/name", "owner/*", "group/**", or "*" for all)"#,
        ));
    }
    let repositories = raw
        .repositories
        .iter()
        .enumerate()
        .map(|(i, text)| RepositoryPattern::parse(&format!("{key}.repositories[{i}]"), text))
        .collect::<Result<Vec<_>, _>>()?;
    let methods = methods(key, raw.methods.as_deref())?;
    if let Some(prefix) = &raw.path_prefix {
        check_prefix(&format!("{key}.path_prefix"), prefix)?;
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
        repositories,
        methods,
        setup: phases.iter().any(|p| p == "setup"),
        agent: phases.iter().any(|p| p == "agent"),
    })
}

/// A prefix is compared with normalised paths, so it must be one: a
/// path with no dot segment and nothing a path is normalised from.
fn check_prefix(key: &str, prefix: &str) -> Result<(), ConfigError> {
    let bad = |why: &str| {
        ConfigError::invalid(
            key,
            format!(r#""{prefix}" {why}; write a plain path such as "/simple/""#),
        )
    };
    if !prefix.starts_with('/') {
        return Err(bad(r#"must start with "/""#));
    }
    if prefix.contains(['?', '#', '%', ';', '\\']) {
        return Err(bad(
            "holds a query, a fragment, a percent-encoding, \";\" or \"\\\"",
        ));
    }
    if prefix.split('/').any(|segment| segment == "." || segment == "..") {
        return Err(bad("holds a dot segment"));
    }
    Ok(())
}

/// The methods a credential is added to: `[GET, HEAD]` unless named.
/// TRACE (which echoes the request, credential included) and CONNECT
/// are never allowed.
fn methods(key: &str, named: Option<&[String]>) -> Result<Vec<http::Method>, ConfigError> {
    let Some(named) = named else {
        return Ok(vec![http::Method::GET, http::Method::HEAD]);
    };
    let key = format!("{key}.methods");
    if named.is_empty() {
        return Err(ConfigError::invalid(
            &key,
            "is empty; leave it out for [GET, HEAD], or name the methods that need the credential (POST or PUT to publish)",
        ));
    }
    named
        .iter()
        .map(|text| {
            let upper = text.trim().to_ascii_uppercase();
            match http::Method::from_bytes(upper.as_bytes()) {
                Ok(m) if [http::Method::TRACE, http::Method::CONNECT].contains(&m) || upper == "TRACK" => {
                    Err(ConfigError::invalid(
                        &key,
                        format!("names {upper}, which never gets a credential (TRACE and TRACK echo it back; CONNECT opens a tunnel); remove it"),
                    ))
                }
                Ok(m) if upper.chars().all(|c| c.is_ascii_uppercase()) => Ok(m),
                _ => Err(ConfigError::invalid(
                    &key,
                    format!(r#""{text}" is not an HTTP method; write GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"#),
                )),
            }
        })
        .collect()
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
    fn a_prefix_covers_paths_at_a_segment_boundary_only() {
        let mut c = resolve(&[raw("bearer", "CORP_TOKEN")], "", Path::new("/"), &lookup)
            .unwrap()
            .credentials
            .remove(0);
        for prefix in ["/simple", "/simple/"] {
            c.path_prefix = Some(prefix.into());
            assert!(c.covers_path("/simple/pkg/"), "{prefix}");
            assert!(c.covers_path("/simple"), "{prefix}");
            assert!(!c.covers_path("/simplefoo"), "{prefix}");
            assert!(!c.covers_path("/simplefoo/x"), "{prefix}");
            assert!(!c.covers_path("/admin/"), "{prefix}");
        }
        c.path_prefix = Some("/".into());
        assert!(c.covers_path("/anything"));
    }

    #[test]
    fn a_prefix_must_be_a_plain_path() {
        for bad in [
            "simple/",
            "/simple/../admin",
            "/simple/%2e",
            "/simple;x",
            "/simple?x",
            "/./simple",
        ] {
            let mut entry = raw("bearer", "CORP_TOKEN");
            entry.path_prefix = Some(bad.into());
            let err = resolve(&[entry], "", Path::new("/"), &lookup).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("sandbox.egress.credentials[0].path_prefix"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn methods_default_to_reading_and_never_include_trace() {
        let all = resolve(&[raw("bearer", "CORP_TOKEN")], "", Path::new("/"), &lookup).unwrap();
        let c = &all.credentials[0];
        assert!(c.allows_method(&http::Method::GET) && c.allows_method(&http::Method::HEAD));
        assert!(!c.allows_method(&http::Method::PUT) && !c.allows_method(&http::Method::POST));
        let mut publish = raw("bearer", "CORP_TOKEN");
        publish.methods = Some(vec!["get".into(), "PUT".into()]);
        let all = resolve(&[publish], "", Path::new("/"), &lookup).unwrap();
        assert!(all.credentials[0].allows_method(&http::Method::PUT));
        for bad in ["TRACE", "connect", "track", "GE T", ""] {
            let mut entry = raw("bearer", "CORP_TOKEN");
            entry.methods = Some(if bad.is_empty() { vec![] } else { vec![bad.into()] });
            let err = resolve(&[entry], "", Path::new("/"), &lookup).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("sandbox.egress.credentials[0].methods"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn repository_patterns_are_read_when_the_config_loads() {
        let mut entry = raw("bearer", "CORP_TOKEN");
        entry.repositories = vec!["group/*".into()];
        let all = resolve(&[entry], "", Path::new("/"), &lookup).unwrap();
        assert_eq!(all.for_repository("group/app").len(), 1);
        assert!(all.for_repository("group/sub/app").is_empty());
        let mut entry = raw("bearer", "CORP_TOKEN");
        entry.repositories = vec!["group/**".into()];
        let all = resolve(&[entry], "", Path::new("/"), &lookup).unwrap();
        assert_eq!(all.for_repository("group/sub/app").len(), 1);
        let mut entry = raw("bearer", "CORP_TOKEN");
        entry.repositories = vec!["group/[app".into()];
        let err = resolve(&[entry], "", Path::new("/"), &lookup).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("sandbox.egress.credentials[0].repositories[0]"),
            "{err}"
        );
    }
}
