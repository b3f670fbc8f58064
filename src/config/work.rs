//! The settings of the work itself: which forges and repositories are
//! watched, the label names that drive a task, and how results are delivered.

use super::{non_empty, raw, ConfigError};
use std::time::Duration;

/// Overrides `github.api_url` (GitHub Enterprise: `https://HOST/api/v3`).
pub const GITHUB_API_URL_ENV: &str = "GITHUB_API_URL";
/// Overrides `gitlab.url` (a self-managed instance).
pub const GITLAB_URL_ENV: &str = "GITLAB_URL";

#[derive(Debug, Clone, PartialEq)]
pub struct GitHubConfig {
    pub api_url: String,
    /// `owner/name` of each watched repository.
    pub repositories: Vec<String>,
    /// Also watch every repository the token (or App installation) can see.
    pub all_repositories: bool,
    /// GitHub App authentication: both set, with the key in GITHUB_APP_PRIVATE_KEY.
    pub app: Option<GitHubApp>,
    /// How long one API request may take before it counts as failed.
    pub api_timeout: std::time::Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GitHubApp {
    pub app_id: u64,
    pub installation_id: u64,
}

impl GitHubConfig {
    pub fn watches_anything(&self) -> bool {
        self.all_repositories || !self.repositories.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GitLabConfig {
    /// The instance's address, e.g. `https://gitlab.example.com` (a path prefix is kept).
    pub url: String,
    /// `group/subgroup/name` of each watched project.
    pub projects: Vec<String>,
    pub all_projects: bool,
    /// Lowest access level allowed to trigger (30 = Developer).
    pub min_access_level: u32,
}

impl GitLabConfig {
    pub fn watches_anything(&self) -> bool {
        self.all_projects || !self.projects.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelsConfig {
    pub trigger: String,
    pub processing: String,
    pub done: String,
    pub failed: String,
    pub paused: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryConfig {
    pub branch_prefix: String,
    /// Path prefixes (a trailing `/` for a folder) the model may not add or change.
    pub protected_paths: Vec<String>,
    pub allow_protected_paths: bool,
    pub max_push_attempts: u32,
    pub author_name: String,
    pub author_email: String,
    /// A change whose tests still fail is not delivered (else: a draft that says so).
    pub require_passing_tests: bool,
    pub ci: CiConfig,
    /// `delivery.signing.ssh_key_env`: the variable named, and the key read
    /// from it when the configuration was loaded.
    pub signing: Option<SigningConfig>,
}

/// Commits signed with an SSH key from the daemon's environment.
#[derive(Debug, Clone, PartialEq)]
pub struct SigningConfig {
    pub key_env: String,
    pub signer: std::sync::Arc<crate::git::signing::CommitSigner>,
}

/// The setting that names the signing key's variable.
pub const SIGNING_KEY_SETTING: &str = "delivery.signing.ssh_key_env";

/// Reads the signing key from the variable `delivery.signing.ssh_key_env`
/// names: a missing variable or a bad key stops the start.
pub(super) fn resolve_signing(
    raw: &raw::RawSigning,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<SigningConfig>, ConfigError> {
    let Some(var) = raw
        .ssh_key_env
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    let Some(text) = lookup(var).filter(|t| !t.trim().is_empty()) else {
        return Err(ConfigError::invalid(
            SIGNING_KEY_SETTING,
            format!("names the environment variable {var}, which is not set; put the OpenSSH private key in it, or remove the setting to push unsigned commits"),
        ));
    };
    let signer = crate::git::signing::CommitSigner::from_openssh(&text)
        .map_err(|e| ConfigError::invalid(SIGNING_KEY_SETTING, format!("the key in {var}: {e}")))?;
    Ok(Some(SigningConfig {
        key_env: var.to_owned(),
        signer: std::sync::Arc::new(signer),
    }))
}

/// Following the forge's checks after each push.
#[derive(Debug, Clone, PartialEq)]
pub struct CiConfig {
    /// Rounds in which the model is given failed checks' logs to fix.
    pub fix_rounds: u32,
    /// How long checks may take to start before forgehand says so and stops waiting.
    pub wait: Duration,
    /// How long started checks may take to end.
    pub timeout: Duration,
    /// How often the checks are asked for while waiting (a webhook rings sooner).
    pub poll: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchedulingConfig {
    pub poll_interval: Duration,
    pub poll_jitter: Duration,
    pub max_concurrent_tasks: usize,
    pub shutdown_grace: Duration,
    pub max_task_attempts: u32,
}

pub(super) fn resolve_scheduling(raw: &raw::RawDaemon) -> Result<SchedulingConfig, ConfigError> {
    if raw.poll_interval.0 < Duration::from_secs(1) {
        return Err(ConfigError::invalid(
            "daemon.poll_interval",
            format!(
                "{} s is too short; use at least \"1s\" (default \"60s\")",
                raw.poll_interval.0.as_secs_f64()
            ),
        ));
    }
    if raw.max_concurrent_tasks == 0 {
        return Err(ConfigError::invalid(
            "daemon.max_concurrent_tasks",
            "must be at least 1 (default 2)",
        ));
    }
    if raw.max_task_attempts == 0 {
        return Err(ConfigError::invalid(
            "daemon.max_task_attempts",
            "must be at least 1 (default 3)",
        ));
    }
    Ok(SchedulingConfig {
        poll_interval: raw.poll_interval.0,
        poll_jitter: raw.poll_jitter.0,
        max_concurrent_tasks: raw.max_concurrent_tasks,
        shutdown_grace: raw.shutdown_grace.0,
        max_task_attempts: raw.max_task_attempts,
    })
}

pub(super) fn resolve_github(raw: raw::RawGitHub) -> Result<GitHubConfig, ConfigError> {
    let api_url = http_url("github.api_url", &raw.api_url)?;
    for (i, repo) in raw.repositories.iter().enumerate() {
        let parts: Vec<&str> = repo.split('/').collect();
        if parts.len() != 2 || parts.iter().any(|p| p.trim().is_empty()) {
            return Err(ConfigError::invalid(
                &format!("github.repositories[{i}]"),
                format!(r#""{repo}" is not a repository; write it as "owner/name""#),
            ));
        }
    }
    let app = match (raw.app_id, raw.installation_id) {
        (0, 0) => None,
        (0, _) | (_, 0) => {
            return Err(ConfigError::invalid(
                "github.app_id",
                "GitHub App authentication needs both github.app_id and github.installation_id; set both, or neither to use GITHUB_TOKEN",
            ))
        }
        (app_id, installation_id) => Some(GitHubApp {
            app_id,
            installation_id,
        }),
    };
    Ok(GitHubConfig {
        api_url,
        repositories: raw.repositories.iter().map(|r| r.trim().to_owned()).collect(),
        all_repositories: raw.all_repositories,
        app,
        api_timeout: super::positive_duration("github.api_timeout", raw.api_timeout)?,
    })
}

pub(super) fn resolve_gitlab(raw: raw::RawGitLab) -> Result<GitLabConfig, ConfigError> {
    let url = http_url("gitlab.url", &raw.url)?;
    for (i, project) in raw.projects.iter().enumerate() {
        if !project.contains('/') || project.split('/').any(|p| p.trim().is_empty()) {
            return Err(ConfigError::invalid(
                &format!("gitlab.projects[{i}]"),
                format!(
                    r#""{project}" is not a project path; write it as "group/name" or "group/subgroup/name""#
                ),
            ));
        }
    }
    if ![10, 20, 30, 40, 50].contains(&raw.min_access_level) {
        return Err(ConfigError::invalid(
            "gitlab.min_access_level",
            format!(
                "{} is not a GitLab access level; use 10 (Guest), 20 (Reporter), 30 (Developer), 40 (Maintainer) or 50 (Owner)",
                raw.min_access_level
            ),
        ));
    }
    Ok(GitLabConfig {
        url,
        projects: raw.projects.iter().map(|p| p.trim().to_owned()).collect(),
        all_projects: raw.all_projects,
        min_access_level: raw.min_access_level,
    })
}

pub(super) fn resolve_labels(raw: raw::RawLabels) -> Result<LabelsConfig, ConfigError> {
    let labels = LabelsConfig {
        trigger: non_empty("labels.trigger", &raw.trigger)?,
        processing: non_empty("labels.processing", &raw.processing)?,
        done: non_empty("labels.done", &raw.done)?,
        failed: non_empty("labels.failed", &raw.failed)?,
        paused: non_empty("labels.paused", &raw.paused)?,
    };
    let all = [
        &labels.trigger,
        &labels.processing,
        &labels.done,
        &labels.failed,
        &labels.paused,
    ];
    for (i, a) in all.iter().enumerate() {
        if all[..i].iter().any(|b| b.eq_ignore_ascii_case(a)) {
            return Err(ConfigError::invalid(
                "labels",
                format!(r#""{a}" is used for two roles; each label must be different"#),
            ));
        }
    }
    Ok(labels)
}

pub(super) fn resolve_delivery(raw: raw::RawDelivery) -> Result<DeliveryConfig, ConfigError> {
    let prefix = raw.branch_prefix.trim().to_owned();
    if prefix.starts_with('/') || prefix.contains("..") || prefix.contains(' ') {
        return Err(ConfigError::invalid(
            "delivery.branch_prefix",
            format!(r#""{prefix}" is not usable in a branch name; use e.g. "forgehand/""#),
        ));
    }
    if raw.max_push_attempts == 0 {
        return Err(ConfigError::invalid(
            "delivery.max_push_attempts",
            "must be at least 1 (default 3)",
        ));
    }
    Ok(DeliveryConfig {
        branch_prefix: prefix,
        protected_paths: raw
            .protected_paths
            .iter()
            .map(|p| p.trim().trim_start_matches('/').to_owned())
            .filter(|p| !p.is_empty())
            .collect(),
        allow_protected_paths: raw.allow_protected_paths,
        max_push_attempts: raw.max_push_attempts,
        author_name: non_empty("delivery.author_name", &raw.author_name)?,
        author_email: non_empty("delivery.author_email", &raw.author_email)?,
        require_passing_tests: raw.require_passing_tests,
        ci: resolve_ci(&raw)?,
        // Read with the environment, after the file (`apply_env_overrides`).
        signing: None,
    })
}

fn resolve_ci(raw: &raw::RawDelivery) -> Result<CiConfig, ConfigError> {
    if raw.ci_fix_rounds > 10 {
        return Err(ConfigError::invalid(
            "delivery.ci_fix_rounds",
            format!(
                "{} rounds is too many; choose 0 to 10 (default 2)",
                raw.ci_fix_rounds
            ),
        ));
    }
    if raw.ci_poll.0 < Duration::from_secs(1) {
        return Err(ConfigError::invalid(
            "delivery.ci_poll",
            "must be at least 1s (default \"30s\")",
        ));
    }
    if raw.ci_timeout.0 < raw.ci_wait.0 {
        return Err(ConfigError::invalid(
            "delivery.ci_timeout",
            "must be at least delivery.ci_wait: checks get ci_wait to start and ci_timeout to end",
        ));
    }
    Ok(CiConfig {
        fix_rounds: raw.ci_fix_rounds,
        wait: raw.ci_wait.0,
        timeout: raw.ci_timeout.0,
        poll: raw.ci_poll.0,
    })
}

pub(super) fn http_url(key: &str, value: &str) -> Result<String, ConfigError> {
    let value = value.trim().trim_end_matches('/');
    match url::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(value.to_owned()),
        _ => Err(ConfigError::invalid(
            key,
            format!(r#""{value}" is not an http(s) address; write e.g. "https://host""#),
        )),
    }
}

/// Applies GITHUB_API_URL / GITLAB_URL.
pub(super) fn apply_url_overrides(
    github: &mut GitHubConfig,
    gitlab: &mut GitLabConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    if let Some(v) = lookup(GITHUB_API_URL_ENV).filter(|v| !v.trim().is_empty()) {
        github.api_url = http_url(GITHUB_API_URL_ENV, &v)?;
    }
    if let Some(v) = lookup(GITLAB_URL_ENV).filter(|v| !v.trim().is_empty()) {
        gitlab.url = http_url(GITLAB_URL_ENV, &v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signing(var: Option<&str>, value: Option<&str>) -> Result<Option<SigningConfig>, ConfigError> {
        let raw = raw::RawSigning {
            ssh_key_env: var.map(str::to_owned),
        };
        let value = value.map(str::to_owned);
        resolve_signing(&raw, &move |_| value.clone())
    }

    #[test]
    fn a_signing_key_that_is_missing_or_wrong_stops_the_start_naming_the_setting() {
        assert_eq!(signing(None, Some("ignored")).ok().flatten(), None);
        for (value, says) in [
            (None, "FORGEHAND_SIGNING_KEY, which is not set"),
            (Some("ssh-ed25519 AAAA public-half"), "not an OpenSSH private key"),
        ] {
            let err = signing(Some("FORGEHAND_SIGNING_KEY"), value)
                .unwrap_err()
                .to_string();
            assert!(err.contains(SIGNING_KEY_SETTING) && err.contains(says), "{err}");
            assert!(
                !err.contains("public-half"),
                "the key's text is not repeated: {err}"
            );
        }
    }
}
