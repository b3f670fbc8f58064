//! Chat Completions' chunks for a whole completion (openai-openapi:
//! CreateChatCompletionStreamResponse, ChatCompletionStreamResponseDelta,
//! ChatCompletionMessageToolCallChunk).

use super::{pieces, Frame};
use serde_json::{json, Value};

pub fn frames(body: &Value, include_usage: bool) -> Vec<Frame> {
    let chunk = |choices: Value| {
        let mut chunk = json!({
            "id": body["id"], "object": "chat.completion.chunk", "created": 1_767_225_600,
            "model": body["model"], "system_fingerprint": null, "choices": choices,
        });
        if include_usage {
            chunk["usage"] = Value::Null;
        }
        Frame::data(chunk.to_string())
    };
    let delta =
        |delta: Value| chunk(json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]));
    let message = &body["choices"][0]["message"];
    let mut frames = vec![delta(
        json!({"role": "assistant", "content": "", "refusal": null}),
    )];
    if let Some(text) = message["content"].as_str() {
        frames.extend(pieces(text).into_iter().map(|p| delta(json!({"content": p}))));
    }
    if let Some(refusal) = message["refusal"].as_str() {
        frames.extend(pieces(refusal).into_iter().map(|p| delta(json!({"refusal": p}))));
    }
    for (index, call) in message["tool_calls"].as_array().into_iter().flatten().enumerate() {
        frames.push(delta(json!({"tool_calls": [{
            "index": index, "id": call["id"], "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""}
        }]})));
        let arguments = call["function"]["arguments"].as_str().unwrap_or_default();
        for piece in pieces(arguments) {
            frames.push(delta(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
            ));
        }
    }
    let finish = &body["choices"][0]["finish_reason"];
    frames.push(chunk(
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]),
    ));
    if include_usage {
        let mut last = json!({
            "id": body["id"], "object": "chat.completion.chunk", "created": 1_767_225_600,
            "model": body["model"], "system_fingerprint": null, "choices": [],
        });
        last["usage"] = body["usage"].clone();
        frames.push(Frame::data(last.to_string()));
    }
    frames.push(Frame::data("[DONE]"));
    frames
}
