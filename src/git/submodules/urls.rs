//! Where a submodule is fetched from, and with what. A URL in
//! `.gitmodules` is the repository's text: relative URLs are resolved
//! against the superproject's own address on the forge; only HTTPS (or the
//! forge's own scheme) is fetched; `file://`, local paths, SSH and other
//! schemes are refused, so a hostile `.gitmodules` can neither read the
//! host's disk nor reach a host the operator did not name. The forge's
//! credential goes only to the forge's own origin.

use crate::config::HostPattern;
use url::Url;

/// How a submodule's repository is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// On the forge's own origin: with the forge's credential.
    Forge,
    /// On a host the operator allowed: without any credential.
    Anonymous,
}

/// The address `declared` names, resolved against `base` (the
/// superproject's address; for a nested submodule, its parent's). The
/// error says why it is refused.
pub fn resolve(declared: &str, base: &str) -> Result<Url, String> {
    let declared = declared.trim();
    let base = Url::parse(base).map_err(|e| format!("the superproject's address cannot be read ({e})"))?;
    if declared.starts_with("./") || declared.starts_with("../") {
        return relative(declared, &base);
    }
    if declared.contains("://") {
        let mut url = Url::parse(declared).map_err(|e| format!("`{declared}` is not a URL ({e})"))?;
        match url.scheme() {
            "https" => {}
            "http" if base.scheme() == "http" => {}
            "file" => return Err("a `file://` URL would read the host's disk; refused".into()),
            "http" => {
                return Err("plain `http://` is fetched only when the forge itself is served over it; write an https:// URL".into())
            }
            other => {
                return Err(format!(
                    "`{other}://` is not fetched: submodules are fetched over HTTPS only"
                ))
            }
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(format!("`{declared}` names no host"));
        }
        // A user or password written into `.gitmodules` is never sent.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        url.set_fragment(None);
        return Ok(url);
    }
    if declared
        .split_once("::")
        .is_some_and(|(transport, _)| !transport.contains('/'))
    {
        return Err("a `transport::address` URL would run a program on the host; refused".into());
    }
    if is_scp_like(declared) {
        return Err(
            "an SSH address (`user@host:path`) is not fetched: submodules are fetched over HTTPS only".into(),
        );
    }
    Err("a local path would read the host's disk; refused (write a URL relative to the forge, such as `../other.git`)".into())
}

/// `../other.git` against `https://forge/group/project.git`: each `../`
/// climbs one component of the superproject's address (the first leaves
/// the repository itself), as git does; never above the host.
fn relative(declared: &str, base: &Url) -> Result<Url, String> {
    let mut parts: Vec<String> = base
        .path()
        .split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    let mut rest = declared;
    loop {
        if let Some(after) = rest.strip_prefix("./") {
            rest = after;
        } else if let Some(after) = rest.strip_prefix("../") {
            rest = after;
            parts
                .pop()
                .ok_or_else(|| format!("`{declared}` climbs above the forge's root"))?;
        } else {
            break;
        }
    }
    for part in rest.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            parts
                .pop()
                .ok_or_else(|| format!("`{declared}` climbs above the forge's root"))?;
        } else {
            parts.push(part.to_owned());
        }
    }
    if parts.is_empty() {
        return Err(format!("`{declared}` names the forge's root, not a repository"));
    }
    let mut url = base.clone();
    url.set_path(&parts.join("/"));
    url.set_query(None);
    url.set_fragment(None);
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Ok(url)
}

/// `git@host:path` (a colon before any slash, not a drive letter).
fn is_scp_like(text: &str) -> bool {
    match (text.find(':'), text.find('/')) {
        (Some(colon), slash) => colon > 1 && slash.is_none_or(|s| colon < s),
        _ => false,
    }
}

/// Whether two addresses name one repository (`.git` and a trailing `/`
/// aside, host and scheme compared without case).
pub fn same_repository(a: &str, b: &str) -> bool {
    let key = |text: &str| {
        Url::parse(text).ok().map(|u| {
            let path = u.path().trim_end_matches('/').trim_end_matches(".git").to_owned();
            (
                u.scheme().to_owned(),
                u.host_str().map(str::to_ascii_lowercase),
                u.port_or_known_default(),
                path,
            )
        })
    };
    key(a).is_some() && key(a) == key(b)
}

