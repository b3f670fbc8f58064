//! Each API against a scripted server in its own wire format that refuses
//! what the real service refuses (`provider_rules`): tool conversations on
//! each provider's current model shape, thinking and signatures passed back,
//! stop reasons, empty turns, schemas, a fallback mid-run, usage and cost,
//! auth headers and error mapping.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::scripted_model;

use forgehand::config::{Api, ProviderKind, Secret};
use forgehand::llm::anthropic::Anthropic;
use forgehand::llm::catalogue;
use forgehand::llm::chat_completions::ChatCompletions;
use forgehand::llm::gemini::Gemini;
use forgehand::llm::responses::Responses;
use forgehand::llm::retry::RetryPolicy;
use forgehand::llm::router::{Route, Router};
use forgehand::llm::usage::UsageReport;
use forgehand::llm::{
    ChatRequest, ChatResponse, FinishReason, LlmError, Message, ModelSpec, Provider, ToolCall, ToolResult,
    ToolSpec,
};
use scripted_model::provider_rules;
use scripted_model::{call, text, Format, Issued, Reply, ScriptedModel, Stop};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const KEY: &str = "test-key-never-logged";

fn provider(format: Format, base: &str) -> Arc<dyn Provider> {
    let timeout = Duration::from_secs(10);
    match format {
        Format::OpenAi => Arc::new(ChatCompletions::new(base, Some(Secret::new(KEY)), timeout).unwrap()),
        Format::Responses => Arc::new(Responses::new(base, Some(Secret::new(KEY)), timeout).unwrap()),
        Format::Gemini => Arc::new(Gemini::new(base, Secret::new(KEY), timeout).unwrap()),
        Format::Anthropic => Arc::new(Anthropic::new(base, Secret::new(KEY), timeout).unwrap()),
    }
}

/// What the catalogue says of `model`, on `format`'s API; a plain model
/// when the catalogue does not know it.
fn spec(format: Format, model: &str) -> ModelSpec {
    let api = match format {
        Format::OpenAi => Api::ChatCompletions,
        Format::Responses => Api::Responses,
        Format::Gemini => Api::GenerateContent,
        Format::Anthropic => Api::Messages,
    };
    let mut spec = catalogue::lookup(model)
        .unwrap_or_else(|| ModelSpec::plain(model, ProviderKind::OpenAi, api, 128_000, 8192));
    spec.api = api;
    spec
}

/// A router with one model on `scripted`, no retries.
fn router_on(routes: Vec<(&ScriptedModel, &str)>) -> Router {
    let routes = routes
        .into_iter()
        .map(|(scripted, model)| Route {
            spec: spec(scripted.format, model),
            reasoning_effort: Some("high".into()),
            provider: provider(scripted.format, &scripted.base_url()),
        })
        .collect();
    let retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    Router::new(routes, retry, vec![]).with_output_room(4000)
}

fn tools() -> Vec<ToolSpec> {
    // As MCP servers write schemas: keywords Gemini's `parameters` refuses.
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "path": {"type": "string", "format": "uri"},
            "mode": {"type": "integer", "enum": [1, 2]},
            "count": {"type": "integer", "exclusiveMinimum": 0}
        },
        "required": ["path"]
    });
    vec![ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: schema.as_object().unwrap().clone(),
    }]
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "You are a test.".into(),
        messages,
        tools: tools(),
        max_output_tokens: 16_000,
        temperature: Some(0.2),
        reasoning_effort: None,
        cache_system: true,
        json_output: false,
    }
}

fn results_for(response: &ChatResponse) -> Message {
    Message::ToolResults(
        response
            .tool_calls
            .iter()
            .map(|c| ToolResult {
                call_id: c.id.clone(),
                name: c.name.clone(),
                content: format!("contents of {}", c.arguments),
                is_error: false,
            })
            .collect(),
    )
}

