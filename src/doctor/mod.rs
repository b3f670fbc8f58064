//! `forgehand doctor`: checks what a running daemon needs and prints a
//! pass/fail table. Secrets are reported as set or not set, never shown.

mod egress;
pub mod kubernetes;
pub mod network_probe;

use crate::config::{Config, SandboxBackendChoice, Secrets};
use crate::images;
use crate::llm::router;
use crate::sandbox::docker as docker_sandbox;
use crate::sandbox::helper::EditorBinary;
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
}

fn check(name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        status,
        detail: detail.into(),
    }
}

/// Runs every check. `config_source` says where the config came from.
/// What `doctor` may do beyond reading.
#[derive(Debug, Clone, Copy, Default)]
pub struct DoctorOptions {
    /// Start a sandbox pod to see whether NetworkPolicy is enforced.
    pub probe_network: bool,
}

pub async fn run_checks(
    config: &Config,
    config_source: &str,
    secrets: &Secrets,
    options: DoctorOptions,
) -> Vec<Check> {
    let mut checks = vec![
        check("config", Status::Pass, format!("loaded {config_source}")),
        state_dir_check(config),
    ];
    checks.extend(docker_checks(config).await);
    checks.extend(secret_checks(config, secrets));
    checks.push(editor_check(config));
    // Every configured model: what forgehand knows of it, where that came
    // from, and whether the keys make it usable.
    checks.extend(model_checks(config, secrets));
    checks.push(planning_check(config, secrets));
    checks.push(prompts_check(config));
    checks.push(mirrors_check(config));
    checks.push(snapshots_check(config));
    checks.extend(egress::credentials_check(config));
    checks.push(signing_check(config));
    if kubernetes::wanted(config) {
        checks.extend(kubernetes::run(config, options.probe_network).await);
    }
    checks
}

/// The state folder exists or can be made.
fn state_dir_check(config: &Config) -> Check {
    match std::fs::create_dir_all(&config.daemon.state_dir) {
        Ok(()) => check(
            "state dir",
            Status::Pass,
            config.daemon.state_dir.display().to_string(),
        ),
        Err(e) => check(
            "state dir",
            Status::Fail,
            format!(
                "cannot create {}: {e}; set daemon.state_dir",
                config.daemon.state_dir.display()
            ),
        ),
    }
}

/// The Docker engine and the sandbox images on it. With Kubernetes
/// sandboxes an unreachable engine is only a warning: building images
/// needs it, the daemon does not.
async fn docker_checks(config: &Config) -> Vec<Check> {
    let docker_wanted = config.sandbox.backend == SandboxBackendChoice::Docker;
    match docker_sandbox::connect(&config.docker).await {
        Err(err) if !docker_wanted => vec![check(
            "docker",
            Status::Warn,
            format!("{err}; the daemon does not need it (sandboxes are pods), `forgehand images build` does"),
        )],
        Err(err) => vec![
            check("docker", Status::Fail, err.to_string()),
            check("images", Status::Fail, "not checked: Docker is not reachable"),
        ],
        Ok(docker) => {
            let detail = match docker.version().await {
                Ok(v) => format!(
                    "engine {} (API {})",
                    v.version.unwrap_or_else(|| "?".into()),
                    v.api_version.unwrap_or_else(|| "?".into())
                ),
                Err(e) => format!("reachable, but its version is unknown: {e}"),
            };
            let mut checks = vec![check("docker", Status::Pass, detail)];
            checks.extend(image_checks(&docker, config).await);
            checks
        }
    }
}

/// Which secrets are set, and whether the watched forges, the models and
/// the HTTP listener have the ones they need.
fn secret_checks(config: &Config, secrets: &Secrets) -> Vec<Check> {
    let mut checks = Vec::new();
    for (var, purpose, present) in secrets.presence() {
        let (status, detail) = if present {
            (Status::Pass, format!("set ({purpose})"))
        } else {
            (Status::Warn, format!("not set; needed for {purpose}"))
        };
        checks.push(check(var, status, detail));
    }
    let model = secrets.openai_api_key.is_some()
        || secrets.gemini_api_key.is_some()
        || secrets.anthropic_api_key.is_some();
    checks.extend(forge_token_checks(config, secrets));
    if !model {
        checks.push(check(
            "model key",
            Status::Fail,
            "none of OPENAI_API_KEY, GEMINI_API_KEY, ANTHROPIC_API_KEY is set",
        ));
    }
    if let Some(problem) = crate::daemon::setup::http_token_problem(config, secrets) {
        checks.push(check("http listener", Status::Fail, problem));
    }
    checks
}

