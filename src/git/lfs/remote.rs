//! Where a repository's LFS objects live and who may be sent the forge
//! credential: the endpoint (`<clone URL>.git/info/lfs`, or `lfs.url` in
//! the base branch's `.lfsconfig`) and the hosts allowed for it and for
//! the transfers its answers name.

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

    /// Why `url` may not be contacted, or `None` when it may: its host is
    /// the forge's or one `git.lfs.allowed_hosts` names, over HTTPS (plain
    /// HTTP only where the forge itself is reached over it).
    pub fn refusal(&self, url: &Url) -> Option<String> {
        let host = url.host_str().unwrap_or_default();
        let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && self.forge.scheme() == "http");
        if !scheme_ok {
            return Some(format!(
                "{} uses {}: LFS transfers go over HTTPS only",
                redacted(url),
                url.scheme()
            ));
        }
        let own = self
            .forge
            .host_str()
            .is_some_and(|forge| forge.eq_ignore_ascii_case(host));
        let port = url.port_or_known_default().unwrap_or(443);
        let allowed = own || self.allowed.iter().any(|p| p.allows(host, port));
        (!allowed).then(|| {
            format!(
                "the host {host} is neither the forge's nor in git.lfs.allowed_hosts, so it was not contacted"
            )
        })
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

/// The repository's LFS endpoint: `lfs.url` from `.lfsconfig` (the base
/// branch's, never the sandbox's), else the clone URL with
/// `.git/info/lfs` (git-lfs's default).
pub fn endpoint(clone_url: &str, lfsconfig: Option<&str>) -> Result<Url, LfsError> {
    if let Some(url) = lfsconfig.and_then(configured_url) {
        return Url::parse(&url).map_err(|e| LfsError::Endpoint {
            detail: format!("lfs.url in .lfsconfig is not a URL ({e}); write an https:// URL"),
        });
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
}
