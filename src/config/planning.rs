//! The planning phase: what code is packed for the models, and how the sage
//! debate runs.

use super::context::{known_model, resolve_ideas_mode, IdeasMode};
use super::units::{ByteSize, HumanDuration};
use super::{positive_duration, ConfigError, ModelConfig};
use serde::Deserialize;
use std::time::Duration;

/// How a task plans before it changes code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanningMode {
    /// Several models debate (one model only: Chain of Recursive Thoughts).
    Debate,
    /// One plan from one model, no debate.
    Single,
    /// No planning; the agent starts from the request.
    Off,
}

impl PlanningMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanningMode::Debate => "debate",
            PlanningMode::Single => "single",
            PlanningMode::Off => "off",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlanningConfig {
    pub mode: PlanningMode,
    /// Most tokens of packed code a task sends to the planners.
    pub context_tokens: u64,
    /// Files larger than this are left out of a pack (and reported).
    pub max_file_bytes: u64,
    /// Debating models by name (from `llm.models`); empty: every usable one
    /// but the light ones.
    pub debaters: Vec<String>,
    /// The models of `llm.models` with `role: light`.
    pub light_models: Vec<String>,
    /// The judging model; `None`: o3 when usable, else the first debater.
    pub judge: Option<String>,
    pub rounds: u32,
    pub consensus_threshold: f64,
    /// Input + output tokens one debate may use before it wraps up.
    pub token_budget: u64,
    /// Longest a debate may take before it wraps up.
    pub time_limit: Duration,
    /// Longest one model call of a debate may take; a slower debater is left out.
    pub call_timeout: Duration,
    /// When idea options widen the debate.
    pub ideas: IdeasMode,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawPlanning {
    pub mode: String,
    pub context_tokens: u64,
    pub max_file_size: ByteSize,
    pub debaters: Vec<String>,
    pub judge: String,
    pub rounds: u32,
    pub consensus_threshold: f64,
    pub token_budget: u64,
    pub time_limit: HumanDuration,
    pub call_timeout: HumanDuration,
    pub ideas: String,
}

impl Default for RawPlanning {
    fn default() -> Self {
        RawPlanning {
            mode: "debate".into(),
            context_tokens: 120_000,
            max_file_size: ByteSize(1 << 20),
            debaters: Vec::new(),
            judge: String::new(),
            rounds: 3,
            consensus_threshold: 0.9,
            token_budget: 3_000_000,
            time_limit: HumanDuration(Duration::from_secs(20 * 60)),
            call_timeout: HumanDuration(Duration::from_secs(10 * 60)),
            ideas: "auto".into(),
        }
    }
}

pub(super) fn resolve_planning(
    raw: RawPlanning,
    models: &[ModelConfig],
) -> Result<PlanningConfig, ConfigError> {
    let mode = planning_mode(&raw.mode)?;
    if raw.context_tokens < 1_000 {
        return Err(ConfigError::invalid(
            "planning.context_tokens",
            format!(
                "{} leaves no room for code; use at least 1000 (default 120000)",
                raw.context_tokens
            ),
        ));
    }
    let debaters = debaters(&raw.debaters, models)?;
    let judge = match raw.judge.trim() {
        "" => None,
        name => Some(known_model("planning.judge", name, models)?),
    };
    check_debate_limits(&raw)?;
    Ok(PlanningConfig {
        mode,
        context_tokens: raw.context_tokens,
        max_file_bytes: raw.max_file_size.bytes(),
        debaters,
        judge,
        rounds: raw.rounds,
        consensus_threshold: raw.consensus_threshold,
        token_budget: raw.token_budget,
        time_limit: positive_duration("planning.time_limit", raw.time_limit)?,
        call_timeout: positive_duration("planning.call_timeout", raw.call_timeout)?,
        ideas: resolve_ideas_mode(&raw.ideas)?,
        light_models: models
            .iter()
            .filter(|m| m.light)
            .map(|m| m.model.clone())
            .collect(),
    })
}

fn planning_mode(text: &str) -> Result<PlanningMode, ConfigError> {
    match text.trim() {
        "debate" => Ok(PlanningMode::Debate),
        "single" => Ok(PlanningMode::Single),
        "off" => Ok(PlanningMode::Off),
        other => Err(ConfigError::invalid(
            "planning.mode",
            format!(r#""{other}" is not one of "debate", "single", "off""#),
        )),
    }
}

/// `planning.debaters`: configured models, each once.
fn debaters(names: &[String], models: &[ModelConfig]) -> Result<Vec<String>, ConfigError> {
    let mut debaters = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let name = known_model(&format!("planning.debaters[{i}]"), name, models)?;
        if debaters.contains(&name) {
            return Err(ConfigError::invalid(
                &format!("planning.debaters[{i}]"),
                format!(r#""{name}" is listed twice"#),
            ));
        }
        debaters.push(name);
    }
    Ok(debaters)
}

/// Rounds, the consensus score and the budgets that bound a debate.
fn check_debate_limits(raw: &RawPlanning) -> Result<(), ConfigError> {
    if !(1..=10).contains(&raw.rounds) {
        return Err(ConfigError::invalid(
            "planning.rounds",
            format!("{} is out of range; use 1 to 10 (default 3)", raw.rounds),
        ));
    }
    if !(raw.consensus_threshold > 0.0 && raw.consensus_threshold <= 1.0) {
        return Err(ConfigError::invalid(
            "planning.consensus_threshold",
            format!(
                "{} is not a score; use a number above 0 and at most 1 (default 0.9)",
                raw.consensus_threshold
            ),
        ));
    }
    if raw.token_budget == 0 {
        return Err(ConfigError::invalid(
            "planning.token_budget",
            "must be at least 1",
        ));
    }
    if raw.max_file_size.bytes() == 0 {
        return Err(ConfigError::invalid(
            "planning.max_file_size",
            r#"use a size above 0, e.g. "1m" (the default)"#,
        ));
    }
    Ok(())
}
