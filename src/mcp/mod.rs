//! The host side of MCP: a small client trait the agent loop talks to, and
//! its implementation over a stdio server running inside a sandbox.

mod sandboxed;
pub mod text_editor;

pub use sandboxed::SandboxedServer;

use async_trait::async_trait;
use serde_json::{Map, Value};
use std::time::Duration;

/// A tool as a server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: Map<String, Value>,
}

/// What a tool call returned: its text, and whether the tool reported an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("MCP server {server} did not start: {detail}")]
    Start { server: String, detail: String },
    #[error("MCP server {server} stopped{exit} while handling {method}: {detail}. {recovery}")]
    ServerDied {
        server: String,
        method: String,
        exit: String,
        detail: String,
        recovery: String,
        /// A fresh server is running; the next call can go ahead.
        restarted: bool,
    },
    #[error("MCP server {server} did not answer {method} within {timeout:?}; the call was cancelled")]
    Timeout {
        server: String,
        method: String,
        timeout: Duration,
    },
    #[error("MCP server {server} refused {method}: {detail}")]
    Protocol {
        server: String,
        method: String,
        detail: String,
    },
}

impl McpError {
    /// Whether the same call may succeed if made again.
    pub fn is_retryable(&self) -> bool {
        match self {
            McpError::Timeout { .. } => true,
            McpError::ServerDied { restarted, .. } => *restarted,
            McpError::Start { .. } | McpError::Protocol { .. } => false,
        }
    }
}

/// One MCP server, as the agent loop sees it.
#[async_trait]
pub trait McpClient: Send + Sync {
    fn server_name(&self) -> &str;
    async fn list_tools(&self) -> Result<Vec<ToolInfo>, McpError>;
    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<ToolOutput, McpError>;
}
