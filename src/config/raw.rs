//! The configuration file as written: every key optional (defaults are the
//! values in the shipped `config.yaml`), unknown keys rejected. Units are
//! parsed here so errors carry the key path; cross-field rules live in
//! `Config::from_raw`.

use super::units::{ByteSize, HumanDuration};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawConfig {
    pub daemon: RawDaemon,
    pub docker: RawDocker,
    pub images: RawImages,
    pub sandbox: RawSandbox,
    pub text_editor_mcp: RawTextEditorMcp,
    pub llm: RawLlm,
    pub agent: RawAgent,
    pub mcp_servers: Vec<RawMcpServerEntry>,
    pub github: RawGitHub,
    pub gitlab: RawGitLab,
    pub labels: RawLabels,
    pub delivery: RawDelivery,
    pub planning: super::planning::RawPlanning,
    pub context: super::context::RawContext,
    pub ideas: super::context::RawIdeas,
    pub trust: super::context::RawTrust,
    pub triggers: super::triggers::RawTriggers,
    pub budget: super::budget::RawBudget,
    pub repositories: super::repository::RawRepositories,
    pub cluster: super::cluster::RawCluster,
    pub git: super::git::RawGit,
    pub automations: Vec<super::automations::RawAutomation>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawDaemon {
    pub instance_id: String,
    pub state_dir: String,
    pub poll_interval: HumanDuration,
    pub poll_jitter: HumanDuration,
    pub max_concurrent_tasks: usize,
    pub shutdown_grace: HumanDuration,
    pub max_task_attempts: u32,
    pub min_free_space: ByteSize,
    pub http: RawHttp,
    pub webhooks: bool,
    pub transcript_retention: HumanDuration,
}

/// `daemon.http`: the health, metrics and status listener.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawHttp {
    pub listen: String,
    pub public_url: String,
}

