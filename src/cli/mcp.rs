//! `forgehand mcp`: forgehand's own MCP servers, on stdio or Streamable
//! HTTP: the text editor (no config needed: it serves one folder), sage
//! and ideas (the config's models, or the built-in defaults when there is
//! no config file).

use super::shutdown_signal;
use crate::{AllowedHostFlags, McpCommand};
use anyhow::Context;
use forgehand::config::Config;
use forgehand::config::Secrets;
use std::path::Path;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// Serves `command`'s server until its client leaves (stdio) or a signal
/// (HTTP). `config_given`: `--config` was given, so `path` must be read.
pub(crate) async fn serve(command: &McpCommand, config_given: bool, path: &Path) -> anyhow::Result<ExitCode> {
    // An MCP client often starts these without a config file: then the
    // built-in defaults (o3 and Gemini 2.5 Pro) apply.
    let config = || -> anyhow::Result<Config> {
        Ok(if !config_given && !path.is_file() {
            Config::defaults()
        } else {
            Config::load(path)?
        })
    };
    match command {
        McpCommand::TextEditor { root, max_view_bytes } => {
            let root = forgehand_editor::Root::new(root)
                .with_context(|| format!("using {} as the root", root.display()))?;
            let limits = forgehand_editor::Limits {
                max_view_bytes: *max_view_bytes,
                ..Default::default()
            };
            forgehand_editor::server::serve_stdio(root, limits)
                .await
                .map_err(anyhow::Error::msg)?;
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::Sage { root, http, hosts } => {
            let http = listen_on(*http, hosts)?;
            serve_sage(config()?, root, http).await
        }
        McpCommand::Ideas { http, hosts } => {
            let http = listen_on(*http, hosts)?;
            serve_ideas(config()?, http).await
        }
    }
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
