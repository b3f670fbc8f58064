//! `forgehand mcp ideas` as MCP clients meet it: the real executable, a
//! real rmcp client session over its stdio and over Streamable HTTP, the
//! scripted model behind it in OpenAI's wire format. `generate_idea_categories`
//! answers in the seed's output shape with its error codes; the context
//! store's tools keep a conversation's goal and constraints.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(deprecated)] // MCP logging

use forgehand_test_support::mcp_client;
use forgehand_test_support::scripted_model;

use mcp_client::{call, free_address, rpc_error, start_http, text_of};
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use scripted_model::{text, TurnModel};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Default)]
struct Recorder {
    logs: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for Recorder {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params.data);
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    config: std::path::PathBuf,
    model: TurnModel,
}

impl Setup {
    async fn new() -> Setup {
        let model = TurnModel::start(vec![(text("unused"), None)]).await;
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            "llm:\n  retry:\n    max_retries: 0\nideas:\n  min_interval: \"0s\"\n",
        )
        .unwrap();
        Setup {
            _dir: dir,
            config,
            model,
        }
    }

    fn command(&self, with_key: bool, extra: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_forgehand"));
        cmd.arg("--config")
            .arg(&self.config)
            .args(["mcp", "ideas"])
            .args(extra);
        for var in [
            "OPENAI_API_KEY",
            "GEMINI_API_KEY",
            "ANTHROPIC_API_KEY",
            "OPENAI_BASE_URL",
            "GEMINI_BASE_URL",
        ] {
            cmd.env_remove(var);
        }
        if with_key {
            cmd.env("OPENAI_API_KEY", "sk-test")
                .env("OPENAI_BASE_URL", self.model.base_url());
        }
        cmd.env("RUST_LOG", "info");
        cmd
    }
}

async fn generate(client: &RunningService<RoleClient, Recorder>) -> Value {
    let result = client
        .call_tool(call(
            "generate_idea_categories",
            json!({"expert_role": "CLI designer", "target_subject": "a --verbose flag", "target_categories": 10, "target_options_per_category": 10, "domain_context": "Keep the output stable."}),
        ))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{}", text_of(&result));
    serde_json::from_str(&text_of(&result)).unwrap()
}