/// Something is watched, and each watched forge has its token.
fn forge_token_checks(config: &Config, secrets: &Secrets) -> Vec<Check> {
    let mut checks = Vec::new();
    let (github, gitlab) = (&config.github, &config.gitlab);
    if !github.watches_anything() && !gitlab.watches_anything() {
        checks.push(check(
            "watched",
            Status::Fail,
            "nothing to watch: set github.repositories (or github.all_repositories) and/or gitlab.projects (or gitlab.all_projects)",
        ));
    }
    if github.watches_anything() {
        let (ok, needed) = match github.app {
            Some(_) => (secrets.github_app_private_key.is_some(), "GITHUB_APP_PRIVATE_KEY"),
            None => (secrets.github_token.is_some(), "GITHUB_TOKEN"),
        };
        checks.push(if ok {
            check(
                "forge token",
                Status::Pass,
                format!("GitHub at {}: {needed} set", github.api_url),
            )
        } else {
            check(
                "forge token",
                Status::Fail,
                format!("GitHub repositories are watched but {needed} is not set"),
            )
        });
    }
    if gitlab.watches_anything() {
        checks.push(if secrets.gitlab_token.is_some() {
            check(
                "forge token",
                Status::Pass,
                format!("GitLab at {}: GITLAB_TOKEN set", gitlab.url),
            )
        } else {
            check(
                "forge token",
                Status::Fail,
                "GitLab projects are watched but GITLAB_TOKEN is not set",
            )
        });
    }
    checks
}

/// The text editor: off, another server, or the built-in one's binary.
fn editor_check(config: &Config) -> Check {
    let editor = &config.text_editor_mcp;
    match (editor.enabled, editor.command.is_empty()) {
        (false, _) => check(
            "text editor",
            Status::Pass,
            "disabled (text_editor_mcp.enabled / TEXT_EDITOR_MCP_ENABLED)",
        ),
        (true, false) => check(
            "text editor",
            Status::Pass,
            format!("enabled, command: {}", editor.command.join(" ")),
        ),
        (true, true) => match EditorBinary::locate(editor.editor_binary.as_deref()) {
            Ok(binary) => check(
                "text editor",
                Status::Pass,
                format!(
                    "built-in server {} (sha256 {})",
                    binary.path().display(),
                    &binary.sha256()[..12]
                ),
            ),
            Err(e) => check("text editor", Status::Fail, e.to_string()),
        },
    }
}

/// Whether pushed commits are signed, and with which key (a bad key
/// stopped the configuration from loading already).
fn signing_check(config: &Config) -> Check {
    match &config.delivery.signing {
        Some(signing) => check(
            "commit signing",
            Status::Pass,
            format!(
                "SSH key {} from {}; register its public half as a signing key: {}",
                signing.signer.fingerprint(),
                signing.key_env,
                signing.signer.public_key()
            ),
        ),
        None => check(
            "commit signing",
            Status::Pass,
            "off: commits are pushed unsigned (delivery.signing.ssh_key_env names a key to sign them)",
        ),
    }
}

/// The built-in prompts, and the operator's folder replacing some of them.
fn prompts_check(config: &Config) -> Check {
    let Some(dir) = &config.agent.prompts_dir else {
        return check("prompts", Status::Pass, "the built-in prompts");
    };
    match crate::prompts::Prompts::load(Some(dir)) {
        Ok(_) => check(
            "prompts",
            Status::Pass,
            format!(
                "the built-in prompts, with the files of {} in their place",
                dir.display()
            ),
        ),
        Err(e) => check("prompts", Status::Fail, format!("{e} (agent.prompts_dir)")),
    }
}

