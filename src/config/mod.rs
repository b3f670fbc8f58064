//! Configuration: `config.yaml` (raw, serde) resolved into the typed [`Config`]
//! the rest of forgehand uses. Loading fails early with an error that names
//! the key, the bad value and what is accepted.

mod automations;
mod budget;
mod cluster;
mod context;
mod egress_credentials;
mod env;
mod git;
mod host_pattern;
mod kube_sandbox;
mod lfs;
mod llm;
mod planning;
mod policy;
mod raw;
mod repository;
mod repository_pattern;
mod sandbox;
mod secrets;
mod submodules;
mod thread_images;
mod triggers;
mod units;
mod work;

pub use automations::{
    parse_schedule, AutomationConfig, AutomationForge, AutomationTarget, DEFAULT_STARTING_DEADLINE,
};
pub use budget::BudgetConfig;
pub use cluster::{ClusterConfig, ClusterMode};
pub use context::{ContextConfig, IdeasConfig, IdeasMode, TrustConfig};
pub use egress_credentials::{CredentialScheme, EgressCredential, EgressCredentials};
pub use git::GitConfig;
pub use host_pattern::{host_patterns, HostName, HostPattern, WEB_PORTS};
pub use kube_sandbox::{KubeSandboxConfig, SandboxBackendChoice};
pub use lfs::LfsConfig;
pub use llm::{LlmConfig, ModelConfig, ModelOverrides, ProviderKind};
pub use planning::{PlanningConfig, PlanningMode};
pub use policy::{AgentLimits, Api, Price, ReasoningKind, RetryPolicy};
pub use repository::{
    check_file as check_repo_file, AgentNetwork, Commands, PlainValue, RawNetwork, RepoBudget, RepoFile,
    RepositoriesConfig, SetupFailure,
};
pub use repository_pattern::RepositoryPattern;
pub use sandbox::{CopyOutLimits, EgressTransport, SandboxConfig, SnapshotsConfig};
pub use secrets::{Secret, Secrets, OWN_SECRET};
pub use submodules::SubmodulesConfig;
pub use thread_images::ThreadImagesConfig;
pub use triggers::{PlanApproval, TriggersConfig};
pub use units::{ByteSize, HumanDuration};
pub use work::{
    CiConfig, DeliveryConfig, GitHubApp, GitHubConfig, GitLabConfig, LabelsConfig, SchedulingConfig,
    SigningConfig, GITHUB_API_URL_ENV, GITLAB_URL_ENV, SIGNING_KEY_SETTING,
};

use raw::RawConfig;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable the specification gives to switch the editor.
pub const TEXT_EDITOR_MCP_ENABLED: &str = "TEXT_EDITOR_MCP_ENABLED";
/// Overrides `text_editor_mcp.editor_binary`.
pub const EDITOR_BINARY_ENV: &str = "FORGEHAND_EDITOR_BINARY";
/// Where a config file is looked for when none is given on the command line.
pub const CONFIG_ENV: &str = "FORGEHAND_CONFIG";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}; pass --config PATH or set {CONFIG_ENV}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not valid YAML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
    #[error("{key}: environment variable {var} is not set; set it, or write ${{{var}:-default}} to give a default")]
    MissingEnv { key: String, var: String },
    #[error("environment variable {var}={value:?} is not a boolean; use true or false")]
    BadEnvOverride { var: String, value: String },
}

