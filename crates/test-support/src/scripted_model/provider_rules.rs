//! What each model API refuses, as it refuses it: the scripted model server
//! checks every request with these rules and answers a broken one with a
//! 400 in the provider's own error shape and words. Each rule names its
//! source (TESTING.md lists them): OpenAI's OpenAPI description
//! (openai/openai-openapi) and its published error texts, Anthropic's API
//! reference and SDK types, the Gemini API reference and google-genai types.
//! How tool calls and their answers pair up is checked in
//! [`super::tool_rules`].

use super::error_shapes::{anthropic_error, gemini_error, openai_error};
use serde_json::{json, Value};
use std::collections::HashSet;

/// Signatures and encrypted reasoning the fake itself handed out, so that a
/// made-up or altered one is refused like the real services refuse it.
#[derive(Default)]
pub struct Issued {
    pub signatures: HashSet<String>,
}

/// OpenAI models that reason (and so refuse `max_tokens` and temperatures).
fn openai_reasons(model: &str) -> bool {
    model.starts_with("gpt-5")
        || (model.starts_with('o') && model[1..].starts_with(|c: char| c.is_ascii_digit()))
}

/// GPT-5.2 and later refuse function tools on Chat Completions while they
/// reason (openai-openapi issue #541 and the error OpenAI returns).
fn refuses_tools_while_reasoning(model: &str) -> bool {
    ["gpt-5.2", "gpt-5.3", "gpt-5.4", "gpt-5.5", "gpt-5.6"]
        .iter()
        .any(|m| model.starts_with(m))
}

