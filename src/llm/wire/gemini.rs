//! Gemini `generateContent`'s request and answer format: pure, no I/O.
//!
//! Tools go as `functionDeclarations`, calls and their results as
//! `functionCall` and `functionResponse` parts.
//!
//! - A model turn comes back exactly as Gemini sent its parts, so every
//!   `thoughtSignature` returns on the part that carried it (Gemini 3
//!   refuses a function-calling turn without it). A turn that lost them (it
//!   came from another provider, or was condensed) carries Google's
//!   documented placeholder on its first call instead.
//! - Thinking is set from the effort (`thinkingLevel` on Gemini 3,
//!   `thinkingBudget` on 2.5); thought tokens count as output, as billed.
//! - Tool schemas go as `parametersJsonSchema`, JSON Schema as MCP servers
//!   write it, instead of the OpenAPI subset `parameters` takes (which
//!   refuses `format: "uri"`, integer enums, `additionalProperties` and more).

use crate::llm::catalogue::ModelSpec;
use crate::llm::{
    answering_model, arguments_object, count_at, made_up_call_id, temperature_json, Api, ChatRequest,
    ChatResponse, FinishReason, LlmError, Message, NativeTurn, ReasoningKind, Refusal, TokenUsage, ToolCall,
};
use serde_json::{json, Value};

/// The signature Google documents for function calls whose real signature
/// is not at hand ("skip the validator"): it costs the model its earlier
/// reasoning, not the request.
pub const PLACEHOLDER_SIGNATURE: &str = "skip_thought_signature_validator";

/// Ids forgehand gives calls that came without one; never sent to Gemini.
const MADE_UP_ID: &str = "forgehand-gemini-call-";

/// Gemini's refusals, from its error object (google.rpc.Status: `status`
/// and `message`): a prompt over the window ("The input token count (N)
/// exceeds the maximum number of tokens allowed (M).", INVALID_ARGUMENT).
/// A prompt its safety filters block is an answer (`promptFeedback`), not
/// an error: [`FinishReason::Refused`].
pub(crate) fn refusal(error: &Value) -> Option<Refusal> {
    let status = error.get("status").and_then(Value::as_str)?;
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
    (status == "INVALID_ARGUMENT" && message.contains("exceeds the maximum number of tokens"))
        .then_some(Refusal::ContextTooLong)
}

/// Appends `parts` as a turn of `role`, joined to the previous turn when
/// that has the same role (function responses followed by a user's text).
fn push_turn(contents: &mut Vec<Value>, role: &str, parts: Vec<Value>) {
    if let Some(last) = contents.last_mut() {
        if last["role"] == role {
            if let Some(existing) = last["parts"].as_array_mut() {
                existing.extend(parts);
                return;
            }
        }
    }
    contents.push(json!({"role": role, "parts": parts}));
}

fn contents(model: &ModelSpec, request: &ChatRequest) -> Vec<Value> {
    let signs = model.reasoning == ReasoningKind::Level;
    let mut contents: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            Message::User(text) => push_turn(&mut contents, "user", vec![json!({"text": text})]),
            // Blob (Gemini API reference: Part.inlineData).
            Message::Image(image) => push_turn(
                &mut contents,
                "user",
                vec![json!({"inlineData": {"mimeType": image.media_type, "data": image.data}})],
            ),
            Message::Assistant {
                native: Some(native), ..
            } if native.api == Api::GenerateContent => {
                let parts = native.content.as_array().cloned().unwrap_or_default();
                contents.push(json!({"role": "model", "parts": parts}));
            }
            Message::Assistant { text, tool_calls, .. } => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(json!({"text": text}));
                }
                for (i, call) in tool_calls.iter().enumerate() {
                    let mut function_call =
                        json!({"name": call.name, "args": arguments_object(&call.arguments)});
                    if !call.id.starts_with(MADE_UP_ID) {
                        function_call["id"] = json!(call.id);
                    }
                    let mut part = json!({"functionCall": function_call});
                    if signs && i == 0 {
                        part["thoughtSignature"] = json!(PLACEHOLDER_SIGNATURE);
                    }
                    parts.push(part);
                }
                contents.push(json!({"role": "model", "parts": parts}));
            }
            Message::ToolResults(results) => {
                let parts: Vec<Value> = results
                    .iter()
                    .map(|r| {
                        let key = if r.is_error { "error" } else { "content" };
                        let mut response = json!({"name": r.name, "response": {key: r.content}});
                        if !r.call_id.starts_with(MADE_UP_ID) {
                            response["id"] = json!(r.call_id);
                        }
                        json!({"functionResponse": response})
                    })
                    .collect();
                push_turn(&mut contents, "user", parts);
            }
        }
    }
    contents
}

