//! The `forgehand` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};
use forgehand::config::{Config, Secrets, CONFIG_ENV};
use forgehand::daemon::{setup, Daemon};
use forgehand::logging::{self, LogFormat};
use forgehand::sandbox::docker::connect;
use forgehand::sandbox::helper::EditorBinary;
use forgehand::snapshots::{human_bytes, SnapshotStore};
use forgehand::task::TaskEnd;
use forgehand::{doctor, images};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

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
    /// Run one task in the foreground: an issue or PR/MR address
    Once {
        /// e.g. https://github.com/OWNER/REPO/issues/12 or https://HOST/GROUP/PROJECT/-/merge_requests/3
        url: String,
    },
    /// Check configuration, Docker, images and credentials; print a table
    Doctor {
        /// With sandboxes as pods: start one that tries to reach the API
        /// server, to see whether the cluster enforces NetworkPolicy
        #[arg(long)]
        probe_network: bool,
    },
    /// Print the tasks in flight, the last 50 that ended and the newest
    /// runs, from the journal; `tasks show ID` prints a run's transcript
    Tasks {
        #[command(subcommand)]
        command: Option<TasksCommand>,
    },
    /// Run SWE-bench-style instances through the pipeline and score them;
    /// `eval make` builds instances from a repository's closed issues
    #[command(args_conflicts_with_subcommands = true)]
    Eval {
        #[command(subcommand)]
        command: Option<EvalCommand>,
        #[command(flatten)]
        run: EvalRun,
    },
    /// Manage sandbox images
    Images {
        #[command(subcommand)]
        command: ImagesCommand,
    },
    /// List or remove the setup snapshots (sandbox.snapshots)
    Snapshots {
        #[command(subcommand)]
        command: SnapshotsCommand,
    },
    /// List the repositories' mirrors (git.history_depth, git.mirror_retention)
    Mirrors {
        #[command(subcommand)]
        command: MirrorsCommand,
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
        #[arg(long, default_value = forgehand_editor::DEFAULT_ROOT)]
        root: PathBuf,
        /// Longest `view` output before it is cut
        #[arg(long, default_value_t = 16 * 1024)]
        max_view_bytes: usize,
    },
    /// The sage tools (sage-opinion, sage-review, sage-plan) on stdio, or on
    /// Streamable HTTP at http://ADDR/mcp with --http
    Sage {
        /// Relative paths are taken from here, and no path may leave it
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// Serve Streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        #[command(flatten)]
        hosts: AllowedHostFlags,
    },
    /// Idea options (generate_idea_categories) and the context store's tools
    /// on stdio, or on Streamable HTTP at http://ADDR/mcp with --http
    Ideas {
        /// Serve Streamable HTTP on this address instead of stdio
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        #[command(flatten)]
        hosts: AllowedHostFlags,
    },
}

#[derive(clap::Args)]
struct AllowedHostFlags {
    /// Over HTTP, also answer requests whose Host header is NAME (a host
    /// name, an IP address or host:port; repeatable; "*" for any name, only
    /// behind a proxy that checks it). localhost, 127.0.0.1 and ::1 are
    /// always answered; any other name gets 403
    #[arg(long = "allowed-host", value_name = "NAME", requires = "http")]
    allowed_hosts: Vec<String>,
}

#[derive(Subcommand)]
enum TasksCommand {
    /// Print a run's transcript: each model answer, tool call, result and edit
    Show {
        /// The run's id, as `forgehand tasks` lists it
        id: i64,
        /// JSON Lines instead of text: one entry a line
        #[arg(long)]
        jsonl: bool,
    },
}

