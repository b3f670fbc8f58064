//! `forgehand mcp ideas`: `generate_idea_categories` and the
//! context store's operations as MCP tools, over stdio or
//! Streamable HTTP (see [`super::transport`]). Context stores are named by the client
//! (`session`) and live as long as the server.

#![allow(deprecated)]

use super::sage::{error, unknown_tool, Logger};
use crate::context_store::{Classifier, ContextLog, ContextStore, Incoming, MemoryLog, Synthesis, Voice};
use crate::ideas::{ErrorCode, Generator, IdeaError, IdeaRequest, Pacer};
use crate::llm::ChatModel;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub const GENERATE: &str = "generate_idea_categories";
pub const CONTEXT_ADD: &str = "context_add_message";
pub const CONTEXT_PROMPT: &str = "context_prompt";
pub const CONTEXT_SHOW: &str = "context_show";

pub struct IdeasSettings {
    pub model: Arc<dyn ChatModel>,
    pub ideas_model: Option<String>,
    pub classifier_model: Option<String>,
    pub pacer: Arc<Pacer>,
    pub max_output_tokens: u32,
    pub evolving_tokens: u64,
    pub prompts: Arc<crate::prompts::Prompts>,
    pub recent_turns: usize,
}

#[derive(Clone)]
pub struct IdeasServer {
    settings: Arc<IdeasSettings>,
    stores: Arc<MemoryLog>,
    tools: Arc<Vec<Tool>>,
}

fn object(value: Value) -> Arc<Map<String, Value>> {
    Arc::new(match value {
        Value::Object(map) => map,
        _ => Map::new(),
    })
}

fn tools() -> Vec<Tool> {
    let session = json!({"type": "string", "description": "The name of the conversation's store (any string the client chooses)."});
    vec![
        Tool::new(
            GENERATE,
            "Generate categories of perspectives an expert would consider on a subject, and options for each category (two stages; fewer options where a category's nature gives fewer). Takes minutes: model calls are spaced by the configured interval.",
            object(json!({
                "type": "object",
                "properties": {
                    "expert_role": {"type": "string", "minLength": 1, "description": "The expert role (e.g. game designer)."},
                    "target_subject": {"type": "string", "minLength": 1, "description": "The subject to think about."},
                    "target_categories": {"type": "integer", "minimum": 10, "maximum": 30, "default": 20, "description": "About how many categories."},
                    "target_options_per_category": {"type": "integer", "minimum": 10, "maximum": 200, "default": 20, "description": "About how many options per category."},
                    "randomize_selection": {"type": "boolean", "default": false, "description": "Return a random sample of each category's options."},
                    "random_sample_size": {"type": "integer", "minimum": 5, "maximum": 200, "default": 10, "description": "Most options per category when sampling (never padded)."},
                    "domain_context": {"type": "string", "description": "Extra context: the original request, its wishes and constraints."}
                },
                "required": ["expert_role", "target_subject"]
            })),
        ),
        Tool::new(
            CONTEXT_ADD,
            "Classify a user message (problem definition, constraint, refinement, question, unclear) and keep it in the session's context store. Returns the labels and the tiers.",
            object(json!({
                "type": "object",
                "properties": {
                    "session": session,
                    "text": {"type": "string", "minLength": 1, "description": "The user's message."},
                    "author": {"type": "string", "description": "Who wrote it (default: user)."}
                },
                "required": ["session", "text"]
            })),
        ),
        Tool::new(
            CONTEXT_PROMPT,
            "The prompt to send to the main model: Mission (the problem), Constraints, Recent Conversation and the User's Current Message, from the session's store. With `text`, that message is classified and stored first.",
            object(json!({
                "type": "object",
                "properties": {
                    "session": session,
                    "text": {"type": "string", "description": "The user's new message, if any."}
                },
                "required": ["session"]
            })),
        ),
        Tool::new(
            CONTEXT_SHOW,
            "The session's store as JSON: every message with its labels, and the tiers (core, evolving, turn).",
            object(json!({
                "type": "object",
                "properties": {"session": session},
                "required": ["session"]
            })),
        ),
    ]
}

impl IdeasServer {
    pub fn new(settings: IdeasSettings) -> IdeasServer {
        IdeasServer {
            settings: Arc::new(settings),
            stores: Arc::new(MemoryLog::default()),
            tools: Arc::new(tools()),
        }
    }

