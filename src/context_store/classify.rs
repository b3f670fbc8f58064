//! The intent classifier of the context store: each message
//! of a thread goes to a light model with the classification prompt,
//! at a low temperature and in JSON mode, and comes back as at most two of
//! five labels with a reason. A classification that fails or makes no sense
//! is `UNCLEAR`, with the failure kept as the reason: the message itself is
//! never lost.

use crate::llm::usage::Meter;
use crate::llm::{ChatModel, ChatRequest, Message};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::prompts::ContextPrompts;

/// 0.1 or lower, for stable labels.
pub const TEMPERATURE: f32 = 0.1;
/// Room for a reasoning model's thoughts before its short JSON answer.
const MAX_OUTPUT_TOKENS: u32 = 4_096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Intent {
    ProblemDefinition,
    ConstraintAddition,
    Refinement,
    Question,
    Unclear,
}

impl Intent {
    pub const ALL: [Intent; 5] = [
        Intent::ProblemDefinition,
        Intent::ConstraintAddition,
        Intent::Refinement,
        Intent::Question,
        Intent::Unclear,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Intent::ProblemDefinition => "PROBLEM_DEFINITION",
            Intent::ConstraintAddition => "CONSTRAINT_ADDITION",
            Intent::Refinement => "REFINEMENT",
            Intent::Question => "QUESTION",
            Intent::Unclear => "UNCLEAR",
        }
    }

    pub fn parse(text: &str) -> Option<Intent> {
        Intent::ALL
            .into_iter()
            .find(|i| i.as_str().eq_ignore_ascii_case(text.trim()))
    }
}

/// What the classifier said of one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    /// One or two labels, never empty.
    pub intents: Vec<Intent>,
    pub reason: String,
    /// Why the classification fell back to `UNCLEAR`, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl Classification {
    pub fn unclear(failure: impl Into<String>) -> Classification {
        let failure = failure.into();
        Classification {
            intents: vec![Intent::Unclear],
            reason: format!("not classified: {failure}"),
            failure: Some(failure),
        }
    }

    pub fn has(&self, intent: Intent) -> bool {
        self.intents.contains(&intent)
    }
}

/// The classification prompt for `message`.
pub fn prompt(prompts: &ContextPrompts, message: &str) -> String {
    crate::prompts::fill(&prompts.classify, &[("message", message)])
}

/// The classification request for `message`.
pub fn request(prompts: &ContextPrompts, message: &str) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: prompts.system.clone(),
        messages: vec![Message::User(prompt(prompts, message))],
        tools: Vec::new(),
        max_output_tokens: MAX_OUTPUT_TOKENS,
        temperature: Some(TEMPERATURE),
        // As little thought as the model allows: the answer is a label.
        reasoning_effort: Some("none".into()),
        cache_system: false,
        json_output: true,
    }
}

/// Classifies `message` on `model_name` (or the router's choice). Never
/// fails: a model error or an unreadable answer gives `UNCLEAR`.
pub async fn classify(
    model: &dyn ChatModel,
    model_name: Option<&str>,
    prompts: &ContextPrompts,
    message: &str,
) -> Classification {
    classify_metered(model, model_name, prompts, message, None).await
}

/// The same, adding the call's tokens to `usage`.
pub async fn classify_metered(
    model: &dyn ChatModel,
    model_name: Option<&str>,
    prompts: &ContextPrompts,
    message: &str,
    usage: Option<&Meter>,
) -> Classification {
    let request = request(prompts, message);
    let answer = match model_name {
        Some(name) => model.chat_on(name, &request).await,
        None => model.chat(&request).await,
    };
    match answer {
        Ok(response) => {
            crate::llm::usage::record(usage, &response);
            parse(&response.text)
        }
        Err(e) => {
            tracing::warn!("the intent classifier could not be asked: {e}");
            Classification::unclear(format!("the classifier could not be asked: {e}"))
        }
    }
}

/// Reads the classifier's JSON: `{"intent": [..], "reason": ".."}`, with
/// markdown fences or text around it tolerated, unknown labels left out
/// and at most the first two kept.
pub fn parse(answer: &str) -> Classification {
    let Some(value) = json_object(answer) else {
        return Classification::unclear(format!("the answer is not a JSON object: {}", first_line(answer)));
    };
    let labels: Vec<String> = match value.get("intent") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => return Classification::unclear("the answer has no \"intent\" list"),
    };
    let mut intents = Vec::new();
    let mut unknown = Vec::new();
    for label in &labels {
        match Intent::parse(label) {
            Some(intent) if !intents.contains(&intent) => intents.push(intent),
            Some(_) => {}
            None => unknown.push(label.clone()),
        }
    }
    if intents.is_empty() {
        return Classification::unclear(if unknown.is_empty() {
            "the answer gave no label".to_owned()
        } else {
            format!("the answer gave no known label ({})", unknown.join(", "))
        });
    }
    intents.truncate(2);
    let reason = value
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_owned();
    Classification {
        intents,
        reason,
        failure: None,
    }
}

/// The first JSON object in `text` (fences and prose around it ignored).
fn json_object(text: &str) -> Option<serde_json::Map<String, Value>> {
    let text = text.trim();
    if let Ok(Value::Object(map)) = serde_json::from_str(text) {
        return Some(map);
    }
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    match serde_json::from_str(text.get(start..=end)?) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

fn first_line(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("(empty)");
    line.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_read_leniently_and_capped_at_two() {
        let c = parse(r#"{"intent": ["PROBLEM_DEFINITION", "QUESTION"], "reason": "r"}"#);
        assert_eq!(c.intents, vec![Intent::ProblemDefinition, Intent::Question]);
        let c = parse("```json\n{\"intent\": \"refinement\", \"reason\": \"x\"}\n```");
        assert_eq!(c.intents, vec![Intent::Refinement]);
        let c = parse(r#"{"intent": ["QUESTION", "REFINEMENT", "UNCLEAR"], "reason": ""}"#);
        assert_eq!(c.intents.len(), 2);
        assert!(parse("I think it is a question").failure.is_some());
        assert_eq!(parse(r#"{"intent": ["WISH"]}"#).intents, vec![Intent::Unclear]);
        assert_eq!(parse(r#"{"reason": "none"}"#).intents, vec![Intent::Unclear]);
    }

    #[test]
    fn the_prompt_is_the_classification_prompt_with_the_message_in_place() {
        let prompts = crate::prompts::Prompts::embedded();
        let p = prompt(&prompts.context, "Add a --verbose flag {message}");
        assert!(p.contains("User's message: \"\"\"\nAdd a --verbose flag {message}\n\"\"\""));
        assert!(p.contains(r#"{"intent": [String], "reason": String}"#));
    }
}
