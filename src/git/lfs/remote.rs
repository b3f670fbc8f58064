//! Where a repository's LFS objects live and who may be sent the forge
//! credential: the endpoint (`<clone URL>.git/info/lfs`, or `lfs.url` in
//! the default branch's `.lfsconfig`) and the origins allowed for it and
//! for the transfers its answers name.

use super::LfsError;
use crate::config::{HostPattern, LfsConfig};
use crate::git::Credentials;
use url::Url;

/// Who may be contacted, and with which credential.
#[derive(Clone)]
pub struct Access {
    /// The forge's clone URL: its host is always allowed.
    forge: Url,
    allowed: Vec<HostPattern>,
    pub(super) credentials: Credentials,
}

impl Access {
    pub fn new(clone_url: &str, config: &LfsConfig, credentials: Credentials) -> Result<Access, LfsError> {
        let forge = Url::parse(clone_url).map_err(|e| LfsError::Endpoint {
            detail: format!("the clone URL {clone_url} is not a URL ({e})"),
        })?;
        Ok(Access {
            forge,
            allowed: config.allowed_hosts.clone(),
            credentials,
        })
    }

    /// Whether the forge's credential may go to `url`: only at the forge's
    /// own origin or the LFS `endpoint`'s.
    pub(super) fn takes_credential(&self, url: &Url, endpoint: &Url) -> bool {
        url.origin() == self.forge.origin() || url.origin() == endpoint.origin()
    }

    /// Why `url` may not be contacted, or `None` when it may: it is at
    /// the forge's own origin (the same scheme, host and port as the clone
    /// URL), or its host and port are in `git.lfs.allowed_hosts` and it
    /// goes over HTTPS (plain HTTP only where the forge itself is reached
    /// over it).
    pub fn refusal(&self, url: &Url) -> Option<String> {
        if url.origin() == self.forge.origin() {
            return None;
        }
        let host = url.host_str().unwrap_or_default();
        let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && self.forge.scheme() == "http");
        if !scheme_ok {
            return Some(format!(
                "{} uses {}: LFS transfers go over HTTPS only",
                redacted(url),
                url.scheme()
            ));
        }
        let port = url.port_or_known_default().unwrap_or(443);
        if self.allowed.iter().any(|p| p.allows(host, port)) {
            return None;
        }
        let forge_host = self.forge.host_str().unwrap_or_default();
        if forge_host.eq_ignore_ascii_case(host) {
            let forge_port = self.forge.port_or_known_default().unwrap_or(443);
            return Some(format!(
                "{}://{host}:{port} is not the forge's own address ({}://{forge_host}:{forge_port}) and not in git.lfs.allowed_hosts, so it was not contacted",
                url.scheme(),
                self.forge.scheme(),
            ));
        }
        Some(format!(
            "the host {host} is neither the forge's nor in git.lfs.allowed_hosts, so it was not contacted"
        ))
    }
}