/// Whether `url` may be fetched and how: the forge's own origin with its
/// credential, an allowed host anonymously; any other host refused.
pub fn access(url: &Url, forge: &str, allowed: &[HostPattern]) -> Result<Access, String> {
    let origin = |u: &Url| {
        Some((
            u.scheme().to_owned(),
            u.host_str()?.to_owned(),
            u.port_or_known_default()?,
        ))
    };
    let forge = Url::parse(forge).map_err(|e| format!("the forge's address cannot be read ({e})"))?;
    if origin(url).is_some() && origin(url) == origin(&forge) {
        return Ok(Access::Forge);
    }
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(443);
    if allowed.iter().any(|pattern| pattern.allows(host, port)) {
        return Ok(Access::Anonymous);
    }
    Err(format!(
        "{host} is not the forge's host and not in `git.submodules.allowed_hosts`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORGE: &str = "https://forge.example/acme/app.git";

    #[test]
    fn relative_urls_resolve_against_the_superprojects_address() {
        let resolved = |d: &str| resolve(d, FORGE).map(|u| u.to_string());
        assert_eq!(
            resolved("../lib.git").unwrap(),
            "https://forge.example/acme/lib.git"
        );
        assert_eq!(
            resolved("../../other/lib.git").unwrap(),
            "https://forge.example/other/lib.git"
        );
        assert_eq!(
            resolved("./nested.git").unwrap(),
            "https://forge.example/acme/app.git/nested.git"
        );
        assert!(resolved("../../../x.git")
            .unwrap_err()
            .contains("above the forge's root"));
        assert!(resolved("../a/../../../../x.git").is_err());
        let port = resolve("../lib.git", "http://127.0.0.1:8080/acme/app.git").unwrap();
        assert_eq!(port.as_str(), "http://127.0.0.1:8080/acme/lib.git");
    }

    #[test]
    fn local_paths_files_ssh_and_other_schemes_are_refused() {
        for (declared, why) in [
            ("file:///etc/passwd", "host's disk"),
            ("/srv/git/lib.git", "local path"),
            ("lib", "local path"),
            ("~/lib.git", "local path"),
            ("git@forge.example:acme/lib.git", "SSH"),
            ("ssh://git@forge.example/acme/lib.git", "HTTPS only"),
            ("git://forge.example/acme/lib.git", "HTTPS only"),
            ("ext::sh -c touch% /tmp/pwned", "run a program"),
            ("http://forge.example/acme/lib.git", "http://"),
        ] {
            let err = resolve(declared, FORGE).unwrap_err();
            assert!(err.contains(why), "{declared}: {err}");
        }
    }

    #[test]
    fn the_superprojects_own_address_is_the_same_repository() {
        let own = |d: &str| same_repository(resolve(d, FORGE).unwrap().as_str(), FORGE);
        assert!(own("../app.git"));
        assert!(own("../app"));
        assert!(own("https://FORGE.example/acme/app/"));
        assert!(!own("../lib.git"));
        assert!(!own("./app.git"));
    }

    #[test]
    fn credentials_written_into_a_url_are_dropped() {
        let url = resolve("https://user:secret@forge.example/acme/lib.git", FORGE).unwrap();
        assert_eq!(url.as_str(), "https://forge.example/acme/lib.git");
    }

    #[test]
    fn the_forge_gets_credentials_allowed_hosts_none_others_refused() {
        let allowed = vec![HostPattern::parse("mirror.example.org").unwrap()];
        let at = |u: &str| access(&Url::parse(u).unwrap(), FORGE, &allowed);
        assert_eq!(at("https://forge.example/acme/lib.git"), Ok(Access::Forge));
        assert_eq!(at("https://mirror.example.org/lib.git"), Ok(Access::Anonymous));
        assert!(at("https://elsewhere.example/lib.git")
            .unwrap_err()
            .contains("git.submodules.allowed_hosts"));
        // Another port of the forge's host is another origin: no credential.
        assert!(at("https://forge.example:8443/acme/lib.git").is_err());
        assert!(at("https://mirror.example.org:8443/lib.git").is_err());
    }
}
