//! The context store, idea options and whose text the
//! model sees: the settings that keep a task's goal and constraints in every
//! request, however long the run.

use super::units::HumanDuration;
use super::{ConfigError, ModelConfig};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct ContextConfig {
    /// The light model that classifies each message (from `llm.models`);
    /// `None`: the router's usual choice.
    pub classifier_model: Option<String>,
    /// Tokens the Evolving tier (constraints, refinements) may take before
    /// its older entries are summarised (never dropped).
    pub evolving_tokens: u64,
    /// Tokens of the other tiers (Mission, Recent Conversation, Current
    /// Message); past them a message is cut with a line saying so.
    pub mission_tokens: u64,
    pub recent_tokens: u64,
    pub current_tokens: u64,
    /// Messages kept whole in the Turn tier.
    pub recent_turns: usize,
    /// The agent's transcript is condensed when a request passes this many
    /// tokens.
    pub transcript_tokens: u64,
    /// Model turns at the end of the transcript that are never condensed.
    pub keep_recent_steps: usize,
    /// Stores of items untouched for this long are deleted.
    pub keep_for: Duration,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawContext {
    pub classifier_model: String,
    pub evolving_tokens: u64,
    pub mission_tokens: u64,
    pub recent_tokens: u64,
    pub current_tokens: u64,
    pub recent_turns: usize,
    pub transcript_tokens: u64,
    pub keep_recent_steps: usize,
    pub keep_for: HumanDuration,
}

impl Default for RawContext {
    fn default() -> Self {
        RawContext {
            classifier_model: String::new(),
            evolving_tokens: 8_000,
            mission_tokens: 12_000,
            recent_tokens: 6_000,
            current_tokens: 8_000,
            recent_turns: 3,
            transcript_tokens: 60_000,
            keep_recent_steps: 4,
            keep_for: HumanDuration(Duration::from_secs(180 * 24 * 3600)),
        }
    }
}

/// When a plan is widened with idea options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdeasMode {
    Always,
    Never,
    /// When the classifier found an open-ended problem definition (a
    /// problem stated together with a question).
    Auto,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IdeasConfig {
    /// The model that generates categories and options; `None`: the router's choice.
    pub model: Option<String>,
    /// Shortest time between the starts of two model calls.
    pub min_interval: Duration,
    /// Calls that may run at once (for keys with higher limits).
    pub max_parallel: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawIdeas {
    pub model: String,
    pub min_interval: HumanDuration,
    pub max_parallel: usize,
}

impl Default for RawIdeas {
    fn default() -> Self {
        RawIdeas {
            model: String::new(),
            min_interval: HumanDuration(Duration::from_secs(5)),
            max_parallel: 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TrustConfig {
    /// A maintainer's trigger label vouches for the title and body of an
    /// issue written by someone without access, as they stood when labelled.
    pub label_vouches_for_issue_text: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawTrust {
    pub label_vouches_for_issue_text: bool,
}

impl Default for RawTrust {
    fn default() -> Self {
        RawTrust {
            label_vouches_for_issue_text: true,
        }
    }
}

/// A model name from `llm.models`, or an error naming the key and the choices.
pub(super) fn known_model(key: &str, name: &str, models: &[ModelConfig]) -> Result<String, ConfigError> {
    let name = name.trim();
    if models.iter().any(|m| m.model == name) {
        return Ok(name.to_owned());
    }
    let names: Vec<&str> = models.iter().map(|m| m.model.as_str()).collect();
    Err(ConfigError::invalid(
        key,
        format!(
            r#""{name}" is not a model under llm.models (those are: {}); add it there first"#,
            names.join(", ")
        ),
    ))
}

fn optional_model(key: &str, name: &str, models: &[ModelConfig]) -> Result<Option<String>, ConfigError> {
    match name.trim() {
        "" => Ok(None),
        name => known_model(key, name, models).map(Some),
    }
}

pub(super) fn resolve_context(raw: RawContext, models: &[ModelConfig]) -> Result<ContextConfig, ConfigError> {
    for (key, value, default) in [
        ("context.evolving_tokens", raw.evolving_tokens, 8_000),
        ("context.mission_tokens", raw.mission_tokens, 12_000),
        ("context.recent_tokens", raw.recent_tokens, 6_000),
        ("context.current_tokens", raw.current_tokens, 8_000),
    ] {
        if value < 500 {
            return Err(ConfigError::invalid(
                key,
                format!("{value} is too small to hold a message; use at least 500 (default {default})"),
            ));
        }
    }
    if !(1..=10).contains(&raw.recent_turns) {
        return Err(ConfigError::invalid(
            "context.recent_turns",
            format!("{} is out of range; use 1 to 10 (default 3)", raw.recent_turns),
        ));
    }
    if raw.transcript_tokens < 4_000 {
        return Err(ConfigError::invalid(
            "context.transcript_tokens",
            format!(
                "{} leaves no room for the work; use at least 4000 (default 60000)",
                raw.transcript_tokens
            ),
        ));
    }
    if !(1..=50).contains(&raw.keep_recent_steps) {
        return Err(ConfigError::invalid(
            "context.keep_recent_steps",
            format!(
                "{} is out of range; use 1 to 50 (default 4)",
                raw.keep_recent_steps
            ),
        ));
    }
    Ok(ContextConfig {
        classifier_model: optional_model("context.classifier_model", &raw.classifier_model, models)?,
        evolving_tokens: raw.evolving_tokens,
        mission_tokens: raw.mission_tokens,
        recent_tokens: raw.recent_tokens,
        current_tokens: raw.current_tokens,
        recent_turns: raw.recent_turns,
        transcript_tokens: raw.transcript_tokens,
        keep_recent_steps: raw.keep_recent_steps,
        keep_for: super::positive_duration("context.keep_for", raw.keep_for)?,
    })
}

pub(super) fn resolve_ideas(raw: RawIdeas, models: &[ModelConfig]) -> Result<IdeasConfig, ConfigError> {
    if !(1..=16).contains(&raw.max_parallel) {
        return Err(ConfigError::invalid(
            "ideas.max_parallel",
            format!("{} is out of range; use 1 to 16 (default 1)", raw.max_parallel),
        ));
    }
    Ok(IdeasConfig {
        model: optional_model("ideas.model", &raw.model, models)?,
        min_interval: raw.min_interval.0,
        max_parallel: raw.max_parallel,
    })
}

pub(super) fn resolve_ideas_mode(text: &str) -> Result<IdeasMode, ConfigError> {
    match text.trim() {
        "always" => Ok(IdeasMode::Always),
        "never" => Ok(IdeasMode::Never),
        "auto" => Ok(IdeasMode::Auto),
        other => Err(ConfigError::invalid(
            "planning.ideas",
            format!(r#""{other}" is not one of "always", "never", "auto""#),
        )),
    }
}

pub(super) fn resolve_trust(raw: RawTrust) -> TrustConfig {
    TrustConfig {
        label_vouches_for_issue_text: raw.label_vouches_for_issue_text,
    }
}
