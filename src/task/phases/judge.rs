//! The judge of best of N: when several attempts at a change qualify
//! (their tests passed, or none passed and several changed something), one
//! model call compares them, given the request, the plan and each diff,
//! and names the one to deliver with its reason. The judge is
//! `planning.judge` when set (the debate's judge), else the router's choice.

use crate::llm::{ChatModel, ChatRequest, Message};

/// How the judge's instructions begin (the scripted model in the tests
/// knows a judgement by it).
pub(in crate::task) const JUDGE_SYSTEM: &str = "You judge candidate changes to a code base.";

const INSTRUCTIONS: &str = " Several attempts made the change a request asks for, each on its own copy of the repository. Choose the one to deliver: the one that does what was asked, correctly and completely, with the least risk for the maintainers; when two are equally good, the smaller change. Answer with JSON only: {\"choice\": <the attempt's number>, \"reason\": \"<one or two sentences for the maintainers: why this one>\"}.";

/// Characters of one attempt's diff the judge reads; the rest is cut.
const DIFF_CHARS: usize = 30_000;

/// The output room of a judgement: a number and a sentence or two.
const MAX_OUTPUT_TOKENS: u32 = 2_048;

/// One attempt as the judge reads it.
pub(in crate::task) struct Entrant<'a> {
    pub number: u32,
    /// `passed`, `exited with code 1`, `no test command`.
    pub tests: &'a str,
    pub diff: &'a str,
}

/// What the task's run knows for a judgement.
pub(in crate::task) struct Case<'a> {
    pub request: &'a str,
    pub plan: Option<&'a str>,
    pub entrants: &'a [Entrant<'a>],
}

/// The judge's choice (an entrant's number) and reason, with the answer's
/// model and usage for the run's report.
pub(in crate::task) struct Verdict {
    pub choice: u32,
    pub reason: String,
    pub model: String,
    pub usage: crate::llm::TokenUsage,
}

/// Asks `model` (on `judge` when named) to choose among `case`'s
/// entrants. An error says why no choice came (a refused call, an answer
/// that is not the JSON asked for, a number no entrant has).
pub(in crate::task) async fn judge(
    model: &dyn ChatModel,
    judge: Option<&str>,
    case: &Case<'_>,
) -> Result<Verdict, String> {
    let request = ChatRequest {
        model: String::new(),
        system: format!("{JUDGE_SYSTEM}{INSTRUCTIONS}"),
        messages: vec![Message::User(prompt(case))],
        tools: Vec::new(),
        max_output_tokens: MAX_OUTPUT_TOKENS,
        temperature: None,
        reasoning_effort: None,
        cache_system: false,
        json_output: true,
    };
    let answer = match judge {
        Some(name) => model.chat_on(name, &request).await,
        None => model.chat(&request).await,
    }
    .map_err(|e| format!("the judge's call failed: {e}"))?;
    let (choice, reason) = parse(&answer.text)?;
    if !case.entrants.iter().any(|e| e.number == choice) {
        return Err(format!(
            "the judge chose attempt {choice}, which is not among those compared"
        ));
    }
    Ok(Verdict {
        choice,
        reason,
        model: answer.model,
        usage: answer.usage,
    })
}

/// The judgement's request: the request, the plan, then each attempt.
fn prompt(case: &Case<'_>) -> String {
    let mut text = format!("## The request\n\n{}\n", case.request.trim());
    if let Some(plan) = case.plan {
        text.push_str(&format!("\n## The plan\n\n{}\n", plan.trim()));
    }
    for entrant in case.entrants {
        let diff = crate::agent::clip_result(entrant.diff, DIFF_CHARS);
        text.push_str(&format!(
            "\n## Attempt {}\n\nTests: {}\n\n{}\n",
            entrant.number,
            entrant.tests,
            crate::sanitize::fenced(&diff)
        ));
    }
    text
}

/// `{"choice": 2, "reason": "…"}`, also inside a code fence or prose.
fn parse(text: &str) -> Result<(u32, String), String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        choice: u32,
        #[serde(default)]
        reason: String,
    }
    let unreadable = || {
        format!(
            "the judge's answer is not the JSON asked for: {}",
            text.chars().take(200).collect::<String>()
        )
    };
    let (start, end) = (
        text.find('{').ok_or_else(unreadable)?,
        text.rfind('}').ok_or_else(unreadable)?,
    );
    let json = text.get(start..=end).ok_or_else(unreadable)?;
    let answer: Answer = serde_json::from_str(json).map_err(|_| unreadable())?;
    let reason = crate::sanitize::for_forge_line(answer.reason.trim(), 600);
    Ok((answer.choice, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_choice_in_a_fence_or_prose() {
        let (choice, reason) = parse("```json\n{\"choice\": 3, \"reason\": \"Smaller.\"}\n```").unwrap();
        assert_eq!((choice, reason.as_str()), (3, "Smaller."));
        assert!(parse("I pick the second").is_err());
        assert!(parse("{\"choice\": \"two\"}").is_err());
    }

    #[test]
    fn the_prompt_holds_the_request_the_plan_and_each_diff() {
        let entrants = [
            Entrant {
                number: 2,
                tests: "passed",
                diff: "+print('Hello, world')",
            },
            Entrant {
                number: 3,
                tests: "passed",
                diff: "+print('Hello, world!')\n+extra",
            },
        ];
        let text = prompt(&Case {
            request: "Greet the world",
            plan: Some("1. Change the greeting"),
            entrants: &entrants,
        });
        for part in [
            "Greet the world",
            "1. Change the greeting",
            "## Attempt 2",
            "## Attempt 3",
            "+extra",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
    }
}
