//! Gemini `generateContent` with `functionDeclarations`, `functionCall` and
//! `functionResponse`. Tool schemas are cut down to the subset Gemini accepts.

use super::http::{client, post_json};
use super::{
    answering_model, arguments_object, ChatRequest, ChatResponse, LlmError, Message, Provider, TokenUsage,
    ToolCall,
};
use crate::config::Secret;
use async_trait::async_trait;
use serde_json::{json, Map, Value};
use std::time::Duration;

pub struct Gemini {
    http: reqwest::Client,
    base_url: String,
    key: Secret,
}

impl Gemini {
    pub fn new(base_url: &str, key: Secret, timeout: Duration) -> Result<Gemini, LlmError> {
        Ok(Gemini {
            http: client(timeout)?,
            base_url: base_url.trim_end_matches('/').to_owned(),
            key,
        })
    }
}

/// Schema keywords Gemini's function declarations accept.
const ALLOWED: [&str; 15] = [
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "anyOf",
];

/// Converts an MCP (JSON Schema) tool schema to Gemini's subset: unknown
/// keywords dropped, `type: [T, "null"]` made `type: T, nullable: true`,
/// `required` kept to properties that exist. Enums and required fields stay.
pub fn gemini_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        if !ALLOWED.contains(&key.as_str()) {
            continue;
        }
        let converted = match key.as_str() {
            "properties" => match value {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), gemini_schema(s)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" => gemini_schema(value),
            "anyOf" => Value::Array(
                value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(gemini_schema)
                    .collect(),
            ),
            "type" => match value {
                Value::Array(types) => {
                    let non_null: Vec<&Value> = types.iter().filter(|t| t.as_str() != Some("null")).collect();
                    if non_null.len() < types.len() {
                        out.insert("nullable".into(), Value::Bool(true));
                    }
                    non_null
                        .first()
                        .map(|t| (*t).clone())
                        .unwrap_or_else(|| json!("string"))
                }
                other => other.clone(),
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    if let (Some(Value::Array(required)), Some(Value::Object(props))) =
        (out.get("required"), out.get("properties"))
    {
        let kept: Vec<Value> = required
            .iter()
            .filter(|r| r.as_str().is_some_and(|n| props.contains_key(n)))
            .cloned()
            .collect();
        out.insert("required".into(), Value::Array(kept));
    }
    Value::Object(out)
}

pub fn request_body(request: &ChatRequest) -> Value {
    let mut contents: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            Message::User(text) => contents.push(json!({"role": "user", "parts": [{"text": text}]})),
            Message::Assistant { text, tool_calls } => {
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(json!({"text": text}));
                }
                for call in tool_calls {
                    parts.push(json!({"functionCall": {"name": call.name, "args": arguments_object(&call.arguments)}}));
                }
                contents.push(json!({"role": "model", "parts": parts}));
            }
            Message::ToolResults(results) => {
                let parts: Vec<Value> = results
                    .iter()
                    .map(|r| {
                        let key = if r.is_error { "error" } else { "content" };
                        json!({"functionResponse": {"name": r.name, "response": {key: r.content}}})
                    })
                    .collect();
                contents.push(json!({"role": "user", "parts": parts}));
            }
        }
    }
    let mut generation = json!({"maxOutputTokens": request.max_output_tokens});
    if let Some(t) = request.temperature {
        generation["temperature"] = json!(t);
    }
    if request.json_output {
        generation["responseMimeType"] = json!("application/json");
    }
    let mut body = json!({
        "systemInstruction": {"parts": [{"text": request.system}]},
        "contents": contents,
        "generationConfig": generation,
    });
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": gemini_schema(&Value::Object(t.parameters.clone()))}))
            .collect();
        body["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    body
}

pub fn parse_response(body: &Value, requested_model: &str) -> Result<ChatResponse, LlmError> {
    let candidate = body.pointer("/candidates/0").ok_or_else(|| LlmError::Decode {
        provider: "gemini".into(),
        detail: format!(
            "no candidates in the answer{}",
            body.pointer("/promptFeedback/blockReason")
                .and_then(Value::as_str)
                .map(|r| format!(" (blocked: {r})"))
                .unwrap_or_default()
        ),
    })?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for part in candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            text.push_str(t);
        }
        if let Some(call) = part.get("functionCall") {
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("gemini-call-{}", tool_calls.len()));
            tool_calls.push(ToolCall {
                id,
                name: call
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                arguments: call
                    .get("args")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into()),
            });
        }
    }
    let usage = TokenUsage::at(
        body,
        "/usageMetadata/promptTokenCount",
        "/usageMetadata/cachedContentTokenCount",
        "/usageMetadata/candidatesTokenCount",
    );
    let model = answering_model(body, "modelVersion", requested_model);
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        model,
    })
}

#[async_trait]
impl Provider for Gemini {
    fn name(&self) -> &str {
        "gemini"
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let http = self
            .http
            .post(format!(
                "{}/v1beta/models/{}:generateContent",
                self.base_url, request.model
            ))
            .header("x-goog-api-key", self.key.expose());
        let body = post_json("gemini", http, &request_body(request)).await?;
        parse_response(&body, &request.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_lose_what_gemini_rejects_and_keep_required_and_enums() {
        let mcp = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "command": {"type": "string", "enum": ["view", "create"]},
                "count": {"type": "integer", "exclusiveMinimum": 0, "default": 3},
                "note": {"type": ["string", "null"]},
                "range": {"type": "array", "items": {"type": "integer", "examples": [1]}, "minItems": 2}
            },
            "required": ["command", "ghost"]
        });
        let out = gemini_schema(&mcp);
        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "enum": ["view", "create"]},
                    "count": {"type": "integer"},
                    "note": {"type": "string", "nullable": true},
                    "range": {"type": "array", "items": {"type": "integer"}, "minItems": 2}
                },
                "required": ["command"]
            })
        );
    }
}
