//! The sage tools as an MCP server (`forgehand mcp sage`), over stdio or
//! Streamable HTTP: `sage-opinion`, `sage-review` and `sage-plan`. While a
//! tool runs it sends log messages (files packed, tokens, the model chosen,
//! token use) and, when the client gave a progress token, progress
//! notifications for each debate phase. A missing key is a tool error that
//! names the variables to set. Nothing but protocol bytes goes to stdout.

// MCP logging (`notifications/message`) is how the sage tools report progress
// and token figures through; rmcp marks it deprecated (SEP-2577) but
// clients still show it.
#![allow(deprecated)]

use crate::llm::usage::Price;
use crate::llm::ChatModel;
use crate::planning::debate::{DebateEvent, DebateSettings, NoCheckpoints, Planner};
use crate::planning::pack::{PackOptions, Packed};
use crate::planning::prompts::Context;
use crate::planning::sage::{expected_model, ReviewAnswer, Sage, SageError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub const OPINION: &str = "sage-opinion";
pub const REVIEW: &str = "sage-review";
pub const PLAN: &str = "sage-plan";

/// What the server needs, shared by every session.
pub struct SageSettings {
    pub model: Arc<dyn ChatModel>,
    pub prices: BTreeMap<String, Price>,
    pub max_output_tokens: u32,
    pub pack: PackOptions,
    pub debate: DebateSettings,
    /// Relative paths are taken from here, and no path may leave it.
    pub root: PathBuf,
    pub prompts: Arc<crate::prompts::Prompts>,
}

#[derive(Clone)]
pub struct SageServer {
    settings: Arc<SageSettings>,
    tools: Arc<Vec<Tool>>,
}

fn schema(text_key: &str, text_description: &str) -> Arc<Map<String, Value>> {
    let value = json!({
        "type": "object",
        "properties": {
            text_key: {"type": "string", "description": text_description},
            "paths": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Files and folders to include as context (folders recursively; .gitignore honoured), relative to the server's root or absolute inside it."
            }
        },
        "required": [text_key, "paths"]
    });
    Arc::new(match value {
        Value::Object(map) => map,
        _ => Map::new(),
    })
}

impl SageServer {
    pub fn new(settings: SageSettings) -> SageServer {
        let tools = vec![
            Tool::new(
                OPINION,
                "Get a second opinion from a large-context model (o3 up to 200K tokens, Gemini 2.5 Pro up to 1M) on a question about the given files.",
                schema("prompt", "The question or task to get an opinion on."),
            ),
            Tool::new(
                REVIEW,
                "Get a code review with concrete edits as SEARCH/REPLACE blocks for an instruction, over the given files. Each block is checked against the files.",
                schema("instruction", "The change or improvement wanted."),
            ),
            Tool::new(
                PLAN,
                "Get an implementation plan made by a debate of several models (or Chain of Recursive Thoughts with one model) over the given files. Takes minutes.",
                schema("prompt", "What needs an implementation plan."),
            ),
        ];
        SageServer {
            settings: Arc::new(settings),
            tools: Arc::new(tools),
        }
    }

