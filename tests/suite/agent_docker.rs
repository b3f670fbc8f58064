//! The real loop against the real editor in a real container, with the
//! scripted model speaking the OpenAI wire format through the router: view a
//! file, replace a line, run a command, answer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;
use forgehand_test_support::scripted_model;

use forgehand::agent::tools::{CommandExecutor, ToolRegistry};
use forgehand::agent::{Agent, StopReason};
use forgehand::config::{Config, Secrets};
use forgehand::llm::router;
use forgehand::llm::Message;
use forgehand::mcp::{text_editor, McpClient};
use forgehand::prompts::Prompts;
use forgehand::sandbox::{Sandbox, SandboxBackend};
use scripted_model::{call, text, Format, ScriptedModel};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

#[tokio::test]
async fn the_loop_edits_a_file_and_runs_a_command_in_a_real_sandbox() {
    common::ensure_images().await;
    let scripted = ScriptedModel::start(Format::OpenAi).await;
    let readme = "/workspace/project/README.md";
    scripted
        .push(call("text_editor_view", json!({"path": readme})))
        .await;
    scripted
        .push(call(
            "text_editor_str_replace",
            json!({"path": readme, "old_str": "version 1", "new_str": "version 2"}),
        ))
        .await;
    scripted
        .push(call(
            "command_executor_execute_command",
            json!({"command": "grep -n version README.md && id -u"}),
        ))
        .await;
    scripted.push(text("Bumped the version to 2.")).await;

    // The model and its key come from config, pointed at the scripted server.
    let base = scripted.base_url();
    let lookup = |var: &str| match var {
        "OPENAI_BASE_URL" => Some(base.clone()),
        _ => None,
    };
    let config = Config::from_yaml("", Path::new("t.yaml"), &common::repo_root(), &lookup).unwrap();
    let secrets = Secrets::from_lookup(&|v| (v == "OPENAI_API_KEY").then(|| "sk-scripted".to_owned()));
    let model = Arc::new(router::from_config(&config.llm, &secrets).unwrap());

    let (backend, _) = common::backend().await;
    let backend = backend.with_editor(common::editor_binary());
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("README.md"), "# Demo\nThis is version 1.\n").unwrap();
    let sandbox: Arc<dyn Sandbox> = Arc::from(
        backend
            .prepare(&common::spec(&common::base_image()), Some(workspace.path()))
            .await
            .unwrap(),
    );
    let editor: Arc<dyn McpClient> = Arc::new(
        text_editor::start(sandbox.clone(), &config.text_editor_mcp)
            .await
            .unwrap(),
    );
    let executor: Arc<dyn CommandExecutor> = Arc::new(sandbox.clone());
    let tools = ToolRegistry::build(Some(editor), Some(executor), vec![])
        .await
        .unwrap();
    let agent = Agent::new(
        model,
        tools,
        config.agent.limits.clone(),
        forgehand::llm::router::price_table(&config.llm),
    );

    let system = Prompts::embedded().agent.system_prompt(true);
    let outcome = agent
        .run(
            &system,
            vec![Message::User("Bump the version in the README to 2.".into())],
        )
        .await;
    assert_eq!(outcome.stop, StopReason::Answered, "{:?}", outcome.messages);
    assert_eq!(outcome.answer.as_deref(), Some("Bumped the version to 2."));
    assert_eq!((outcome.steps, outcome.tool_calls), (4, 3));

    // The edit happened in the sandbox, and the command saw it.
    let out = sandbox.exec("cat README.md", None).await.unwrap();
    assert_eq!(out.stdout, "# Demo\nThis is version 2.\n");
    // The default model is a Responses model: the Chat Completions-only
    // server's answer to the first `/responses` request sends it to Chat
    // Completions, whose requests carry `messages`.
    let requests: Vec<_> = scripted
        .requests()
        .await
        .into_iter()
        .filter(|(_, body)| body.get("messages").is_some())
        .collect();
    assert_eq!(requests.len(), 4);
    let last = requests[3].1["messages"].as_array().unwrap();
    let command_result = last.last().unwrap();
    assert_eq!(command_result["role"], "tool");
    let content = command_result["content"].as_str().unwrap();
    assert!(
        content.starts_with("exit code 0")
            && content.contains("2:This is version 2.")
            && content.contains("1000"),
        "{content}"
    );
    // The model was offered the editor's five functions and the executor, and
    // the system prompt has the editor section.
    let tool_names: Vec<&str> = requests[0].1["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tool_names.len(), 6);
    assert!(requests[0].1["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("## Text Editor Tool"));
    // Usage and cost are reported (o3 has a price in the default config).
    assert!(
        outcome.usage.summary().contains("estimated $"),
        "{}",
        outcome.usage.summary()
    );
    sandbox.remove().await.unwrap();
}
