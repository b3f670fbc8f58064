//! Tool calls and their answers, as each model API pairs them (checked on
//! every request by [`super::provider_rules`]), and the fake's own replies
//! held to the tools the request declares.
//!
//! Every call the model made must be answered before the conversation goes
//! on, and the API says so with a 400 in its own words (the texts below are
//! the ones integrators quote in their bug reports):
//! - Chat Completions (openai-openapi: ChatCompletionRequestAssistantMessage
//!   `tool_calls`, ChatCompletionRequestToolMessage `tool_call_id`): the
//!   tool messages right after the assistant message answer each of its
//!   ids; "An assistant message with 'tool_calls' must be followed by tool
//!   messages responding to each 'tool_call_id'. The following
//!   tool_call_ids did not have response messages: ...".
//! - Responses (openai-openapi: FunctionToolCall `call_id`,
//!   FunctionCallOutputItemParam): each `function_call` has its
//!   `function_call_output` before the next message; "No tool output found
//!   for function call ...".
//! - Messages (Anthropic API reference, tool use: "tool result blocks must
//!   immediately follow their corresponding tool use blocks", and come
//!   first in the user message): "messages.N: `tool_use` ids were found
//!   without `tool_result` blocks immediately after: ..." (earlier: "Did
//!   not find 1 `tool_result` block(s) at the beginning of this message").
//! - generateContent (Gemini API reference: Content, FunctionCall,
//!   FunctionResponse; function calling guide): the turn after a function
//!   call turn holds one `functionResponse` per `functionCall`, in order,
//!   with its name; "Please ensure that the number of function response
//!   parts is equal to the number of function call parts of the function
//!   call turn.", "Please ensure that function response turn comes
//!   immediately after a function call turn.", "Please ensure that function
//!   call turn comes immediately after a user turn or after a function
//!   response turn.". A response under another call's name has no quoted
//!   text of Google's: the words for it are the fake's.
//!
//! A model only calls the tools it is given: a reply a test scripts with a
//! call to a tool the request does not declare is a mistake in the test's
//! setup, refused with a 400 that says so instead of being answered.

use super::error_shapes::{anthropic_error, gemini_error, openai_error};
use super::Format;
use serde_json::Value;
use std::collections::HashSet;

fn list(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Chat Completions: the run of `tool` messages after each assistant
/// message with `tool_calls` answers every one of its ids.
pub fn chat_completions(messages: &[Value]) -> Result<(), Value> {
    for (i, m) in messages.iter().enumerate() {
        if m["role"] != "assistant" {
            continue;
        }
        let answered: HashSet<&str> = messages[i + 1..]
            .iter()
            .take_while(|n| n["role"] == "tool")
            .filter_map(|n| n["tool_call_id"].as_str())
            .collect();
        let missing: Vec<&str> = list(&m["tool_calls"])
            .iter()
            .filter_map(|c| c["id"].as_str())
            .filter(|id| !answered.contains(id))
            .collect();
        if !missing.is_empty() {
            return Err(openai_error(
                format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                    missing.join(", ")
                ),
                Some("messages"),
            ));
        }
    }
    Ok(())
}

/// A Responses input item that is a message (typed, or an easy input
/// message with only a role).
fn is_message(item: &Value) -> bool {
    item["type"].as_str().unwrap_or("message") == "message"
}

/// Responses: each `function_call` has its `function_call_output` (same
/// `call_id`) after it and before the next message.
pub fn responses(input: &[Value]) -> Result<(), Value> {
    for (i, item) in input.iter().enumerate() {
        if item["type"] != "function_call" {
            continue;
        }
        let id = item["call_id"].as_str().unwrap_or_default();
        let answered = input[i + 1..]
            .iter()
            .take_while(|n| !is_message(n))
            .any(|n| n["type"] == "function_call_output" && n["call_id"] == id);
        if !answered {
            return Err(openai_error(
                format!("No tool output found for function call {id}."),
                Some("input"),
            ));
        }
    }
    Ok(())
}

/// Messages: the user message right after an assistant message with
/// `tool_use` blocks opens with a `tool_result` block for each of them.
pub fn messages(messages: &[Value]) -> Result<(), Value> {
    for (i, m) in messages.iter().enumerate() {
        if m["role"] != "assistant" {
            continue;
        }
        let next = messages.get(i + 1).filter(|n| n["role"] == "user");
        let answered: HashSet<&str> = next
            .map(|n| list(&n["content"]))
            .unwrap_or_default()
            .iter()
            .take_while(|b| b["type"] == "tool_result")
            .filter_map(|b| b["tool_use_id"].as_str())
            .collect();
        let missing: Vec<&str> = list(&m["content"])
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .filter_map(|b| b["id"].as_str())
            .filter(|id| !answered.contains(id))
            .collect();
        if !missing.is_empty() {
            return Err(anthropic_error(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                missing.join(", ")
            )));
        }
    }
    Ok(())
}

