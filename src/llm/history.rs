//! The conversation made fit for the model that gets it, whatever happened
//! to it before: every provider refuses empty turns, opaque reasoning state
//! can only be verified by the API and model that made it (a run may fall
//! back to another provider partway), and tool-call ids must be unique
//! across the whole conversation (Anthropic refuses duplicates, and some
//! servers number their calls from 0 in every answer).

use super::catalogue::ModelSpec;
use super::{ChatRequest, Message};
use std::collections::HashMap;

/// What a tool result with no text says instead (an empty block is refused).
pub const EMPTY_RESULT: &str = "(no output)";

/// `request` as `model` may receive it:
/// - assistant turns with no text, no calls and no state are left out, and
///   the user turns they separated are joined; empty user turns go too;
/// - native turns made by another API or model lose their native state and
///   are sent in the neutral form (text and calls);
/// - a tool-call id seen before in the conversation is renamed, in the call
///   and in its result, and that turn loses its native state (which names
///   the old id);
/// - empty tool results say [`EMPTY_RESULT`];
/// - an image the model cannot take (no vision, a type or size its API
///   refuses) becomes a note with its alt text, joined to the user's text;
/// - no temperature for a model that refuses one.
pub fn for_model(request: &ChatRequest, model: &ModelSpec) -> ChatRequest {
    let mut out = request.clone();
    out.messages = prepare(&request.messages, model);
    if !model.temperature {
        out.temperature = None;
    }
    out
}

fn prepare(messages: &[Message], model: &ModelSpec) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut seen: HashMap<String, u32> = HashMap::new();
    // Renamed ids of the last assistant turn, for the results that follow it.
    let mut renamed: HashMap<String, String> = HashMap::new();
    // Base64 image bytes already in the request (the APIs cap the sum).
    let mut image_bytes = 0;
    for message in messages {
        match message {
            Message::User(text) => push_user_text(&mut out, text),
            Message::Image(image) => match super::image::refused_by(model, image, image_bytes) {
                Some(why) => push_user_text(&mut out, &image.note(&why)),
                None => {
                    image_bytes += image.data.len();
                    out.push(message.clone());
                }
            },
            Message::Assistant {
                text,
                tool_calls,
                native,
            } => {
                renamed.clear();
                let mut native = native
                    .clone()
                    .filter(|n| n.api == model.api && n.model == model.name);
                let mut calls = tool_calls.clone();
                for call in &mut calls {
                    let times = seen.entry(call.id.clone()).or_insert(0);
                    *times += 1;
                    if *times > 1 || call.id.is_empty() {
                        let fresh = format!(
                            "{}-{}",
                            if call.id.is_empty() { "call" } else { &call.id },
                            *times
                        );
                        renamed.insert(call.id.clone(), fresh.clone());
                        call.id = fresh;
                        native = None;
                    }
                }
                if text.trim().is_empty() && calls.is_empty() && native.is_none() {
                    continue;
                }
                out.push(Message::Assistant {
                    text: text.clone(),
                    tool_calls: calls,
                    native,
                });
            }
            Message::ToolResults(results) => {
                let results = results
                    .iter()
                    .map(|r| {
                        let mut r = r.clone();
                        if let Some(fresh) = renamed.get(&r.call_id) {
                            r.call_id = fresh.clone();
                        }
                        if r.content.trim().is_empty() {
                            r.content = EMPTY_RESULT.to_owned();
                        }
                        r
                    })
                    .collect();
                out.push(Message::ToolResults(results));
            }
        }
    }
    out
}

