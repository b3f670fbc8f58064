//! The `forgehand` command line: its arguments, and which command of
//! [`cli`] runs.

use clap::{Parser, Subcommand};
use forgehand::config::{Config, CONFIG_ENV};
use forgehand::logging::{self, LogFormat};
use std::path::PathBuf;
use std::process::ExitCode;

mod cli;

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
    /// Scheduled automations: `automations list` prints each one, its
    /// repositories, its next times and what it last did
    Automations {
        #[command(subcommand)]
        command: AutomationsCommand,
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
enum AutomationsCommand {
    /// Print each automation, its repositories, its next times (in its
    /// time zone and in UTC) and its last run or skip in each repository
    List {
        /// How many next times to print
        #[arg(long, default_value_t = 3)]
        next: usize,
    },
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

fn main() -> ExitCode {
    // Before the runtime's threads start: freed memory goes back to the
    // system (see forgehand::memory).
    forgehand::memory::return_freed_memory();
    start()
}

#[tokio::main]
async fn start() -> ExitCode {
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
    let path = config_path(&cli);
    if let Command::Mcp { command } = &cli.command {
        return cli::mcp::serve(command, cli.config.is_some(), &path).await;
    }
    let config = Config::load(&path)?;
    match cli.command {
        Command::Run => cli::run_daemon(config, path).await,
        Command::Once { url } => cli::once(config, &url).await,
        Command::Doctor { probe_network } => cli::doctor(&config, &path, probe_network).await,
        Command::Tasks { command } => cli::tasks::show(&config, command),
        Command::Automations {
            command: AutomationsCommand::List { next },
        } => cli::automations::list(&config, next),
        Command::Eval { command: None, run } => cli::eval::evaluate(config, run).await,
        Command::Eval {
            command: Some(command),
            ..
        } => cli::eval::make_instances(config, command).await,
        Command::Images {
            command: ImagesCommand::List,
        } => cli::artefacts::list_images(&config),
        Command::Images {
            command: ImagesCommand::Build { names, no_cache },
        } => cli::artefacts::build_images(&config, &names, no_cache).await,
        Command::Mirrors {
            command: MirrorsCommand::List,
        } => cli::artefacts::list_mirrors(&config),
        Command::Snapshots {
            command: SnapshotsCommand::List,
        } => cli::artefacts::list_snapshots(&config),
        Command::Snapshots {
            command:
                SnapshotsCommand::Remove {
                    keys,
                    repository,
                    all,
                },
        } => cli::artefacts::remove_snapshots(&config, &keys, repository.as_deref(), all),
        // Served above, before any config is read.
        Command::Mcp { .. } => Ok(ExitCode::SUCCESS),
    }
}