impl ConfigError {
    fn invalid(key: &str, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub daemon: DaemonConfig,
    pub docker: DockerConfig,
    pub images: ImagesConfig,
    pub sandbox: SandboxConfig,
    pub text_editor_mcp: TextEditorMcpConfig,
    pub llm: LlmConfig,
    pub agent: AgentConfig,
    pub mcp_servers: Vec<McpServerConfig>,
    pub scheduling: SchedulingConfig,
    pub github: GitHubConfig,
    pub gitlab: GitLabConfig,
    pub labels: LabelsConfig,
    pub delivery: DeliveryConfig,
    pub planning: PlanningConfig,
    pub context: ContextConfig,
    pub ideas: IdeasConfig,
    pub trust: TrustConfig,
    pub triggers: TriggersConfig,
    /// Spending caps in US dollars.
    pub budget: BudgetConfig,
    pub git: GitConfig,
    pub repositories: RepositoriesConfig,
    pub cluster: ClusterConfig,
    /// Issues opened on a schedule (`automations:`).
    pub automations: Vec<AutomationConfig>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    pub limits: AgentLimits,
    /// A folder whose files replace the built-in prompts at the same
    /// relative path; `None`: the built-in prompts only.
    pub prompts_dir: Option<PathBuf>,
    /// Rounds the model gets to fix a change whose tests fail (`test` in
    /// the repository's settings).
    pub test_fix_rounds: u32,
    /// Attempts at each change, each in its own sandbox (best of N, the
    /// tests and a judge choose); 1: one attempt.
    pub attempts: u32,
    /// Images from the thread for models that take them (`agent.images`).
    pub images: ThreadImagesConfig,
}

#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    pub name: String,
    pub command: Vec<String>,
    pub allowed_tools: Option<Vec<String>>,
    pub excluded_tools: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    /// Put on every container this daemon makes; empty until the daemon
    /// starts when not configured (then the state folder's own id).
    pub instance_id: String,
    pub state_dir: PathBuf,
    /// Where `/healthz`, `/readyz`, `/metrics` and the status page are
    /// served (`daemon.http.listen`); `None`: nowhere.
    pub http_listen: Option<std::net::SocketAddr>,
    /// Below this much free space in `state_dir` no new task is claimed.
    pub min_free_space: u64,
    /// GitHub's and GitLab's webhook deliveries are taken at
    /// `/webhooks/github` and `/webhooks/gitlab` on the HTTP listener.
    pub webhooks: bool,
    /// How long a run's transcript is kept after the run ended.
    pub transcript_retention: Duration,
    /// Where people reach the HTTP listener (`daemon.http.public_url`): a
    /// run's progress comment links its transcript there.
    pub public_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DockerConfig {
    /// `None`: `DOCKER_HOST` or the local socket.
    pub host: Option<String>,
    pub api_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImagesConfig {
    /// A folder whose `<name>/Dockerfile` replace or add to the images built
    /// into the binary; `None`: the built-in images only.
    pub dir: Option<PathBuf>,
    pub tag_prefix: String,
    pub tag: String,
    pub base_image: String,
    pub build_network: String,
    /// Repository (`owner/name`) -> image reference that overrides detection.
    pub pins: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TextEditorMcpConfig {
    pub enabled: bool,
    /// The static `forgehand-editor`; `None`: next to the forgehand executable.
    pub editor_binary: Option<PathBuf>,
    pub call_timeout: Duration,
    pub max_view_bytes: usize,
    pub server_name: String,
    /// Empty: forgehand's own editor server. Otherwise argv of a stdio MCP
    /// server started inside the sandbox (for example the Node one).
    pub command: Vec<String>,
}

impl Config {
    /// Reads and validates a config file, with `${VAR}` substitution and env
    /// overrides taken from the process environment.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base_dir = path.parent().map(Path::to_owned).unwrap_or_default();
        Config::from_yaml(&text, path, &base_dir, &|name| std::env::var(name).ok())
    }

    /// `path` made absolute against the current folder, without touching
    /// the filesystem. Every path the config gives goes through this once:
    /// Docker's bind mounts and `file://` URLs take only absolute paths, and
    /// a daemon must not depend on the folder it was started from.
    pub fn absolute(path: &Path) -> PathBuf {
        if path.as_os_str().is_empty() {
            return std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        }
        std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
    }

    /// The built-in defaults, as if an empty file had been given.
    pub fn defaults() -> Config {
        // The raw defaults always validate; a test keeps it so.
        Config::from_raw(RawConfig::default(), &Config::absolute(Path::new("")))
            .unwrap_or_else(|e| unreachable!("built-in defaults must validate: {e}"))
    }

    /// Parses YAML text. `base_dir` anchors relative paths; `lookup` reads
    /// environment variables (injected so tests do not touch the process env).
    pub fn from_yaml(
        text: &str,
        origin: &Path,
        base_dir: &Path,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut value: yaml_serde::Value = yaml_serde::from_str(text).map_err(|e| ConfigError::Syntax {
            path: origin.to_owned(),
            message: e.to_string(),
        })?;
        if value.is_null() {
            value = yaml_serde::Value::Mapping(Default::default());
        }
        env::substitute(&mut value, "", lookup)?;
        let raw: RawConfig = serde_path_to_error::deserialize(value).map_err(|err| {
            let key = err.path().to_string();
            let key = if key == "." { "(top level)".to_owned() } else { key };
            ConfigError::Invalid {
                key,
                message: friendly_serde_message(&err.into_inner().to_string()),
            }
        })?;
        let signing = work::resolve_signing(&raw.delivery.signing, lookup)?;
        let egress = &raw.sandbox.egress;
        let credentials =
            egress_credentials::resolve(&egress.credentials, &egress.extra_ca_file, base_dir, lookup)?;
        let mut config = Config::from_raw(raw, base_dir)?;
        config.delivery.signing = signing;
        config.sandbox.egress_credentials = credentials;
        config.apply_env_overrides(lookup)?;
        Ok(config)
    }

    fn apply_env_overrides(&mut self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(value) = lookup(TEXT_EDITOR_MCP_ENABLED).filter(|v| !v.trim().is_empty()) {
            self.text_editor_mcp.enabled = parse_bool(&value).ok_or_else(|| ConfigError::BadEnvOverride {
                var: TEXT_EDITOR_MCP_ENABLED.into(),
                value: value.clone(),
            })?;
        }
        for (var, url) in [
            ("OPENAI_BASE_URL", &mut self.llm.openai_base_url),
            ("GEMINI_BASE_URL", &mut self.llm.gemini_base_url),
            ("ANTHROPIC_BASE_URL", &mut self.llm.anthropic_base_url),
        ] {
            if let Some(value) = lookup(var).filter(|v| !v.trim().is_empty()) {
                *url = value.trim().trim_end_matches('/').to_owned();
            }
        }
        if let Some(path) = lookup(EDITOR_BINARY_ENV).filter(|v| !v.trim().is_empty()) {
            self.text_editor_mcp.editor_binary = Some(Config::absolute(Path::new(path.trim())));
        }
        work::apply_url_overrides(&mut self.github, &mut self.gitlab, lookup)
    }

    fn from_raw(raw: RawConfig, base_dir: &Path) -> Result<Config, ConfigError> {
        let base_dir = Config::absolute(base_dir);
        let resolve_path = |p: &str| {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                base_dir.join(p)
            }
        };
        let daemon = resolve_daemon(&raw.daemon, &resolve_path)?;
        let docker = DockerConfig {
            host: Some(raw.docker.host.trim().to_owned()).filter(|h| !h.is_empty()),
            api_timeout: positive_duration("docker.api_timeout", raw.docker.api_timeout)?,
        };
        let images = resolve_images(&raw.images, &resolve_path)?;
        let sandbox = sandbox::resolve_sandbox(raw.sandbox, &raw.images, &daemon.state_dir, &resolve_path)?;
        let text_editor_mcp = resolve_text_editor(raw.text_editor_mcp, &resolve_path)?;
        let llm = llm::resolve_llm(raw.llm)?;
        let agent = resolve_agent(raw.agent, llm.max_output_tokens, &resolve_path)?;
        let mcp_servers = resolve_mcp_servers(raw.mcp_servers)?;
        let scheduling = work::resolve_scheduling(&raw.daemon)?;
        let planning = planning::resolve_planning(raw.planning, &llm.models)?;
        let github = work::resolve_github(raw.github)?;
        let gitlab = work::resolve_gitlab(raw.gitlab)?;
        let automations = automations::resolve_automations(raw.automations, &github, &gitlab)?;
        Ok(Config {
            automations,
            planning,
            context: context::resolve_context(raw.context, &llm.models)?,
            ideas: context::resolve_ideas(raw.ideas, &llm.models)?,
            trust: context::resolve_trust(raw.trust),
            triggers: triggers::resolve_triggers(raw.triggers)?,
            budget: budget::resolve_budget(raw.budget)?,
            git: git::resolve_git(raw.git)?,
            repositories: repository::resolve_repositories(raw.repositories, agent.attempts)?,
            cluster: cluster::resolve_cluster(raw.cluster, &resolve_path)?,
            scheduling,
            github,
            gitlab,
            labels: work::resolve_labels(raw.labels)?,
            delivery: work::resolve_delivery(raw.delivery)?,
            daemon,
            docker,
            images,
            sandbox,
            text_editor_mcp,
            llm,
            agent,
            mcp_servers,
        })
    }
}

/// `images:`; the registry keys belong to the Kubernetes backend and are
/// resolved with `sandbox:`.
fn resolve_images(
    raw: &raw::RawImages,
    resolve_path: &dyn Fn(&str) -> PathBuf,
) -> Result<ImagesConfig, ConfigError> {
    for (repo, image) in &raw.pins {
        if !repo.contains('/') {
            return Err(ConfigError::invalid(
                &format!("images.pins.{repo}"),
                format!(
                    r#""{repo}" is not a repository; write it as "owner/name" (GitLab: "group/subgroup/name")"#
                ),
            ));
        }
        non_empty(&format!("images.pins.{repo}"), image)?;
    }
    Ok(ImagesConfig {
        dir: optional_path(&raw.dir, resolve_path),
        tag_prefix: raw.tag_prefix.clone(),
        tag: non_empty("images.tag", &raw.tag)?,
        base_image: non_empty("images.base_image", &raw.base_image)?,
        build_network: non_empty("images.build_network", &raw.build_network)?,
        pins: raw.pins.clone(),
    })
}

/// `text_editor_mcp:`: the built-in editor or another stdio MCP server.
fn resolve_text_editor(
    editor: raw::RawTextEditorMcp,
    resolve_path: &dyn Fn(&str) -> PathBuf,
) -> Result<TextEditorMcpConfig, ConfigError> {
    if editor.mcp_server.command.iter().any(|arg| arg.is_empty()) {
        return Err(ConfigError::invalid(
            "text_editor_mcp.mcp_server.command",
            "holds an empty argument; list the program and its arguments, or leave the list empty for the built-in editor",
        ));
    }
    let max_view_bytes = usize::try_from(editor.max_view_bytes.bytes())
        .ok()
        .filter(|n| *n >= 256)
        .ok_or_else(|| {
            ConfigError::invalid(
                "text_editor_mcp.max_view_bytes",
                format!(
                    r#""{}" is too small; use at least "256" (default "16k")"#,
                    editor.max_view_bytes
                ),
            )
        })?;
    Ok(TextEditorMcpConfig {
        enabled: editor.enabled,
        editor_binary: Some(editor.editor_binary.trim())
            .filter(|p| !p.is_empty())
            .map(resolve_path),
        call_timeout: positive_duration("text_editor_mcp.call_timeout", editor.call_timeout)?,
        max_view_bytes,
        server_name: non_empty("text_editor_mcp.mcp_server.name", &editor.mcp_server.name)?,
        command: editor.mcp_server.command,
    })
}

fn resolve_agent(
    raw: raw::RawAgent,
    max_output_tokens: u32,
    resolve_path: &dyn Fn(&str) -> PathBuf,
) -> Result<AgentConfig, ConfigError> {
    let at_least_one = |key: &str, value: u64| {
        if value == 0 {
            Err(ConfigError::invalid(key, "must be at least 1"))
        } else {
            Ok(())
        }
    };
    at_least_one("agent.max_steps", raw.max_steps.into())?;
    at_least_one("agent.token_budget", raw.token_budget)?;
    at_least_one("agent.max_repeated_failures", raw.max_repeated_failures.into())?;
    at_least_one(
        "agent.max_tool_calls_per_step",
        raw.max_tool_calls_per_step as u64,
    )?;
    let max_tool_result_bytes = usize::try_from(raw.max_tool_result_bytes.bytes())
        .ok()
        .filter(|n| *n >= 1024)
        .ok_or_else(|| {
            ConfigError::invalid(
                "agent.max_tool_result_bytes",
                r#"use a size of at least "1k" (default "32k")"#,
            )
        })?;
    Ok(AgentConfig {
        limits: AgentLimits {
            max_steps: raw.max_steps,
            token_budget: raw.token_budget,
            wall_clock: positive_duration("agent.wall_clock_limit", raw.wall_clock_limit)?,
            max_tool_result_bytes,
            max_repeated_failures: raw.max_repeated_failures,
            max_tool_calls_per_step: raw.max_tool_calls_per_step,
            max_output_tokens,
            temperature: None,
        },
        prompts_dir: optional_path(&raw.prompts_dir, resolve_path),
        test_fix_rounds: raw.test_fix_rounds,
        attempts: attempts(raw.attempts)?,
        images: thread_images::resolve(raw.images)?,
    })
}

/// `agent.attempts`: at least one, at most [`MAX_ATTEMPTS`].
fn attempts(value: u32) -> Result<u32, ConfigError> {
    if (1..=MAX_ATTEMPTS).contains(&value) {
        return Ok(value);
    }
    Err(ConfigError::invalid(
        "agent.attempts",
        format!("{value} is out of range; use 1 (one attempt, the default) to {MAX_ATTEMPTS}"),
    ))
}

/// The most attempts `agent.attempts` allows for one change.
pub const MAX_ATTEMPTS: u32 = 8;

fn resolve_mcp_servers(raw: Vec<raw::RawMcpServerEntry>) -> Result<Vec<McpServerConfig>, ConfigError> {
    let mut servers: Vec<McpServerConfig> = Vec::new();
    for (i, entry) in raw.into_iter().enumerate() {
        let name = non_empty(&format!("mcp_servers[{i}].name"), &entry.name)?;
        if servers.iter().any(|s| s.name == name) {
            return Err(ConfigError::invalid(
                &format!("mcp_servers[{i}].name"),
                format!(r#""{name}" is used twice; server names must be unique"#),
            ));
        }
        if entry.command.is_empty() || entry.command.iter().any(|a| a.is_empty()) {
            return Err(ConfigError::invalid(
                &format!("mcp_servers[{i}].command"),
                "list the program and its arguments, none empty",
            ));
        }
        servers.push(McpServerConfig {
            name,
            command: entry.command,
            allowed_tools: entry.allowed_tools,
            excluded_tools: entry.excluded_tools,
        });
    }
    Ok(servers)
}

/// `daemon:`'s identity, state folder and HTTP listener.
fn resolve_daemon(
    raw: &raw::RawDaemon,
    resolve_path: &dyn Fn(&str) -> PathBuf,
) -> Result<DaemonConfig, ConfigError> {
    let daemon = DaemonConfig {
        // Empty: the state folder's own id, resolved when the daemon starts.
        instance_id: raw.instance_id.trim().to_owned(),
        state_dir: resolve_path(&non_empty("daemon.state_dir", &raw.state_dir)?),
        min_free_space: raw.min_free_space.bytes(),
        webhooks: raw.webhooks,
        transcript_retention: raw.transcript_retention.0,
        public_url: match raw.http.public_url.trim() {
            "" => None,
            url => Some(work::http_url("daemon.http.public_url", url)?),
        },
        http_listen: match raw.http.listen.trim() {
            "" => None,
            text => Some(text.parse().map_err(|_| {
                ConfigError::invalid(
                    "daemon.http.listen",
                    format!(r#""{text}" is not an address; use e.g. "127.0.0.1:9464" (empty: off)"#),
                )
            })?),
        },
    };
    if !daemon
        .instance_id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(ConfigError::invalid(
            "daemon.instance_id",
            format!(
                r#""{}" may only hold letters, digits, "-", "_" and "."; it becomes a container label"#,
                daemon.instance_id
            ),
        ));
    }
    if daemon.transcript_retention < Duration::from_secs(3600) {
        return Err(ConfigError::invalid(
            "daemon.transcript_retention",
            format!(
                "{} is too short to read a run's transcript; use at least \"1h\" (default \"30d\")",
                humantime::format_duration(daemon.transcript_retention)
            ),
        ));
    }
    if daemon.webhooks && daemon.http_listen.is_none() {
        return Err(ConfigError::invalid(
            "daemon.webhooks",
            "is on, but daemon.http.listen is empty: webhooks are taken on the HTTP listener; give it an address (e.g. \"0.0.0.0:9464\") or turn webhooks off".to_owned(),
        ));
    }
    Ok(daemon)
}

/// An optional folder: empty means "not set".
fn optional_path(value: &str, resolve_path: &dyn Fn(&str) -> PathBuf) -> Option<PathBuf> {
    let trimmed = value.trim();
    (!trimmed.is_empty()).then(|| resolve_path(trimmed))
}

fn non_empty(key: &str, value: &str) -> Result<String, ConfigError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(ConfigError::invalid(
            key,
            "must not be empty (see config.yaml for the default)",
        ));
    }
    Ok(trimmed.to_owned())
}

fn positive_duration(key: &str, value: HumanDuration) -> Result<Duration, ConfigError> {
    if value.0.is_zero() {
        return Err(ConfigError::invalid(
            key,
            r#"must be longer than zero; use e.g. "30s""#,
        ));
    }
    Ok(value.0)
}

pub(crate) fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// serde's messages speak of "fields" and Rust types; operators see YAML keys.
fn friendly_serde_message(message: &str) -> String {
    let message = message
        .replace("unknown field", "unknown key")
        .replace("expected one of", "known keys are");
    let message = message
        .replace("expected i64", "expected a whole number")
        .replace("expected u64", "expected a whole number")
        .replace("expected f64", "expected a number")
        .replace("expected a boolean", "expected true or false")
        .replace("expected a string", "expected text");
    let message = message.replace("invalid type: ", "wrong type: ");
    // "expected struct RawSandbox" names a Rust type; say what YAML is wanted.
    match message.find("expected struct ") {
        Some(at) => format!("{}expected a mapping of settings", &message[..at]),
        None => message,
    }
}
