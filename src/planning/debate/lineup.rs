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

/// The largest request of a planning with `debaters` models, in tokens: the
/// packed code, the plans or critiques of every debater (each at most one
/// answer long: a revision gets its own plan and the others' critiques,
/// the judge every plan), and room for the answer itself.
pub fn largest_request(settings: &DebateSettings, context_tokens: u64, debaters: usize) -> u64 {
    context_tokens + (debaters as u64 + 1) * u64::from(settings.max_output_tokens)
}

/// The largest window a debate can use, and what its answers take of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room {
    /// The model with the largest window among those that may debate.
    pub model: String,
    /// Its window, in tokens.
    pub window: u64,
    /// Debaters counted: every model that may debate.
    pub debaters: usize,
    /// Tokens its largest request carries besides the context: the
    /// debaters' plans or critiques and the room for the answer.
    pub answers: u64,
}

impl Room {
    /// The context (the packed code and the system text) that fits beside
    /// the answers; 0 when the answers alone fill the window.
    pub fn context(&self) -> u64 {
        self.window.saturating_sub(self.answers)
    }
}

/// The room for a debate's context among the `usable` models: the largest
/// window of the models that may debate, less the answers its largest
/// request carries with every one of them debating. [`lineup`] never
/// counts more debaters than that, so a context that fits this room always
/// has that model among the debaters. `None`: no model may debate (see
/// [`lineup`] for why).
pub fn room(settings: &DebateSettings, usable: &[ModelInfo]) -> Option<Room> {
    let candidates = candidates(settings, usable);
    let eligible: Vec<&ModelInfo> = if settings.debaters.is_empty() {
        candidates.iter().collect()
    } else {
        candidates
            .iter()
            .filter(|m| settings.debaters.contains(&m.name))
            .collect()
    };
    // The first of equal windows (`max_by_key` keeps the last).
    let largest = eligible.iter().rev().max_by_key(|m| m.max_input_tokens)?;
    // One plan alone is asked of one model.
    let debaters = match settings.method {
        Method::Single => 1,
        Method::Debate if settings.debaters.is_empty() => eligible.len(),
        Method::Debate => settings.debaters.len(),
    }
    .max(1);
    Some(Room {
        model: largest.name.clone(),
        window: largest.max_input_tokens,
        debaters,
        answers: largest_request(settings, 0, debaters),
    })
}

/// Chooses the debaters and the judge among the `usable` models for a
/// context of `context_tokens` (see [`DebateSettings`]). A model takes part
/// only when its window holds the largest request it will be sent, not the
/// packed code alone, so it does not fail mid-debate.
pub fn lineup(
    settings: &DebateSettings,
    usable: &[ModelInfo],
    context_tokens: u64,
) -> Result<Lineup, PlanError> {
    let usable = candidates(settings, usable);
    let expected = if settings.debaters.is_empty() {
        usable
            .iter()
            .filter(|m| m.max_input_tokens >= context_tokens)
            .count()
    } else {
        settings.debaters.len()
    };
    let needed = largest_request(settings, context_tokens, expected.max(1));
    let fitting: Vec<String> = usable
        .iter()
        .filter(|m| m.max_input_tokens >= needed)
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
                    "{name} was left out: its context cannot hold the largest request of the debate ({needed} tokens: the packed code's {context_tokens} and the plans and critiques it would be sent)"
                ));
            } else {
                notes.push(format!("{name} was left out: its provider's key is not set"));
            }
        }
        chosen
    };
    if debaters.is_empty() && settings.method == Method::Debate {
        return Err(PlanError::NoModel(no_debater(
            &usable,
            &fitting,
            (needed, context_tokens),
            &notes,
        )));
    }
    let judge = judge(settings, &fitting, &debaters, &mut notes);
    Ok(Lineup {
        debaters,
        judge,
        notes,
    })
}

/// The models that may debate. Light models debate only when named, or
/// when nothing else is usable.
fn candidates(settings: &DebateSettings, usable: &[ModelInfo]) -> Vec<ModelInfo> {
    let main: Vec<ModelInfo> = usable
        .iter()
        .filter(|m| !settings.light.contains(&m.name))
        .cloned()
        .collect();
    if settings.debaters.is_empty() && !main.is_empty() {
        main
    } else {
        usable.to_vec()
    }
}