/// The parts of a Gemini content that hold `key` (`functionCall`,
/// `functionResponse`), as that object.
fn gemini_parts<'a>(content: &'a Value, key: &str) -> Vec<&'a Value> {
    list(&content["parts"])
        .iter()
        .filter_map(|p| p.get(key))
        .collect()
}

/// Whether a Gemini content is the user's side (a user turn, or function
/// responses under the `function` role of older clients).
fn users_side(content: &Value) -> bool {
    content["role"] == "user" || content["role"] == "function"
}

/// generateContent: a function call turn follows the user's side; the
/// content right after it answers each call, in order, under its name; and
/// function responses only ever answer the turn right before.
pub fn generate_content(contents: &[Value]) -> Result<(), Value> {
    for (i, content) in contents.iter().enumerate() {
        let previous = i.checked_sub(1).map(|p| &contents[p]);
        let calls = gemini_parts(content, "functionCall");
        let responses = gemini_parts(content, "functionResponse");
        let after_calls =
            previous.is_some_and(|p| p["role"] == "model" && !gemini_parts(p, "functionCall").is_empty());
        if !responses.is_empty() && !after_calls {
            return Err(gemini_error(
                "Please ensure that function response turn comes immediately after a function call turn."
                    .into(),
            ));
        }
        if calls.is_empty() {
            continue;
        }
        if !previous.is_some_and(users_side) {
            return Err(gemini_error(
                "Please ensure that function call turn comes immediately after a user turn or after a function response turn.".into(),
            ));
        }
        let answers = contents
            .get(i + 1)
            .map(|n| gemini_parts(n, "functionResponse"))
            .unwrap_or_default();
        if answers.len() != calls.len() {
            return Err(gemini_error(
                "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.".into(),
            ));
        }
        for (k, (call, answer)) in calls.iter().zip(&answers).enumerate() {
            if call["name"] != answer["name"] {
                return Err(gemini_error(format!(
                    "Please ensure that each function response part answers the function call part in the same position of the function call turn: contents[{}].parts function response {k} is named {}, function call {k} of contents[{i}] is named {}.",
                    i + 1,
                    answer["name"],
                    call["name"]
                )));
            }
        }
    }
    Ok(())
}

