//! Each provider against the scripted server in its own wire format: a
//! two-step tool conversation, usage, auth headers, and error mapping.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/scripted_model.rs"]
mod scripted_model;

use forgehand::config::Secret;
use forgehand::llm::anthropic::Anthropic;
use forgehand::llm::gemini::Gemini;
use forgehand::llm::openai::OpenAi;
use forgehand::llm::{ChatRequest, LlmError, Message, Provider, ToolResult, ToolSpec};
use scripted_model::{call, text, Format, Reply, ScriptedModel};
use serde_json::{json, Value};
use std::time::Duration;

const KEY: &str = "test-key-never-logged";

fn provider(format: Format, base: &str) -> Box<dyn Provider> {
    let timeout = Duration::from_secs(10);
    match format {
        Format::OpenAi => Box::new(OpenAi::new(base, Some(Secret::new(KEY)), timeout).unwrap()),
        Format::Gemini => Box::new(Gemini::new(base, Secret::new(KEY), timeout).unwrap()),
        Format::Anthropic => Box::new(Anthropic::new(base, Secret::new(KEY), timeout).unwrap()),
    }
}

fn request(model: &str, messages: Vec<Message>) -> ChatRequest {
    let schema = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {"path": {"type": "string"}},
        "required": ["path"]
    });
    ChatRequest {
        model: model.into(),
        system: "You are a test.".into(),
        messages,
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: schema.as_object().unwrap().clone(),
        }],
        max_output_tokens: 1000,
        temperature: Some(0.2),
        reasoning_effort: Some("high".into()),
        cache_system: false,
        json_output: false,
    }
}

async fn two_step_conversation(
    format: Format,
    model: &str,
) -> (Vec<(wiremock::http::HeaderMap, Value)>, u64, u64) {
    let scripted = ScriptedModel::start(format).await;
    scripted
        .push(call("read_file", json!({"path": "README.md"})))
        .await;
    scripted.push(text("The README says hello.")).await;
    let provider = provider(format, &scripted.base_url());

    let mut messages = vec![Message::User("What does the README say?".into())];
    let first = provider.chat(&request(model, messages.clone())).await.unwrap();
    assert_eq!(first.tool_calls.len(), 1);
    assert_eq!(first.tool_calls[0].name, "read_file");
    let args: Value = serde_json::from_str(&first.tool_calls[0].arguments).unwrap();
    assert_eq!(args, json!({"path": "README.md"}));
    assert!(first.usage.input_tokens > 0 && first.usage.output_tokens > 0);

    messages.push(Message::Assistant {
        text: first.text.clone(),
        tool_calls: first.tool_calls.clone(),
    });
    messages.push(Message::ToolResults(vec![ToolResult {
        call_id: first.tool_calls[0].id.clone(),
        name: "read_file".into(),
        content: "hello".into(),
        is_error: false,
    }]));
    let second = provider.chat(&request(model, messages)).await.unwrap();
    assert_eq!(second.text, "The README says hello.");
    assert!(second.tool_calls.is_empty());
    (
        scripted.requests().await,
        first.usage.input_tokens,
        second.usage.input_tokens,
    )
}

