//! `forgehand mcp sage` as MCP clients meet it: the real executable, a real
//! rmcp client session over its stdio and over Streamable HTTP, the models
//! behind it in their wire formats. Progress notifications arrive for the
//! debate's phases, log messages name the model and the token use, and a
//! missing key is a tool error naming the variables to set.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(deprecated)] // MCP logging, which the seed reports through

use forgehand_test_support::debate_model;
use forgehand_test_support::mcp_client;
use forgehand_test_support::scripted_model;

use debate_model::{Behaviour, DebateModel};
use mcp_client::{call, free_address, initialize_by_name, rpc_error, start_http, text_of, transport_by_name};
use rmcp::model::{LoggingMessageNotificationParam, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use scripted_model::Format;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    logs: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params.data);
    }
}

struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    models: Vec<DebateModel>,
}

impl Setup {
    async fn new() -> Setup {
        let agree = Behaviour {
            consensus: vec![
                r#"{"consensusScore": 0.92, "consensusReached": true, "reasoning": "close"}"#.into(),
            ],
            ..Default::default()
        };
        let models = vec![
            DebateModel::start(Format::OpenAi, "o3", agree).await,
            DebateModel::start(Format::Gemini, "gemini-2.5-pro", Behaviour::default()).await,
        ];
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/src")).unwrap();
        std::fs::write(dir.path().join("project/src/cli.rs"), "pub fn parse() {}\n").unwrap();
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            // The seed's pairing: o3 up to 200K tokens, then Gemini 2.5 Pro.
            "llm:\n  retry:\n    max_retries: 0\n  models:\n    - {provider: openai, model: o3, max_input_tokens: 200000}\n    - {provider: gemini, model: gemini-2.5-pro, max_input_tokens: 1000000}\nplanning:\n  call_timeout: \"30s\"\n",
        )
        .unwrap();
        Setup { dir, config, models }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    fn env(&self, with_keys: bool) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("OPENAI_BASE_URL", self.models[0].base_url()),
            ("GEMINI_BASE_URL", self.models[1].base_url()),
            ("RUST_LOG", "info".into()),
        ];
        if with_keys {
            env.push(("OPENAI_API_KEY", "sk-test".into()));
            env.push(("GEMINI_API_KEY", "g-test".into()));
        } else {
            // Keyless, OpenAI stays at its own address, so nothing is usable.
            env.retain(|(k, _)| *k != "OPENAI_BASE_URL");
        }
        env
    }

    fn command(&self, with_keys: bool, extra: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_forgehand"));
        cmd.arg("--config")
            .arg(&self.config)
            .args(["mcp", "sage", "--root"])
            .arg(self.root())
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
        cmd.envs(self.env(with_keys));
        cmd
    }
}

/// Lists the tools, asks for a plan with a progress token, checks what came back.
async fn plan_session(client: &RunningService<RoleClient, Recorder>, recorder: &Recorder) {
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["sage-opinion", "sage-plan", "sage-review"]);
    let plan = tools.iter().find(|t| t.name == "sage-plan").unwrap();
    assert_eq!(plan.input_schema["required"], json!(["prompt", "paths"]));

    let result = client
        .call_tool(call(
            "sage-plan",
            json!({"prompt": "Add a --verbose flag", "paths": ["src"]}),
        ))
        .await
        .unwrap();
    let text = text_of(&result);
    assert_ne!(result.is_error, Some(true), "{text}");
    assert!(text.starts_with("# Final Implementation Plan"), "{text}");
    assert!(
        text.contains("consensus 0.92") && text.contains("Judge's confidence: 0.80"),
        "{text}"
    );

    // Notifications may trail the answer by a moment.
    for _ in 0..50 {
        if recorder.progress.lock().unwrap().len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let progress = recorder.progress.lock().unwrap().clone();
    assert!(progress.len() >= 4, "{progress:?}");
    // rmcp's client gives every request its own progress token; the server
    // answers with the token of the call.
    assert!(
        progress
            .iter()
            .all(|p| p.progress_token == progress[0].progress_token),
        "{progress:?}"
    );
    assert!(
        progress.windows(2).all(|w| w[0].progress <= w[1].progress),
        "{progress:?}"
    );
    let messages: Vec<String> = progress.iter().filter_map(|p| p.message.clone()).collect();
    assert_eq!(messages[0], "round 1: plans");
    assert!(messages.contains(&"judgement".to_owned()), "{messages:?}");
    let logs = recorder.logs.lock().unwrap().clone();
    let packed = logs
        .iter()
        .find(|l| l["event"] == "packed")
        .expect("a packed log message");
    assert_eq!(packed["model"], "o3");
    assert_eq!(packed["files"], 1);
    assert!(packed["tokens"].as_u64().unwrap() > 0);
    assert!(logs.iter().any(|l| l["event"] == "call"
        && l["model"] == "gemini-2.5-pro"
        && l["input_tokens"].as_u64().unwrap() > 0));
}