/// The names of the function tools a request declares, in `format`.
pub fn declared(format: Format, body: &Value) -> Vec<String> {
    let tools = list(&body["tools"]).iter();
    let names: Vec<&Value> = match format {
        Format::OpenAi => tools.map(|t| &t["function"]["name"]).collect(),
        Format::Responses | Format::Anthropic => tools.map(|t| &t["name"]).collect(),
        Format::Gemini => tools
            .flat_map(|t| list(&t["functionDeclarations"]))
            .map(|f| &f["name"])
            .collect(),
    };
    names
        .into_iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// Refuses a scripted reply whose `calls` (name, arguments) name a tool
/// the request (`body`) does not declare: no real model answers so, so the
/// test that scripted it is told, in `format`'s error shape.
pub fn scripted_calls(format: Format, body: &Value, calls: &[(String, String)]) -> Result<(), Value> {
    let declared = declared(format, body);
    let Some((name, _)) = calls.iter().find(|(name, _)| !declared.contains(name)) else {
        return Ok(());
    };
    let offered = match declared.is_empty() {
        true => "it declares no tools".to_owned(),
        false => format!("it declares {}", declared.join(", ")),
    };
    let message = format!(
        "Test setup error (scripted model): the scripted reply calls the tool `{name}`, which this request does not declare ({offered}). A real model only calls the tools a request declares: script a call to one of them, or check why the product did not offer `{name}`."
    );
    Err(match format {
        Format::OpenAi | Format::Responses => openai_error(message, Some("tools")),
        Format::Anthropic => anthropic_error(message),
        Format::Gemini => gemini_error(message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The message of an error in any of the three shapes.
    fn message_of(error: Value) -> String {
        error["error"]["message"].as_str().unwrap().to_owned()
    }

    #[test]
    fn chat_completions_refuses_a_call_without_its_tool_message() {
        let call = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "t", "arguments": "{}"}},
            {"id": "call_b", "type": "function", "function": {"name": "t", "arguments": "{}"}}]});
        let answer = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "x"});
        let user = json!({"role": "user", "content": "go on"});
        let fine = [
            user.clone(),
            call.clone(),
            answer("call_b"),
            answer("call_a"),
            user.clone(),
        ];
        chat_completions(&fine).unwrap();
        for broken in [
            vec![user.clone(), call.clone(), answer("call_a"), user.clone()],
            vec![
                user.clone(),
                call.clone(),
                user.clone(),
                answer("call_a"),
                answer("call_b"),
            ],
            vec![user.clone(), call.clone()],
        ] {
            let error = chat_completions(&broken).unwrap_err();
            assert_eq!(error["error"]["type"], "invalid_request_error");
            let message = message_of(error);
            assert!(
                message
                    .starts_with("An assistant message with 'tool_calls' must be followed by tool messages")
                    && message.contains("did not have response messages: ")
                    && message.ends_with("call_b"),
                "{broken:?}: {message}"
            );
        }
    }

    #[test]
    fn responses_refuses_a_function_call_without_its_output() {
        let call = json!({"type": "function_call", "call_id": "call_a", "name": "t", "arguments": "{}"});
        let output = json!({"type": "function_call_output", "call_id": "call_a", "output": "x"});
        let user = json!({"role": "user", "content": "go on"});
        responses(&[user.clone(), call.clone(), output.clone(), user.clone()]).unwrap();
        for broken in [
            vec![user.clone(), call.clone(), user.clone()],
            vec![user.clone(), call.clone(), user.clone(), output.clone()],
            vec![user.clone(), call.clone()],
        ] {
            let error = responses(&broken).unwrap_err();
            assert_eq!(error["error"]["param"], "input");
            assert!(message_of(error).contains("No tool output found for function call call_a."));
        }
    }

    #[test]
    fn messages_refuses_a_tool_use_without_its_result_right_after() {
        let user = |content: Value| json!({"role": "user", "content": content});
        let text = json!({"type": "text", "text": "go on"});
        let result = json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"});
        let call = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]});
        let go = user(json!([text.clone()]));
        messages(&[
            go.clone(),
            call.clone(),
            user(json!([result.clone(), text.clone()])),
        ])
        .unwrap();
        for broken in [
            vec![go.clone(), call.clone(), go.clone()],
            vec![
                go.clone(),
                call.clone(),
                user(json!([text.clone(), result.clone()])),
            ],
            vec![go.clone(), call.clone()],
        ] {
            let error = messages(&broken).unwrap_err();
            assert_eq!(error["error"]["type"], "invalid_request_error");
            assert!(
                message_of(error).contains("messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1."),
                "{broken:?}"
            );
        }
    }

    #[test]
    fn gemini_refuses_calls_and_responses_out_of_turn_or_unmatched() {
        let user = json!({"role": "user", "parts": [{"text": "go"}]});
        let calls = json!({"role": "model", "parts": [
            {"functionCall": {"name": "read", "args": {}}}, {"functionCall": {"name": "run", "args": {}}}]});
        let answers = |names: &[&str]| {
            let parts: Vec<Value> = names
                .iter()
                .map(|n| json!({"functionResponse": {"name": n, "response": {"content": "x"}}}))
                .collect();
            json!({"role": "user", "parts": parts})
        };
        generate_content(&[
            user.clone(),
            calls.clone(),
            answers(&["read", "run"]),
            user.clone(),
        ])
        .unwrap();
        for (broken, words) in [
            (
                vec![user.clone(), calls.clone(), user.clone()],
                "the number of function response parts",
            ),
            (
                vec![user.clone(), calls.clone(), answers(&["read"])],
                "the number of function response parts",
            ),
            (
                vec![user.clone(), calls.clone()],
                "the number of function response parts",
            ),
            (
                vec![user.clone(), answers(&["read"])],
                "function response turn comes immediately after",
            ),
            (
                vec![calls.clone(), answers(&["read", "run"])],
                "function call turn comes immediately after",
            ),
            (
                vec![user.clone(), calls.clone(), answers(&["run", "read"])],
                "is named \"run\"",
            ),
        ] {
            let error = generate_content(&broken).unwrap_err();
            assert_eq!(error["error"]["status"], "INVALID_ARGUMENT");
            assert!(message_of(error).contains(words), "{broken:?}");
        }
    }

    #[test]
    fn a_scripted_call_to_a_tool_the_request_does_not_declare_is_refused() {
        let calls = vec![("delete_everything".to_owned(), "{}".to_owned())];
        for (format, body) in [
            (
                Format::OpenAi,
                json!({"tools": [{"type": "function", "function": {"name": "read"}}]}),
            ),
            (
                Format::Responses,
                json!({"tools": [{"type": "function", "name": "read"}]}),
            ),
            (
                Format::Anthropic,
                json!({"tools": [{"name": "read", "input_schema": {}}]}),
            ),
            (
                Format::Gemini,
                json!({"tools": [{"functionDeclarations": [{"name": "read"}]}]}),
            ),
        ] {
            assert_eq!(declared(format, &body), ["read"], "{format:?}");
            scripted_calls(format, &body, &[("read".into(), "{}".into())]).unwrap();
            let error = message_of(scripted_calls(format, &body, &calls).unwrap_err());
            assert!(
                error.contains("Test setup error")
                    && error.contains("`delete_everything`")
                    && error.contains("it declares read"),
                "{format:?}: {error}"
            );
        }
        let bare = message_of(scripted_calls(Format::Gemini, &json!({}), &calls).unwrap_err());
        assert!(bare.contains("it declares no tools"), "{bare}");
    }
}