    fn sage(&self) -> Sage<'_> {
        Sage {
            model: self.settings.model.as_ref(),
            prices: &self.settings.prices,
            max_output_tokens: self.settings.max_output_tokens,
            pack: self.settings.pack,
            prompts: self.settings.prompts.clone(),
        }
    }

    async fn run(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let args = request.arguments.unwrap_or_default();
        let (text, paths) = match arguments(&request.name, &args) {
            Ok(found) => found,
            Err(message) => return error(message),
        };
        if self.settings.model.models().is_empty() {
            return error(
                "No model can be used: set OPENAI_API_KEY (o3), GEMINI_API_KEY (Gemini 2.5 Pro) or ANTHROPIC_API_KEY in the server's environment, matching llm.models in the config."
                    .into(),
            );
        }
        let log = Logger {
            peer: context.peer.clone(),
            name: "sage",
        };
        let sage = self.sage();
        let packed = match sage.pack(&self.settings.root, &paths).await {
            Ok(p) => p,
            Err(e) => return error(e.to_string()),
        };
        let models = self.settings.model.models();
        let chosen = expected_model(&models, packed.tokens).unwrap_or("none");
        log.info(json!({
            "event": "packed",
            "files": packed.files.len(),
            "skipped": packed.skipped.iter().map(|s| format!("{}: {}", s.path, s.reason)).collect::<Vec<_>>(),
            "tokens": packed.tokens,
            "model": chosen,
        }))
        .await;
        let outcome = match request.name.as_ref() {
            OPINION => sage.opinion(&packed, text).await.map(|a| {
                let usage = a.usage.summary();
                (a.text, a.model, usage)
            }),
            REVIEW => sage
                .review(&self.settings.root, &packed, text)
                .await
                .map(|r| (review_report(&r), r.answer.model, r.answer.usage.summary())),
            _ => self.plan(&packed, text, context).await,
        };
        match outcome {
            Ok((text, model, usage)) => {
                log.info(json!({"event": "done", "model": model, "usage": usage}))
                    .await;
                let mut text = text;
                if !packed.skipped.is_empty() {
                    text.push_str(&format!("\n\nLeft out of the context:\n{}", packed.skip_report()));
                }
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            Err(e) => error(e.to_string()),
        }
    }

    async fn plan(
        &self,
        packed: &Packed,
        prompt: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<(String, String, String), SageError> {
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel::<DebateEvent>();
        let token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        // Notifications are sent from here, in order, while the debate runs.
        let forward = tokio::spawn(async move {
            let log = Logger {
                peer: peer.clone(),
                name: "sage",
            };
            while let Some(event) = received.recv().await {
                match event {
                    DebateEvent::Phase { name, done, total } => {
                        if let Some(token) = &token {
                            let param = ProgressNotificationParam::new(token.clone(), done as f64)
                                .with_total(total as f64)
                                .with_message(name.clone());
                            if let Err(e) = peer.notify_progress(param).await {
                                tracing::debug!("cannot send a progress notification: {e}");
                            }
                        }
                        log.info(json!({"event": "phase", "phase": name, "done": done, "total": total}))
                            .await;
                    }
                    DebateEvent::Call {
                        step,
                        model,
                        usage,
                        replayed,
                    } => {
                        log.info(json!({
                            "event": "call",
                            "step": step,
                            "model": model,
                            "input_tokens": usage.input_tokens,
                            "cached_input_tokens": usage.cached_input_tokens,
                            "output_tokens": usage.output_tokens,
                            "replayed": replayed,
                        }))
                        .await
                    }
                    DebateEvent::Note(note) => log.warning(json!({"event": "note", "note": note})).await,
                }
            }
        });
        let observer: crate::planning::debate::Observer = Arc::new(move |event| {
            let _ = events.send(event);
        });
        let planner = Planner {
            model: self.settings.model.as_ref(),
            settings: &self.settings.debate,
            prices: &self.settings.prices,
            checkpoints: &NoCheckpoints,
            observer: Some(observer),
        };
        let ctx = Context::new(self.settings.prompts.clone(), &packed.xml, packed.tokens);
        let result = planner.plan(&ctx, prompt).await;
        // The observer (and with it the sender) is gone: the forwarder drains and ends.
        drop(planner);
        let _ = forward.await;
        let outcome = result?;
        let model = outcome
            .usage
            .per_model()
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        Ok((outcome.report(), model, outcome.usage.summary()))
    }
}

/// The JSON-RPC error for a call to a tool the server does not have.
pub(super) fn unknown_tool(name: &str, tools: &str) -> ErrorData {
    ErrorData::invalid_params(format!("Unknown tool: {name}. This server has {tools}."), None)
}

pub(super) fn error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// MCP log messages to the client (`notifications/message`), copied to our log.
pub(super) struct Logger {
    pub peer: Peer<RoleServer>,
    pub name: &'static str,
}

impl Logger {
    pub async fn info(&self, data: Value) {
        self.send(LoggingLevel::Info, data).await
    }

    pub async fn warning(&self, data: Value) {
        self.send(LoggingLevel::Warning, data).await
    }

    async fn send(&self, level: LoggingLevel, data: Value) {
        tracing::info!(server = self.name, "{data}");
        let param = LoggingMessageNotificationParam::new(level, data).with_logger(self.name);
        if let Err(e) = self.peer.notify_logging_message(param).await {
            tracing::debug!("cannot send a log message: {e}");
        }
    }
}

impl ServerHandler for SageServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
            .with_server_info(Implementation::new("forgehand-sage", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Ask sage-opinion for a second opinion, sage-review for edits as SEARCH/REPLACE blocks, sage-plan for a debated implementation plan. Give the files or folders that matter as paths.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // An unknown tool is a protocol error (invalid params), as the MCP
        // specification asks; bad arguments are tool errors the model reads.
        if ![OPINION, REVIEW, PLAN].contains(&request.name.as_ref()) {
            return Err(unknown_tool(
                &request.name,
                &format!("{OPINION}, {REVIEW} and {PLAN}"),
            ));
        }
        Ok(CallToolResponse::Complete(self.run(request, &context).await))
    }
}

/// The tool's text (`instruction` for a review, `prompt` otherwise) and
/// its `paths`; the error says which is missing or wrong.
fn arguments<'a>(tool: &str, args: &'a Map<String, Value>) -> Result<(&'a str, Vec<String>), String> {
    let text_key = if tool == REVIEW { "instruction" } else { "prompt" };
    let Some(text) = args
        .get(text_key)
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
    else {
        return Err(format!("`{text_key}` is required: a non-empty string."));
    };
    let paths: Vec<String> = match args.get("paths") {
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => return Err("`paths` is required: an array of file or folder paths (strings).".into()),
    };
    Ok((text, paths))
}

/// A review's answer, with how many of its edit blocks apply and why the
/// others do not.
fn review_report(review: &ReviewAnswer) -> String {
    let mut out = review.answer.text.clone();
    let usable = review.blocks.iter().filter(|b| b.usable()).count();
    out.push_str(&format!(
        "\n\n---\n{usable} of {} edit block(s) apply cleanly.",
        review.blocks.len()
    ));
    for p in &review.problems {
        out.push_str(&format!("\n- {p}"));
    }
    out
}
