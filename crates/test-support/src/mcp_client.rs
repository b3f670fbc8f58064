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

/// The JSON-RPC error a tool call got (a tool result instead fails the test).
pub fn rpc_error(outcome: Result<CallToolResult, rmcp::ServiceError>) -> rmcp::model::ErrorData {
    match outcome {
        Err(rmcp::ServiceError::McpError(error)) => error,
        Err(other) => panic!("the call failed outside the protocol: {other}"),
        Ok(result) => panic!("a tool result, not a JSON-RPC error: {}", text_of(&result)),
    }
}

/// An HTTP client that reaches `name` on loopback, as it would through a
/// DNS name pointing at this host (nothing is looked up).
pub fn client_for(name: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .resolve(name, "127.0.0.1:0".parse().unwrap())
        .build()
        .unwrap()
}

/// A client session's transport to `http://NAME:PORT/mcp`, the name
/// reaching the server on loopback (so its requests carry `Host: NAME:PORT`).
pub fn transport_by_name(
    name: &str,
    address: &str,
) -> rmcp::transport::StreamableHttpClientTransport<reqwest::Client> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let port = address.rsplit(':').next().unwrap();
    rmcp::transport::StreamableHttpClientTransport::with_client(
        client_for(name),
        StreamableHttpClientTransportConfig::with_uri(format!("http://{name}:{port}/mcp")),
    )
}

/// The status and body an MCP `initialize` POSTed to
/// `http://NAME:PORT/mcp` gets.
pub async fn initialize_by_name(name: &str, address: &str) -> (u16, String) {
    let port = address.rsplit(':').next().unwrap();
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    });
    let response = client_for(name)
        .post(format!("http://{name}:{port}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}
