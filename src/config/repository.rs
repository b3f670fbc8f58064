//! A repository's own environment: the keys of `.forgehand.yaml` (read from
//! the repository's default branch) and the operator's side of them in
//! `config.yaml` under `repositories:` (defaults per repository and the
//! limits no repository can pass). The merge itself is in
//! [`crate::repo_settings`]; this module only parses and checks values.

use super::host_pattern::host_patterns;
use super::host_pattern::HostPattern;
use super::units::HumanDuration;
use super::ConfigError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The keys of `.forgehand.yaml`, as written; every key optional. The same
/// shape is an operator's per-repository default in `config.yaml`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RepoFile {
    pub image: Option<String>,
    pub setup: Option<Commands>,
    pub setup_timeout: Option<HumanDuration>,
    pub env: Option<BTreeMap<String, PlainValue>>,
    pub network: Option<RawNetwork>,
    pub test: Option<String>,
    pub test_timeout: Option<HumanDuration>,
    pub instructions: Option<Vec<String>>,
    /// Caps that lower the operator's `budget.*` for this repository.
    pub budget: Option<RepoBudget>,
    /// Best of N for this repository: the operator's entries set it
    /// (1..=[`super::MAX_ATTEMPTS`]); the repository's own file only lowers it.
    pub attempts: Option<u32>,
}

/// A repository's own spending caps in US dollars: each lowers the
/// operator's (`budget.task_usd`, `repository_daily_usd`,
/// `repository_monthly_usd`), never raises it.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RepoBudget {
    pub task_usd: Option<f64>,
    pub daily_usd: Option<f64>,
    pub monthly_usd: Option<f64>,
}

/// One shell command or a list of them.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged, expecting = "a shell command or a list of shell commands")]
pub enum Commands {
    One(String),
    Many(Vec<String>),
}

impl Commands {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Commands::One(command) => vec![command],
            Commands::Many(commands) => commands,
        }
    }
}

/// An environment value: YAML may write it as text, a number or a boolean.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged, expecting = "text, a number or true/false")]
pub enum PlainValue {
    Text(String),
    Integer(i64),
    Float(f64),
    Bool(bool),
}

impl std::fmt::Display for PlainValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlainValue::Text(text) => f.write_str(text),
            PlainValue::Integer(n) => write!(f, "{n}"),
            PlainValue::Float(n) => write!(f, "{n}"),
            PlainValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawNetwork {
    pub setup: Option<Vec<String>>,
    pub agent: Option<AgentNetwork>,
}

/// `network.agent`: `off`, or the hosts the agent phase may reach.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged, expecting = r#""off" or a list of host names"#)]
pub enum AgentNetwork {
    Word(String),
    Hosts(Vec<String>),
}

/// What happens when a repository's setup fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupFailure {
    /// Say so on the issue and stop before any model call (the default).
    Stop,
    /// Say so on the issue and let the model work in the unprepared sandbox.
    Continue,
}

/// `repositories:` in `config.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub struct RepositoriesConfig {
    /// Defaults for every repository, below its `.forgehand.yaml`.
    pub defaults: RepoFile,
    /// Defaults for one repository (`owner/name`), below its `.forgehand.yaml`
    /// and above `defaults`.
    pub per_repository: BTreeMap<String, RepoFile>,
    /// Whether a repository's file may choose any image (`image`), not only
    /// one of forgehand's own.
    pub allow_image: bool,
    /// No repository's setup or tests run longer than these.
    pub max_setup_timeout: Duration,
    pub max_test_timeout: Duration,
    /// Timeouts when neither side gives one.
    pub setup_timeout: Duration,
    pub test_timeout: Duration,
    /// When non-empty, hosts a repository may name; any other is dropped
    /// from its allowlists (with a note on the issue).
    pub allowed_hosts: Vec<HostPattern>,
    pub on_setup_failure: SetupFailure,
    /// Tokens the repository's instructions may take in a prompt.
    pub instructions_tokens: u64,
    /// `agent.attempts`: best of N where no repository entry gives `attempts`.
    pub attempts: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawRepositories {
    pub defaults: RepoFile,
    pub per_repository: BTreeMap<String, RepoFile>,
    pub allow_image: bool,
    pub max_setup_timeout: HumanDuration,
    pub max_test_timeout: HumanDuration,
    pub allowed_hosts: Vec<String>,
    pub on_setup_failure: String,
    pub instructions_tokens: u64,
}

impl Default for RawRepositories {
    fn default() -> Self {
        RawRepositories {
            defaults: RepoFile::default(),
            per_repository: BTreeMap::new(),
            allow_image: false,
            max_setup_timeout: HumanDuration(Duration::from_secs(3600)),
            max_test_timeout: HumanDuration(Duration::from_secs(3600)),
            allowed_hosts: Vec::new(),
            on_setup_failure: "stop".into(),
            instructions_tokens: 8_000,
        }
    }
}

