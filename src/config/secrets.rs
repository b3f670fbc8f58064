//! Forge tokens and model keys. They come from the environment only, are
//! never written in the config, and never print: `Debug` and `Display` show
//! a fixed mask.

use std::fmt;

/// A secret value. The only way to the text is [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The raw value, for the one place that sends it (an auth header, a
    /// credential callback). Never log what this returns.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The environment variables forgehand reads secrets from, with what each is for.
pub const SECRET_VARS: [(&str, &str); 9] = [
    ("GITHUB_TOKEN", "GitHub API and git over HTTPS"),
    (
        "GITHUB_APP_PRIVATE_KEY",
        "GitHub App authentication (PEM), with github.app_id",
    ),
    ("GITLAB_TOKEN", "GitLab API and git over HTTPS"),
    ("OPENAI_API_KEY", "OpenAI models"),
    ("GEMINI_API_KEY", "Gemini models"),
    ("ANTHROPIC_API_KEY", "Anthropic models"),
    (
        "FORGEHAND_HTTP_TOKEN",
        "bearer token for /metrics and the status page (daemon.http.listen)",
    ),
    (
        "FORGEHAND_GITHUB_WEBHOOK_SECRET",
        "the GitHub webhook's secret (daemon.webhooks)",
    ),
    (
        "FORGEHAND_GITLAB_WEBHOOK_SECRET",
        "the GitLab webhook's secret token (daemon.webhooks)",
    ),
];

#[derive(Debug, Clone, Default)]
pub struct Secrets {
    pub github_token: Option<Secret>,
    pub github_app_private_key: Option<Secret>,
    pub gitlab_token: Option<Secret>,
    pub openai_api_key: Option<Secret>,
    pub gemini_api_key: Option<Secret>,
    pub anthropic_api_key: Option<Secret>,
    /// Bearer token the HTTP listener asks for (all but /healthz and /readyz).
    pub http_token: Option<Secret>,
    /// The GitHub webhook's HMAC secret (`daemon.webhooks`).
    pub github_webhook_secret: Option<Secret>,
    /// The GitLab webhook's secret token (`daemon.webhooks`).
    pub gitlab_webhook_secret: Option<Secret>,
}

impl Secrets {
    pub fn from_env() -> Secrets {
        Secrets::from_lookup(&|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Secrets {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .map(Secret)
        };
        Secrets {
            github_token: get("GITHUB_TOKEN"),
            github_app_private_key: get("GITHUB_APP_PRIVATE_KEY"),
            gitlab_token: get("GITLAB_TOKEN"),
            openai_api_key: get("OPENAI_API_KEY"),
            gemini_api_key: get("GEMINI_API_KEY"),
            anthropic_api_key: get("ANTHROPIC_API_KEY"),
            http_token: get("FORGEHAND_HTTP_TOKEN"),
            github_webhook_secret: get("FORGEHAND_GITHUB_WEBHOOK_SECRET"),
            gitlab_webhook_secret: get("FORGEHAND_GITLAB_WEBHOOK_SECRET"),
        }
    }

    /// (variable, purpose, present) for every secret, in a fixed order.
    pub fn presence(&self) -> Vec<(&'static str, &'static str, bool)> {
        let present = [
            self.github_token.is_some(),
            self.github_app_private_key.is_some(),
            self.gitlab_token.is_some(),
            self.openai_api_key.is_some(),
            self.gemini_api_key.is_some(),
            self.anthropic_api_key.is_some(),
            self.http_token.is_some(),
            self.github_webhook_secret.is_some(),
            self.gitlab_webhook_secret.is_some(),
        ];
        SECRET_VARS
            .iter()
            .zip(present)
            .map(|((var, purpose), present)| (*var, *purpose, present))
            .collect()
    }

    /// `text` with every secret value replaced by `***`: a last guard on
    /// anything forgehand writes where people can read it.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for value in self.values() {
            if value.len() >= 4 && out.contains(value) {
                out = out.replace(value, "***");
            }
        }
        out
    }

    /// Every secret value that is set, for scrubbing and leak checks.
    pub fn values(&self) -> Vec<&str> {
        [
            &self.github_token,
            &self.github_app_private_key,
            &self.gitlab_token,
            &self.openai_api_key,
            &self.gemini_api_key,
            &self.anthropic_api_key,
            &self.http_token,
            &self.github_webhook_secret,
            &self.gitlab_webhook_secret,
        ]
        .into_iter()
        .flatten()
        .map(Secret::expose)
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_format_their_value() {
        let secret = Secret::new("ghp_supersecret");
        assert_eq!(format!("{secret}"), "***");
        assert!(!format!("{secret:?}").contains("supersecret"));
        let all = Secrets::from_lookup(&|n| (n == "GITHUB_TOKEN").then(|| "ghp_supersecret".to_owned()));
        assert!(!format!("{all:?}").contains("supersecret"));
        assert_eq!(all.values(), vec!["ghp_supersecret"]);
        assert!(all.presence().iter().any(|(v, _, p)| *v == "GITHUB_TOKEN" && *p));
    }
}