/// Appends a user text, joined to the user text before it; an empty one
/// is left out.
fn push_user_text(out: &mut Vec<Message>, text: &str) {
    if text.trim().is_empty() {
        return;
    }
    match out.last_mut() {
        Some(Message::User(previous)) => {
            previous.push_str("\n\n");
            previous.push_str(text);
        }
        _ => out.push(Message::User(text.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Api, ProviderKind};
    use crate::llm::{NativeTurn, ToolCall, ToolResult};
    use serde_json::json;

    fn spec(api: Api, name: &str) -> ModelSpec {
        ModelSpec::plain(name, ProviderKind::Anthropic, api, 100_000, 1000)
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    fn result(id: &str, content: &str) -> Message {
        Message::ToolResults(vec![ToolResult {
            call_id: id.into(),
            name: "t".into(),
            content: content.into(),
            is_error: false,
        }])
    }

    #[test]
    fn an_empty_assistant_turn_goes_and_the_user_turns_around_it_join() {
        let messages = vec![
            Message::User("Fix the bug.".into()),
            Message::assistant("", vec![]),
            Message::User("The tests fail: ...".into()),
            Message::User("  ".into()),
        ];
        let out = prepare(&messages, &spec(Api::Messages, "m"));
        assert_eq!(
            out,
            vec![Message::User("Fix the bug.\n\nThe tests fail: ...".into())]
        );
    }

    #[test]
    fn a_model_without_vision_reads_the_alt_text_and_a_vision_model_the_image() {
        let image = crate::llm::image::ImagePart {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
            alt: "the login form".into(),
            source: "https://github.com/user-attachments/assets/1".into(),
            size: Some((10, 10)),
            animated: false,
        };
        let messages = vec![
            Message::User("Fix the form.".into()),
            Message::Image(image.clone()),
        ];
        let blind = prepare(&messages, &spec(Api::Messages, "m"));
        assert_eq!(
            blind,
            vec![Message::User(
                "Fix the form.\n\n[image: the login form, not shown: this model does not take images]".into()
            )]
        );
        let mut seeing = spec(Api::Messages, "m");
        seeing.vision = true;
        assert_eq!(prepare(&messages, &seeing), messages);
    }

    #[test]
    fn native_state_reaches_only_the_api_and_model_that_made_it() {
        let native = NativeTurn {
            api: Api::Messages,
            model: "claude-a".into(),
            content: json!([{"type": "thinking", "thinking": "...", "signature": "sig"}]),
        };
        let messages = vec![
            Message::User("go".into()),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("toolu_1")],
                native: Some(native.clone()),
            },
            result("toolu_1", "done"),
        ];
        let same = prepare(&messages, &spec(Api::Messages, "claude-a"));
        assert!(matches!(&same[1], Message::Assistant { native: Some(n), .. } if *n == native));
        for other in [spec(Api::Messages, "claude-b"), spec(Api::Responses, "claude-a")] {
            let out = prepare(&messages, &other);
            assert!(
                matches!(&out[1], Message::Assistant { native: None, tool_calls, .. } if tool_calls.len() == 1)
            );
        }
    }

    #[test]
    fn repeated_call_ids_are_renamed_with_their_results_and_empty_results_say_so() {
        let messages = vec![
            Message::User("go".into()),
            Message::assistant("", vec![call("call_0")]),
            result("call_0", "first"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("call_0")],
                native: Some(NativeTurn {
                    api: Api::Messages,
                    model: "m".into(),
                    content: json!([]),
                }),
            },
            result("call_0", ""),
        ];
        let out = prepare(&messages, &spec(Api::Messages, "m"));
        let Message::Assistant {
            tool_calls, native, ..
        } = &out[3]
        else {
            panic!("{out:?}")
        };
        assert_eq!(tool_calls[0].id, "call_0-2");
        assert_eq!(*native, None);
        let Message::ToolResults(results) = &out[4] else {
            panic!("{out:?}")
        };
        assert_eq!(
            (results[0].call_id.as_str(), results[0].content.as_str()),
            ("call_0-2", EMPTY_RESULT)
        );
        let Message::ToolResults(first) = &out[2] else {
            panic!("{out:?}")
        };
        assert_eq!(first[0].call_id, "call_0");
    }
}
