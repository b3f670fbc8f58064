//! Anthropic's Messages events for a whole message (the streaming
//! reference and the SDKs' RawMessageStreamEvent types).

use super::{pieces, Frame};
use serde_json::{json, Value};

/// A content block as `content_block_start` opens it: empty.
fn opening(block: &Value) -> Value {
    match block["type"].as_str().unwrap_or_default() {
        "thinking" => json!({"type": "thinking", "thinking": "", "signature": ""}),
        "text" => json!({"type": "text", "text": ""}),
        "tool_use" => json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
        // Redacted thinking comes whole.
        _ => block.clone(),
    }
}

/// The deltas that fill `block`.
fn deltas(block: &Value) -> Vec<Value> {
    let text = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
    match block["type"].as_str().unwrap_or_default() {
        "thinking" => {
            let mut out: Vec<Value> = pieces(&text("thinking"))
                .into_iter()
                .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                .collect();
            out.push(json!({"type": "signature_delta", "signature": block["signature"]}));
            out
        }
        "text" => pieces(&text("text"))
            .into_iter()
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect(),
        "tool_use" => {
            let input = block["input"].to_string();
            if input == "{}" {
                return Vec::new();
            }
            pieces(&input)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect()
        }
        _ => Vec::new(),
    }
}

pub fn frames(body: &Value) -> Vec<Frame> {
    let mut frames = Vec::new();
    let mut start = body.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["stop_sequence"] = Value::Null;
    // Input counts come first; output grows to message_delta's count.
    start["usage"]["output_tokens"] = json!(1);
    frames.push(Frame::typed(json!({"type": "message_start", "message": start})));
    frames.push(Frame::typed(json!({"type": "ping"})));
    for (index, block) in body["content"].as_array().into_iter().flatten().enumerate() {
        frames.push(Frame::typed(
            json!({"type": "content_block_start", "index": index, "content_block": opening(block)}),
        ));
        for delta in deltas(block) {
            frames.push(Frame::typed(
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        frames.push(Frame::typed(
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    frames.push(Frame::typed(json!({
        "type": "message_delta",
        "delta": {"stop_reason": body["stop_reason"], "stop_sequence": body["stop_sequence"]},
        "usage": {"output_tokens": body["usage"]["output_tokens"]}
    })));
    frames.push(Frame::typed(json!({"type": "message_stop"})));
    frames
}