/// Why no debater is left: no key, no window large enough for the
/// `(needed, context_tokens)` request, or every named one left out.
fn no_debater(
    usable: &[ModelInfo],
    fitting: &[String],
    (needed, context_tokens): (u64, u64),
    notes: &[String],
) -> String {
    if usable.is_empty() {
        "no model is usable; set OPENAI_API_KEY, GEMINI_API_KEY or ANTHROPIC_API_KEY (see llm.models)".into()
    } else if fitting.is_empty() {
        format!(
            "the debate's largest request ({needed} tokens: the packed code's {context_tokens} and the plans and critiques sent with it) fits no usable model ({})",
            usable
                .iter()
                .map(|m| format!("{} takes up to {}", m.name, m.max_input_tokens))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        format!("none of planning.debaters is usable: {}", notes.join("; "))
    }
}

/// The configured judge when it fits; otherwise o3 if it fits, else the
/// first debater (with a note when a configured judge was passed over).
fn judge(
    settings: &DebateSettings,
    fitting: &[String],
    debaters: &[String],
    notes: &mut Vec<String>,
) -> String {
    match &settings.judge {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(debaters: &[&str]) -> DebateSettings {
        DebateSettings {
            debaters: debaters.iter().map(|d| (*d).to_owned()).collect(),
            ..DebateSettings::for_tests(16_000)
        }
    }

    fn model(name: &str, window: u64) -> ModelInfo {
        ModelInfo {
            name: name.into(),
            max_input_tokens: window,
        }
    }

    #[test]
    fn a_window_that_holds_the_code_but_not_the_plans_is_left_out() {
        let usable = [
            model("o3", 200_000),
            model("gemini-2.5-pro", 1_000_000),
            model("claude-sonnet-4", 200_000),
        ];
        // 150K of code + 4 answers of 16K = 214K: only Gemini's window holds it.
        let l = lineup(
            &settings(&["o3", "gemini-2.5-pro", "claude-sonnet-4"]),
            &usable,
            150_000,
        )
        .unwrap();
        assert_eq!(l.debaters, vec!["gemini-2.5-pro"]);
        assert_eq!(l.judge, "gemini-2.5-pro");
        assert!(
            l.notes[0].starts_with("o3 was left out: its context cannot hold"),
            "{:?}",
            l.notes
        );
        // 100K of code + 64K fits them all.
        let all = lineup(&settings(&[]), &usable, 100_000).unwrap();
        assert_eq!(all.debaters.len(), 3);
        assert_eq!(all.judge, "o3");
    }

    #[test]
    fn a_context_that_fits_the_room_always_finds_a_debater() {
        let usable = [
            model("o3", 200_000),
            model("gemini-2.5-pro", 1_000_000),
            model("claude-sonnet-4", 200_000),
        ];
        let every = room(&settings(&[]), &usable).unwrap();
        assert_eq!(every.model, "gemini-2.5-pro");
        // Three debaters: their three plans and the answer.
        assert_eq!(every.answers, 4 * 16_000);
        let l = lineup(&settings(&[]), &usable, every.context()).unwrap();
        assert_eq!(l.debaters, vec!["gemini-2.5-pro"]);
        // Named debaters: the largest window among them.
        let named = room(&settings(&["o3", "claude-sonnet-4"]), &usable).unwrap();
        assert_eq!(
            (named.model.as_str(), named.context()),
            ("o3", 200_000 - 3 * 16_000)
        );
        assert!(lineup(&settings(&["o3", "claude-sonnet-4"]), &usable, named.context()).is_ok());
        assert!(lineup(
            &settings(&["o3", "claude-sonnet-4"]),
            &usable,
            named.context() + 1
        )
        .is_err());
        // One model of 100K: the code gets what its plan and answer leave.
        let one = room(&settings(&[]), &[model("gpt-4o-mini", 100_000)]).unwrap();
        assert_eq!(one.context(), 100_000 - 2 * 16_000);
        assert!(lineup(&settings(&[]), &[model("gpt-4o-mini", 100_000)], one.context()).is_ok());
        assert_eq!(room(&settings(&["o3"]), &[]), None);
        assert_eq!(room(&settings(&["o4"]), &usable), None);
    }

    #[test]
    fn a_light_model_debates_only_when_named_or_alone() {
        let usable = [model("o3", 200_000), model("gpt-4.1-mini", 1_000_000)];
        let light = |debaters: &[&str]| DebateSettings {
            light: vec!["gpt-4.1-mini".into()],
            ..settings(debaters)
        };
        let l = lineup(&light(&[]), &usable, 50_000).unwrap();
        assert_eq!(l.debaters, vec!["o3"]);
        let named = lineup(&light(&["o3", "gpt-4.1-mini"]), &usable, 50_000).unwrap();
        assert_eq!(named.debaters, vec!["o3", "gpt-4.1-mini"]);
        let alone = lineup(&light(&[]), &usable[1..], 50_000).unwrap();
        assert_eq!(alone.debaters, vec!["gpt-4.1-mini"]);
    }
}
