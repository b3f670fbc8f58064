//! Configuration: `config.yaml` (raw, serde) resolved into the typed [`Config`]
//! the rest of forgehand uses. Loading fails early with an error that names
//! the key, the bad value and what is accepted.

mod env;
mod raw;
mod secrets;
mod units;

pub use secrets::{Secret, Secrets};
pub use units::{ByteSize, HumanDuration};

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
}

#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    /// Put on every container this daemon makes; the reaper only touches its own.
    pub instance_id: String,
    pub state_dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DockerConfig {
    /// `None`: `DOCKER_HOST` or the local socket.
    pub host: Option<String>,
    pub api_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImagesConfig {
    pub dir: PathBuf,
    pub tag_prefix: String,
    pub tag: String,
    pub base_image: String,
    pub build_network: String,
    /// Repository (`owner/name`) -> image reference that overrides detection.
    pub pins: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    pub network_mode: String,
    pub drop_all_capabilities: bool,
    pub no_new_privileges: bool,
    /// `uid[:gid]` or a user name known to the image.
    pub user: String,
    pub pids_limit: i64,
    pub memory_bytes: u64,
    pub cpus: f64,
    pub read_only_root: bool,
    pub tmp_size: u64,
    pub home_dir: String,
    pub home_size: u64,
    pub workspace_dir: String,
    pub project_dir: String,
    pub exec_timeout: Duration,
    pub output_limit: usize,
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

    /// The built-in defaults, as if an empty file had been given.
    pub fn defaults() -> Config {
        // The raw defaults always validate; a test keeps it so.
        Config::from_raw(RawConfig::default(), Path::new("."))
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
        let mut config = Config::from_raw(raw, base_dir)?;
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
        if let Some(path) = lookup(EDITOR_BINARY_ENV).filter(|v| !v.trim().is_empty()) {
            self.text_editor_mcp.editor_binary = Some(PathBuf::from(path.trim()));
        }
        Ok(())
    }

    fn from_raw(raw: RawConfig, base_dir: &Path) -> Result<Config, ConfigError> {
        let resolve_path = |p: &str| {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                base_dir.join(p)
            }
        };
        let daemon = DaemonConfig {
            instance_id: non_empty("daemon.instance_id", &raw.daemon.instance_id)?,
            state_dir: resolve_path(&non_empty("daemon.state_dir", &raw.daemon.state_dir)?),
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

        let docker = DockerConfig {
            host: Some(raw.docker.host.trim().to_owned()).filter(|h| !h.is_empty()),
            api_timeout: positive_duration("docker.api_timeout", raw.docker.api_timeout)?,
        };

        for (repo, image) in &raw.images.pins {
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
        let images = ImagesConfig {
            dir: resolve_path(&non_empty("images.dir", &raw.images.dir)?),
            tag_prefix: raw.images.tag_prefix,
            tag: non_empty("images.tag", &raw.images.tag)?,
            base_image: non_empty("images.base_image", &raw.images.base_image)?,
            build_network: non_empty("images.build_network", &raw.images.build_network)?,
            pins: raw.images.pins,
        };

        let s = raw.sandbox;
        if s.pids_limit < 16 {
            return Err(ConfigError::invalid(
                "sandbox.pids_limit",
                format!(
                    "{} is too small for a shell and a build; use at least 16 (default 512)",
                    s.pids_limit
                ),
            ));
        }
        if !(s.cpus.is_finite() && s.cpus > 0.0) {
            return Err(ConfigError::invalid(
                "sandbox.cpus",
                format!(
                    "{} is not a CPU count; use a positive number such as 2 or 0.5",
                    s.cpus
                ),
            ));
        }
        const MIN_MEMORY: u64 = 16 << 20;
        if s.memory.bytes() < MIN_MEMORY {
            return Err(ConfigError::invalid(
                "sandbox.memory",
                format!(
                    r#""{}" is below Docker's minimum; use at least "16m" (default "4g")"#,
                    s.memory
                ),
            ));
        }
        let output_limit = usize::try_from(s.output_limit.bytes())
            .ok()
            .filter(|n| *n >= 1024)
            .ok_or_else(|| {
                ConfigError::invalid(
                    "sandbox.output_limit",
                    format!(
                        r#""{}" is not usable; use a size of at least "1k" (default "1m")"#,
                        s.output_limit
                    ),
                )
            })?;
        for (key, dir) in [
            ("sandbox.home_dir", &s.home_dir),
            ("sandbox.workspace_dir", &s.workspace_dir),
            ("sandbox.project_dir", &s.project_dir),
        ] {
            if !dir.starts_with('/') {
                return Err(ConfigError::invalid(
                    key,
                    format!(r#""{dir}" must be an absolute path inside the container"#),
                ));
            }
        }
        if !s
            .project_dir
            .starts_with(&format!("{}/", s.workspace_dir.trim_end_matches('/')))
        {
            return Err(ConfigError::invalid(
                "sandbox.project_dir",
                format!(
                    r#""{}" must be inside sandbox.workspace_dir ("{}"), the writable volume"#,
                    s.project_dir, s.workspace_dir
                ),
            ));
        }
        let sandbox = SandboxConfig {
            network_mode: non_empty("sandbox.network_mode", &s.network_mode)?,
            drop_all_capabilities: s.drop_all_capabilities,
            no_new_privileges: s.no_new_privileges,
            user: non_empty("sandbox.user", &s.user)?,
            pids_limit: s.pids_limit,
            memory_bytes: s.memory.bytes(),
            cpus: s.cpus,
            read_only_root: s.read_only_root,
            tmp_size: s.tmp_size.bytes(),
            home_dir: s.home_dir,
            home_size: s.home_size.bytes(),
            workspace_dir: s.workspace_dir,
            project_dir: s.project_dir,
            exec_timeout: positive_duration("sandbox.exec_timeout", s.exec_timeout)?,
            output_limit,
        };

        let editor = raw.text_editor_mcp;
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
        let text_editor_mcp = TextEditorMcpConfig {
            enabled: editor.enabled,
            editor_binary: Some(editor.editor_binary.trim())
                .filter(|p| !p.is_empty())
                .map(resolve_path),
            call_timeout: positive_duration("text_editor_mcp.call_timeout", editor.call_timeout)?,
            max_view_bytes,
            server_name: non_empty("text_editor_mcp.mcp_server.name", &editor.mcp_server.name)?,
            command: editor.mcp_server.command,
        };

        Ok(Config {
            daemon,
            docker,
            images,
            sandbox,
            text_editor_mcp,
        })
    }
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