#[derive(clap::Args)]
struct EvalRun {
    /// The instances, one JSON object a line (SWE-bench's fields, plus
    /// `test_command`)
    instances: Option<PathBuf>,
    /// Where results, predictions, transcripts and the work go; running
    /// again with the same folder resumes
    #[arg(long, default_value = "eval-out")]
    out: PathBuf,
    /// Instances run at once
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// `model_name_or_path` in preds.jsonl [default: forgehand-<model>]
    #[arg(long)]
    model_name: Option<String>,
    /// Runs one named test, for instances without a `test_command`;
    /// `{test}` is replaced by the name, else it is appended
    #[arg(long)]
    test_command: Option<String>,
    /// Longest run of one test while scoring
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    test_timeout: std::time::Duration,
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Instances from issues closed by a merged PR/MR that changed tests
    Make {
        /// OWNER/NAME on GitHub, or a GitLab project's path
        #[arg(long)]
        repo: String,
        /// Issues closed on or after this day (YYYY-MM-DD)
        #[arg(long)]
        since: String,
        /// The forge the repository is on
        #[arg(long, value_enum, default_value = "github")]
        forge: EvalForge,
        /// Written as each instance's `test_command`
        #[arg(long)]
        test_command: Option<String>,
        /// The instances file to write
        #[arg(long, default_value = "instances.jsonl")]
        out: PathBuf,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum EvalForge {
    Github,
    Gitlab,
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
    /// List the images forgehand can build and their tags, then the setup snapshots
    List,
}

#[derive(Subcommand)]
enum MirrorsCommand {
    /// Every mirror: its repository, size, depth and last use
    List,
}

#[derive(Subcommand)]
enum SnapshotsCommand {
    /// Every kept snapshot, most recently used first
    List,
    /// Remove snapshots by key (or its first characters), by repository, or all
    Remove {
        /// Keys or key prefixes, as `snapshots list` prints them
        keys: Vec<String>,
        /// Every snapshot of this repository (owner/name, or a GitLab path)
        #[arg(long, value_name = "REPOSITORY")]
        repository: Option<String>,
        /// Every snapshot
        #[arg(long, conflicts_with_all = ["keys", "repository"])]
        all: bool,
    },
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
        let root = forgehand_editor::Root::new(root)
            .with_context(|| format!("using {} as the root", root.display()))?;
        let limits = forgehand_editor::Limits {
            max_view_bytes: *max_view_bytes,
            ..Default::default()
        };
        forgehand_editor::server::serve_stdio(root, limits)
            .await
            .map_err(anyhow::Error::msg)?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = config_path(&cli);
    if let Command::Mcp { command } = &cli.command {
        // An MCP client often starts these without a config file: then the
        // built-in defaults (o3 and Gemini 2.5 Pro) apply.
        let config = || -> anyhow::Result<Config> {
            Ok(if cli.config.is_none() && !path.is_file() {
                Config::defaults()
            } else {
                Config::load(&path)?
            })
        };
        match command {
            McpCommand::Sage { root, http, hosts } => {
                let http = listen_on(*http, hosts)?;
                return serve_sage(config()?, root, http).await;
            }
            McpCommand::Ideas { http, hosts } => {
                let http = listen_on(*http, hosts)?;
                return serve_ideas(config()?, http).await;
            }
            McpCommand::TextEditor { .. } => {}
        }
    }
    let config = Config::load(&path)?;
    match cli.command {
        Command::Tasks { command } => tasks(&config, command),
        Command::Eval {
            command: None,
            run: options,
        } => evaluate(config, options).await,
        Command::Eval {
            command: Some(command),
            ..
        } => make_instances(config, command).await,
        Command::Doctor { probe_network } => {
            let secrets = Secrets::from_env();
            let options = doctor::DoctorOptions { probe_network };
            let checks = doctor::run_checks(&config, &path.display().to_string(), &secrets, options).await;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(doctor::render(&checks).as_bytes())?;
            // A machine that cannot run yet gets the same advice as `forgehand run`.
            let problems = setup::first_run_problems(&config, &secrets);
            if !problems.is_empty() {
                writeln!(
                    stdout,
                    "\n{}",
                    setup::first_run_help(&problems, &path.display().to_string())
                )?;
            }
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
                .with_context(|| format!("reading images.dir {:?}", config.images.dir))?
            {
                writeln!(stdout, "{name}\t{}", images::image_tag(&config.images, &name))?;
            }
            let store = SnapshotStore::new(&config.sandbox.snapshots);
            for snapshot in store.list()? {
                writeln!(stdout, "snapshot\t{}", snapshot.describe())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mirrors {
            command: MirrorsCommand::List,
        } => list_mirrors(&config),
        Command::Snapshots {
            command: SnapshotsCommand::List,
        } => {
            let store = SnapshotStore::new(&config.sandbox.snapshots);
            let all = store.list()?;
            let mut stdout = std::io::stdout().lock();
            for snapshot in &all {
                writeln!(stdout, "{}", snapshot.describe())?;
            }
            let total: u64 = all.iter().map(|s| s.bytes).sum();
            writeln!(
                stdout,
                "{} snapshot(s), {} of {} (sandbox.snapshots.max_bytes) in {}",
                all.len(),
                human_bytes(total),
                human_bytes(store.max_bytes()),
                store.dir().display()
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Snapshots {
            command:
                SnapshotsCommand::Remove {
                    keys,
                    repository,
                    all,
                },
        } => {
            if keys.is_empty() && repository.is_none() && !all {
                anyhow::bail!("name the snapshots to remove: keys (or their first characters), --repository OWNER/NAME, or --all");
            }
            let store = SnapshotStore::new(&config.sandbox.snapshots);
            let removed = store.remove_where(|s| {
                all || repository.as_deref() == Some(s.repository.as_str())
                    || keys
                        .iter()
                        .any(|k| !k.is_empty() && s.key.starts_with(k.as_str()))
            })?;
            let mut stdout = std::io::stdout().lock();
            for snapshot in &removed {
                writeln!(stdout, "removed {}", snapshot.describe())?;
            }
            if removed.is_empty() {
                writeln!(
                    stdout,
                    "no snapshot matched; `forgehand snapshots list` shows them"
                )?;
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
            let secrets = Secrets::from_env();
            let problems = setup::first_run_problems(&config, &secrets);
            if !problems.is_empty() {
                eprint!(
                    "{}",
                    setup::first_run_help(&problems, &path.display().to_string())
                );
                return Ok(ExitCode::from(2));
            }
            let assembly = setup::assemble(config, secrets, None).await?;
            let mut daemon = Daemon::new(assembly.env, assembly.forges).reload_on_hangup(path.clone());
            let shutdown = CancellationToken::new();
            let trigger = shutdown.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                tracing::info!("shutdown requested");
                trigger.cancel();
            });
            daemon.run(shutdown).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Once { url } => {
            let item = forgehand::forge::parse_item_url(&url).with_context(|| {
                format!("{url:?} is not an issue or PR/MR address; give e.g. https://github.com/OWNER/REPO/issues/12")
            })?;
            let assembly = setup::assemble(config, Secrets::from_env(), Some(&[item.forge])).await?;
            let mut env =
                std::sync::Arc::into_inner(assembly.env).context("the task environment is shared")?;
            env.echo_progress = true;
            let forge = assembly.forges.into_iter().next().context("no forge connected")?;
            // Keyed under the watched spelling, as the daemon keys it.
            let mut item = item;
            if let Ok(watched) = forge.watched_repositories().await {
                if let Some(spelling) = forgehand::forge::watched_spelling(&watched, &item.repo) {
                    item.repo = spelling.to_owned();
                }
            }
            let shutdown = CancellationToken::new();
            let trigger = shutdown.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                trigger.cancel();
            });
            let end = forgehand::task::run(&env, forge, item, shutdown).await;
            if let TaskEnd::Deferred { reason } = &end {
                eprintln!("put off: {reason}; run the same command again to resume the task");
            } else {
                eprintln!("{end:?}");
            }
            Ok(match end {
                TaskEnd::Delivered { .. }
                | TaskEnd::NoChanges
                | TaskEnd::Skipped { .. }
                | TaskEnd::AwaitingApproval => ExitCode::SUCCESS,
                _ => ExitCode::FAILURE,
            })
        }
    }
}

/// `forgehand eval INSTANCES.jsonl`: the table on stdout, the files in `--out`.
async fn evaluate(config: Config, run: EvalRun) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let instances = run.instances.context(
        "name the instances file: forgehand eval INSTANCES.jsonl (or `forgehand eval make` to build one)",
    )?;
    let options = forgehand::eval::Options {
        instances: Config::absolute(&instances),
        out: Config::absolute(&run.out),
        concurrency: run.concurrency.max(1),
        model_name: run
            .model_name
            .unwrap_or_else(|| forgehand::eval::default_model_name(&config)),
        test_command: run.test_command,
        test_timeout: run.test_timeout,
        progress: std::io::stderr().is_terminal(),
    };
    let instances = forgehand::eval::read_instances(&options)?;
    let env = forgehand::eval::environment(config, Secrets::from_env(), &options).await?;
    let shutdown = CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("interrupted; the instances running now are resumed next time");
        trigger.cancel();
    });
    let results = forgehand::eval::run(env, &instances, &options, shutdown).await?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(forgehand::eval::report::table(&results).as_bytes())?;
    writeln!(
        stdout,
        "\nPredictions: {}\nReport: {}",
        options.out.join("preds.jsonl").display(),
        options.out.join("report.json").display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `forgehand eval make`: instances from a repository's closed issues.
async fn make_instances(config: Config, command: EvalCommand) -> anyhow::Result<ExitCode> {
    use forgehand::eval::make;
    use forgehand::forge::history::History;
    use forgehand::forge::Forge;
    let EvalCommand::Make {
        repo,
        since,
        forge,
        test_command,
        out,
    } = command;
    let since = make::parse_since(&since).map_err(anyhow::Error::msg)?;
    let secrets = Secrets::from_env();
    let connected: (Box<dyn History>, String) = match forge {
        EvalForge::Github => {
            let github =
                forgehand::forge::github::GitHub::new(&config.github, &secrets, config.github.api_timeout)?;
            let clone_url = github.repository(&repo).await?.clone_url;
            (Box::new(github), clone_url)
        }
        EvalForge::Gitlab => {
            let gitlab = forgehand::forge::gitlab::GitLab::connect(&config.gitlab, &secrets).await?;
            let clone_url = gitlab.repository(&repo).await?.clone_url;
            (Box::new(gitlab), clone_url)
        }
    };
    let (history, clone_url) = connected;
    let made = make::make(
        history.as_ref(),
        (&repo, &clone_url),
        since,
        test_command.as_deref(),
    )
    .await?;
    let mut text = String::new();
    for instance in &made.instances {
        text.push_str(&serde_json::to_string(instance)?);
        text.push('\n');
    }
    std::fs::write(&out, text).with_context(|| format!("writing {}", out.display()))?;
    let mut stdout = std::io::stdout().lock();
    for skipped in &made.skipped {
        writeln!(stdout, "skipped {skipped}")?;
    }
    writeln!(
        stdout,
        "{} instance(s) from issues of {repo} closed since {} written to {}",
        made.instances.len(),
        since.format("%Y-%m-%d"),
        out.display()
    )?;
    if test_command.is_none() && !made.instances.is_empty() {
        writeln!(stdout, "They have no test command: {}", make::test_command_hint())?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn serve_sage(
    config: Config,
    root: &std::path::Path,
    http: Option<HttpListen>,
) -> anyhow::Result<ExitCode> {
    use forgehand::mcp_servers::sage as server;
    use forgehand::planning::{debate::DebateSettings, pack::PackOptions};
    let root = root
        .canonicalize()
        .with_context(|| format!("using {} as the root", root.display()))?;
    let router = forgehand::llm::router::from_config(&config.llm, &Secrets::from_env())?;
    let settings = server::SageSettings {
        model: std::sync::Arc::new(router),
        prices: forgehand::llm::router::price_table(&config.llm),
        max_output_tokens: config.llm.max_output_tokens,
        pack: PackOptions {
            max_file_bytes: config.planning.max_file_bytes,
        },
        debate: DebateSettings::from_config(&config.planning, config.llm.max_output_tokens),
        root,
        prompts: std::sync::Arc::new(forgehand::prompts::Prompts::load(
            config.agent.prompts_dir.as_deref(),
        )?),
    };
    serve_mcp("sage", server::SageServer::new(settings), http).await
}

async fn serve_ideas(config: Config, http: Option<HttpListen>) -> anyhow::Result<ExitCode> {
    use forgehand::ideas;
    use forgehand::mcp_servers::ideas as ideas_server;
    let router = forgehand::llm::router::from_config(&config.llm, &Secrets::from_env())?;
    let settings = ideas_server::IdeasSettings {
        model: std::sync::Arc::new(router),
        ideas_model: config.ideas.model.clone(),
        classifier_model: config.context.classifier_model.clone(),
        pacer: ideas::shared_pacer(&config.ideas),
        max_output_tokens: config.llm.max_output_tokens,
        evolving_tokens: config.context.evolving_tokens,
        prompts: std::sync::Arc::new(forgehand::prompts::Prompts::load(
            config.agent.prompts_dir.as_deref(),
        )?),
        recent_turns: config.context.recent_turns,
    };
    serve_mcp("ideas", ideas_server::IdeasServer::new(settings), http).await
}

/// Where an MCP server listens for Streamable HTTP, and the names it answers.
struct HttpListen {
    addr: std::net::SocketAddr,
    hosts: forgehand::mcp_servers::transport::AllowedHosts,
}

/// `--http` with its `--allowed-host` names, read before anything starts.
fn listen_on(
    http: Option<std::net::SocketAddr>,
    flags: &AllowedHostFlags,
) -> anyhow::Result<Option<HttpListen>> {
    let hosts = forgehand::mcp_servers::transport::AllowedHosts::with(&flags.allowed_hosts)?;
    Ok(http.map(|addr| HttpListen { addr, hosts }))
}

/// Serves `server` on stdio, or on Streamable HTTP at `http` until a signal.
async fn serve_mcp<S: rmcp::ServerHandler + Clone + Send + Sync + 'static>(
    name: &str,
    server: S,
    http: Option<HttpListen>,
) -> anyhow::Result<ExitCode> {
    use forgehand::mcp_servers::transport::{serve_http, serve_stdio};
    match http {
        None => serve_stdio(server).await.map_err(anyhow::Error::msg)?,
        Some(HttpListen { addr, hosts }) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            tracing::info!(
                "{name} MCP server on http://{}/mcp, answering Host {}",
                listener.local_addr()?,
                hosts.describe()
            );
            let shutdown = CancellationToken::new();
            let trigger = shutdown.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                trigger.cancel();
            });
            serve_http(server, listener, &hosts, shutdown)
                .await
                .map_err(anyhow::Error::msg)?;
        }
    }
    Ok(ExitCode::SUCCESS)
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

/// `forgehand tasks [show ID [--jsonl]]`.
fn tasks(config: &Config, command: Option<TasksCommand>) -> anyhow::Result<ExitCode> {
    let journal = forgehand::journal::Journal::open(&config.daemon.state_dir)?;
    let text = match command {
        None => {
            let mut text = forgehand::journal::render_tasks(&journal.unfinished()?, &journal.ended(50)?);
            text.push('\n');
            text.push_str(&forgehand::transcript::render_runs(&journal.runs(20)?));
            text
        }
        Some(TasksCommand::Show { id, jsonl }) => {
            let shown = match jsonl {
                true => forgehand::transcript::render_jsonl(&journal, id)?,
                false => forgehand::transcript::render_text(&journal, id)?,
            };
            match shown {
                Some(text) => text,
                None => {
                    eprintln!("no run {id} in {}; `forgehand tasks` lists the runs kept (daemon.transcript_retention)", config.daemon.state_dir.display());
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// `forgehand mirrors list`: one line per mirror, then the total.
fn list_mirrors(config: &Config) -> anyhow::Result<ExitCode> {
    let mirrors = forgehand::git::mirror::Mirrors::for_config(config);
    let all = mirrors
        .list()
        .with_context(|| format!("reading {}", mirrors.root().display()))?;
    let mut stdout = std::io::stdout().lock();
    for mirror in &all {
        let used = mirror.last_used.map_or_else(
            || "never used".to_owned(),
            |t| format!("used {}", humantime::format_rfc3339_seconds(t)),
        );
        writeln!(
            stdout,
            "{}\t{}\t{}\t{used}\t{}",
            mirror.url,
            human_bytes(mirror.bytes),
            if mirror.shallow {
                "shallow"
            } else {
                "whole history"
            },
            mirror.path.display()
        )?;
    }
    writeln!(
        stdout,
        "{} mirror(s), {} in {}",
        all.len(),
        human_bytes(all.iter().map(|m| m.bytes).sum()),
        mirrors.root().display()
    )?;
    Ok(ExitCode::SUCCESS)
}