/// Default timeouts when no side gives one.
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(15 * 60);
pub const DEFAULT_TEST_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// `attempts` is the already checked `agent.attempts`.
pub(super) fn resolve_repositories(
    raw: RawRepositories,
    attempts: u32,
) -> Result<RepositoriesConfig, ConfigError> {
    let on_setup_failure = match raw.on_setup_failure.trim() {
        "stop" => SetupFailure::Stop,
        "continue" => SetupFailure::Continue,
        other => {
            return Err(ConfigError::invalid(
                "repositories.on_setup_failure",
                format!(r#""{other}" is not known; use "stop" (the default) or "continue""#),
            ))
        }
    };
    let positive = |key: &str, d: HumanDuration| {
        if d.0.is_zero() {
            Err(ConfigError::invalid(key, "must be longer than 0s"))
        } else {
            Ok(d.0)
        }
    };
    let max_setup_timeout = positive("repositories.max_setup_timeout", raw.max_setup_timeout)?;
    let max_test_timeout = positive("repositories.max_test_timeout", raw.max_test_timeout)?;
    check_file("repositories.defaults", &raw.defaults)?;
    for (name, file) in &raw.per_repository {
        check_file(&format!("repositories.per_repository.{name}"), file)?;
    }
    if raw.instructions_tokens < 200 {
        return Err(ConfigError::invalid(
            "repositories.instructions_tokens",
            "must be at least 200 (default 8000)",
        ));
    }
    Ok(RepositoriesConfig {
        setup_timeout: raw
            .defaults
            .setup_timeout
            .map_or(DEFAULT_SETUP_TIMEOUT, |d| d.0)
            .min(max_setup_timeout),
        test_timeout: raw
            .defaults
            .test_timeout
            .map_or(DEFAULT_TEST_TIMEOUT, |d| d.0)
            .min(max_test_timeout),
        defaults: raw.defaults,
        per_repository: raw.per_repository,
        allow_image: raw.allow_image,
        max_setup_timeout,
        max_test_timeout,
        allowed_hosts: host_patterns("repositories.allowed_hosts", &raw.allowed_hosts)?,
        on_setup_failure,
        instructions_tokens: raw.instructions_tokens,
        attempts,
    })
}

/// Checks the values of one settings file whose keys parsed; `prefix` is
/// where it sits (`.forgehand.yaml` or a key path in `config.yaml`).
pub fn check_file(prefix: &str, file: &RepoFile) -> Result<(), ConfigError> {
    let key = |name: &str| {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}.{name}")
        }
    };
    if let Some(image) = &file.image {
        check_image(&key, image)?;
    }
    if let Some(budget) = &file.budget {
        check_budget(&key, budget)?;
    }
    if let Some(attempts) = file.attempts.filter(|n| !(1..=super::MAX_ATTEMPTS).contains(n)) {
        return Err(ConfigError::invalid(
            &key("attempts"),
            format!(
                "{attempts} is out of range; use 1 (one attempt) to {}, or leave it out for the operator's number",
                super::MAX_ATTEMPTS
            ),
        ));
    }
    check_setup(&key, file)?;
    if let Some(env) = &file.env {
        for name in env.keys() {
            check_env_name(&key(&format!("env.{name}")), name)?;
        }
    }
    if let Some(network) = &file.network {
        check_network(&key, network)?;
    }
    if file.test.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(ConfigError::invalid(
            &key("test"),
            "is empty; give the command that verifies a change, such as \"pytest -q\", or leave the key out",
        ));
    }
    if let Some(paths) = &file.instructions {
        check_instructions(&key, paths)?;
    }
    Ok(())
}

/// `image`: one reference, which Docker cannot take with spaces in it.
fn check_image(key: &dyn Fn(&str) -> String, image: &str) -> Result<(), ConfigError> {
    if image.trim().is_empty() || image.chars().any(char::is_whitespace) {
        return Err(ConfigError::invalid(
            &key("image"),
            format!(
                r#""{image}" is not an image reference; use a forgehand image name such as "python" or a reference such as "registry.example.org/team/app:1.2" or "name@sha256:…""#
            ),
        ));
    }
    Ok(())
}

/// `budget`: each cap given is a positive amount.
fn check_budget(key: &dyn Fn(&str) -> String, budget: &RepoBudget) -> Result<(), ConfigError> {
    for (name, cap) in [
        ("budget.task_usd", budget.task_usd),
        ("budget.daily_usd", budget.daily_usd),
        ("budget.monthly_usd", budget.monthly_usd),
    ] {
        if cap.is_some_and(|cap| !cap.is_finite() || cap <= 0.0) {
            return Err(ConfigError::invalid(
                &key(name),
                "is not a positive amount of US dollars; write e.g. 2 or 0.50, or leave it out",
            ));
        }
    }
    Ok(())
}

