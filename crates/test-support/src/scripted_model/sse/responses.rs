//! The Responses API's events for a whole response (openai-openapi:
//! ResponseStreamEvent and its Response*Event schemas).

use super::{pieces, Frame};
use serde_json::{json, Value};

struct Events {
    frames: Vec<Frame>,
    sequence: u64,
}

impl Events {
    fn push(&mut self, mut data: Value) {
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        self.frames.push(Frame::typed(data));
    }
}

/// An item as `response.output_item.added` announces it: still empty.
fn opening(item: &Value) -> Value {
    let mut item = item.clone();
    match item["type"].as_str().unwrap_or_default() {
        "message" => {
            item["status"] = json!("in_progress");
            item["content"] = json!([]);
        }
        "function_call" => {
            item["status"] = json!("in_progress");
            item["arguments"] = json!("");
        }
        "reasoning" => {
            // The encrypted content comes with the finished item only.
            item.as_object_mut().map(|m| m.remove("encrypted_content"));
            item["summary"] = json!([]);
        }
        _ => {}
    }
    item
}

fn message_parts(events: &mut Events, index: usize, item: &Value) {
    let item_id = item["id"].clone();
    for (part_index, part) in item["content"].as_array().into_iter().flatten().enumerate() {
        let at = json!({"item_id": item_id, "output_index": index, "content_index": part_index});
        let with = |mut fields: Value| {
            for (k, v) in at.as_object().into_iter().flatten() {
                fields[k] = v.clone();
            }
            fields
        };
        let (kind, key) = match part["type"].as_str() {
            Some("refusal") => ("refusal", "refusal"),
            _ => ("output_text", "text"),
        };
        let mut empty = part.clone();
        empty[key] = json!("");
        events.push(with(
            json!({"type": "response.content_part.added", "part": empty}),
        ));
        let whole = part[key].as_str().unwrap_or_default();
        for piece in pieces(whole) {
            let mut delta = json!({"type": format!("response.{kind}.delta"), "delta": piece});
            if kind == "output_text" {
                delta["logprobs"] = json!([]);
            }
            events.push(with(delta));
        }
        let mut done = json!({"type": format!("response.{kind}.done")});
        done[key] = json!(whole);
        if kind == "output_text" {
            done["logprobs"] = json!([]);
        }
        events.push(with(done));
        events.push(with(json!({"type": "response.content_part.done", "part": part})));
    }
}

fn call_arguments(events: &mut Events, index: usize, item: &Value) {
    let arguments = item["arguments"].as_str().unwrap_or_default();
    for piece in pieces(arguments) {
        events.push(json!({"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": index, "delta": piece}));
    }
    events.push(json!({"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": index, "arguments": arguments}));
}

pub fn frames(body: &Value) -> Vec<Frame> {
    let mut events = Events {
        frames: Vec::new(),
        sequence: 0,
    };
    let mut shell = body.clone();
    shell["status"] = json!("in_progress");
    shell["output"] = json!([]);
    shell["usage"] = Value::Null;
    shell["incomplete_details"] = Value::Null;
    events.push(json!({"type": "response.created", "response": shell}));
    events.push(json!({"type": "response.in_progress", "response": shell}));
    for (index, item) in body["output"].as_array().into_iter().flatten().enumerate() {
        events.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": opening(item)}),
        );
        match item["type"].as_str().unwrap_or_default() {
            "message" => message_parts(&mut events, index, item),
            "function_call" => call_arguments(&mut events, index, item),
            _ => {}
        }
        events.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    }
    let terminal = match body["status"].as_str() {
        Some("incomplete") => "response.incomplete",
        _ => "response.completed",
    };
    events.push(json!({"type": terminal, "response": body}));
    events.frames
}