/// Chat Completions (openai-openapi: CreateChatCompletionRequest).
pub fn chat_completions(body: &Value) -> Result<(), Value> {
    super::image_rules::chat_completions(body)?;
    let model = body["model"].as_str().unwrap_or_default();
    // ChatCompletionStreamOptions: only with `stream: true`.
    if body.get("stream_options").is_some() && body["stream"] != json!(true) {
        return Err(openai_error(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.".into(),
            Some("stream_options"),
        ));
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if messages.is_empty() {
        return Err(openai_error(
            "[] is too short - 'messages'".into(),
            Some("messages"),
        ));
    }
    for (i, m) in messages.iter().enumerate() {
        let empty_text = m["content"].as_str().is_some_and(|t| t.trim().is_empty());
        let no_calls = m["tool_calls"].as_array().is_none_or(|c| c.is_empty());
        if (m["role"] != "assistant" && empty_text)
            || (m["role"] == "assistant" && m["content"].is_null() && no_calls)
        {
            return Err(openai_error(
                format!("Invalid 'messages[{i}].content': empty content."),
                Some(&format!("messages.[{i}].content")),
            ));
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            let answered = messages[..i]
                .iter()
                .rev()
                .find(|p| p["role"] == "assistant")
                .is_some_and(|p| {
                    p["tool_calls"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["id"] == id)
                });
            if !answered {
                return Err(openai_error(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into(),
                    Some(&format!("messages.[{i}].role")),
                ));
            }
        }
    }
    super::tool_rules::chat_completions(&messages)?;
    if openai_reasons(model) {
        if body.get("max_tokens").is_some() {
            return Err(openai_error(
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.".into(),
                Some("max_tokens"),
            ));
        }
        if let Some(t) = body
            .get("temperature")
            .and_then(Value::as_f64)
            .filter(|t| *t != 1.0)
        {
            return Err(openai_error(
                format!("Unsupported value: 'temperature' does not support {t} with this model. Only the default (1) value is supported."),
                Some("temperature"),
            ));
        }
        let tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
        if tools && refuses_tools_while_reasoning(model) && body["reasoning_effort"] != "none" {
            return Err(openai_error(
                format!("Function tools with reasoning_effort are not supported for {model} in /v1/chat/completions. To use function tools, use /v1/responses or set reasoning_effort to 'none'."),
                Some("reasoning_effort"),
            ));
        }
    }
    Ok(())
}

/// The Responses API's parameters: none of Chat Completions', and no
/// temperature for a model that reasons.
fn responses_parameters(body: &Value) -> Result<(), Value> {
    let model = body["model"].as_str().unwrap_or_default();
    for param in [
        "max_tokens",
        "messages",
        "max_completion_tokens",
        "reasoning_effort",
    ] {
        if body.get(param).is_some() {
            return Err(openai_error(
                format!("Unsupported parameter: '{param}'."),
                Some(param),
            ));
        }
    }
    if openai_reasons(model) && body.get("temperature").is_some() {
        return Err(openai_error(
            "Unsupported parameter: 'temperature' is not supported with this model.".into(),
            Some("temperature"),
        ));
    }
    Ok(())
}

/// The Responses API (openai-openapi: CreateResponse, InputItem), used
/// statelessly.
pub fn responses(body: &Value, issued: &Issued) -> Result<(), Value> {
    super::image_rules::responses(body)?;
    responses_parameters(body)?;
    let stored = body["store"].as_bool().unwrap_or(true);
    let input = body["input"].as_array().cloned().unwrap_or_default();
    if input.is_empty() {
        return Err(openai_error(
            "Invalid 'input': empty array.".into(),
            Some("input"),
        ));
    }
    let mut calls = HashSet::new();
    for (i, item) in input.iter().enumerate() {
        match item["type"].as_str().unwrap_or("message") {
            "message" => {
                let empty = match &item["content"] {
                    Value::String(t) => t.trim().is_empty(),
                    Value::Array(parts) => {
                        parts.is_empty()
                            || parts
                                .iter()
                                .all(|p| p["text"].as_str().is_some_and(|t| t.trim().is_empty()))
                    }
                    _ => true,
                };
                if empty {
                    return Err(openai_error(
                        format!("Invalid 'input[{i}].content': empty content."),
                        Some(&format!("input[{i}].content")),
                    ));
                }
            }
            "function_call" => {
                calls.insert(item["call_id"].as_str().unwrap_or_default().to_owned());
            }
            "function_call_output" => {
                let id = item["call_id"].as_str().unwrap_or_default();
                if !calls.contains(id) {
                    return Err(openai_error(
                        format!("No tool call found for function call output with call_id {id}."),
                        Some("input"),
                    ));
                }
            }
            "reasoning" => {
                let id = item["id"].as_str().unwrap_or_default();
                let encrypted = item["encrypted_content"].as_str().unwrap_or_default();
                if !stored && !issued.signatures.contains(encrypted) {
                    return Err(openai_error(
                        format!("Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."),
                        Some("input"),
                    ));
                }
                if input.get(i + 1).is_none() {
                    return Err(openai_error(
                        format!("Item '{id}' of type 'reasoning' was provided without its required following item."),
                        Some("input"),
                    ));
                }
            }
            _ => {}
        }
    }
    super::tool_rules::responses(&input)?;
    Ok(())
}

/// Claude models that think even when the request does not ask.
pub fn claude_thinks_by_default(model: &str) -> bool {
    ["claude-opus-5", "claude-sonnet-5", "claude-haiku-5"]
        .iter()
        .any(|m| model.starts_with(m))
}

/// Messages' system text and thinking settings (Anthropic API reference:
/// Messages, extended thinking).
fn messages_settings(body: &Value, thinking: bool) -> Result<(), Value> {
    match &body["system"] {
        Value::String(s) if s.trim().is_empty() => {
            return Err(anthropic_error(
                "system: text content blocks must be non-empty".into(),
            ))
        }
        Value::Array(blocks)
            if blocks
                .iter()
                .any(|b| b["text"].as_str().is_some_and(|t| t.trim().is_empty())) =>
        {
            return Err(anthropic_error(
                "system.0: text content blocks must be non-empty".into(),
            ))
        }
        _ => {}
    }
    if thinking
        && body
            .get("temperature")
            .and_then(Value::as_f64)
            .is_some_and(|t| t != 1.0)
    {
        return Err(anthropic_error(
            "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility".into(),
        ));
    }
    if let Some(budget) = body.pointer("/thinking/budget_tokens").and_then(Value::as_u64) {
        if budget < 1024 || budget >= body["max_tokens"].as_u64().unwrap_or(0) {
            return Err(anthropic_error(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024 and less than `max_tokens`".into(),
            ));
        }
    }
    Ok(())
}

/// An assistant turn `i` with tool calls, while thinking, opens with its
/// thinking (extended thinking: thinking with tool use).
fn opens_with_thinking(i: usize, blocks: &[Value]) -> Result<(), Value> {
    let first = blocks
        .first()
        .and_then(|b| b["type"].as_str())
        .unwrap_or_default();
    let calls = blocks.iter().any(|b| b["type"] == "tool_use");
    if calls && first != "thinking" && first != "redacted_thinking" {
        return Err(anthropic_error(format!(
            "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
        )));
    }
    Ok(())
}

/// Messages (Anthropic API reference: Messages, extended thinking, prompt
/// caching; SDK types MessageParam, ThinkingConfigParam).
pub fn messages(body: &Value, issued: &Issued) -> Result<(), Value> {
    super::image_rules::messages(body)?;
    let model = body["model"].as_str().unwrap_or_default();
    let thinking = body.get("thinking").is_some() || claude_thinks_by_default(model);
    messages_settings(body, thinking)?;
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if messages.first().is_some_and(|m| m["role"] != "user") {
        return Err(anthropic_error(
            "messages: first message must use the \"user\" role".into(),
        ));
    }
    let mut breakpoints = usize::from(body.pointer("/system/0/cache_control").is_some());
    let mut ids = HashSet::new();
    let last_assistant = messages.iter().rposition(|m| m["role"] == "assistant");
    for (i, m) in messages.iter().enumerate() {
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        let final_assistant = i + 1 == messages.len() && m["role"] == "assistant";
        if blocks.is_empty() && !final_assistant {
            return Err(anthropic_error(format!(
                "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
            )));
        }
        for (j, b) in blocks.iter().enumerate() {
            breakpoints += usize::from(b.get("cache_control").is_some());
            match b["type"].as_str().unwrap_or_default() {
                "text" if b["text"].as_str().is_none_or(|t| t.trim().is_empty()) => {
                    return Err(anthropic_error(format!(
                        "messages.{i}.content.{j}.text: text content blocks must be non-empty"
                    )))
                }
                "tool_use" => {
                    let id = b["id"].as_str().unwrap_or_default().to_owned();
                    if !ids.insert(id.clone()) {
                        return Err(anthropic_error(format!(
                            "messages.{i}.content.{j}: `tool_use` ids must be unique"
                        )));
                    }
                }
                "tool_result" => {
                    let id = b["tool_use_id"].as_str().unwrap_or_default();
                    let previous = i.checked_sub(1).map(|p| &messages[p]);
                    let matched = previous.is_some_and(|p| {
                        p["role"] == "assistant"
                            && p["content"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .any(|c| c["type"] == "tool_use" && c["id"] == id)
                    });
                    if !matched {
                        return Err(anthropic_error(format!(
                            "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        )));
                    }
                }
                "thinking" => {
                    let signature = b["signature"].as_str().unwrap_or_default();
                    if !issued.signatures.contains(signature) {
                        return Err(anthropic_error(format!(
                            "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                        )));
                    }
                }
                _ => {}
            }
        }
        // The turn before the newest tool results must open with its thinking.
        if thinking && Some(i) == last_assistant && i + 1 < messages.len() {
            opens_with_thinking(i, &blocks)?;
        }
    }
    super::tool_rules::messages(&messages)?;
    if breakpoints > 4 {
        return Err(anthropic_error(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        )));
    }
    Ok(())
}

/// Keywords the OpenAPI-subset `parameters` schema has (Gemini API
/// reference: Schema); anything else is an unknown field.
const GEMINI_SCHEMA_FIELDS: [&str; 19] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "items",
];

fn gemini_parameters(schema: &Value, at: &str) -> Result<(), Value> {
    let Value::Object(map) = schema else { return Ok(()) };
    for (key, value) in map {
        if !GEMINI_SCHEMA_FIELDS.contains(&key.as_str())
            && !["minimum", "maximum", "default"].contains(&key.as_str())
        {
            return Err(gemini_error(format!(
                "Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."
            )));
        }
        match key.as_str() {
            "format" if map.get("type") == Some(&json!("string")) && !["enum", "date-time"].contains(&value.as_str().unwrap_or("")) => {
                return Err(gemini_error(format!(
                    "* GenerateContentRequest.{at}.format: only 'enum' and 'date-time' are supported for STRING type"
                )))
            }
            "enum" if map.get("type") != Some(&json!("string")) => {
                return Err(gemini_error(format!("* GenerateContentRequest.{at}.enum: only allowed for STRING type")))
            }
            "properties" => {
                for (name, sub) in value.as_object().into_iter().flatten() {
                    gemini_parameters(sub, &format!("{at}.properties[{name}].value"))?;
                }
            }
            "items" => gemini_parameters(value, &format!("{at}.items"))?,
            _ => {}
        }
    }
    Ok(())
}

/// Gemini 3 models, which sign their thoughts.
pub fn gemini_signs(model: &str) -> bool {
    model.starts_with("gemini-3")
}

/// generateContent (Gemini API reference: GenerateContentRequest, Content,
/// FunctionDeclaration; thought signatures guide).
pub fn generate_content(model: &str, body: &Value, issued: &Issued) -> Result<(), Value> {
    super::image_rules::generate_content(body)?;
    if let Some(parts) = body.pointer("/systemInstruction/parts").and_then(Value::as_array) {
        if parts
            .iter()
            .any(|p| p["text"].as_str().is_some_and(|t| t.trim().is_empty()))
        {
            return Err(gemini_error("* GenerateContentRequest.system_instruction.parts[0].data: required oneof field 'data' must have one initialized field".into()));
        }
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        for (j, f) in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if f.get("parameters").is_some() && f.get("parametersJsonSchema").is_some() {
                return Err(gemini_error(format!("tools[{i}].function_declarations[{j}]: parameters and parameters_json_schema are mutually exclusive")));
            }
            if let Some(p) = f.get("parameters") {
                gemini_parameters(p, &format!("tools[{i}].function_declarations[{j}].parameters"))?;
            }
        }
    }
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    if contents.is_empty() {
        return Err(gemini_error(
            "* GenerateContentRequest.contents: contents is not specified".into(),
        ));
    }
    // The current turn starts at the last user content that has text.
    let current = contents
        .iter()
        .rposition(|c| {
            c["role"] == "user"
                && c["parts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p.get("text").is_some())
        })
        .unwrap_or(0);
    for (i, c) in contents.iter().enumerate() {
        let parts = c["parts"].as_array().cloned().unwrap_or_default();
        if parts.is_empty() {
            return Err(gemini_error(format!(
                "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
            )));
        }
        for (j, p) in parts.iter().enumerate() {
            if p["text"].as_str().is_some_and(|t| t.is_empty()) {
                return Err(gemini_error(format!("* GenerateContentRequest.contents[{i}].parts[{j}].data: required oneof field 'data' must have one initialized field")));
            }
            if let Some(sig) = p.get("thoughtSignature").and_then(Value::as_str) {
                if sig != "skip_thought_signature_validator" && !issued.signatures.contains(sig) {
                    return Err(gemini_error("Corrupted thought signature.".into()));
                }
            }
        }
        if gemini_signs(model) && c["role"] == "model" && i > current {
            if let Some((position, first)) = parts
                .iter()
                .enumerate()
                .find(|(_, p)| p.get("functionCall").is_some())
            {
                if first.get("thoughtSignature").is_none() {
                    return Err(gemini_error(format!(
                        "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                        first["functionCall"]["name"].as_str().unwrap_or_default(),
                        position + 1
                    )));
                }
            }
        }
    }
    super::tool_rules::generate_content(&contents)?;
    Ok(())
}