/// A URL as it may be said: without user, password, query or fragment.
pub fn redacted(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// The repository's LFS endpoint: `lfs.url` from `.lfsconfig` (the
/// default branch's, never the task branch's or the sandbox's), else the clone URL with
/// `.git/info/lfs` (git-lfs's default).
pub fn endpoint(clone_url: &str, lfsconfig: Option<&str>) -> Result<Url, LfsError> {
    if let Some(url) = lfsconfig.and_then(configured_url) {
        let url = Url::parse(&url).map_err(|e| LfsError::Endpoint {
            detail: format!("lfs.url in .lfsconfig is not a URL ({e}); write an https:// URL"),
        })?;
        // The batch path is appended to the endpoint: after a `?` or a
        // `#` it would become part of a query, and the request with the
        // credential would go to whatever path comes before.
        if url.query().is_some() || url.fragment().is_some() {
            return Err(LfsError::Endpoint {
                detail: format!(
                    "lfs.url in the default branch's .lfsconfig ({}) has a query (`?`) or a fragment (`#`); an LFS endpoint is a plain URL such as https://host/owner/repo.git/info/lfs",
                    redacted(&url)
                ),
            });
        }
        return Ok(url);
    }
    let base = clone_url.trim_end_matches('/');
    let base = if base.ends_with(".git") {
        base.to_owned()
    } else {
        format!("{base}.git")
    };
    Url::parse(&format!("{base}/info/lfs")).map_err(|e| LfsError::Endpoint {
        detail: format!("the clone URL {clone_url} gives no LFS endpoint ({e})"),
    })
}

/// `url` in the `[lfs]` section of a git-config text.
fn configured_url(text: &str) -> Option<String> {
    let mut in_lfs = false;
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_lfs = line
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .eq_ignore_ascii_case("lfs");
            continue;
        }
        if !in_lfs {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            if key.trim().eq_ignore_ascii_case("url") {
                found = Some(value.trim().trim_matches('"').to_owned());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn access(clone: &str, allowed: &[&str]) -> Access {
        let config = LfsConfig {
            allowed_hosts: allowed.iter().map(|h| HostPattern::parse(h).unwrap()).collect(),
            ..LfsConfig::default()
        };
        let credentials = Credentials {
            username: "x-access-token".into(),
            token: Secret::new("t"),
        };
        Access::new(clone, &config, credentials).unwrap()
    }

    #[test]
    fn the_endpoint_follows_the_clone_url_unless_lfsconfig_names_one() {
        let url = endpoint("https://forge.example/o/r.git", None).unwrap();
        assert_eq!(url.as_str(), "https://forge.example/o/r.git/info/lfs");
        let url = endpoint("https://forge.example/o/r", None).unwrap();
        assert_eq!(url.as_str(), "https://forge.example/o/r.git/info/lfs");
        let config = "[core]\n\turl = nope\n[lfs]\n\turl = \"https://lfs.example.org/o/r\"\n";
        let url = endpoint("https://forge.example/o/r.git", Some(config)).unwrap();
        assert_eq!(url.as_str(), "https://lfs.example.org/o/r");
    }

    #[test]
    fn only_the_forge_and_allowed_hosts_over_https_may_be_contacted() {
        let a = access("https://forge.example/o/r.git", &["lfs.example.org"]);
        let ok = |u: &str| a.refusal(&Url::parse(u).unwrap());
        assert_eq!(ok("https://forge.example/o/r.git/info/lfs"), None);
        assert_eq!(ok("https://lfs.example.org/x"), None);
        assert!(ok("https://elsewhere.example/x")
            .unwrap()
            .contains("elsewhere.example"));
        assert!(ok("http://forge.example/x").unwrap().contains("HTTPS"));
        assert!(ok("https://lfs.example.org:8443/x").is_some());
    }

    #[test]
    fn another_port_or_scheme_on_the_forges_host_is_not_the_forge() {
        let a = access("https://forge.example/o/r.git", &[]);
        let ok = |u: &str| a.refusal(&Url::parse(u).unwrap());
        assert_eq!(ok("https://forge.example:443/api/x"), None);
        let why = ok("https://forge.example:8443/o/r.git/info/lfs").unwrap();
        assert!(
            why.contains("https://forge.example:8443 is not the forge's own address"),
            "{why}"
        );
        assert!(ok("http://forge.example/x").unwrap().contains("HTTPS"));
        let plain = access("http://127.0.0.1:3000/o/r.git", &["127.0.0.1:4000"]);
        let ok = |u: &str| plain.refusal(&Url::parse(u).unwrap());
        assert_eq!(ok("http://127.0.0.1:3000/o/r.git/info/lfs"), None);
        assert_eq!(ok("http://127.0.0.1:4000/o/r.git/info/lfs"), None);
        assert!(ok("http://127.0.0.1:5000/o/r.git/info/lfs").is_some());
    }

    #[test]
    fn an_lfs_url_with_a_query_or_a_fragment_is_refused() {
        for url in [
            "https://forge.example/api/v3/repos/o/r?x=",
            "https://forge.example/api/v3/repos/o/r?",
            "https://forge.example/api/v3/repos/o/r#",
            "https://forge.example/o/r.git/info/lfs#x",
        ] {
            let config = format!("[lfs]\n\turl = {url}\n");
            let err = endpoint("https://forge.example/o/r.git", Some(&config)).unwrap_err();
            assert!(
                err.to_string().contains("has a query (`?`) or a fragment (`#`)"),
                "{url}: {err}"
            );
        }
    }
}