#[tokio::test]
async fn over_stdio_ideas_and_the_context_store_work_for_any_client() {
    let setup = Setup::new().await;
    let recorder = Recorder::default();
    let transport = TokioChildProcess::new(setup.command(true, &[]).configure(|_| {})).unwrap();
    let client = recorder.clone().serve(transport).await.unwrap();
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "context_add_message",
            "context_prompt",
            "context_show",
            "generate_idea_categories"
        ]
    );

    let answer = generate(&client).await;
    assert_eq!(answer["success"], true);
    let data = &answer["data"];
    assert_eq!(data["categories"][0]["name"], "Error handling");
    assert_eq!(data["categories"][0]["options"].as_array().unwrap().len(), 6);
    assert_eq!(data["metadata"]["total_categories"], 2);
    assert_eq!(data["metadata"]["total_options"], 12);
    assert!(data["metadata"]["processing_time_ms"].is_u64());
    for _ in 0..50 {
        if recorder.logs.lock().unwrap().iter().any(|l| l["event"] == "done") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let logs = recorder.logs.lock().unwrap().clone();
    assert!(
        logs.iter()
            .any(|l| l["event"] == "started" && l["estimated_model_calls"] == 11),
        "{logs:?}"
    );

    // Out of range: the seed's error shape and code, no model call.
    let before = setup.model.all_requests().await.len();
    let bad = client
        .call_tool(call(
            "generate_idea_categories",
            json!({"expert_role": "x", "target_subject": "y", "target_categories": 5}),
        ))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    let error: Value = serde_json::from_str(&text_of(&bad)).unwrap();
    assert_eq!(error["success"], false);
    assert_eq!(error["error"]["code"], "INVALID_PARAMETERS");
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("target_categories is 5; use 10 to 30"));
    assert_eq!(setup.model.all_requests().await.len(), before);

    // The context store: classify, keep, synthesise.
    for text in [
        "Add a --verbose flag to the CLI",
        "It must not change the default output",
        "Which module parses the flags?",
    ] {
        let added = client
            .call_tool(call(
                "context_add_message",
                json!({"session": "s1", "text": text, "author": "dev"}),
            ))
            .await
            .unwrap();
        assert_ne!(added.is_error, Some(true), "{}", text_of(&added));
    }
    let prompt = client
        .call_tool(call(
            "context_prompt",
            json!({"session": "s1", "text": "Also log the config path"}),
        ))
        .await
        .unwrap();
    let prompt = text_of(&prompt);
    let at = |h: &str| prompt.find(h).unwrap();
    assert!(prompt[at("# Mission")..at("# Constraints")].contains("Add a --verbose flag to the CLI"));
    assert!(prompt[at("# Constraints")..at("# Recent")].contains("It must not change the default output"));
    assert!(prompt[at("# Recent")..at("# User's Current")].contains("Which module parses the flags?"));
    assert!(prompt[at("# User's Current")..].contains("Also log the config path"));
    let shown: Value = serde_json::from_str(&text_of(
        &client
            .call_tool(call("context_show", json!({"session": "s1"})))
            .await
            .unwrap(),
    ))
    .unwrap();
    assert_eq!(shown["messages"].as_array().unwrap().len(), 4);
    assert_eq!(shown["tiers"]["core"], json!([1]));
    assert_eq!(shown["tiers"]["evolving"], json!([2, 4]));
    assert_eq!(
        shown["messages"][2]["classification"]["intents"],
        json!(["QUESTION"])
    );
    let other: Value = serde_json::from_str(&text_of(
        &client
            .call_tool(call("context_show", json!({"session": "s2"})))
            .await
            .unwrap(),
    ))
    .unwrap();
    assert!(other["messages"].as_array().unwrap().is_empty());
    let missing = client
        .call_tool(call("context_add_message", json!({"session": "s1"})))
        .await
        .unwrap();
    assert_eq!(missing.is_error, Some(true));
    assert!(text_of(&missing).contains("`text` is required"));
    unknown_tool_is_invalid_params(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_a_key_generation_is_invalid_api_key_naming_the_variables() {
    let setup = Setup::new().await;
    let transport = TokioChildProcess::new(setup.command(false, &[]).configure(|_| {})).unwrap();
    let client = Recorder::default().serve(transport).await.unwrap();
    let result = client
        .call_tool(call(
            "generate_idea_categories",
            json!({"expert_role": "a", "target_subject": "b"}),
        ))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    let error: Value = serde_json::from_str(&text_of(&result)).unwrap();
    assert_eq!(error["error"]["code"], "INVALID_API_KEY");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("GEMINI_API_KEY") && message.contains("OPENAI_API_KEY"),
        "{message}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn over_streamable_http_ideas_are_generated() {
    let setup = Setup::new().await;
    let address = free_address();
    let _server = start_http(setup.command(true, &["--http", &address]), &address).await;
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp"));
    let client = Recorder::default().serve(transport).await.unwrap();
    let answer = generate(&client).await;
    assert_eq!(answer["data"]["metadata"]["total_categories"], 2);
    unknown_tool_is_invalid_params(&client).await;
    client.cancel().await.unwrap();
}

/// A tool the server does not have is the JSON-RPC error -32602 (invalid
/// params), as the MCP specification asks, naming the tools there are.
async fn unknown_tool_is_invalid_params(client: &RunningService<RoleClient, Recorder>) {
    let error = rpc_error(
        client
            .call_tool(call(
                "generate_ideas",
                json!({"expert_role": "a", "target_subject": "b"}),
            ))
            .await,
    );
    assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert_eq!(error.code.0, -32602);
    assert!(
        error.message.contains("generate_ideas") && error.message.contains("generate_idea_categories"),
        "{}",
        error.message
    );
}
