//! Starting the text-editor MCP server for a sandbox: forgehand's own static
//! editor by default, or the operator's `text_editor_mcp.mcp_server.command`.

use super::{McpError, SandboxedServer};
use crate::config::TextEditorMcpConfig;
use crate::sandbox::Sandbox;
use std::sync::Arc;
use std::time::Duration;

/// How long the server may take from process start to a finished `initialize`.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Restarts allowed when the server dies mid-session.
const RESTARTS: u32 = 1;

/// The argv that runs the editor server inside `sandbox`.
pub fn editor_argv(sandbox: &dyn Sandbox, config: &TextEditorMcpConfig) -> Result<Vec<String>, McpError> {
    if !config.command.is_empty() {
        return Ok(config.command.clone());
    }
    let binary = sandbox.editor_path().ok_or_else(|| McpError::Start {
        server: config.server_name.clone(),
        detail: "the built-in editor is not in this sandbox: forgehand found no forgehand-editor executable to put there. Build it with scripts/build-editor and set text_editor_mcp.editor_binary (or FORGEHAND_EDITOR_BINARY), or set text_editor_mcp.mcp_server.command".into(),
    })?;
    Ok(vec![
        binary.to_owned(),
        "--root".into(),
        sandbox.project_dir().to_owned(),
        "--max-view-bytes".into(),
        config.max_view_bytes.to_string(),
    ])
}

/// Starts the editor server in `sandbox` and completes the MCP handshake.
pub async fn start(
    sandbox: Arc<dyn Sandbox>,
    config: &TextEditorMcpConfig,
) -> Result<SandboxedServer, McpError> {
    let argv = editor_argv(sandbox.as_ref(), config)?;
    SandboxedServer::start(
        config.server_name.clone(),
        sandbox,
        argv,
        START_TIMEOUT,
        config.call_timeout,
        RESTARTS,
    )
    .await
}
