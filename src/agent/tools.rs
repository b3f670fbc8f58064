//! The tools the model sees, and where each call goes:
//! - the editor as five functions `text_editor_<command>`,
//!   each with only its own parameters, routed to the MCP `text_editor` tool;
//! - the command executor as `command_executor_execute_command`;
//! - every other MCP server's tools as `<server>__<tool>`, filtered
//!   by `allowed_tools` / `excluded_tools`. GitHub and GitLab servers are left
//!   out while the editor is enabled (it is the one way to edit).
//!
//! Names are made valid for OpenAI, Gemini and Anthropic alike.

use crate::llm::ToolSpec;
use crate::mcp::{McpClient, McpError, ToolOutput};
use crate::sandbox::{ExecOutput, Sandbox};
use async_trait::async_trait;
use forgehand_editor::TOOL_NAME as EDITOR_TOOL;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub const EXECUTE_COMMAND: &str = "command_executor_execute_command";
/// Servers whose tools duplicate what the editor and the task handler do.
pub const PLATFORM_SERVERS: [&str; 2] = ["github", "gitlab"];

/// Runs shell commands for the model (the sandbox in production).
#[async_trait]
pub trait CommandExecutor: Send + Sync {
    async fn execute(&self, command: &str, timeout: Option<Duration>) -> Result<ExecOutput, String>;
}

#[async_trait]
impl CommandExecutor for Arc<dyn Sandbox> {
    async fn execute(&self, command: &str, timeout: Option<Duration>) -> Result<ExecOutput, String> {
        self.exec(command, timeout).await.map_err(|e| e.to_string())
    }
}

/// An MCP server other than the editor, with the operator's filters.
pub struct ServerTools {
    pub client: Arc<dyn McpClient>,
    /// When set, only these tools are offered.
    pub allowed_tools: Option<Vec<String>>,
    pub excluded_tools: Vec<String>,
}

/// A tool that runs in the daemon itself (e.g. `update_plan`).
#[async_trait]
pub trait LocalTool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    async fn call(&self, arguments: Map<String, Value>) -> ToolOutput;
}

enum Target {
    Editor(&'static str),
    Execute,
    Server { index: usize, tool: String },
    Local(usize),
}

pub struct ToolRegistry {
    specs: Vec<ToolSpec>,
    targets: HashMap<String, Target>,
    required: HashMap<String, Vec<String>>,
    editor: Option<Arc<dyn McpClient>>,
    executor: Option<Arc<dyn CommandExecutor>>,
    servers: Vec<Arc<dyn McpClient>>,
    locals: Vec<Arc<dyn LocalTool>>,
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The five editor functions with their own parameters.
fn editor_specs() -> Vec<(&'static str, ToolSpec)> {
    let path = json!({"type": "string", "description": "Absolute path inside /workspace/project."});
    let spec = |command: &'static str, description: &str, properties: Value, required: Value| {
        (
            command,
            ToolSpec {
                name: format!("text_editor_{command}"),
                description: description.to_owned(),
                parameters: object(json!({"type": "object", "properties": properties, "required": required})),
            },
        )
    };
    vec![
        spec(
            "view",
            "View a file with line numbers (cat -n), or list a folder two levels deep.",
            json!({"path": path, "view_range": {"type": "array", "items": {"type": "integer"}, "description": "[start, end], 1-based inclusive; end -1 means to the end of the file."}}),
            json!(["path"]),
        ),
        spec(
            "create",
            "Create a new file with the given content. Never overwrites an existing file.",
            json!({"path": path, "file_text": {"type": "string", "description": "The whole content of the new file."}}),
            json!(["path", "file_text"]),
        ),
        spec(
            "str_replace",
            "Replace text that occurs exactly once in a file. Include enough context to make it unique.",
            json!({"path": path, "old_str": {"type": "string", "description": "The exact text to replace, whitespace included."}, "new_str": {"type": "string", "description": "The replacement; empty deletes old_str."}}),
            json!(["path", "old_str"]),
        ),
        spec(
            "insert",
            "Insert text after a line of a file (0 inserts at the top).",
            json!({"path": path, "insert_line": {"type": "integer", "description": "0 for the top, N to insert after line N."}, "new_str": {"type": "string", "description": "The text to insert."}}),
            json!(["path", "insert_line", "new_str"]),
        ),
        spec(
            "undo_edit",
            "Undo the last edit made to a file in this session.",
            json!({"path": path}),
            json!(["path"]),
        ),
    ]
}

fn execute_spec() -> ToolSpec {
    ToolSpec {
        name: EXECUTE_COMMAND.to_owned(),
        description: "Run a shell command in /workspace/project inside the sandbox (no network). Returns the exit code, stdout and stderr.".to_owned(),
        parameters: object(json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command, run with sh -c."},
                "timeout_seconds": {"type": "integer", "description": "Stop the command after this many seconds (default: the configured limit)."}
            },
            "required": ["command"]
        })),
    }
}