#[tokio::test]
async fn openai_two_step_tool_conversation() {
    let (requests, first_in, second_in) = two_step_conversation(Format::OpenAi, "o3").await;
    assert_eq!((first_in, second_in), (100, 101));
    let (headers, body) = &requests[1];
    assert_eq!(
        headers.get("authorization").unwrap().to_str().unwrap(),
        format!("Bearer {KEY}")
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are a test."})
    );
    assert_eq!(messages[2]["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], messages[2]["tool_calls"][0]["id"]);
    assert_eq!(messages[3]["content"], "hello");
    assert_eq!(body["tools"][0]["type"], "function");
    // o-series rules.
    assert_eq!(body["max_completion_tokens"], 1000);
    assert_eq!(body["reasoning_effort"], "high");
    assert!(body.get("temperature").is_none() && body.get("max_tokens").is_none());
}

#[tokio::test]
async fn openai_compatible_models_get_temperature_and_max_tokens() {
    let (requests, _, _) = two_step_conversation(Format::OpenAi, "llama3.1").await;
    let body = &requests[0].1;
    assert_eq!(body["max_tokens"], 1000);
    assert!((body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert!(body.get("reasoning_effort").is_none() && body.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn anthropic_two_step_tool_conversation() {
    let (requests, first_in, _) = two_step_conversation(Format::Anthropic, "claude-test").await;
    assert_eq!(first_in, 200);
    let (headers, body) = &requests[1];
    assert_eq!(headers.get("x-api-key").unwrap().to_str().unwrap(), KEY);
    assert_eq!(
        headers.get("anthropic-version").unwrap().to_str().unwrap(),
        "2023-06-01"
    );
    assert_eq!(body["system"], "You are a test.");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[1]["content"][0]["input"], json!({"path": "README.md"}));
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    assert_eq!(
        messages[2]["content"][0]["tool_use_id"],
        messages[1]["content"][0]["id"]
    );
    assert_eq!(body["tools"][0]["input_schema"]["required"], json!(["path"]));
}

#[tokio::test]
async fn gemini_two_step_tool_conversation() {
    let (requests, first_in, _) = two_step_conversation(Format::Gemini, "gemini-2.5-pro").await;
    assert_eq!(first_in, 300);
    let (headers, body) = &requests[1];
    assert_eq!(headers.get("x-goog-api-key").unwrap().to_str().unwrap(), KEY);
    assert_eq!(body["systemInstruction"]["parts"][0]["text"], "You are a test.");
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(contents[1]["parts"][0]["functionCall"]["name"], "read_file");
    assert_eq!(contents[2]["parts"][0]["functionResponse"]["name"], "read_file");
    assert_eq!(
        contents[2]["parts"][0]["functionResponse"]["response"]["content"],
        "hello"
    );
    let declared = &body["tools"][0]["functionDeclarations"][0]["parameters"];
    assert!(declared.get("additionalProperties").is_none(), "{declared}");
    assert_eq!(declared["required"], json!(["path"]));
}

#[tokio::test]
async fn errors_map_to_what_they_mean() {
    for format in [Format::OpenAi, Format::Gemini, Format::Anthropic] {
        let scripted = ScriptedModel::start(format).await;
        scripted
            .push(Reply::Status {
                code: 400,
                message: "tools[0] is invalid".into(),
                retry_after: None,
            })
            .await;
        scripted
            .push(Reply::Status {
                code: 529,
                message: "Overloaded".into(),
                retry_after: None,
            })
            .await;
        scripted
            .push(Reply::Status {
                code: 503,
                message: "try later".into(),
                retry_after: Some(7),
            })
            .await;
        scripted
            .push(Reply::Status {
                code: 429,
                message: "rate limit".into(),
                retry_after: None,
            })
            .await;
        scripted
            .push(Reply::Status {
                code: 500,
                message: "boom".into(),
                retry_after: None,
            })
            .await;
        let provider = provider(format, &scripted.base_url());
        let req = request("m", vec![Message::User("hi".into())]);

        let err = provider.chat(&req).await.unwrap_err();
        assert!(
            matches!(err, LlmError::Rejected { status: 400, .. }),
            "{format:?}: {err}"
        );
        assert!(
            err.to_string().contains("tools[0] is invalid") && !err.is_retryable(),
            "{err}"
        );
        let err = provider.chat(&req).await.unwrap_err();
        assert!(
            matches!(err, LlmError::Overloaded { status: 529, .. }) && err.is_retryable(),
            "{err}"
        );
        let err = provider.chat(&req).await.unwrap_err();
        assert_eq!(err.retry_after(), Some(Duration::from_secs(7)), "{err}");
        let err = provider.chat(&req).await.unwrap_err();
        assert!(matches!(err, LlmError::Overloaded { status: 429, .. }), "{err}");
        let err = provider.chat(&req).await.unwrap_err();
        assert!(
            matches!(err, LlmError::Server { status: 500, .. }) && err.falls_back(),
            "{err}"
        );
        assert!(!err.to_string().contains(KEY));
    }
}

#[tokio::test]
async fn an_unreachable_provider_is_a_network_error() {
    let provider = OpenAi::new("http://127.0.0.1:9/v1", None, Duration::from_secs(2)).unwrap();
    let err = provider
        .chat(&request("o3", vec![Message::User("hi".into())]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Network { .. }) && err.falls_back(),
        "{err}"
    );
}

#[tokio::test]
async fn malformed_arguments_reach_the_loop_as_the_model_sent_them() {
    let scripted = ScriptedModel::start(Format::OpenAi).await;
    scripted
        .push(Reply::ToolCalls(vec![(
            "read_file".into(),
            "{\"path\": \"README.md\"".into(),
        )]))
        .await;
    let provider = provider(Format::OpenAi, &scripted.base_url());
    let response = provider
        .chat(&request("o3", vec![Message::User("hi".into())]))
        .await
        .unwrap();
    assert_eq!(response.tool_calls[0].arguments, "{\"path\": \"README.md\"");
    assert!(serde_json::from_str::<Value>(&response.tool_calls[0].arguments).is_err());
}
