//! What the MCP server tests share as clients: tool calls, the text of a
//! result, a server process killed when the test ends, a free port.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::Value;
use std::time::Duration;

pub fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments.as_object().unwrap().clone())
}

pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Kills the server process when the test ends, however it ends.
pub struct Child(pub tokio::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

/// A loopback address with a port nobody listens on yet.
pub fn free_address() -> String {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", probe.local_addr().unwrap().port())
}

pub async fn wait_for_port(address: &str) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(address).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the MCP server never listened on {address}");
}

/// Starts `command` (an MCP server given `--http ADDRESS`) quietly and
/// waits until it listens; the server is killed when the handle drops.
pub async fn start_http(mut command: tokio::process::Command, address: &str) -> Child {
    command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = Child(command.spawn().unwrap());
    wait_for_port(address).await;
    child
}
