//! Who debates and who judges among the usable models.

use super::{DebateSettings, Method, PlanError};
use crate::llm::ModelInfo;

/// Who debates and who judges, and what was left out and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineup {
    pub debaters: Vec<String>,
    pub judge: String,
    pub notes: Vec<String>,
}

/// Chooses the debaters and the judge among the `usable` models for a
/// context of `context_tokens` (see [`DebateSettings`]).
pub fn lineup(
    settings: &DebateSettings,
    usable: &[ModelInfo],
    context_tokens: u64,
) -> Result<Lineup, PlanError> {
    let fitting: Vec<String> = usable
        .iter()
        .filter(|m| m.max_input_tokens >= context_tokens)
        .map(|m| m.name.clone())
        .collect();
    let mut notes = Vec::new();
    let debaters: Vec<String> = if settings.debaters.is_empty() {
        fitting.clone()
    } else {
        let mut chosen = Vec::new();
        for name in &settings.debaters {
            if fitting.contains(name) {
                chosen.push(name.clone());
            } else if usable.iter().any(|m| &m.name == name) {
                notes.push(format!(
                    "{name} was left out: the packed code ({context_tokens} tokens) exceeds its context"
                ));
            } else {
                notes.push(format!("{name} was left out: its provider's key is not set"));
            }
        }
        chosen
    };
    if debaters.is_empty() && settings.method == Method::Debate {
        return Err(PlanError::NoModel(if usable.is_empty() {
            "no model is usable; set OPENAI_API_KEY, GEMINI_API_KEY or ANTHROPIC_API_KEY (see llm.models)"
                .into()
        } else if fitting.is_empty() {
            format!(
                "the packed code ({context_tokens} tokens) fits no usable model ({})",
                usable
                    .iter()
                    .map(|m| format!("{} takes up to {}", m.name, m.max_input_tokens))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!("none of planning.debaters is usable: {}", notes.join("; "))
        }));
    }
    let judge = match &settings.judge {
        Some(j) if fitting.contains(j) => j.clone(),
        other => {
            let fallback = if fitting.iter().any(|m| m == "o3") {
                "o3".to_owned()
            } else {
                debaters.first().cloned().unwrap_or_default()
            };
            if let Some(j) = other {
                notes.push(format!(
                    "the judge {j} is not usable here; {fallback} judged instead"
                ));
            }
            fallback
        }
    };
    Ok(Lineup {
        debaters,
        judge,
        notes,
    })
}