impl Default for RawDaemon {
    fn default() -> Self {
        RawDaemon {
            instance_id: String::new(),
            state_dir: "state".into(),
            poll_interval: HumanDuration(Duration::from_secs(60)),
            poll_jitter: HumanDuration(Duration::from_secs(10)),
            max_concurrent_tasks: 2,
            shutdown_grace: HumanDuration(Duration::from_secs(60)),
            max_task_attempts: 3,
            min_free_space: ByteSize(512 << 20),
            http: RawHttp::default(),
            webhooks: false,
            transcript_retention: HumanDuration(Duration::from_secs(30 * 24 * 3600)),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawGitHub {
    pub api_url: String,
    pub repositories: Vec<String>,
    pub all_repositories: bool,
    pub app_id: u64,
    pub installation_id: u64,
    pub api_timeout: HumanDuration,
}

impl Default for RawGitHub {
    fn default() -> Self {
        RawGitHub {
            api_url: "https://api.github.com".into(),
            repositories: Vec::new(),
            all_repositories: false,
            app_id: 0,
            installation_id: 0,
            api_timeout: HumanDuration(Duration::from_secs(60)),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawGitLab {
    pub url: String,
    pub projects: Vec<String>,
    pub all_projects: bool,
    pub min_access_level: u32,
}

impl Default for RawGitLab {
    fn default() -> Self {
        RawGitLab {
            url: "https://gitlab.com".into(),
            projects: Vec::new(),
            all_projects: false,
            min_access_level: 30,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawLabels {
    pub trigger: String,
    pub processing: String,
    pub done: String,
    pub failed: String,
    pub paused: String,
}

impl Default for RawLabels {
    fn default() -> Self {
        RawLabels {
            trigger: "coding agent".into(),
            processing: "coding agent processing".into(),
            done: "coding agent done".into(),
            failed: "coding agent failed".into(),
            paused: "coding agent paused".into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawDelivery {
    pub branch_prefix: String,
    pub protected_paths: Vec<String>,
    pub allow_protected_paths: bool,
    pub max_push_attempts: u32,
    pub author_name: String,
    pub author_email: String,
    pub require_passing_tests: bool,
    pub ci_fix_rounds: u32,
    pub ci_wait: HumanDuration,
    pub ci_timeout: HumanDuration,
    pub ci_poll: HumanDuration,
    pub signing: RawSigning,
}

/// `delivery.signing`: the key commits are signed with.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSigning {
    /// The environment variable holding the OpenSSH private key.
    pub ssh_key_env: Option<String>,
}

impl Default for RawDelivery {
    fn default() -> Self {
        RawDelivery {
            branch_prefix: "forgehand/".into(),
            protected_paths: vec![".github/workflows/".into(), ".gitlab-ci.yml".into()],
            allow_protected_paths: false,
            max_push_attempts: 3,
            author_name: "forgehand".into(),
            author_email: "forgehand@localhost".into(),
            require_passing_tests: false,
            ci_fix_rounds: 2,
            ci_wait: HumanDuration(Duration::from_secs(600)),
            ci_timeout: HumanDuration(Duration::from_secs(3600)),
            ci_poll: HumanDuration(Duration::from_secs(30)),
            signing: RawSigning::default(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawDocker {
    pub host: String,
    pub api_timeout: HumanDuration,
}

impl Default for RawDocker {
    fn default() -> Self {
        RawDocker {
            host: String::new(),
            api_timeout: HumanDuration(Duration::from_secs(120)),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawImages {
    pub dir: String,
    pub tag_prefix: String,
    pub tag: String,
    pub base_image: String,
    pub build_network: String,
    pub pins: BTreeMap<String, String>,
    /// Where sandbox pods pull the images from (the Kubernetes backend).
    pub registry: String,
    pub pull_policy: String,
    pub pull_secrets: Vec<String>,
}

impl Default for RawImages {
    fn default() -> Self {
        RawImages {
            dir: String::new(),
            tag_prefix: "forgehand/".into(),
            tag: "latest".into(),
            base_image: "debian:bookworm-slim".into(),
            build_network: "host".into(),
            pins: BTreeMap::new(),
            registry: String::new(),
            pull_policy: "IfNotPresent".into(),
            pull_secrets: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSandbox {
    pub network_mode: String,
    pub drop_all_capabilities: bool,
    pub no_new_privileges: bool,
    pub user: String,
    pub pids_limit: i64,
    pub memory: ByteSize,
    pub cpus: f64,
    pub read_only_root: bool,
    pub tmp_size: ByteSize,
    pub home_dir: String,
    pub home_size: ByteSize,
    pub workspace_dir: String,
    pub project_dir: String,
    pub exec_timeout: HumanDuration,
    pub output_limit: ByteSize,
    pub copy_out_max_bytes: ByteSize,
    pub copy_out_max_entries: u64,
    pub egress: RawEgress,
    pub snapshots: RawSnapshots,
    /// `docker` (default) or `kubernetes`.
    pub backend: String,
    pub kubernetes: super::kube_sandbox::RawKubeSandbox,
}

/// `sandbox.snapshots`: prepared sandboxes kept after a successful setup.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSnapshots {
    pub enabled: bool,
    /// Empty: `<daemon.state_dir>/snapshots`.
    pub dir: String,
    pub max_bytes: ByteSize,
}

impl Default for RawSnapshots {
    fn default() -> Self {
        RawSnapshots {
            enabled: true,
            dir: String::new(),
            max_bytes: ByteSize(20 << 30),
        }
    }
}

/// `sandbox.egress`: the tunnel that is a sandbox's only way out.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawEgress {
    pub allow_private: bool,
    pub allow_loopback: bool,
    pub proxy_port: u16,
    pub transport: String,
    /// The ports CONNECT may reach (TLS must start the tunnel).
    pub tls_ports: Vec<u16>,
    /// Credentials added on the host for named registries.
    pub credentials: Vec<super::egress_credentials::RawCredential>,
    /// PEM roots the relay trusts besides the host's, for those registries.
    pub extra_ca_file: String,
}

impl Default for RawEgress {
    fn default() -> Self {
        RawEgress {
            allow_private: false,
            allow_loopback: false,
            proxy_port: 3128,
            transport: "auto".into(),
            tls_ports: vec![443],
            credentials: Vec::new(),
            extra_ca_file: String::new(),
        }
    }
}

impl Default for RawSandbox {
    fn default() -> Self {
        RawSandbox {
            network_mode: "none".into(),
            drop_all_capabilities: true,
            no_new_privileges: true,
            user: "1000:1000".into(),
            pids_limit: 512,
            memory: ByteSize(4 << 30),
            cpus: 2.0,
            read_only_root: true,
            tmp_size: ByteSize(1 << 30),
            home_dir: "/home/agent".into(),
            home_size: ByteSize(1 << 30),
            workspace_dir: "/workspace".into(),
            project_dir: "/workspace/project".into(),
            exec_timeout: HumanDuration(Duration::from_secs(1800)),
            output_limit: ByteSize(1 << 20),
            copy_out_max_bytes: ByteSize(4 << 30),
            copy_out_max_entries: 1_000_000,
            egress: RawEgress::default(),
            snapshots: RawSnapshots::default(),
            backend: "docker".into(),
            kubernetes: super::kube_sandbox::RawKubeSandbox::default(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTextEditorMcp {
    pub enabled: bool,
    pub editor_binary: String,
    pub call_timeout: HumanDuration,
    pub max_view_bytes: ByteSize,
    pub mcp_server: RawMcpServer,
}

impl Default for RawTextEditorMcp {
    fn default() -> Self {
        RawTextEditorMcp {
            enabled: true,
            editor_binary: String::new(),
            call_timeout: HumanDuration(Duration::from_secs(60)),
            max_view_bytes: ByteSize(16 << 10),
            mcp_server: RawMcpServer::default(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawMcpServer {
    pub name: String,
    pub command: Vec<String>,
}

impl Default for RawMcpServer {
    fn default() -> Self {
        RawMcpServer {
            name: "text-editor".into(),
            command: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawLlm {
    pub request_timeout: HumanDuration,
    pub stream_idle_timeout: HumanDuration,
    pub stream_total_timeout: HumanDuration,
    pub max_output_tokens: u32,
    pub retry: RawRetry,
    pub providers: RawProviders,
    pub models: Vec<RawModel>,
    pub prices: BTreeMap<String, RawPrice>,
}

impl Default for RawLlm {
    fn default() -> Self {
        RawLlm {
            request_timeout: HumanDuration(Duration::from_secs(600)),
            stream_idle_timeout: HumanDuration(Duration::from_secs(120)),
            stream_total_timeout: HumanDuration(Duration::from_secs(60 * 60)),
            max_output_tokens: 16384,
            retry: RawRetry::default(),
            providers: RawProviders::default(),
            // Each provider's current flagship and light model (checked
            // against the providers' model pages in November 2026).
            models: vec![
                RawModel::new("openai", "gpt-5.6", Some("medium"), None),
                RawModel::new("anthropic", "claude-opus-5-5", Some("medium"), None),
                RawModel::new("gemini", "gemini-3.1-pro-preview", None, None),
                RawModel::new("openai", "gpt-5.6-luna", None, Some("light")),
                RawModel::new("anthropic", "claude-haiku-5-5", None, Some("light")),
                RawModel::new("gemini", "gemini-3.8-flash", None, Some("light")),
            ],
            // Prices come from the model catalogue; entries here replace them.
            prices: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawRetry {
    pub initial_backoff: HumanDuration,
    pub max_backoff: HumanDuration,
    pub max_retries: usize,
}

impl Default for RawRetry {
    fn default() -> Self {
        RawRetry {
            initial_backoff: HumanDuration(Duration::from_secs(1)),
            max_backoff: HumanDuration(Duration::from_secs(30)),
            max_retries: 5,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawProviders {
    pub openai: RawProvider,
    pub gemini: RawProvider,
    pub anthropic: RawProvider,
}

impl Default for RawProviders {
    fn default() -> Self {
        RawProviders {
            openai: RawProvider {
                base_url: "https://api.openai.com/v1".into(),
            },
            gemini: RawProvider {
                base_url: "https://generativelanguage.googleapis.com".into(),
            },
            anthropic: RawProvider {
                base_url: "https://api.anthropic.com".into(),
            },
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RawProvider {
    pub base_url: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub provider: String,
    pub model: String,
    /// Absent: the model catalogue's window.
    #[serde(default)]
    pub max_input_tokens: Option<u64>,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// "main" (the default) or "light".
    #[serde(default)]
    pub role: Option<String>,
    // What the model catalogue says of the model, replaced.
    #[serde(default)]
    pub api: Option<String>,
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub efforts: Option<Vec<String>>,
    #[serde(default)]
    pub temperature: Option<bool>,
    #[serde(default)]
    pub vision: Option<bool>,
}

impl RawModel {
    fn new(provider: &str, model: &str, effort: Option<&str>, role: Option<&str>) -> RawModel {
        RawModel {
            provider: provider.into(),
            model: model.into(),
            max_input_tokens: None,
            reasoning_effort: effort.map(Into::into),
            role: role.map(Into::into),
            api: None,
            max_output_tokens: None,
            reasoning: None,
            efforts: None,
            temperature: None,
            vision: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    pub input: f64,
    pub output: f64,
    /// Input served from the provider's prompt cache; absent: the input price.
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Input written to the prompt cache; absent: the input price.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawAgent {
    pub max_steps: u32,
    pub token_budget: u64,
    pub wall_clock_limit: HumanDuration,
    pub max_tool_result_bytes: ByteSize,
    pub max_repeated_failures: u32,
    pub max_tool_calls_per_step: usize,
    pub prompts_dir: String,
    pub test_fix_rounds: u32,
    pub attempts: u32,
    pub images: super::thread_images::RawThreadImages,
}

impl Default for RawAgent {
    fn default() -> Self {
        RawAgent {
            max_steps: 50,
            token_budget: 2_000_000,
            wall_clock_limit: HumanDuration(Duration::from_secs(7200)),
            max_tool_result_bytes: ByteSize(32 << 10),
            max_repeated_failures: 3,
            max_tool_calls_per_step: 16,
            prompts_dir: String::new(),
            test_fix_rounds: 2,
            attempts: 1,
            images: Default::default(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMcpServerEntry {
    pub name: String,
    pub command: Vec<String>,
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
    #[serde(default)]
    pub excluded_tools: Vec<String>,
}
