//! Token counts with a real tokenizer (`o200k_base`, the encoding of
//! OpenAI's current models; see [`super::tokenizer`]): the counts of
//! tiktoken, fast enough to count a whole repository as it is packed. Text
//! is counted as the APIs count user text: `<|endoftext|>` is plain text
//! there, not a special token. Other providers count a little differently;
//! this is the estimate routing decisions are made on.

use super::{ChatRequest, Message, ToolSpec};

pub fn count_text(text: &str) -> u64 {
    super::tokenizer::count(text) as u64
}

/// Tokens a request will take as input: system prompt, messages and tools.
pub fn count_request(request: &ChatRequest) -> u64 {
    count_text(&request.system)
        + PER_MESSAGE
        + request.messages.iter().map(count_message).sum::<u64>()
        + count_tools(&request.tools)
}

/// A few tokens of framing per message, as the chat formats add them.
const PER_MESSAGE: u64 = 4;

/// Tokens of one message with its framing.
pub fn count_message(message: &Message) -> u64 {
    PER_MESSAGE
        + match message {
            Message::User(text) => count_text(text),
            Message::Assistant { text, tool_calls, .. } => {
                count_text(text)
                    + tool_calls
                        .iter()
                        .map(|c| count_text(&c.name) + count_text(&c.arguments))
                        .sum::<u64>()
            }
            Message::ToolResults(results) => {
                results.iter().map(|r| count_text(&r.content) + PER_MESSAGE).sum()
            }
            Message::Image(image) => image.estimated_tokens(),
        }
}

/// Tokens of the tool definitions.
pub fn count_tools(tools: &[ToolSpec]) -> u64 {
    tools
        .iter()
        .map(|tool| {
            count_text(&tool.name)
                + count_text(&tool.description)
                + count_text(&serde_json::Value::Object(tool.parameters.clone()).to_string())
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_real_token_counts() {
        assert_eq!(count_text(""), 0);
        assert_eq!(count_text("hello world"), 2);
        // As the APIs see user text: the special token's spelling is text.
        assert_eq!(count_text("<|endoftext|>"), 7);
        let long = "word ".repeat(1000);
        let n = count_text(&long);
        assert!((900..=1100).contains(&n), "{n}");
    }
}