/// The repositories' mirrors kept on this host.
fn mirrors_check(config: &Config) -> Check {
    use crate::snapshots::human_bytes;
    let mirrors = crate::git::mirror::Mirrors::for_config(config);
    let depth = match config.git.history_depth {
        Some(depth) => format!("{depth} commits deep (git.history_depth)"),
        None => "whole histories (git.history_depth: 0)".to_owned(),
    };
    match mirrors.list() {
        Ok(all) => check(
            "mirrors",
            Status::Pass,
            format!(
                "{} repository mirror(s), {} in {}, fetched {depth}, removed after {} unused",
                all.len(),
                human_bytes(all.iter().map(|m| m.bytes).sum()),
                mirrors.root().display(),
                humantime::format_duration(config.git.mirror_retention)
            ),
        ),
        Err(e) => check(
            "mirrors",
            Status::Fail,
            format!(
                "cannot read {}: {e}; check daemon.state_dir",
                mirrors.root().display()
            ),
        ),
    }
}

/// The setup snapshots kept on this host, against their bound.
fn snapshots_check(config: &Config) -> Check {
    use crate::snapshots::{human_bytes, SnapshotStore};
    let settings = &config.sandbox.snapshots;
    if !settings.enabled {
        return check(
            "snapshots",
            Status::Pass,
            "off (sandbox.snapshots.enabled: false): setup runs for every task",
        );
    }
    let store = SnapshotStore::new(settings);
    if let Err(e) = std::fs::create_dir_all(store.dir()) {
        return check(
            "snapshots",
            Status::Warn,
            format!(
                "cannot create {}: {e}; set sandbox.snapshots.dir, or no snapshot is kept",
                store.dir().display()
            ),
        );
    }
    match store.list() {
        Ok(all) => {
            let total: u64 = all.iter().map(|s| s.bytes).sum();
            let repositories: std::collections::BTreeSet<&str> =
                all.iter().map(|s| s.repository.as_str()).collect();
            check(
                "snapshots",
                Status::Pass,
                format!(
                    "{} kept for {} repositories, {} of {} in {} (`forgehand snapshots list`)",
                    all.len(),
                    repositories.len(),
                    human_bytes(total),
                    human_bytes(store.max_bytes()),
                    store.dir().display()
                ),
            )
        }
        Err(e) => check("snapshots", Status::Warn, e.to_string()),
    }
}

/// How tasks will plan with the keys that are set.
fn planning_check(config: &Config, secrets: &Secrets) -> Check {
    use crate::config::PlanningMode;
    use crate::llm::ChatModel;
    use crate::planning::debate::{lineup, DebateSettings, Method};
    let planning = &config.planning;
    if planning.mode == PlanningMode::Off {
        return check(
            "planning",
            Status::Pass,
            "off (planning.mode): tasks start from the request",
        );
    }
    let usable = match router::from_config(&config.llm, secrets) {
        Ok(router) => router.models(),
        Err(e) => return check("planning", Status::Fail, e.to_string()),
    };
    let settings = DebateSettings::from_config(planning, config.llm.max_output_tokens);
    if settings.method == Method::Single {
        return match usable.first() {
            Some(m) => check(
                "planning",
                Status::Pass,
                format!("one plan per task, from {} or the model the size chooses", m.name),
            ),
            None => check(
                "planning",
                Status::Warn,
                "no model is usable: tasks go on without a plan; set a model key",
            ),
        };
    }
    match lineup(&settings, &usable, 0) {
        Ok(l) if l.debaters.len() == 1 => check(
            "planning",
            Status::Warn,
            format!(
                "only {} can plan: Chain of Recursive Thoughts instead of a debate; set another provider's key for a debate",
                l.debaters[0]
            ),
        ),
        Ok(l) => check(
            "planning",
            if l.notes.is_empty() { Status::Pass } else { Status::Warn },
            format!(
                "debate of {} judged by {}, up to {} rounds{}",
                l.debaters.join(", "),
                l.judge,
                planning.rounds,
                if l.notes.is_empty() { String::new() } else { format!(" ({})", l.notes.join("; ")) }
            ),
        ),
        Err(e) => check("planning", Status::Warn, format!("{e}: tasks go on without a plan")),
    }
}

