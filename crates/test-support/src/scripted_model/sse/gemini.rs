//! Gemini's chunks for a whole GenerateContentResponse, as
//! `streamGenerateContent` sends them: text in pieces, each function call
//! whole in its own chunk, every chunk with the prompt's count, and a last
//! chunk with the finish reason, the whole usage and, for a signed text
//! answer, the thought signature on an empty text part.

use super::pieces;
use serde_json::{json, Map, Value};

fn chunk(body: &Value, candidate: Value, usage: Value) -> Value {
    let mut chunk = json!({"candidates": [candidate], "usageMetadata": usage});
    for key in ["modelVersion", "responseId"] {
        if let Some(value) = body.get(key) {
            chunk[key] = value.clone();
        }
    }
    chunk
}

pub fn chunks(body: &Value) -> Vec<Value> {
    let Some(candidate) = body.pointer("/candidates/0") else {
        // A blocked prompt: its feedback, in one chunk.
        return vec![body.clone()];
    };
    let prompt = body
        .pointer("/usageMetadata/promptTokenCount")
        .cloned()
        .unwrap_or(json!(0));
    let running = json!({"promptTokenCount": prompt, "totalTokenCount": prompt});
    let parts = candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut signature = None;
    for part in &parts {
        let content = |parts: Value| json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        match part.get("text").and_then(Value::as_str) {
            Some(text) if part.get("functionCall").is_none() => {
                for piece in pieces(text) {
                    out.push(chunk(body, content(json!([{"text": piece}])), running.clone()));
                }
                signature = part.get("thoughtSignature").cloned();
            }
            _ => out.push(chunk(body, content(json!([part])), running.clone())),
        }
    }
    // The last chunk: the candidate's own fields, its signature if a text
    // carried one, the whole usage.
    let mut last: Map<String, Value> = candidate.as_object().cloned().unwrap_or_default();
    last.remove("content");
    match (signature, parts.is_empty()) {
        (Some(signature), _) => {
            last.insert(
                "content".into(),
                json!({"parts": [{"text": "", "thoughtSignature": signature}], "role": "model"}),
            );
        }
        (None, true) => {
            if let Some(content) = candidate.get("content") {
                last.insert("content".into(), content.clone());
            }
        }
        (None, false) => {}
    }
    let usage = body.get("usageMetadata").cloned().unwrap_or(json!({}));
    out.push(chunk(body, Value::Object(last), usage));
    out
}