/// Three tool turns and an answer on `model`: every request must pass the
/// provider's rules, each answer's reasoning state going back with it.
async fn three_tool_turns(format: Format, model: &str) -> ScriptedModel {
    let scripted = ScriptedModel::start(format).await;
    for file in ["a.rs", "b.rs", "c.rs"] {
        scripted.push(call("read_file", json!({"path": file}))).await;
    }
    scripted.push(text("All three files read.")).await;
    let router = router_on(vec![(&scripted, model)]);
    let mut messages = vec![Message::User("Read a.rs, b.rs and c.rs.".into())];
    for _ in 0..3 {
        let response = router
            .chat_on(model, &request(messages.clone()))
            .await
            .unwrap_or_else(|e| panic!("{format:?} {model}: {e}\nrefused: {:?}", scripted.refused()));
        assert_eq!(response.finish, FinishReason::Complete);
        assert_eq!(response.tool_calls.len(), 1, "{response:?}");
        messages.push(response.to_message());
        messages.push(results_for(&response));
    }
    let last = router.chat_on(model, &request(messages)).await.unwrap();
    assert_eq!(last.text, "All three files read.");
    assert!(scripted.refused().is_empty(), "{:?}", scripted.refused());
    scripted
}

async fn bodies(scripted: &ScriptedModel) -> Vec<(wiremock::http::HeaderMap, Value)> {
    scripted.requests().await
}

#[tokio::test]
async fn gpt_5_goes_through_the_responses_api_with_its_reasoning_passed_back() {
    let scripted = three_tool_turns(Format::Responses, "gpt-5.6").await;
    let requests = bodies(&scripted).await;
    let (headers, body) = &requests[3];
    assert_eq!(
        headers.get("authorization").unwrap().to_str().unwrap(),
        format!("Bearer {KEY}")
    );
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["reasoning"], json!({"effort": "high"}));
    assert_eq!(body["max_output_tokens"], 16_000);
    assert_eq!(body["instructions"], "You are a test.");
    assert!(body.get("temperature").is_none() && body.get("max_tokens").is_none());
    let input = body["input"].as_array().unwrap();
    // user, then per step: reasoning, function_call, function_call_output.
    let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output",
            "reasoning",
            "function_call",
            "function_call_output",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(input[1]["encrypted_content"], "enc-0-gpt-5.6");
    assert_eq!(input[3]["call_id"], input[2]["call_id"]);
}

#[tokio::test]
async fn claude_thinks_and_gets_each_thinking_block_back_unchanged() {
    let scripted = three_tool_turns(Format::Anthropic, "claude-opus-5-5").await;
    let requests = bodies(&scripted).await;
    let (headers, body) = &requests[3];
    assert_eq!(headers.get("x-api-key").unwrap().to_str().unwrap(), KEY);
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(body["output_config"], json!({"effort": "high"}));
    assert!(
        body.get("temperature").is_none(),
        "a thinking model takes no temperature"
    );
    let messages = body["messages"].as_array().unwrap();
    for (i, signature) in [
        (1, "sig-0-claude-opus-5-5"),
        (3, "sig-1-claude-opus-5-5"),
        (5, "sig-2-claude-opus-5-5"),
    ] {
        assert_eq!(messages[i]["content"][0]["type"], "thinking", "{}", messages[i]);
        assert_eq!(messages[i]["content"][0]["signature"], signature);
    }
    // Caching: the system text and a moving breakpoint on the newest turn.
    assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(
        messages[6]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(messages[4]["content"][0].get("cache_control").is_none());
}

#[tokio::test]
async fn gemini_3_gets_every_thought_signature_back_on_its_part() {
    let scripted = three_tool_turns(Format::Gemini, "gemini-3.1-pro-preview").await;
    let requests = bodies(&scripted).await;
    let body = &requests[3].1;
    assert_eq!(
        requests[3].0.get("x-goog-api-key").unwrap().to_str().unwrap(),
        KEY
    );
    assert_eq!(
        body["generationConfig"]["thinkingConfig"],
        json!({"thinkingLevel": "high"})
    );
    let contents = body["contents"].as_array().unwrap();
    for (i, n) in [(1, 0), (3, 1), (5, 2)] {
        assert_eq!(
            contents[i]["parts"][0]["thoughtSignature"],
            format!("gsig-{n}-gemini-3.1-pro-preview")
        );
    }
    let declared = &body["tools"][0]["functionDeclarations"][0];
    assert!(declared.get("parameters").is_none());
    assert_eq!(
        declared["parametersJsonSchema"]["properties"]["path"]["format"],
        "uri"
    );
}

#[tokio::test]
async fn an_openai_compatible_server_keeps_chat_completions() {
    let scripted = three_tool_turns(Format::OpenAi, "llama3.1").await;
    let body = &bodies(&scripted).await[0].1;
    // The model's own cap (8192 for this plain model) bounds the room.
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["temperature"], json!(0.2));
    assert!(body.get("reasoning_effort").is_none() && body.get("max_completion_tokens").is_none());
}

