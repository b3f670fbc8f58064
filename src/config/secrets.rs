//! Forge tokens and model keys. They come from the environment only, are
//! never written in the config, and never print: `Debug` and `Display` show
//! a fixed mask.

use crate::secrets::Masked;
use std::fmt;

/// The rule id a transcript names when forgehand's own secret was masked.
pub const OWN_SECRET: &str = "forgehand-secret";

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
    /// Other values never to show (the egress relay's credentials).
    pub extra: Vec<Secret>,
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
            extra: Vec::new(),
        }
    }

    /// These secrets and `extra`, masked as forgehand's own.
    pub fn with_extra(mut self, extra: Vec<Secret>) -> Secrets {
        self.extra.extend(extra);
        self
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

    /// `text` with forgehand's own secrets replaced by `***` and every
    /// credential of a known format (anyone's: a CI job's, a thread's)
    /// replaced by `[masked: <rule>]`: the guard on anything forgehand
    /// writes where people or models read it.
    pub fn scrub(&self, text: &str) -> String {
        self.mask(text).text
    }

    /// As [`Secrets::scrub`], saying which rules masked something
    /// (`forgehand-secret` for forgehand's own values), never what.
    pub fn mask(&self, text: &str) -> Masked {
        let (own, found) = self.mask_own(text);
        let mut masked = crate::secrets::mask(&own);
        if found {
            masked.rules.insert(OWN_SECRET.to_owned());
        }
        masked
    }

    /// Whether `text` holds one of forgehand's own secret values.
    pub fn holds_own_value(&self, text: &str) -> bool {
        self.mask_own(text).1
    }

    /// `text` with each own value replaced by `***`, as it is and as it
    /// reads inside a JSON string (a value holding `"`, `\` or a newline,
    /// such as a PEM key, is escaped there); and whether any was found.
    fn mask_own(&self, text: &str) -> (String, bool) {
        let mut out = text.to_owned();
        let mut found = false;
        for value in self.values() {
            if value.len() < 4 {
                continue;
            }
            for form in [Some(value.to_owned()), json_escaped(value)]
                .into_iter()
                .flatten()
            {
                if out.contains(&form) {
                    out = out.replace(&form, "***");
                    found = true;
                }
            }
        }
        (out, found)
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
        .chain(&self.extra)
        .map(Secret::expose)
        .collect()
    }
}

/// `value` as it reads inside a JSON string, when that differs.
fn json_escaped(value: &str) -> Option<String> {
    let quoted = serde_json::to_string(value).ok()?;
    let inner = &quoted[1..quoted.len() - 1];
    (inner != value).then(|| inner.to_owned())
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

    #[test]
    fn own_values_are_masked_as_they_are_and_as_json_escapes_them() {
        let key = "sk-\"quoted\\key\nsecond-line";
        let secrets = Secrets::from_lookup(&|n| (n == "OPENAI_API_KEY").then(|| key.to_owned()));
        let json = serde_json::to_string(&format!("key: {key}")).unwrap();
        let masked = secrets.mask(&json);
        assert_eq!(masked.text, "\"key: ***\"");
        assert_eq!(masked.rules, [OWN_SECRET.to_owned()].into());
        assert!(secrets.holds_own_value(&format!("x {key}")));
        // Someone else's credential is masked by format, and is not one of forgehand's own.
        let url = "postgres://app:pa55w0rd@db/app";
        assert!(!secrets.holds_own_value(url));
        assert_eq!(
            secrets.scrub(url),
            "postgres://app:[masked: url-credentials]@db/app"
        );
        assert_eq!(secrets.scrub("nothing to mask"), "nothing to mask");
    }
}