async fn image_checks(docker: &bollard::Docker, config: &Config) -> Vec<Check> {
    let names = match images::available_images(&config.images) {
        Ok(names) => names,
        Err(e) => {
            return vec![check(
                "images",
                Status::Fail,
                format!(
                    "cannot read images.dir {}: {e}; fix it, or leave it empty for the built-in images",
                    config
                        .images
                        .dir
                        .as_deref()
                        .unwrap_or(std::path::Path::new(""))
                        .display()
                ),
            )]
        }
    };
    let mut wanted: Vec<(String, String)> = names
        .iter()
        .map(|n| (format!("image {n}"), images::image_tag(&config.images, n)))
        .collect();
    wanted.extend(
        config
            .images
            .pins
            .iter()
            .map(|(repo, image)| (format!("pin {repo}"), image.clone())),
    );
    let mut checks = Vec::new();
    for (name, image) in wanted {
        checks.push(match images::image_present(docker, &image).await {
            Ok(true) => check(name, Status::Pass, format!("{image} present")),
            Ok(false) => check(
                name,
                Status::Fail,
                format!("{image} missing; run `forgehand images build` (or pull the pinned image)"),
            ),
            Err(e) => check(name, Status::Fail, e.to_string()),
        });
    }
    checks
}

/// The checks as an aligned text table.
pub fn render(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(5).max(5);
    let mut out = format!("{:<width$}  STATUS  DETAIL\n", "CHECK");
    for c in checks {
        let _ = writeln!(out, "{:<width$}  {:<6}  {}", c.name, c.status.label(), c.detail);
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    let _ = writeln!(
        out,
        "\n{} checks: {} failed, {} warnings",
        checks.len(),
        failed,
        warned
    );
    out
}

pub fn all_passed(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.status != Status::Fail)
}

/// One row per configured model; a FAIL when none is usable.
fn model_checks(config: &Config, secrets: &Secrets) -> Vec<Check> {
    let usable: Vec<String> = match router::from_config(&config.llm, secrets) {
        Ok(router) => router.routes().iter().map(|r| r.model().to_owned()).collect(),
        Err(e) => return vec![check("models", Status::Fail, e.to_string())],
    };
    let mut rows = Vec::new();
    for (index, model) in config.llm.models.iter().enumerate() {
        let name = format!("model {}", model.model);
        rows.push(match router::model_spec(&config.llm, index) {
            Err(e) => check(name, Status::Fail, e.to_string()),
            Ok(spec) if usable.contains(&model.model) => check(name, Status::Pass, describe_model(&spec)),
            Ok(spec) => check(
                name,
                Status::Warn,
                format!(
                    "not usable: {} is not set; {}",
                    model.provider.key_var(),
                    describe_model(&spec)
                ),
            ),
        });
    }
    if usable.is_empty() {
        rows.push(check(
            "models",
            Status::Fail,
            "no configured model is usable: set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY for a model under llm.models",
        ));
    }
    rows
}

/// What forgehand knows of a model, and where it came from.
fn describe_model(spec: &crate::llm::ModelSpec) -> String {
    let price = spec
        .price
        .map(|p| {
            format!(
                "${}/${} per M in/out, cache ${} read ${} write",
                p.input_per_million,
                p.output_per_million,
                p.cached_input_per_million,
                p.cache_write_per_million
            )
        })
        .unwrap_or_else(|| "no price".to_owned());
    let reasoning = if spec.reasons() {
        format!("reasons ({}: {})", spec.reasoning.name(), spec.efforts.join("/"))
    } else {
        "no reasoning".to_owned()
    };
    format!(
        "via {}: window {} tokens, output up to {}, {reasoning}, {}, {price} [from {}]",
        spec.api.name(),
        spec.window,
        spec.max_output,
        if spec.temperature {
            "temperature"
        } else {
            "no temperature"
        },
        spec.origin
    )
}