#[tokio::test]
async fn over_stdio_a_plan_comes_with_progress_and_logs() {
    let setup = Setup::new().await;
    let recorder = Recorder::default();
    let transport = TokioChildProcess::new(setup.command(true, &[]).configure(|_| {})).unwrap();
    let client = recorder.clone().serve(transport).await.unwrap();
    plan_session(&client, &recorder).await;

    // Opinion and a refused path, in the same session.
    let opinion = client
        .call_tool(call(
            "sage-opinion",
            json!({"prompt": "Is parse right?", "paths": ["src/cli.rs"]}),
        ))
        .await
        .unwrap();
    assert_eq!(text_of(&opinion), "Opinion of o3: looks fine.");
    let outside = client
        .call_tool(call(
            "sage-opinion",
            json!({"prompt": "?", "paths": ["../config.yaml"]}),
        ))
        .await
        .unwrap();
    assert_eq!(outside.is_error, Some(true));
    assert!(text_of(&outside).contains("is outside"), "{}", text_of(&outside));
    let bad = client
        .call_tool(call("sage-review", json!({"instruction": "x"})))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert!(text_of(&bad).contains("`paths` is required"));
    unknown_tool_is_invalid_params(&client).await;
    client.cancel().await.unwrap();
}

/// A tool the server does not have is the JSON-RPC error -32602 (invalid
/// params), as the MCP specification asks, naming the tools there are.
async fn unknown_tool_is_invalid_params(client: &RunningService<RoleClient, Recorder>) {
    let error = rpc_error(
        client
            .call_tool(call("sage-debate", json!({"prompt": "x", "paths": ["src"]})))
            .await,
    );
    assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    assert_eq!(error.code.0, -32602);
    assert!(
        error.message.contains("sage-debate") && error.message.contains("sage-plan"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn missing_keys_are_a_tool_error_naming_the_variables() {
    let setup = Setup::new().await;
    let transport = TokioChildProcess::new(setup.command(false, &[]).configure(|_| {})).unwrap();
    let client = Recorder::default().serve(transport).await.unwrap();
    let result = client
        .call_tool(call("sage-plan", json!({"prompt": "x", "paths": ["src"]})))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    let text = text_of(&result);
    assert!(
        text.contains("OPENAI_API_KEY") && text.contains("GEMINI_API_KEY"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn over_streamable_http_a_plan_comes_with_progress_and_logs() {
    let setup = Setup::new().await;
    let address = free_address();
    let _server = start_http(setup.command(true, &["--http", &address]), &address).await;
    let recorder = Recorder::default();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp"));
    let client = recorder.clone().serve(transport).await.unwrap();
    plan_session(&client, &recorder).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn over_http_the_allowed_host_names_are_answered_and_others_refused() {
    let setup = Setup::new().await;
    let address = free_address();
    let _server = start_http(
        setup.command(true, &["--http", &address, "--allowed-host", "mcp.example.test"]),
        &address,
    )
    .await;
    // A whole session through the allowed name.
    let recorder = Recorder::default();
    let client = recorder
        .clone()
        .serve(transport_by_name("mcp.example.test", &address))
        .await
        .unwrap();
    plan_session(&client, &recorder).await;
    unknown_tool_is_invalid_params(&client).await;
    client.cancel().await.unwrap();
    // Loopback names still, any other name 403.
    assert_eq!(initialize_by_name("localhost", &address).await.0, 200);
    let (status, body) = initialize_by_name("other.example.test", &address).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("Host"), "{body}");

    // A name that is not a host is refused before anything starts.
    let refused = setup
        .command(
            true,
            &[
                "--http",
                &free_address(),
                "--allowed-host",
                "http://mcp.example.test",
            ],
        )
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("--allowed-host \"http://mcp.example.test\" is not a host name"),
        "{stderr}"
    );
}

#[tokio::test]
async fn over_http_without_allowed_hosts_only_loopback_names_are_answered() {
    let setup = Setup::new().await;
    let address = free_address();
    let _server = start_http(setup.command(true, &["--http", &address]), &address).await;
    assert_eq!(initialize_by_name("127.0.0.1", &address).await.0, 200);
    assert_eq!(initialize_by_name("mcp.example.test", &address).await.0, 403);
}
