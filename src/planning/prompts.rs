//! The sage prompts (`prompts/sage/*.txt`, embedded) and how a call is
//! laid out so the providers' prompt caches hit: the system text, then the
//! packed code, then the request, and only then the phase's own part. Every
//! call of a debate starts with the same bytes up to the end of the request.

use crate::llm::{ChatRequest, Message};

pub const SYSTEM: &str = include_str!("../../prompts/sage/system.txt");
const REQUEST: &str = include_str!("../../prompts/sage/request.txt");
pub const OPINION: &str = include_str!("../../prompts/sage/opinion.txt");
pub const REVIEW: &str = include_str!("../../prompts/sage/review.txt");
pub const GENERATE: &str = include_str!("../../prompts/sage/generate.txt");
pub const CRITIQUE: &str = include_str!("../../prompts/sage/critique.txt");
pub const SYNTHESIZE: &str = include_str!("../../prompts/sage/synthesize.txt");
pub const CONSENSUS: &str = include_str!("../../prompts/sage/consensus.txt");
pub const JUDGE: &str = include_str!("../../prompts/sage/judge.txt");
pub const SELF_DEBATE: &str = include_str!("../../prompts/sage/self_debate.txt");

/// Fills `{name}` places in one pass: text put in is never scanned again,
/// so a plan that happens to contain `{id}` stays as written.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + values.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let hit = after.find('}').and_then(|close| {
            let name = &after[..close];
            values
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (close, *value))
        });
        match hit {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The shared beginning of every sage call: the system text and the packed
/// code, in the system slot (marked for caching).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub system: String,
    /// Tokens of `system` (the packed code's count plus the system text).
    pub tokens: u64,
}

impl Context {
    pub fn new(packed_xml: &str, packed_tokens: u64) -> Context {
        let head = format!("{}\n", SYSTEM.trim());
        let tokens = crate::llm::tokens::count_text(&head) + packed_tokens;
        Context {
            system: format!("{head}{packed_xml}"),
            tokens,
        }
    }
}

/// The request as every call states it, right after the context.
pub fn request_block(request: &str) -> String {
    fill(REQUEST, &[("request", request.trim())])
}

/// A call: the shared context and request, then `phase`.
pub fn call(context: &Context, request: &str, phase: &str, max_output_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: context.system.clone(),
        messages: vec![Message::User(format!(
            "{}\n{}",
            request_block(request),
            phase.trim()
        ))],
        tools: Vec::new(),
        max_output_tokens,
        temperature: None,
        reasoning_effort: None,
        cache_system: true,
        json_output: false,
    }
}

/// Plans under `## PLAN X` headings, for critique, consensus and judgement.
pub fn plans_section<'a>(plans: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    plans
        .into_iter()
        .map(|(id, text)| format!("## PLAN {id}\n\n{}\n", text.trim()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filling_does_not_rescan_what_it_put_in() {
        let out = fill(
            "MODEL {id}: {plan} {unknown} {",
            &[("id", "A"), ("plan", "uses {id}")],
        );
        assert_eq!(out, "MODEL A: uses {id} {unknown} {");
    }
}