/// `setup` holds no empty command, and neither timeout is zero.
fn check_setup(key: &dyn Fn(&str) -> String, file: &RepoFile) -> Result<(), ConfigError> {
    if let Some(commands) = &file.setup {
        let commands = commands.clone().into_vec();
        if commands.iter().any(|c| c.trim().is_empty()) {
            return Err(ConfigError::invalid(
                &key("setup"),
                "holds an empty command; give shell commands such as \"pip install -r requirements.txt\"",
            ));
        }
    }
    for (name, timeout) in [
        ("setup_timeout", file.setup_timeout),
        ("test_timeout", file.test_timeout),
    ] {
        if timeout.is_some_and(|t| t.0.is_zero()) {
            return Err(ConfigError::invalid(&key(name), "must be longer than 0s"));
        }
    }
    Ok(())
}

/// `network`: host lists for setup and the agent, or the agent's "off".
fn check_network(key: &dyn Fn(&str) -> String, network: &RawNetwork) -> Result<(), ConfigError> {
    if let Some(hosts) = &network.setup {
        host_patterns(&key("network.setup"), hosts)?;
    }
    match &network.agent {
        Some(AgentNetwork::Word(word)) if word.trim() != "off" => Err(ConfigError::invalid(
            &key("network.agent"),
            format!(r#""{word}" is not accepted; write "off" (the default) or a list of hosts"#),
        )),
        Some(AgentNetwork::Hosts(hosts)) => host_patterns(&key("network.agent"), hosts).map(drop),
        _ => Ok(()),
    }
}

/// `instructions`: relative paths that stay inside the repository.
fn check_instructions(key: &dyn Fn(&str) -> String, paths: &[String]) -> Result<(), ConfigError> {
    for path in paths {
        let clean = path.trim();
        if clean.is_empty() || clean.starts_with('/') || clean.split('/').any(|part| part == "..") {
            return Err(ConfigError::invalid(
                &key("instructions"),
                format!(
                    r#""{path}" is not a path inside the repository; give paths such as "AGENTS.md" or "docs/agents.md""#
                ),
            ));
        }
    }
    Ok(())
}

/// Names forgehand sets itself in the sandbox (the proxy) or that carry
/// credentials by convention; a repository may not set them.
const RESERVED_ENV: &[&str] = &[
    "HOME",
    "PATH",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
];

/// Variables that change how programs are loaded or run: a repository may
/// not set them for the commands forgehand runs (its setup, its tests, the
/// model's commands), whose meaning they would change behind their text.
const LOADER_ENV: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "CDPATH",
    "GLOBIGNORE",
    "TAR_OPTIONS",
    "GCONV_PATH",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "NODE_OPTIONS",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "GIT_PAGER",
    "LESSOPEN",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTFLAGS",
    "CARGO_BUILD_RUSTC_WRAPPER",
];

/// Whether `name` changes how programs are loaded or run.
fn changes_loading(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("LD_")
        || upper.starts_with("DYLD_")
        || upper.starts_with("GIT_CONFIG_KEY_")
        || upper.starts_with("GIT_CONFIG_VALUE_")
        || upper.starts_with("BASH_FUNC_")
        || LOADER_ENV.iter().any(|n| n.eq_ignore_ascii_case(name))
}

fn check_env_name(key: &str, name: &str) -> Result<(), ConfigError> {
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(ConfigError::invalid(
            key,
            format!("\"{name}\" is not a variable name; use letters, digits and _ (not first a digit)"),
        ));
    }
    if RESERVED_ENV.contains(&name) {
        return Err(ConfigError::invalid(
            key,
            format!("{name} is set by forgehand in the sandbox and cannot be changed"),
        ));
    }
    if changes_loading(name) {
        return Err(ConfigError::invalid(
            key,
            format!("{name} changes how programs are loaded or run (the dynamic loader, the shell, an interpreter, git, a build wrapper); env holds plain settings only. Put such a step in `setup` as a command instead"),
        ));
    }
    let upper = name.to_ascii_uppercase();
    if [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "API_KEY",
        "PRIVATE_KEY",
        "CREDENTIAL",
    ]
    .iter()
    .any(|word| upper.contains(word))
    {
        return Err(ConfigError::invalid(
            key,
            format!("{name} looks like a secret; no secret ever enters a sandbox, so env holds plain settings only (private registries with credentials are not supported)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_and_reserved_variables_are_refused() {
        for name in ["NPM_TOKEN", "HTTPS_PROXY", "1ABC", "A-B"] {
            assert!(check_env_name("env", name).is_err(), "{name}");
        }
        assert!(check_env_name("env", "PIP_NO_CACHE_DIR").is_ok());
        assert!(check_env_name("env", "APP_MODE").is_ok());
    }

    #[test]
    fn variables_that_change_how_programs_load_or_run_are_refused() {
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "ld_audit",
            "BASH_ENV",
            "TAR_OPTIONS",
            "PYTHONSTARTUP",
            "NODE_OPTIONS",
            "GIT_CONFIG_KEY_0",
            "GIT_SSH_COMMAND",
            "RUSTC_WRAPPER",
            "BASH_FUNC_ls",
        ] {
            let err = check_env_name("env", name).unwrap_err().to_string();
            assert!(
                err.contains("changes how programs are loaded or run"),
                "{name}: {err}"
            );
        }
    }
}
