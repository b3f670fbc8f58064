//! The `forgehand` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};
use forgehand::config::{Config, Secrets, CONFIG_ENV};
use forgehand::logging::{self, LogFormat};
use forgehand::sandbox::docker::{connect, DockerBackend};
use forgehand::sandbox::helper::EditorBinary;
use forgehand::sandbox::SandboxBackend;
use forgehand::{doctor, images};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "forgehand",
    version,
    about = "Turns labelled GitHub/GitLab issues into draft PRs/MRs"
)]
struct Cli {
    /// Configuration file [default: ./config.yaml, then /etc/forgehand/config.yaml]
    #[arg(long, global = true, env = CONFIG_ENV)]
    config: Option<PathBuf>,
    /// Log format on stderr
    #[arg(long, global = true, value_enum, default_value = "human")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon until SIGTERM or SIGINT
    Run,
    /// Check configuration, Docker, images and credentials; print a table
    Doctor,
    /// Manage sandbox images
    Images {
        #[command(subcommand)]
        command: ImagesCommand,
    },
    /// Run one of forgehand's MCP servers on stdio
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
}

#[derive(Subcommand)]
enum McpCommand {
    /// The text-editor server (the same one the sandboxes run)
    TextEditor {
        /// The only folder it may view and edit
        #[arg(long, default_value = forgehand::editor::DEFAULT_ROOT)]
        root: PathBuf,
        /// Longest `view` output before it is cut
        #[arg(long, default_value_t = 16 * 1024)]
        max_view_bytes: usize,
    },
}

#[derive(Subcommand)]
enum ImagesCommand {
    /// Build images/<NAME>/Dockerfile (all of them when no name is given)
    Build {
        names: Vec<String>,
        /// Run every build step again instead of reusing cached layers
        #[arg(long)]
        no_cache: bool,
    },
    /// List the images forgehand can build and their tags
    List,
}

fn config_path(cli: &Cli) -> PathBuf {
    if let Some(path) = &cli.config {
        return path.clone();
    }
    let local = PathBuf::from("config.yaml");
    if local.is_file() {
        return local;
    }
    PathBuf::from("/etc/forgehand/config.yaml")
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format);
    match run(cli).await {
        Ok(code) => code,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    if let Command::Mcp {
        command: McpCommand::TextEditor { root, max_view_bytes },
    } = &cli.command
    {
        // Needs no config: it serves one folder on stdio.
        let root = forgehand::editor::Root::new(root)
            .with_context(|| format!("using {} as the root", root.display()))?;
        let limits = forgehand::editor::Limits {
            max_view_bytes: *max_view_bytes,
            ..Default::default()
        };
        forgehand::editor::server::serve_stdio(root, limits)
            .await
            .map_err(anyhow::Error::msg)?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = config_path(&cli);
    let config = Config::load(&path)?;
    match cli.command {
        Command::Doctor => {
            let checks = doctor::run_checks(&config, &path.display().to_string(), &Secrets::from_env()).await;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(doctor::render(&checks).as_bytes())?;
            Ok(if doctor::all_passed(&checks) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Images {
            command: ImagesCommand::List,
        } => {
            let mut stdout = std::io::stdout().lock();
            for name in images::available_images(&config.images)
                .with_context(|| format!("reading {}", config.images.dir.display()))?
            {
                writeln!(stdout, "{name}\t{}", images::image_tag(&config.images, &name))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Images {
            command: ImagesCommand::Build { names, no_cache },
        } => {
            let editor = EditorBinary::locate(config.text_editor_mcp.editor_binary.as_deref())?;
            let docker = connect(&config.docker).await?;
            let mut progress = |name: &str, line: &str| eprintln!("[{name}] {line}");
            let cache = if no_cache {
                images::BuildCache::Ignore
            } else {
                images::BuildCache::Use
            };
            let tags =
                images::build_images(&docker, &config.images, &editor, &names, cache, &mut progress).await?;
            tracing::info!(images = %tags.join(", "), "images built");
            Ok(ExitCode::SUCCESS)
        }
        // Served above, before any config is read.
        Command::Mcp { .. } => Ok(ExitCode::SUCCESS),
        Command::Run => {
            let docker = connect(&config.docker).await?;
            let mut backend =
                DockerBackend::new(docker, config.sandbox.clone(), config.daemon.instance_id.clone());
            // Sandboxes need the static editor (their main process and the
            // editor server): fail at start, not at the first task.
            if config.text_editor_mcp.enabled && config.text_editor_mcp.command.is_empty() {
                let editor = EditorBinary::locate(config.text_editor_mcp.editor_binary.as_deref())?;
                tracing::info!(path = %editor.path().display(), sha256 = %editor.sha256(), "text editor ready");
                backend = backend.with_editor(editor);
            }
            std::fs::create_dir_all(&config.daemon.state_dir).with_context(|| {
                format!("creating daemon.state_dir {}", config.daemon.state_dir.display())
            })?;
            // Nothing runs yet at start, so every sandbox of this instance is an orphan.
            let reaped = backend.reap(&[]).await?;
            tracing::info!(
                instance = %config.daemon.instance_id,
                reaped = reaped.len(),
                "forgehand started; no forge intake is configured in this version, waiting for SIGTERM/SIGINT"
            );
            shutdown_signal().await;
            tracing::info!("shutting down");
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
