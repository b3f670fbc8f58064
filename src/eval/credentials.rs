//! The credential an instance's repository is fetched with: the daemon's
//! own for the forge that serves it (a private repository of the team's,
//! as `eval make` writes them), and none for anything else. The token goes
//! only to its forge's host, and never into a repository's config.

use crate::config::{Config, Secrets};
use crate::forge::Delivery;
use crate::git::Credentials;

/// The host of an address (without port), lowercased.
fn host_of(address: &str) -> Option<String> {
    url::Url::parse(address)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
}

/// GitHub's git host for its API address: `api.github.com` serves git
/// at `github.com`; Enterprise Server serves both on its own host.
fn github_git_host(api_url: &str) -> Option<String> {
    host_of(api_url).map(|host| host.strip_prefix("api.").map(str::to_owned).unwrap_or(host))
}

/// Credentials for fetching `source`, when it is an HTTP(S) address on a
/// forge the configuration and secrets give access to.
pub async fn for_source(config: &Config, secrets: &Secrets, source: &str) -> Option<Credentials> {
    let host = host_of(source).filter(|_| source.starts_with("http"))?;
    let github = secrets.github_token.is_some() || config.github.app.is_some();
    let answer = if github && github_git_host(&config.github.api_url).as_deref() == Some(host.as_str()) {
        match crate::forge::github::GitHub::new(&config.github, secrets, config.github.api_timeout) {
            Ok(forge) => forge.git_credentials().await,
            Err(e) => Err(e),
        }
    } else if secrets.gitlab_token.is_some() && host_of(&config.gitlab.url).as_deref() == Some(host.as_str())
    {
        match crate::forge::gitlab::GitLab::connect(&config.gitlab, secrets).await {
            Ok(forge) => forge.git_credentials().await,
            Err(e) => Err(e),
        }
    } else {
        return None;
    };
    match answer {
        Ok(credentials) => Some(credentials),
        Err(e) => {
            tracing::warn!("fetching {source} without credentials: the forge's cannot be had: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_git_host_of_each_forge_is_known_from_its_api_address() {
        assert_eq!(
            github_git_host("https://api.github.com").as_deref(),
            Some("github.com")
        );
        assert_eq!(
            github_git_host("https://ghe.example.com/api/v3").as_deref(),
            Some("ghe.example.com")
        );
        assert_eq!(
            host_of("http://127.0.0.1:4567/acme/app.git").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(host_of("/srv/repos/app"), None);
    }
}
