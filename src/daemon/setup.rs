//! Builds everything a daemon (or `forgehand once`) needs from the config
//! and the secrets, failing early with errors that say what to fix.

use crate::config::{Config, SandboxBackendChoice, Secrets};
use crate::forge::github::GitHub;
use crate::forge::gitlab::GitLab;
use crate::forge::{Forge, ForgeKind};
use crate::journal::Journal;
use crate::prompts::Prompts;
use crate::sandbox::docker::{connect, DockerBackend};
use crate::sandbox::helper::EditorBinary;
use crate::sandbox::kubernetes::KubernetesBackend;
use crate::sandbox::SandboxBackend;
use crate::task::TaskEnv;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    #[error(transparent)]
    Editor(#[from] crate::sandbox::helper::HelperError),
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    #[error(transparent)]
    Prompts(#[from] crate::prompts::PromptError),
    #[error("models: {0}")]
    Models(#[from] crate::llm::LlmError),
    #[error(transparent)]
    Forge(#[from] crate::forge::ForgeError),
    #[error(transparent)]
    Ownership(#[from] crate::ownership::OwnershipError),
    #[error("nothing to watch: set github.repositories (or github.all_repositories) and/or gitlab.projects (or gitlab.all_projects) in the config")]
    NothingWatched,
}

/// What keeps a fresh installation from doing anything: nothing watched,
/// a watched forge without its token, no model key. Empty when it can run.
pub fn first_run_problems(config: &Config, secrets: &Secrets) -> Vec<String> {
    let mut problems = Vec::new();
    let (github, gitlab) = (config.github.watches_anything(), config.gitlab.watches_anything());
    if !github && !gitlab {
        problems.push(
            "nothing to watch: list repositories under github.repositories (or set github.all_repositories: true) and/or projects under gitlab.projects".to_owned(),
        );
    }
    if github && secrets.github_token.is_none() && config.github.app.is_none() {
        problems.push("GITHUB_TOKEN is not set: a token that may read and write contents, issues and pull requests of the watched repositories".to_owned());
    }
    if gitlab && secrets.gitlab_token.is_none() {
        problems
            .push("GITLAB_TOKEN is not set: a token with the api scope on the watched projects".to_owned());
    }
    problems.extend(model_key_problem(config, secrets));
    problems.extend(webhook_problems(config, secrets));
    problems.extend(http_token_problem(config, secrets));
    problems
}

/// The HTTP listener serves the status page, `/metrics` and every run's
/// transcript (`/tasks/<id>`: code and thread text). Once others can reach
/// it (an address that is not loopback, or a `public_url` that progress
/// comments link to) it must ask for `FORGEHAND_HTTP_TOKEN`.
pub fn http_token_problem(config: &Config, secrets: &Secrets) -> Option<String> {
    if secrets.http_token.is_some() {
        return None;
    }
    let daemon = &config.daemon;
    let mut reachable = Vec::new();
    if let Some(address) = daemon
        .http_listen
        .filter(|a| !a.ip().to_canonical().is_loopback())
    {
        reachable.push(format!(
            "daemon.http.listen is \"{address}\", which other machines can reach"
        ));
    }
    if let Some(url) = &daemon.public_url {
        reachable.push(format!(
            "daemon.http.public_url is \"{url}\", so every progress comment links its run's transcript there"
        ));
    }
    if reachable.is_empty() {
        return None;
    }
    Some(format!(
        "FORGEHAND_HTTP_TOKEN is not set, but {}: anyone who reaches the listener would read the status page, /metrics and every run's transcript (code and thread text). Set FORGEHAND_HTTP_TOKEN to a long random value (e.g. the output of `openssl rand -hex 32`), or keep daemon.http.listen on a loopback address (\"127.0.0.1:9464\") and daemon.http.public_url empty",
        reachable.join(", and ")
    ))
}

/// No model key (and no keyless endpoint): nothing can be asked.
pub fn model_key_problem(config: &Config, secrets: &Secrets) -> Option<String> {
    let keys = [
        &secrets.openai_api_key,
        &secrets.gemini_api_key,
        &secrets.anthropic_api_key,
    ];
    let keyless = config.llm.openai_base_url != crate::llm::router::OPENAI_DEFAULT;
    (keys.iter().all(|k| k.is_none()) && !keyless).then(|| {
        "no model key: set OPENAI_API_KEY (o3), GEMINI_API_KEY (Gemini 2.5 Pro) or ANTHROPIC_API_KEY"
            .to_owned()
    })
}

/// With `daemon.webhooks`, each watched forge needs its webhook secret:
/// an unsigned delivery is never taken.
fn webhook_problems(config: &Config, secrets: &Secrets) -> Vec<String> {
    let mut problems = Vec::new();
    if !config.daemon.webhooks {
        return problems;
    }
    if config.github.watches_anything() && secrets.github_webhook_secret.is_none() {
        problems.push("daemon.webhooks is on but FORGEHAND_GITHUB_WEBHOOK_SECRET is not set: the secret you give the GitHub webhook, so its deliveries can be verified".to_owned());
    }
    if config.gitlab.watches_anything() && secrets.gitlab_webhook_secret.is_none() {
        problems.push("daemon.webhooks is on but FORGEHAND_GITLAB_WEBHOOK_SECRET is not set: the secret token you give the GitLab webhook".to_owned());
    }
    problems
}

/// The message `forgehand run` prints for [`first_run_problems`]: what is
/// missing, and an example that works.
pub fn first_run_help(problems: &[String], config_path: &str) -> String {
    let mut out = String::from("forgehand cannot start yet:\n");
    for p in problems {
        out.push_str(&format!("  - {p}\n"));
    }
    out.push_str(&format!(
        "\nFor example, in {config_path}:\n\n    github:\n      repositories: [\"your-org/your-repo\"]\n\nand in the environment (or the service's secrets file):\n\n    export GITHUB_TOKEN=ghp_...     # contents, issues, pull requests: read and write\n    export OPENAI_API_KEY=sk-...    # or GEMINI_API_KEY / ANTHROPIC_API_KEY\n\nThen start it again and add the label \"coding agent\" to an issue. `forgehand doctor` checks the whole setup.\n"
    ));
    out
}

/// The shared task environment and the forges.
pub struct Assembly {
    pub env: Arc<TaskEnv>,
    pub forges: Vec<Arc<dyn Forge>>,
}

/// Connects Docker, loads the editor, prompts and models, opens the journal
/// and connects the forges named in `forges` (all watched ones when `None`).
pub async fn assemble(
    config: Config,
    secrets: Secrets,
    forges: Option<&[ForgeKind]>,
) -> Result<Assembly, SetupError> {
    // Before anything uses the state folder: one daemon per folder.
    let kept = Kept::acquire(&config.daemon.state_dir)?;
    assemble_owned(config, secrets, forges, kept).await
}

/// What a reload keeps of the running daemon: its hold on the state folder
/// (so its id and instance id), the board its tasks and status page share,
/// and its metrics (counters go on across the reload).
pub struct Kept {
    pub owner: Arc<crate::ownership::StateOwner>,
    pub board: Arc<crate::task::board::Board>,
    /// The runs in flight, followed by their live transcript pages.
    pub live: Arc<crate::transcript::LiveRuns>,
    pub metrics: Arc<crate::metrics::Metrics>,
}

impl Kept {
    /// A new process's: its hold on `state_dir` (one process per folder),
    /// a fresh board, metrics and bell.
    pub fn acquire(state_dir: &std::path::Path) -> Result<Kept, SetupError> {
        Ok(Kept {
            owner: Arc::new(crate::ownership::StateOwner::acquire(state_dir)?),
            board: Arc::default(),
            live: Arc::default(),
            metrics: Arc::default(),
        })
    }
}

/// [`assemble`] for a process that already holds the state folder (a
/// reload keeps its hold, its id and so its instance id).
pub async fn assemble_owned(
    config: Config,
    secrets: Secrets,
    forges: Option<&[ForgeKind]>,
    kept: Kept,
) -> Result<Assembly, SetupError> {
    let wanted = |kind: ForgeKind| match forges {
        Some(list) => list.contains(&kind),
        None => match kind {
            ForgeKind::GitHub => config.github.watches_anything(),
            ForgeKind::GitLab => config.gitlab.watches_anything(),
            ForgeKind::Local => false,
        },
    };
    let mut connected: Vec<Arc<dyn Forge>> = Vec::new();
    if wanted(ForgeKind::GitHub) {
        let timeout = config.github.api_timeout;
        connected.push(Arc::new(
            GitHub::new(&config.github, &secrets, timeout)?.with_metrics(kept.metrics.clone()),
        ));
        tracing::info!(url = %config.github.api_url, "GitHub ready");
    }
    if wanted(ForgeKind::GitLab) {
        connected.push(Arc::new(
            GitLab::connect(&config.gitlab, &secrets)
                .await?
                .with_metrics(kept.metrics.clone()),
        ));
        tracing::info!(url = %config.gitlab.url, "GitLab ready");
    }
    if connected.is_empty() {
        return Err(SetupError::NothingWatched);
    }
    let env = task_env(config, secrets, kept).await?;
    Ok(Assembly {
        env,
        forges: connected,
    })
}

/// Everything tasks share but the forges: the sandbox backend (Docker or
/// pods) with the editor, the models, the prompts and the journal, for a
/// process that holds the state folder (`kept.owner`).
pub async fn task_env(config: Config, secrets: Secrets, kept: Kept) -> Result<Arc<TaskEnv>, SetupError> {
    let owner = &kept.owner;
    let instance_id = owner.instance_id(&config.daemon.instance_id);
    let mut config = config;
    config.daemon.instance_id = instance_id.clone();
    // The relay's credentials are masked wherever forgehand's own secrets are.
    let secrets = secrets.with_extra(config.sandbox.egress_credentials.secret_values());
    let backend = sandbox_backend(&config, &instance_id, &kept).await?;
    tracing::info!(instance = %instance_id, daemon = %owner.daemon_id(), "state folder and sandboxes owned");
    let router = crate::llm::router::from_config(&config.llm, &secrets)?.with_metrics(kept.metrics.clone());
    let prompts = std::sync::Arc::new(Prompts::load(config.agent.prompts_dir.as_deref())?);
    let journal = Journal::open(&config.daemon.state_dir)?;
    match journal.prune_contexts(config.context.keep_for) {
        Ok(0) => {}
        Ok(n) => tracing::info!("deleted {n} context message(s) unused for longer than context.keep_for"),
        Err(e) => tracing::warn!("cannot prune old context stores: {e}"),
    }
    let ideas_pacer = crate::ideas::shared_pacer(&config.ideas);
    let env = TaskEnv {
        ideas_pacer,
        config: Arc::new(config),
        secrets: Arc::new(secrets),
        backend,
        model: Arc::new(router),
        prompts,
        journal: Arc::new(journal),
        echo_progress: false,
        state_owner: kept.owner.clone(),
        board: kept.board,
        live: kept.live,
        metrics: kept.metrics,
        sandbox_hints: Arc::default(),
    };
    Ok(Arc::new(env))
}

/// The sandboxes' backend, Docker or pods, with the static editor, owned by
/// this process.
async fn sandbox_backend(
    config: &Config,
    instance_id: &str,
    kept: &Kept,
) -> Result<Arc<dyn SandboxBackend>, SetupError> {
    let owner = &kept.owner;
    let instance_id = instance_id.to_owned();
    // Sandboxes need the static editor (their main process and the editor
    // server): fail at start, not at the first task.
    let editor = if config.text_editor_mcp.enabled && config.text_editor_mcp.command.is_empty() {
        let editor = EditorBinary::locate(config.text_editor_mcp.editor_binary.as_deref())?;
        tracing::info!(path = %editor.path().display(), sha256 = %editor.sha256(), "text editor ready");
        Some(editor)
    } else {
        None
    };
    let backend: Arc<dyn SandboxBackend> = match &config.sandbox.backend {
        SandboxBackendChoice::Docker => {
            let docker = connect(&config.docker).await?;
            let mut backend = DockerBackend::new(docker, config.sandbox.clone(), instance_id.clone())
                .owned_by(owner.daemon_id())
                .with_metrics(kept.metrics.clone());
            backend.check_instance_is_free().await?;
            if let Some(editor) = editor {
                backend = backend.with_editor(editor);
            }
            Arc::new(backend)
        }
        SandboxBackendChoice::Kubernetes(pods) => {
            let mut backend =
                KubernetesBackend::connect(config.sandbox.clone(), pods.clone(), instance_id.clone())
                    .await?
                    .owned_by(owner.daemon_id())
                    .with_metrics(kept.metrics.clone());
            if let Some((pod, namespace)) = KubernetesBackend::owner_from_env() {
                backend = backend.owned_by_pod(pod, &namespace);
            }
            if let Some(editor) = editor {
                backend = backend.with_editor(editor);
            }
            // A cluster that does not answer is worth knowing before a task.
            backend.ping().await?;
            tracing::info!(namespace = %backend.namespace(), "sandboxes run as pods");
            Arc::new(backend)
        }
    };
    Ok(backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(listen: Option<&str>, public_url: Option<&str>) -> Config {
        let mut config = Config::defaults();
        config.daemon.http_listen = listen.map(|a| a.parse().unwrap());
        config.daemon.public_url = public_url.map(str::to_owned);
        config
    }

    fn secrets(token: Option<&str>) -> Secrets {
        Secrets::from_lookup(&|name| match name {
            "FORGEHAND_HTTP_TOKEN" => token.map(str::to_owned),
            _ => None,
        })
    }

    #[test]
    fn a_listener_others_reach_needs_the_token() {
        for loopback in [
            "127.0.0.1:9464",
            "127.8.0.1:9464",
            "[::1]:9464",
            "[::ffff:127.0.0.1]:9464",
        ] {
            assert_eq!(
                http_token_problem(&config(Some(loopback), None), &secrets(None)),
                None,
                "{loopback}"
            );
        }
        assert_eq!(http_token_problem(&config(None, None), &secrets(None)), None);
        for open in [
            "0.0.0.0:9464",
            "[::]:9464",
            "192.0.2.7:9464",
            "[::ffff:0.0.0.0]:9464",
        ] {
            let problem = http_token_problem(&config(Some(open), None), &secrets(None))
                .unwrap_or_else(|| panic!("{open} needs the token"));
            assert!(
                problem.contains(&format!("daemon.http.listen is \"{open}\""))
                    && problem.contains("FORGEHAND_HTTP_TOKEN is not set")
                    && problem.contains("daemon.http.public_url empty"),
                "{problem}"
            );
            assert_eq!(
                http_token_problem(&config(Some(open), None), &secrets(Some("t0ken"))),
                None
            );
        }
    }

    #[test]
    fn a_public_url_needs_the_token_even_on_loopback() {
        let url = Some("https://forgehand.example.org");
        let problem = http_token_problem(&config(Some("127.0.0.1:9464"), url), &secrets(None)).unwrap();
        assert!(
            problem.contains("daemon.http.public_url is \"https://forgehand.example.org\"")
                && !problem.contains("daemon.http.listen is \"")
                && problem.contains("keep daemon.http.listen on a loopback address"),
            "{problem}"
        );
        assert!(http_token_problem(&config(None, url), &secrets(None)).is_some());
        let both = http_token_problem(&config(Some("0.0.0.0:9464"), url), &secrets(None)).unwrap();
        assert!(
            both.contains("daemon.http.listen is \"0.0.0.0:9464\"")
                && both.contains("daemon.http.public_url is \""),
            "{both}"
        );
        assert_eq!(
            http_token_problem(&config(None, url), &secrets(Some("t0ken"))),
            None
        );
        // `forgehand run` refuses with it, and the reload too.
        let problems = first_run_problems(&config(Some("0.0.0.0:9464"), None), &secrets(None));
        assert!(
            problems.iter().any(|p| p.contains("FORGEHAND_HTTP_TOKEN")),
            "{problems:?}"
        );
    }
}
