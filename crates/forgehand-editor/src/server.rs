//! The editor as an MCP server over stdio: one tool, `text_editor`, with the
//! input schema of the Node server the specification names. Bad arguments
//! and failed edits are tool results with `isError: true`, so the model reads
//! what went wrong; a call to another tool is the JSON-RPC error -32602
//! (invalid params), as the MCP specification asks.

use super::{Editor, Limits, Root, COMMANDS, TOOL_NAME};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

pub struct EditorServer {
    editor: Mutex<Editor>,
    tool: Tool,
}

/// The JSON Schema of the `text_editor` tool's arguments.
pub fn input_schema() -> Map<String, Value> {
    let schema = json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": COMMANDS,
                "description": "The operation: view, create, str_replace, insert or undo_edit."
            },
            "path": {
                "type": "string",
                "description": "Absolute path of a file or folder inside the project, e.g. /workspace/project/src/main.rs."
            },
            "file_text": {
                "type": "string",
                "description": "create: the whole content of the new file."
            },
            "old_str": {
                "type": "string",
                "description": "str_replace: the exact text to replace; it must occur exactly once."
            },
            "new_str": {
                "type": "string",
                "description": "str_replace: the replacement text. insert: the text to insert."
            },
            "insert_line": {
                "type": "integer",
                "description": "insert: 0 inserts at the top of the file, N inserts after line N."
            },
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 2,
                "maxItems": 2,
                "description": "view: [start, end] lines, 1-based and inclusive; end -1 means to the end of the file."
            },
            "description": {
                "type": "string",
                "description": "Optional note on why this call is made; not used by the editor."
            }
        },
        "required": ["command", "path"]
    });
    match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

impl EditorServer {
    pub fn new(root: Root, limits: Limits) -> EditorServer {
        let tool = Tool::new(
            TOOL_NAME,
            "View, create and edit text files in the project. Commands: view (a file with line numbers, or a folder two levels deep), create (a new file; never overwrites), str_replace (replace text that occurs exactly once), insert (text after a line), undo_edit (revert the last edit of a file).",
            Arc::new(input_schema()),
        );
        EditorServer {
            editor: Mutex::new(Editor::new(root, limits)),
            tool,
        }
    }

    fn run(&self, request: CallToolRequestParams) -> CallToolResult {
        let args = request.arguments.unwrap_or_default();
        let outcome = match self.editor.lock() {
            Ok(mut editor) => editor.execute_json(&args),
            // A panic in an earlier call poisoned the lock; the editor state
            // is still usable (every command writes whole files).
            Err(poisoned) => poisoned.into_inner().execute_json(&args),
        };
        match outcome {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(err) => {
                tracing::debug!(error = %err, "editor call refused");
                CallToolResult::error(vec![ContentBlock::text(err.to_string())])
            }
        }
    }
}

impl ServerHandler for EditorServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("forgehand-editor", env!("CARGO_PKG_VERSION")))
            .with_instructions("Use the text_editor tool to view and edit files under the project folder.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // An unknown tool is a protocol error (invalid params), as the MCP
        // specification asks; bad arguments are tool errors the model reads.
        if request.name != TOOL_NAME {
            return Err(ErrorData::invalid_params(
                format!(
                    "Unknown tool: {}. This server has one tool, {TOOL_NAME}.",
                    request.name
                ),
                None,
            ));
        }
        Ok(CallToolResponse::Complete(self.run(request)))
    }
}

/// Serves the editor on this process's stdin/stdout until the client leaves.
/// Nothing but protocol bytes is ever written to stdout.
pub async fn serve_stdio(root: Root, limits: Limits) -> Result<(), String> {
    let server = EditorServer::new(root, limits);
    let running = server
        .serve(rmcp::transport::io::stdio_pipes())
        .await
        .map_err(|e| format!("MCP session did not start: {e}"))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("MCP session ended abnormally: {e}"))
}
