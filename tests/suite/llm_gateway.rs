//! OpenAI models behind a gateway: the router built from config, a fake
//! gateway on one base URL serving OpenAI's two APIs in their wire formats
//! (or Chat Completions alone, `/v1/responses` answering 404). A model the
//! catalogue knows as a Responses model keeps the Responses API and its
//! reasoning; a gateway without it is found out once and remembered; a
//! local model and an explicit `api:` keep what they say.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::scripted_model::{call, text, ScriptedModel};

use forgehand::config::{Config, Secrets};
use forgehand::llm::router::{self, Router};
use forgehand::llm::{ChatRequest, LlmError, Message, ToolSpec};
use serde_json::{json, Value};
use std::path::Path;

const RESPONSES: &str = "/v1/responses";
const CHAT: &str = "/v1/chat/completions";

/// The router `models` (YAML flow entries) make with the gateway as
/// OpenAI's base URL and a key set.
fn router_for(gateway: &ScriptedModel, models: &[&str]) -> Router {
    let yaml = format!(
        "llm:\n  retry:\n    max_retries: 0\n  providers:\n    openai: {{base_url: \"{}\"}}\n  models:\n{}",
        gateway.base_url(),
        models.iter().map(|m| format!("    - {m}\n")).collect::<String>()
    );
    let config = Config::from_yaml(&yaml, Path::new("t.yaml"), Path::new("/tmp"), &|_| None).unwrap();
    let key = Secrets::from_lookup(&|v| (v == "OPENAI_API_KEY").then(|| "sk-gateway".to_owned()));
    router::from_config(&config.llm, &key).unwrap()
}

fn request(messages: Vec<Message>) -> ChatRequest {
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    ChatRequest {
        model: String::new(),
        system: "You are a test.".into(),
        messages,
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: schema.as_object().unwrap().clone(),
        }],
        max_output_tokens: 4000,
        temperature: None,
        reasoning_effort: None,
        cache_system: false,
        json_output: false,
    }
}

/// A tool call, then an answer after its result: two requests.
async fn two_turns(router: &Router, model: &str) -> Result<String, LlmError> {
    let mut messages = vec![Message::User("Read a.rs.".into())];
    let first = router.chat_on(model, &request(messages.clone())).await?;
    assert_eq!(first.tool_calls.len(), 1, "{first:?}");
    messages.push(first.to_message());
    messages.push(Message::ToolResults(vec![forgehand::llm::ToolResult {
        call_id: first.tool_calls[0].id.clone(),
        name: "read_file".into(),
        content: "fn a() {}".into(),
        is_error: false,
    }]));
    Ok(router.chat_on(model, &request(messages)).await?.text)
}

async fn script(gateway: &ScriptedModel) {
    gateway.push(call("read_file", json!({"path": "a.rs"}))).await;
    gateway.push(text("a.rs defines a.")).await;
}

fn paths(calls: &[(String, String)]) -> Vec<&str> {
    calls.iter().map(|(p, _)| p.as_str()).collect()
}

fn body(call: &(String, String)) -> Value {
    serde_json::from_str(&call.1).unwrap()
}

#[tokio::test]
async fn a_catalogue_gpt_5_model_keeps_the_responses_api_and_its_reasoning_on_a_gateway() {
    let gateway = ScriptedModel::start_gateway(true).await;
    script(&gateway).await;
    let router = router_for(
        &gateway,
        &["{provider: openai, model: gpt-5.6, reasoning_effort: high}"],
    );
    assert_eq!(two_turns(&router, "gpt-5.6").await.unwrap(), "a.rs defines a.");
    assert!(gateway.refused().is_empty(), "{:?}", gateway.refused());
    let calls = gateway.calls().await;
    assert_eq!(paths(&calls), [RESPONSES, RESPONSES]);
    let second = body(&calls[1]);
    // Reasoning with tools, and the encrypted reasoning passed back.
    assert_eq!(second["reasoning"], json!({"effort": "high"}));
    assert_eq!(second["tools"][0]["name"], "read_file");
    assert_eq!(second["input"][1]["type"], "reasoning");
}

#[tokio::test]
async fn a_gateway_without_responses_is_found_out_once_and_remembered() {
    let gateway = ScriptedModel::start_gateway(false).await;
    script(&gateway).await;
    let router = router_for(
        &gateway,
        &["{provider: openai, model: gpt-5.6, reasoning_effort: high}"],
    );
    assert_eq!(two_turns(&router, "gpt-5.6").await.unwrap(), "a.rs defines a.");
    assert!(gateway.refused().is_empty(), "{:?}", gateway.refused());
    let calls = gateway.calls().await;
    // One 404, then Chat Completions; the second call goes straight there.
    assert_eq!(paths(&calls), [RESPONSES, CHAT, CHAT]);
    let chat = body(&calls[1]);
    assert_eq!(chat["model"], "gpt-5.6");
    assert_eq!(chat["reasoning_effort"], "none", "{chat}");

    // A router made again (a reload) asks once more, then remembers.
    script(&gateway).await;
    let again = router_for(&gateway, &["{provider: openai, model: gpt-5.6}"]);
    two_turns(&again, "gpt-5.6").await.unwrap();
    assert_eq!(&paths(&gateway.calls().await)[3..], [RESPONSES, CHAT, CHAT]);
}

#[tokio::test]
async fn an_explicit_api_wins_and_a_local_model_keeps_chat_completions() {
    // `api: responses` is the operator's word: a 404 is an error, not a fallback.
    let without = ScriptedModel::start_gateway(false).await;
    script(&without).await;
    let chosen = router_for(&without, &["{provider: openai, model: gpt-5.6, api: responses}"]);
    let err = two_turns(&chosen, "gpt-5.6").await.unwrap_err();
    assert!(matches!(err, LlmError::Rejected { status: 404, .. }), "{err}");
    assert_eq!(paths(&without.calls().await), [RESPONSES]);

    // `api: chat_completions` and a model the catalogue lacks: Chat
    // Completions, though the gateway serves both.
    let both = ScriptedModel::start_gateway(true).await;
    script(&both).await;
    script(&both).await;
    let router = router_for(
        &both,
        &[
            "{provider: openai, model: gpt-4.1, api: chat_completions}",
            "{provider: openai, model: qwen-coder, max_input_tokens: 32000}",
        ],
    );
    two_turns(&router, "gpt-4.1").await.unwrap();
    two_turns(&router, "qwen-coder").await.unwrap();
    assert!(both.refused().is_empty(), "{:?}", both.refused());
    assert_eq!(paths(&both.calls().await), [CHAT, CHAT, CHAT, CHAT]);
}