#[tokio::test]
async fn gpt_5_on_chat_completions_reasons_with_effort_none_when_it_has_tools() {
    let scripted = three_tool_turns(Format::OpenAi, "gpt-5.6").await;
    let body = &bodies(&scripted).await[0].1;
    assert_eq!(body["reasoning_effort"], "none");
    assert_eq!(body["max_completion_tokens"], 16_000);
    assert!(body.get("max_tokens").is_none() && body.get("temperature").is_none());
}

#[test]
fn the_fakes_refuse_what_the_providers_refuse() {
    let issued = Issued::default();
    let refused = |r: Result<(), Value>| r.expect_err("refused").to_string();
    // OpenAI Chat Completions on GPT-5.x.
    let chat = json!({"model": "gpt-5.6", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10});
    assert!(refused(provider_rules::chat_completions(&chat)).contains("Use 'max_completion_tokens' instead"));
    let chat = json!({"model": "gpt-5.6", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]});
    assert!(refused(provider_rules::chat_completions(&chat))
        .contains("Function tools with reasoning_effort are not supported"));
    let chat =
        json!({"model": "gpt-5.6", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.2});
    assert!(
        refused(provider_rules::chat_completions(&chat)).contains("Only the default (1) value is supported")
    );
    let chat = json!({"model": "m", "messages": [{"role": "system", "content": ""}, {"role": "user", "content": "hi"}]});
    assert!(refused(provider_rules::chat_completions(&chat)).contains("empty content"));
    // The Responses API, stateless.
    let unsigned = json!({"model": "gpt-5.6", "store": false, "input": [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c", "name": "t", "arguments": "{}"}]});
    assert!(refused(provider_rules::responses(&unsigned, &issued)).contains("Items are not persisted"));
    let orphan = json!({"model": "gpt-5.6", "store": false, "input": [
        {"role": "user", "content": "hi"},
        {"type": "function_call_output", "call_id": "c", "output": "x"}]});
    assert!(refused(provider_rules::responses(&orphan, &issued)).contains("No tool call found"));
    // Anthropic: a thinking model's tool turn without its thinking block.
    let bare = json!({"model": "claude-opus-5-5", "max_tokens": 100, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]});
    assert!(refused(provider_rules::messages(&bare, &issued))
        .contains("Expected `thinking` or `redacted_thinking`"));
    let empty = json!({"model": "claude-x", "max_tokens": 100, "system": "", "messages": [{"role": "user", "content": [{"type": "text", "text": "go"}]}]});
    assert!(refused(provider_rules::messages(&empty, &issued)).contains("must be non-empty"));
    let empty_turn = json!({"model": "claude-x", "max_tokens": 100, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": []},
        {"role": "user", "content": [{"type": "text", "text": "again"}]}]});
    assert!(refused(provider_rules::messages(&empty_turn, &issued)).contains("non-empty content"));
    let duplicate = json!({"model": "claude-x", "max_tokens": 100, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]});
    assert!(refused(provider_rules::messages(&duplicate, &issued)).contains("ids must be unique"));
    // Gemini 3: a function call without its signature in the current turn.
    let unsigned = json!({"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "t", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "t", "response": {"content": "x"}}}]}]});
    assert!(refused(provider_rules::generate_content(
        "gemini-3.1-pro-preview",
        &unsigned,
        &issued
    ))
    .contains("missing a thought_signature"));
    assert!(provider_rules::generate_content("gemini-2.5-pro", &unsigned, &issued).is_ok());
}

#[test]
fn geminis_parameters_refuse_each_keyword_mcp_schemas_use() {
    let issued = Issued::default();
    for (schema, words) in [
        (
            json!({"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}}),
            "only 'enum' and 'date-time'",
        ),
        (
            json!({"type": "object", "properties": {"mode": {"type": "integer", "enum": [1, 2]}}}),
            "only allowed for STRING type",
        ),
        (
            json!({"type": "object", "additionalProperties": false}),
            "Unknown name \"additionalProperties\"",
        ),
        (
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
            "Unknown name \"$schema\"",
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}}}),
            "Unknown name \"exclusiveMinimum\"",
        ),
    ] {
        let body = json!({
            "contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "t", "description": "d", "parameters": schema.clone()}]}]
        });
        let err =
            provider_rules::generate_content("gemini-3.1-pro-preview", &body, &issued).expect_err("refused");
        assert!(
            err["error"]["message"].as_str().unwrap().contains(words),
            "{schema}: {err}"
        );
        // The same schema as parametersJsonSchema, as forgehand sends it, passes.
        let body = json!({
            "contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "t", "description": "d", "parametersJsonSchema": schema}]}]
        });
        provider_rules::generate_content("gemini-3.1-pro-preview", &body, &issued).unwrap();
    }
}

