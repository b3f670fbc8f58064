//! An MCP stdio server running inside a sandbox, reached over the sandbox's
//! long-lived exec stream with an rmcp client session. Its stderr goes to the
//! log; each call has a timeout; a server that dies is restarted once and the
//! call that was in flight gets an error that says so.

use super::{McpClient, McpError, ToolInfo, ToolOutput};
use crate::sandbox::Sandbox;
use async_trait::async_trait;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Lines of the server's stderr kept for error messages.
const STDERR_TAIL: usize = 20;

struct Live {
    service: RunningService<RoleClient, ()>,
    exec_id: String,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

struct State {
    live: Option<Live>,
    restarts_left: u32,
}

pub struct SandboxedServer {
    name: String,
    sandbox: Arc<dyn Sandbox>,
    argv: Vec<String>,
    start_timeout: Duration,
    call_timeout: Duration,
    state: tokio::sync::Mutex<State>,
}

impl SandboxedServer {
    /// Starts `argv` in the sandbox and completes the MCP handshake.
    pub async fn start(
        name: impl Into<String>,
        sandbox: Arc<dyn Sandbox>,
        argv: Vec<String>,
        start_timeout: Duration,
        call_timeout: Duration,
        restarts: u32,
    ) -> Result<SandboxedServer, McpError> {
        let server = SandboxedServer {
            name: name.into(),
            sandbox,
            argv,
            start_timeout,
            call_timeout,
            state: tokio::sync::Mutex::new(State {
                live: None,
                restarts_left: restarts,
            }),
        };
        let live = server.launch().await?;
        server.state.lock().await.live = Some(live);
        Ok(server)
    }

    async fn launch(&self) -> Result<Live, McpError> {
        let start_error = |detail: String| McpError::Start {
            server: self.name.clone(),
            detail,
        };
        let stream = self
            .sandbox
            .exec_stream(&self.argv)
            .await
            .map_err(|e| start_error(e.to_string()))?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        let server = self.name.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream.stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %server, "stderr: {line}");
                if let Ok(mut tail) = tail.lock() {
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
        });
        let handshake = ().serve((stream.stdout, stream.stdin));
        let service = match tokio::time::timeout(self.start_timeout, handshake).await {
            Ok(Ok(service)) => service,
            Ok(Err(err)) => {
                let exit = self.exit_description(&stream.id).await;
                let stderr = tail_text(&stderr_tail);
                return Err(start_error(format!(
                    "the MCP handshake failed{exit}: {err}{stderr}; check text_editor_mcp.mcp_server.command"
                )));
            }
            Err(_) => {
                return Err(start_error(format!(
                    "no answer to initialize within {:?}{}",
                    self.start_timeout,
                    tail_text(&stderr_tail)
                )))
            }
        };
        tracing::debug!(server = %self.name, "MCP session started");
        Ok(Live {
            service,
            exec_id: stream.id,
            stderr_tail,
        })
    }

    async fn exit_description(&self, exec_id: &str) -> String {
        match self.sandbox.exec_status(exec_id).await {
            Ok(status) if !status.running => match status.exit_code {
                Some(code) => format!(" (exit code {code})"),
                None => " (exited)".to_owned(),
            },
            _ => String::new(),
        }
    }

    /// Runs `op` on the live session, restarting a dead server once.
    async fn with_session<T, F, Fut>(&self, method: &str, op: F) -> Result<T, McpError>
    where
        F: FnOnce(rmcp::service::Peer<RoleClient>) -> Fut,
        Fut: std::future::Future<Output = Result<T, ServiceError>>,
    {
        let mut state = self.state.lock().await;
        if state.live.is_none() {
            if state.restarts_left == 0 {
                return Err(self.died(
                    method,
                    String::new(),
                    "the server is gone and no restart is left".into(),
                    false,
                ));
            }
            state.restarts_left -= 1;
            state.live = Some(self.launch().await?);
        }
        let Some(live) = state.live.as_ref() else {
            return Err(self.died(method, String::new(), "no session".into(), false));
        };
        let peer = live.service.peer().clone();
        match tokio::time::timeout(self.call_timeout, op(peer)).await {
            Err(_) => Err(McpError::Timeout {
                server: self.name.clone(),
                method: method.to_owned(),
                timeout: self.call_timeout,
            }),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(ServiceError::McpError(err))) => Err(McpError::Protocol {
                server: self.name.clone(),
                method: method.to_owned(),
                detail: err.message.to_string(),
            }),
            Ok(Err(err)) => {
                // The transport broke: the server process is gone.
                let Some(dead) = state.live.take() else {
                    return Err(self.died(method, String::new(), err.to_string(), false));
                };
                let exit = self.exit_description(&dead.exec_id).await;
                let detail = format!("{err}{}", tail_text(&dead.stderr_tail));
                drop(dead);
                if state.restarts_left == 0 {
                    return Err(self.died(method, exit, detail, false));
                }
                state.restarts_left -= 1;
                tracing::warn!(server = %self.name, "MCP server stopped{exit}; restarting it");
                match self.launch().await {
                    Ok(live) => {
                        state.live = Some(live);
                        Err(self.died(method, exit, detail, true))
                    }
                    Err(restart) => Err(self.died(
                        method,
                        exit,
                        format!("{detail}; the restart failed: {restart}"),
                        false,
                    )),
                }
            }
        }
    }

    fn died(&self, method: &str, exit: String, detail: String, restarted: bool) -> McpError {
        let recovery = if restarted {
            "It has been restarted, but whatever that call did may be half done and its undo history is lost: check the state (e.g. view the file) before repeating it".to_owned()
        } else {
            "It could not be restarted; the task cannot use this server any more".to_owned()
        };
        McpError::ServerDied {
            server: self.name.clone(),
            method: method.to_owned(),
            exit,
            detail,
            recovery,
            restarted,
        }
    }

    /// Backend id of the running server process (for tests and diagnostics).
    pub async fn exec_id(&self) -> Option<String> {
        self.state.lock().await.live.as_ref().map(|l| l.exec_id.clone())
    }

    /// Ends the session and the server process.
    pub async fn shutdown(&self) {
        if let Some(live) = self.state.lock().await.live.take() {
            let _ = live.service.cancel().await;
        }
    }
}

fn tail_text(tail: &Arc<Mutex<VecDeque<String>>>) -> String {
    let lines: Vec<String> = tail
        .lock()
        .map(|t| t.iter().cloned().collect())
        .unwrap_or_default();
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its stderr ended with: {}", lines.join(" | "))
    }
}

#[async_trait]
impl McpClient for SandboxedServer {
    fn server_name(&self) -> &str {
        &self.name
    }

    async fn list_tools(&self) -> Result<Vec<ToolInfo>, McpError> {
        let tools = self
            .with_session("tools/list", |peer| async move { peer.list_all_tools().await })
            .await?;
        Ok(tools
            .into_iter()
            .map(|tool| ToolInfo {
                name: tool.name.to_string(),
                description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: (*tool.input_schema).clone(),
            })
            .collect())
    }

    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutput, McpError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let result = self
            .with_session(&format!("tools/call {name}"), |peer| async move {
                peer.call_tool(params).await
            })
            .await?;
        let text = result
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        Ok(ToolOutput {
            text,
            is_error: result.is_error.unwrap_or(false),
        })
    }
}