/// A name every provider accepts: `^[A-Za-z_][A-Za-z0-9_-]{0,63}$`.
pub fn provider_safe_name(raw: &str) -> String {
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    if name.len() > 64 {
        // Keep names unique when cut: end with a short hash of the full name.
        let hash = raw.bytes().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        });
        name.truncate(55);
        name.push_str(&format!("_{:08x}", hash as u32));
    }
    name
}

fn required_of(spec: &ToolSpec) -> Vec<String> {
    spec.parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

impl ToolRegistry {
    /// Lists every server's tools and builds the model's tool list.
    pub async fn build(
        editor: Option<Arc<dyn McpClient>>,
        executor: Option<Arc<dyn CommandExecutor>>,
        servers: Vec<ServerTools>,
    ) -> Result<ToolRegistry, McpError> {
        let mut registry = ToolRegistry {
            specs: Vec::new(),
            targets: HashMap::new(),
            required: HashMap::new(),
            editor: editor.clone(),
            executor: executor.clone(),
            servers: Vec::new(),
            locals: Vec::new(),
        };
        if editor.is_some() {
            for (command, spec) in editor_specs() {
                registry.add(spec, Target::Editor(command));
            }
        }
        if executor.is_some() {
            registry.add(execute_spec(), Target::Execute);
        }
        for server in servers {
            let name = server.client.server_name().to_owned();
            if editor.is_some() && PLATFORM_SERVERS.contains(&name.to_ascii_lowercase().as_str()) {
                tracing::info!(server = %name, "tools hidden from the model while the text editor is enabled");
                continue;
            }
            let index = registry.servers.len();
            registry.servers.push(server.client.clone());
            for tool in server.client.list_tools().await? {
                let offered = server
                    .allowed_tools
                    .as_ref()
                    .is_none_or(|allowed| allowed.contains(&tool.name))
                    && !server.excluded_tools.contains(&tool.name);
                if !offered {
                    continue;
                }
                let mut exposed = provider_safe_name(&format!("{name}__{}", tool.name));
                while registry.targets.contains_key(&exposed) {
                    exposed.push('_');
                }
                let spec = ToolSpec {
                    name: exposed,
                    description: tool.description.clone(),
                    parameters: tool.input_schema.clone(),
                };
                registry.add(
                    spec,
                    Target::Server {
                        index,
                        tool: tool.name,
                    },
                );
            }
        }
        Ok(registry)
    }

    /// Offers a tool the daemon runs itself. A name already taken is
    /// refused (the first tool keeps it).
    pub fn add_local(&mut self, tool: Arc<dyn LocalTool>) -> bool {
        let spec = tool.spec();
        if self.targets.contains_key(&spec.name) {
            tracing::warn!(tool = %spec.name, "a tool of that name exists already; the local one is not offered");
            return false;
        }
        self.locals.push(tool);
        self.add(spec, Target::Local(self.locals.len() - 1));
        true
    }

    fn add(&mut self, spec: ToolSpec, target: Target) {
        self.required.insert(spec.name.clone(), required_of(&spec));
        self.targets.insert(spec.name.clone(), target);
        self.specs.push(spec);
    }

    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    pub fn contains(&self, name: &str) -> bool {
        self.targets.contains_key(name)
    }

    /// Required fields of `name` that `arguments` lacks.
    pub fn missing_required(&self, name: &str, arguments: &Map<String, Value>) -> Vec<String> {
        self.required
            .get(name)
            .map(|fields| {
                fields
                    .iter()
                    .filter(|f| !arguments.contains_key(*f))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Runs one call. Failures of any kind come back as error output for the
    /// model, never as an error of the loop.
    pub async fn call(&self, name: &str, mut arguments: Map<String, Value>) -> ToolOutput {
        let failed = |text: String| ToolOutput { text, is_error: true };
        match self.targets.get(name) {
            None => failed(format!(
                "Unknown tool `{name}`. Available tools: {}.",
                self.specs
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Some(Target::Editor(command)) => {
                let Some(editor) = &self.editor else {
                    return failed("The text editor is not available.".into());
                };
                arguments.insert("command".into(), json!(command));
                editor
                    .call_tool(EDITOR_TOOL, arguments)
                    .await
                    .unwrap_or_else(|e| failed(e.to_string()))
            }
            Some(Target::Execute) => {
                let Some(executor) = &self.executor else {
                    return failed("The command executor is not available.".into());
                };
                let Some(command) = arguments.get("command").and_then(Value::as_str) else {
                    return failed("`command` must be a string holding a shell command.".into());
                };
                let timeout = arguments
                    .get("timeout_seconds")
                    .and_then(Value::as_u64)
                    .map(Duration::from_secs);
                match executor.execute(command, timeout).await {
                    Ok(out) => format_exec(&out),
                    Err(e) => failed(format!("The command could not be run: {e}")),
                }
            }
            Some(Target::Server { index, tool }) => match self.servers.get(*index) {
                Some(server) => server
                    .call_tool(tool, arguments)
                    .await
                    .unwrap_or_else(|e| failed(e.to_string())),
                None => failed(format!("The server of `{name}` is gone.")),
            },
            Some(Target::Local(index)) => match self.locals.get(*index) {
                Some(tool) => tool.call(arguments).await,
                None => failed(format!("`{name}` is gone.")),
            },
        }
    }
}

/// A command's result as the model reads it.
pub fn format_exec(out: &ExecOutput) -> ToolOutput {
    let status = match (out.timed_out, out.exit_code) {
        (true, _) => "stopped: the command ran past its timeout".to_owned(),
        (false, Some(code)) => format!("exit code {code}"),
        (false, None) => "exit code unknown".to_owned(),
    };
    let mut text = format!("{status} ({:.1} s)\n", out.duration.as_secs_f64());
    if !out.stdout.is_empty() {
        text.push_str("--- stdout ---\n");
        text.push_str(&out.stdout);
        if !out.stdout.ends_with('\n') {
            text.push('\n');
        }
    }
    if !out.stderr.is_empty() {
        text.push_str("--- stderr ---\n");
        text.push_str(&out.stderr);
    }
    ToolOutput {
        text,
        is_error: !out.success(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_for_every_provider() {
        let valid = |n: &str| {
            n.len() <= 64
                && n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        for raw in [
            "github__create_issue",
            "my.server__get/thing",
            "9lives__x",
            &"long".repeat(30),
        ] {
            let name = provider_safe_name(raw);
            assert!(valid(&name), "{raw} -> {name}");
        }
        assert_eq!(provider_safe_name("fs__read_file"), "fs__read_file");
        assert_ne!(
            provider_safe_name(&"a".repeat(70)),
            provider_safe_name(&format!("{}b", "a".repeat(69)))
        );
    }
}