/// A conversation whose tool call goes unanswered: the user speaks next.
fn unanswered_call() -> Vec<Message> {
    let call = ToolCall {
        id: "call_1".into(),
        name: "read_file".into(),
        arguments: json!({"path": "a.rs"}).to_string(),
    };
    vec![
        Message::User("Read a.rs.".into()),
        Message::assistant("", vec![call]),
        Message::User("Never mind: just answer.".into()),
    ]
}

#[tokio::test]
async fn a_tool_call_left_unanswered_is_refused_in_each_providers_words() {
    // Models that neither think nor sign, so that only the pairing is wrong.
    for (format, model, words) in [
        (Format::OpenAi, "llama3.1", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_1"),
        (Format::Responses, "gpt-4.1", "No tool output found for function call call_1."),
        (Format::Anthropic, "claude-sonnet-4-5", "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: call_1."),
        (Format::Gemini, "gemini-2.5-pro", "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."),
    ] {
        let scripted = ScriptedModel::start(format).await;
        scripted.push(text("never sent")).await;
        let mut req = request(unanswered_call());
        req.model = model.into();
        let err = provider(format, &scripted.base_url())
            .chat(&spec(format, model), &req)
            .await
            .unwrap_err();
        assert!(
            matches!(err, LlmError::Rejected { status: 400, .. }) && err.to_string().contains(words),
            "{format:?}: {err}"
        );
        assert_eq!(scripted.refused().len(), 1, "{format:?}");
    }
}

#[tokio::test]
async fn a_scripted_call_to_a_tool_the_request_never_declared_fails_the_test_loudly() {
    for (format, model) in [
        (Format::OpenAi, "llama3.1"),
        (Format::Responses, "gpt-5.6"),
        (Format::Anthropic, "claude-opus-5-5"),
        (Format::Gemini, "gemini-3.1-pro-preview"),
    ] {
        let scripted = ScriptedModel::start(format).await;
        scripted.push(call("delete_everything", json!({}))).await;
        let mut req = request(vec![Message::User("Read a.rs.".into())]);
        req.model = model.into();
        let err = provider(format, &scripted.base_url())
            .chat(&spec(format, model), &req)
            .await
            .unwrap_err();
        assert!(
            matches!(err, LlmError::Rejected { status: 400, .. })
                && err.to_string().contains("Test setup error")
                && err.to_string().contains(
                    "`delete_everything`, which this request does not declare (it declares read_file)"
                ),
            "{format:?}: {err}"
        );
        assert_eq!(scripted.refused().len(), 1, "{format:?}");
    }
}

/// Sends one request on `format` whose answer stops for `stop`.
async fn stopped(format: Format, model: &str, stop: Stop) -> ChatResponse {
    let scripted = ScriptedModel::start(format).await;
    scripted.push(Reply::Stopped(stop)).await;
    let router = router_on(vec![(&scripted, model)]);
    router
        .chat_on(model, &request(vec![Message::User("go".into())]))
        .await
        .unwrap()
}

#[tokio::test]
async fn why_a_model_stopped_is_read_on_every_api() {
    for (format, model) in [
        (Format::Responses, "gpt-5.6"),
        (Format::Anthropic, "claude-opus-5-5"),
        (Format::Gemini, "gemini-3.1-pro-preview"),
        (Format::OpenAi, "llama3.1"),
    ] {
        let cut = stopped(format, model, Stop::Cut).await;
        assert_eq!(
            (cut.finish, cut.text.as_str()),
            (FinishReason::OutputLimit, ""),
            "{format:?}"
        );
        let refusal = stopped(format, model, Stop::Refusal).await;
        assert!(
            matches!(refusal.finish, FinishReason::Refused(_)),
            "{format:?}: {refusal:?}"
        );
    }
    let malformed = stopped(Format::Gemini, "gemini-3.1-pro-preview", Stop::Malformed).await;
    assert!(
        matches!(&malformed.finish, FinishReason::MalformedToolCall(what) if what.contains("MALFORMED_FUNCTION_CALL")),
        "{malformed:?}"
    );
    assert_eq!(malformed.native, None, "nothing to send back");
}

#[tokio::test]
async fn empty_turns_and_an_empty_system_text_never_reach_a_provider() {
    for (format, model) in [
        (Format::Responses, "gpt-5.6"),
        (Format::Anthropic, "claude-opus-5-5"),
        (Format::Gemini, "gemini-3.1-pro-preview"),
        (Format::OpenAi, "llama3.1"),
    ] {
        let scripted = ScriptedModel::start(format).await;
        scripted.push(text("ok")).await;
        let router = router_on(vec![(&scripted, model)]);
        let mut req = request(vec![
            Message::User("Fix it.".into()),
            // An answer that said nothing, then the test-fix round's request.
            Message::assistant("", vec![]),
            Message::User("The tests fail.".into()),
        ]);
        req.system = String::new();
        let response = router.chat_on(model, &req).await;
        assert!(
            response.is_ok(),
            "{format:?}: {response:?} {:?}",
            scripted.refused()
        );
    }
}

#[tokio::test]
async fn a_run_that_falls_back_mid_way_keeps_a_history_each_provider_accepts() {
    let claude = ScriptedModel::start(Format::Anthropic).await;
    let gemini = ScriptedModel::start(Format::Gemini).await;
    let gpt = ScriptedModel::start(Format::Responses).await;
    claude.push(call("read_file", json!({"path": "a.rs"}))).await;
    claude.push(call("read_file", json!({"path": "b.rs"}))).await;
    gemini.push(call("read_file", json!({"path": "c.rs"}))).await;
    gpt.push(text("done")).await;
    let router = router_on(vec![
        (&claude, "claude-opus-5-5"),
        (&gemini, "gemini-3.1-pro-preview"),
        (&gpt, "gpt-5.6"),
    ]);
    let mut messages = vec![Message::User("Read the files.".into())];
    for model in ["claude-opus-5-5", "claude-opus-5-5", "gemini-3.1-pro-preview"] {
        let response = router
            .chat_on(model, &request(messages.clone()))
            .await
            .unwrap_or_else(|e| panic!("{model}: {e} {:?} {:?}", claude.refused(), gemini.refused()));
        messages.push(response.to_message());
        messages.push(results_for(&response));
    }
    let last = router.chat_on("gpt-5.6", &request(messages)).await;
    assert_eq!(
        last.unwrap_or_else(|e| panic!("{e} {:?}", gpt.refused())).text,
        "done"
    );
    // Claude's turns reach Gemini 3 with the documented placeholder, and
    // without Claude's thinking.
    let to_gemini = &gemini.requests().await[0].1;
    let contents = to_gemini["contents"].as_array().unwrap();
    assert_eq!(
        contents[1]["parts"][0]["thoughtSignature"],
        "skip_thought_signature_validator"
    );
    assert!(!to_gemini.to_string().contains("sig-0"));
    // Gemini's and Claude's turns reach the Responses API as plain calls.
    let to_gpt = &gpt.requests().await[0].1;
    assert!(!to_gpt.to_string().contains("thoughtSignature") && !to_gpt.to_string().contains("gsig"));
}

#[tokio::test]
async fn usage_counts_thoughts_and_cache_and_the_estimate_is_the_bill() {
    let scripted = ScriptedModel::start(Format::Gemini).await;
    scripted.push(text("ok")).await;
    let router = router_on(vec![(&scripted, "gemini-3.1-pro-preview")]);
    let response = router
        .chat_on(
            "gemini-3.1-pro-preview",
            &request(vec![Message::User("go".into())]),
        )
        .await
        .unwrap();
    // 30 answer tokens and 12 thought tokens, both billed as output.
    assert_eq!(
        (response.usage.output_tokens, response.usage.reasoning_tokens),
        (42, 12)
    );

    // Anthropic's bill: plain input, cache reads and cache writes apart.
    let price = catalogue::lookup("claude-opus-5-5").unwrap().price.unwrap();
    let usage = forgehand::llm::TokenUsage {
        input_tokens: 1_000 + 50_000 + 4_000,
        cached_input_tokens: 50_000,
        cache_write_tokens: 4_000,
        output_tokens: 2_000,
        reasoning_tokens: 1_500,
    };
    let bill = 1_000.0 * price.input_per_million / 1e6
        + 50_000.0 * price.cached_input_per_million / 1e6
        + 4_000.0 * price.cache_write_per_million / 1e6
        + 2_000.0 * price.output_per_million / 1e6;
    let report = UsageReport::new([("claude-opus-5-5".to_owned(), price)].into());
    let estimate = report.cost_of("claude-opus-5-5", usage).unwrap();
    assert!((estimate - bill).abs() < 1e-12, "{estimate} vs {bill}");
    assert!(price.cache_write_per_million > price.input_per_million);
}

#[tokio::test]
async fn errors_map_to_what_they_mean() {
    for format in [
        Format::OpenAi,
        Format::Responses,
        Format::Gemini,
        Format::Anthropic,
    ] {
        let scripted = ScriptedModel::start(format).await;
        for (code, message, retry_after) in [
            (400, "tools[0] is invalid", None),
            (529, "Overloaded", None),
            (503, "try later", Some(7)),
            (429, "rate limit", None),
            (500, "boom", None),
        ] {
            scripted
                .push(Reply::Status {
                    code,
                    message: message.into(),
                    retry_after,
                })
                .await;
        }
        let provider = provider(format, &scripted.base_url());
        let spec = spec(format, "m");
        let mut req = request(vec![Message::User("hi".into())]);
        req.model = "m".into();

        let err = provider.chat(&spec, &req).await.unwrap_err();
        assert!(
            matches!(err, LlmError::Rejected { status: 400, .. }),
            "{format:?}: {err}"
        );
        assert!(
            err.to_string().contains("tools[0] is invalid") && !err.is_retryable(),
            "{err}"
        );
        let err = provider.chat(&spec, &req).await.unwrap_err();
        assert!(
            matches!(err, LlmError::Overloaded { status: 529, .. }) && err.is_retryable(),
            "{err}"
        );
        let err = provider.chat(&spec, &req).await.unwrap_err();
        assert_eq!(err.retry_after(), Some(Duration::from_secs(7)), "{err}");
        let err = provider.chat(&spec, &req).await.unwrap_err();
        assert!(matches!(err, LlmError::Overloaded { status: 429, .. }), "{err}");
        let err = provider.chat(&spec, &req).await.unwrap_err();
        assert!(
            matches!(err, LlmError::Server { status: 500, .. }) && err.falls_back(),
            "{err}"
        );
        assert!(!err.to_string().contains(KEY));
    }
}

#[tokio::test]
async fn an_unreachable_provider_is_a_network_error() {
    let provider = Responses::new("http://127.0.0.1:9/v1", None, Duration::from_secs(2)).unwrap();
    let err = provider
        .chat(
            &spec(Format::Responses, "gpt-5.6"),
            &request(vec![Message::User("hi".into())]),
        )
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
    let router = router_on(vec![(&scripted, "llama3.1")]);
    let response = router
        .chat_on("llama3.1", &request(vec![Message::User("hi".into())]))
        .await
        .unwrap();
    assert_eq!(response.tool_calls[0].arguments, "{\"path\": \"README.md\"");
    assert!(serde_json::from_str::<Value>(&response.tool_calls[0].arguments).is_err());
}

#[tokio::test]
async fn the_agent_loop_reads_its_transcript_from_claudes_cache() {
    // Without the moving breakpoint only the system text would be read back.
    let scripted = ScriptedModel::start_caching(Format::Anthropic).await;
    for step in 0..7 {
        scripted
            .push(call("read_file", json!({"path": format!("f{step}.rs")})))
            .await;
    }
    scripted.push(text("done")).await;
    let router = router_on(vec![(&scripted, "claude-opus-5-5")]);
    let mut messages = vec![Message::User("Read the files.".into())];
    let mut usage = Vec::new();
    for _ in 0..8 {
        let mut req = request(messages.clone());
        req.system = "Rules of the project. ".repeat(400);
        let response = router.chat_on("claude-opus-5-5", &req).await.unwrap();
        usage.push(response.usage);
        messages.push(response.to_message());
        let mut results = results_for(&response);
        if let Message::ToolResults(r) = &mut results {
            for r in r.iter_mut() {
                r.content = format!("{} {}", r.call_id, "fn f() {}\n".repeat(300));
            }
        }
        messages.push(results);
    }
    let (cached, input) = usage[2..].iter().fold((0, 0), |(c, i), u| {
        (c + u.cached_input_tokens, i + u.input_tokens)
    });
    assert!(
        cached * 100 >= input * 80,
        "{cached} of {input} from the cache: {usage:?}"
    );
    assert!(
        usage[1].cache_write_tokens > 0 && usage[1].cached_input_tokens > 0,
        "{usage:?}"
    );
}

#[tokio::test]
async fn a_temperature_reaches_each_provider_as_the_decimal_it_was_written_as() {
    // Models that take a temperature and do not think unasked, per API.
    for (format, model) in [
        (Format::OpenAi, "llama3.1"),
        (Format::Responses, "gpt-4.1"),
        (Format::Gemini, "gemini-2.5-pro"),
        (Format::Anthropic, "claude-sonnet-4-5"),
    ] {
        let scripted = ScriptedModel::start(format).await;
        scripted.push(text("ok")).await;
        let mut req = request(vec![Message::User("hi".into())]);
        req.model = model.into();
        req.temperature = Some(0.1);
        let provider = provider(format, &scripted.base_url());
        provider.chat(&spec(format, model), &req).await.unwrap();
        let calls = scripted.calls().await;
        let sent = &calls[0].1;
        let compact = sent.replace([' ', '\n'], "");
        assert!(
            compact.contains("\"temperature\":0.1,") || compact.contains("\"temperature\":0.1}"),
            "{format:?}: {sent}"
        );
        assert!(!sent.contains("0.10000"), "{format:?}: {sent}");
    }
}