fn thinking_config(model: &ModelSpec, request: &ChatRequest) -> Option<Value> {
    let effort = request
        .reasoning_effort
        .as_deref()
        .and_then(|e| model.effort(e))?;
    match model.reasoning {
        ReasoningKind::Level => Some(json!({"thinkingLevel": effort})),
        ReasoningKind::Budget => {
            let budget = match effort {
                "none" | "minimal" => 128,
                "low" => 1024,
                "medium" => 8192,
                _ => 24576,
            };
            Some(json!({"thinkingBudget": budget.min(request.max_output_tokens.saturating_sub(256))}))
        }
        _ => None,
    }
}

pub fn request_body(model: &ModelSpec, request: &ChatRequest) -> Value {
    let mut generation = json!({"maxOutputTokens": request.max_output_tokens});
    if let (Some(t), true) = (request.temperature.and_then(temperature_json), model.temperature) {
        generation["temperature"] = t;
    }
    if request.json_output {
        generation["responseMimeType"] = json!("application/json");
    }
    if let Some(thinking) = thinking_config(model, request) {
        generation["thinkingConfig"] = thinking;
    }
    let mut body = json!({
        "contents": contents(model, request),
        "generationConfig": generation,
    });
    if !request.system.trim().is_empty() {
        body["systemInstruction"] = json!({"parts": [{"text": request.system}]});
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
            .collect();
        body["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    body
}

/// Finish reasons that mean the answer was withheld.
const WITHHELD: [&str; 7] = [
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "LANGUAGE",
    "IMAGE_SAFETY",
];

fn finish_reason(candidate: &Value) -> FinishReason {
    let reason = candidate
        .get("finishReason")
        .and_then(Value::as_str)
        .unwrap_or("STOP");
    let message = candidate
        .get("finishMessage")
        .and_then(Value::as_str)
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    match reason {
        "MAX_TOKENS" => FinishReason::OutputLimit,
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => {
            FinishReason::MalformedToolCall(format!("{reason}{message}"))
        }
        r if WITHHELD.contains(&r) => {
            FinishReason::Refused(format!("Gemini withheld the answer ({reason}){message}"))
        }
        _ => FinishReason::Complete,
    }
}

pub fn parse_response(body: &Value, requested_model: &str) -> Result<ChatResponse, LlmError> {
    let usage = TokenUsage {
        input_tokens: count_at(body, "/usageMetadata/promptTokenCount"),
        cached_input_tokens: count_at(body, "/usageMetadata/cachedContentTokenCount"),
        cache_write_tokens: 0,
        // Thought tokens are billed as output.
        output_tokens: count_at(body, "/usageMetadata/candidatesTokenCount")
            + count_at(body, "/usageMetadata/thoughtsTokenCount"),
        reasoning_tokens: count_at(body, "/usageMetadata/thoughtsTokenCount"),
    };
    let model = answering_model(body, "modelVersion", requested_model);
    let Some(candidate) = body.pointer("/candidates/0") else {
        // The prompt itself was blocked: say why, in plain words.
        let reason = body
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
            .ok_or_else(|| LlmError::Decode {
                provider: "gemini".into(),
                detail: "no candidates in the answer".into(),
            })?;
        return Ok(ChatResponse {
            usage,
            model,
            finish: FinishReason::Refused(format!("Gemini refused the prompt ({reason})")),
            ..Default::default()
        });
    };
    let parts = candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for part in &parts {
        // Thought summaries (when asked for) are not the answer.
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            text.push_str(t);
        }
        if let Some(call) = part.get("functionCall") {
            let field = |key: &str| call.get(key).and_then(Value::as_str).map(str::to_owned);
            tool_calls.push(ToolCall {
                id: field("id").unwrap_or_else(|| made_up_call_id(MADE_UP_ID)),
                name: field("name").unwrap_or_default(),
                arguments: call
                    .get("args")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into()),
            });
        }
    }
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        model,
        finish: finish_reason(candidate),
        native: NativeTurn::of(Api::GenerateContent, requested_model, &parts),
    })
}
