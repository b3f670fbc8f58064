//! Keeping a long run's transcript inside a token budget without losing
//! the goal: the first message (the synthesised request with the mission
//! and every constraint) is never touched; old tool results are replaced by
//! one-line summaries and long arguments of old tool calls are shortened;
//! the latest steps stay whole. The cut moves only when the budget is
//! passed, and then as far as it can, so the transcript's beginning stays
//! byte-identical (and in the providers' prompt caches) for as long as
//! possible. The model can always read a condensed result again.

use crate::llm::{Message, ToolCall, ToolResult};
use serde_json::Value;

/// A result or an argument this short is left as it is.
const SHORT_RESULT_BYTES: usize = 400;
const SHORT_STRING_BYTES: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CondenseSettings {
    /// Condense when a request passes this many tokens.
    pub at_tokens: u64,
    /// Model turns at the end that are never condensed.
    pub keep_recent_steps: usize,
}

/// What one condensation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Condensed {
    pub results: usize,
    pub arguments: usize,
    /// Messages before this index are condensed.
    pub upto: usize,
}

/// Condenses `messages[done..cut)`, where `cut` is the start of the last
/// `keep_recent_steps` model turns. Returns `None` when there is nothing
/// (new) to condense. Message 0 is never changed.
pub fn condense(messages: &mut [Message], done: usize, keep_recent_steps: usize) -> Option<Condensed> {
    // The newest turn is never condensed: its reasoning state (a thinking
    // block, a signature) must reach the provider unchanged.
    let keep_recent_steps = keep_recent_steps.max(1);
    let turns: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, Message::Assistant { .. }))
        .map(|(i, _)| i)
        .collect();
    if turns.len() <= keep_recent_steps {
        return None;
    }
    let cut = turns[turns.len() - keep_recent_steps];
    let start = done.max(1);
    if cut <= start {
        return None;
    }
    let mut results = 0;
    let mut arguments = 0;
    for message in &mut messages[start..cut] {
        match message {
            Message::ToolResults(list) => {
                for r in list.iter_mut() {
                    if shorten_result(r) {
                        results += 1;
                    }
                }
            }
            Message::Assistant {
                tool_calls, native, ..
            } => {
                let mut edited = false;
                for call in tool_calls.iter_mut() {
                    if shorten_arguments(call) {
                        arguments += 1;
                        edited = true;
                    }
                }
                // The provider's copy would still hold the long arguments,
                // and its reasoning state belongs to the turn as it was.
                if edited {
                    *native = None;
                }
            }
            Message::User(_) | Message::Image(_) => {}
        }
    }
    Some(Condensed {
        results,
        arguments,
        upto: cut,
    })
}

/// Replaces a long result with what it was and how to see it again.
fn shorten_result(result: &mut ToolResult) -> bool {
    if result.content.len() <= SHORT_RESULT_BYTES || result.content.starts_with("[condensed") {
        return false;
    }
    let lines = result.content.lines().count();
    let first = result
        .content
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let first: String = first.chars().take(120).collect();
    result.content = format!(
        "[condensed by forgehand: {}{} of {lines} lines ({} bytes), beginning \"{first}\". It is out of date if files changed since; call the tool again to see it.]",
        result.name,
        if result.is_error { " failed with an output" } else { " returned an output" },
        result.content.len(),
    );
    true
}

/// Shortens long string values in an old call's arguments (a whole file
/// passed to `create`, say), keeping the JSON valid.
fn shorten_arguments(call: &mut ToolCall) -> bool {
    if call.arguments.len() <= SHORT_RESULT_BYTES {
        return false;
    }
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(&call.arguments) else {
        return false;
    };
    let mut changed = false;
    for value in map.values_mut() {
        if let Value::String(text) = value {
            if text.len() > SHORT_STRING_BYTES {
                *text = format!(
                    "[condensed by forgehand: {} lines, {} bytes]",
                    text.lines().count(),
                    text.len()
                );
                changed = true;
            }
        }
    }
    if changed {
        call.arguments = Value::Object(map).to_string();
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(i: usize, output: &str) -> [Message; 2] {
        [
            Message::Assistant {
                native: None,
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: format!("c{i}"),
                    name: "text_editor_create".into(),
                    arguments: serde_json::json!({"path": "a.rs", "file_text": "x\n".repeat(300)})
                        .to_string(),
                }],
            },
            Message::ToolResults(vec![ToolResult {
                call_id: format!("c{i}"),
                name: "text_editor_create".into(),
                content: output.to_owned(),
                is_error: false,
            }]),
        ]
    }

    #[test]
    fn old_steps_are_condensed_and_the_first_message_and_recent_steps_stay() {
        let long = "line of output\n".repeat(100);
        let mut messages = vec![Message::User("the mission".repeat(100))];
        for i in 0..6 {
            messages.extend(step(i, &long));
        }
        let before = messages.clone();
        let done = condense(&mut messages, 0, 2).unwrap();
        assert_eq!(done.upto, 9);
        assert_eq!((done.results, done.arguments), (4, 4));
        assert_eq!(messages[0], before[0]);
        assert_eq!(messages[9..], before[9..]);
        let Message::ToolResults(r) = &messages[2] else {
            panic!()
        };
        assert!(r[0].content.contains("100 lines"), "{}", r[0].content);
        let Message::Assistant { tool_calls, .. } = &messages[1] else {
            panic!()
        };
        let args: Value = serde_json::from_str(&tool_calls[0].arguments).unwrap();
        assert_eq!(args["path"], "a.rs");
        // Nothing new to condense until the cut can move.
        assert_eq!(condense(&mut messages, done.upto, 2), None);
    }
}