    fn classifier(&self) -> Classifier<'_> {
        Classifier {
            model: self.settings.model.as_ref(),
            name: self.settings.classifier_model.as_deref(),
            usage: None,
            prompts: &self.settings.prompts.context,
        }
    }

    async fn run(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            GENERATE => self.generate(args, context).await,
            _ => self.context_tool(request.name.as_ref(), &args).await,
        }
    }

    async fn generate(
        &self,
        args: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let failed = |e: IdeaError| {
            let body = json!({"success": false, "error": e});
            CallToolResult::error(vec![ContentBlock::text(body.to_string())])
        };
        let request: IdeaRequest = match serde_json::from_value(Value::Object(args)) {
            Ok(r) => r,
            Err(e) => {
                return failed(IdeaError::new(
                    ErrorCode::InvalidParameters,
                    format!("the arguments do not match the schema: {e}"),
                ))
            }
        };
        if let Err(e) = request.validate() {
            return failed(e);
        }
        if self.settings.model.models().is_empty() {
            return failed(IdeaError::new(
                ErrorCode::InvalidApiKey,
                "no model can be used: set GEMINI_API_KEY, OPENAI_API_KEY or ANTHROPIC_API_KEY in the server's environment, matching llm.models in the config",
            ));
        }
        let log = Logger {
            peer: context.peer.clone(),
            name: "ideas",
        };
        // The user is told at the start how long it will take.
        let calls = 1 + request.target_categories;
        log.info(json!({
            "event": "started",
            "estimated_model_calls": calls,
            "note": format!("about {calls} model calls; this takes a few minutes at the configured interval between calls"),
        }))
        .await;
        let generator = Generator {
            model: self.settings.model.as_ref(),
            model_name: self.settings.ideas_model.as_deref(),
            pacer: &self.settings.pacer,
            max_output_tokens: self.settings.max_output_tokens,
            usage: None,
            prompts: &self.settings.prompts.ideas,
        };
        match generator.generate(&request).await {
            Ok(output) => {
                log.info(json!({"event": "done", "metadata": output.metadata}))
                    .await;
                let body = json!({"success": true, "data": output});
                CallToolResult::success(vec![ContentBlock::text(body.to_string())])
            }
            Err(e) => failed(e),
        }
    }

    async fn context_tool(&self, tool: &str, args: &Map<String, Value>) -> CallToolResult {
        let Some(session) = args
            .get("session")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
        else {
            return error("`session` is required: a non-empty string naming the conversation.".into());
        };
        let text = args
            .get("text")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty());
        if tool == CONTEXT_ADD && text.is_none() {
            return error("`text` is required: the user's message.".into());
        }
        let log: &dyn ContextLog = self.stores.as_ref();
        let mut store = ContextStore::load(log, session);
        if let Some(text) = text {
            let author = args.get("author").and_then(Value::as_str).unwrap_or("user");
            let incoming = Incoming {
                source: format!("mcp:{}", store.messages().len() + 1),
                author: author.to_owned(),
                voice: Voice::Member,
                text: text.to_owned(),
            };
            store.add_all(log, self.classifier(), vec![incoming]).await;
            store
                .fit_evolving(log, self.classifier(), self.settings.evolving_tokens)
                .await;
        }
        match tool {
            CONTEXT_PROMPT => {
                CallToolResult::success(vec![ContentBlock::text(store.synthesize(&Synthesis::new(
                    &self.settings.prompts.context.synthesis,
                    self.settings.recent_turns,
                )))])
            }
            _ => {
                let ids = |list: Vec<&crate::context_store::StoredMessage>| {
                    list.iter().map(|m| m.seq).collect::<Vec<_>>()
                };
                let body = json!({
                    "session": session,
                    "messages": store.messages(),
                    "tiers": {
                        "core": ids(store.core()),
                        "evolving": ids(store.evolving()),
                        "turn": store.messages().iter().rev().take(self.settings.recent_turns).map(|m| m.seq).collect::<Vec<_>>(),
                    },
                    "open_ended": store.open_ended(),
                });
                CallToolResult::success(vec![ContentBlock::text(body.to_string())])
            }
        }
    }
}

impl ServerHandler for IdeasServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
            .with_server_info(Implementation::new("forgehand-ideas", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "generate_idea_categories gives categories of perspectives and options on a subject. The context_* tools keep a conversation's goal and constraints: add each user message, then ask context_prompt for the prompt to send.",
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
        // specification asks; bad arguments are tool errors.
        if ![GENERATE, CONTEXT_ADD, CONTEXT_PROMPT, CONTEXT_SHOW].contains(&request.name.as_ref()) {
            return Err(unknown_tool(
                &request.name,
                &format!("{GENERATE}, {CONTEXT_ADD}, {CONTEXT_PROMPT} and {CONTEXT_SHOW}"),
            ));
        }
        Ok(CallToolResponse::Complete(self.run(request, &context).await))
    }
}
