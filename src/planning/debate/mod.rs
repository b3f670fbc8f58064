//! `sage-plan`: the plan debate (models write plans, critique each other's and a judge picks or merges).
//!
//! - Several models: round 1, every model writes a plan in parallel, then
//!   every model critiques every other plan in parallel. Rounds 2..N: each
//!   model revises its plan with the critiques it received; the judge scores
//!   consensus (JSON); at or above the threshold the debate ends, otherwise
//!   the models critique again unless it is the last round. Finally the
//!   judge picks or merges the plans into the final plan with a confidence.
//! - One model: Chain of Recursive Thoughts. Three different initial plans,
//!   then one improved plan per round; the last one wins.
//! - `single` mode: one plan from the model the size chooses.
//!
//! Every call carries the packed code and the request (see [`prompts`]).
//! A debater that fails or times out is left out, a judge that answers no
//! valid JSON counts as "no consensus", a budget or time limit wraps the
//! debate up; each is noted in the result. Only no plan at all fails.
//! Each finished call is saved through [`Checkpoints`], so a restarted
//! debate replays what it has and pays for nothing twice.
//!
//! The parts: [`lineup`] (who debates and judges), `phases` (single plan,
//! self-debate, debate and judgement), [`parse`] (reading real models'
//! answers: critiques, consensus, confidence, the final plan, the checklist).

mod call;
mod lineup;
pub mod parse;
mod phases;

pub use lineup::{lineup, room, Lineup, Room};
pub use parse::{checklist, parse_confidence, parse_consensus};

use super::prompts::{self, Context};
use crate::config::PlanningConfig;
use crate::llm::usage::{Price, UsageReport};
use crate::llm::{ChatModel, TokenUsage};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The answer of one finished call, as saved for a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    pub model: String,
    pub text: String,
    pub usage: TokenUsage,
}

/// Where finished calls are kept (the task journal; nowhere for MCP calls).
pub trait Checkpoints: Send + Sync {
    fn load(&self, key: &str) -> Option<CallRecord>;
    fn save(&self, key: &str, record: &CallRecord);
}

/// Keeps nothing.
pub struct NoCheckpoints;

impl Checkpoints for NoCheckpoints {
    fn load(&self, _key: &str) -> Option<CallRecord> {
        None
    }
    fn save(&self, _key: &str, _record: &CallRecord) {}
}

/// What a debate reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum DebateEvent {
    /// A phase begins; `done` of about `total` calls are finished.
    Phase {
        name: String,
        done: u32,
        total: u32,
    },
    /// A call finished (`replayed`: taken from a checkpoint, not paid again).
    Call {
        step: String,
        model: String,
        usage: TokenUsage,
        replayed: bool,
    },
    Note(String),
}

pub type Observer = Arc<dyn Fn(DebateEvent) + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Debate,
    Single,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DebateSettings {
    pub method: Method,
    /// Model names; empty: every usable model that fits the context, but
    /// the light ones (while another is usable).
    pub debaters: Vec<String>,
    /// Models for light work, left out of a debate nobody named.
    pub light: Vec<String>,
    /// `None`: o3 when usable, else the first debater.
    pub judge: Option<String>,
    pub rounds: u32,
    pub threshold: f64,
    pub token_budget: u64,
    pub time_limit: Duration,
    pub call_timeout: Duration,
    pub max_output_tokens: u32,
}

impl DebateSettings {
    pub fn from_config(config: &PlanningConfig, max_output_tokens: u32) -> DebateSettings {
        DebateSettings {
            method: match config.mode {
                crate::config::PlanningMode::Single => Method::Single,
                _ => Method::Debate,
            },
            debaters: config.debaters.clone(),
            light: config.light_models.clone(),
            judge: config.judge.clone(),
            rounds: config.rounds,
            threshold: config.consensus_threshold,
            token_budget: config.token_budget,
            time_limit: config.time_limit,
            call_timeout: config.call_timeout,
            max_output_tokens,
        }
    }

    /// The defaults' debate (3 rounds, 0.9, 3M tokens, 20 minutes, 10 a
    /// call) among every usable model, for tests.
    #[cfg(test)]
    pub(crate) fn for_tests(max_output_tokens: u32) -> DebateSettings {
        DebateSettings {
            method: Method::Debate,
            debaters: Vec::new(),
            light: Vec::new(),
            judge: None,
            rounds: 3,
            threshold: 0.9,
            token_budget: 3_000_000,
            time_limit: Duration::from_secs(20 * 60),
            call_timeout: Duration::from_secs(10 * 60),
            max_output_tokens,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("no model can plan: {0}")]
    NoModel(String),
    #[error("the debate produced no plan: {0}")]
    NoPlan(String),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// `A`, `B`, ... (or `1`, `2`, ... in a self-debate).
    pub id: String,
    pub model: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Consensus {
    pub score: f64,
    /// The judge's own `consensusReached`, when it gave one.
    pub reached: Option<bool>,
    pub reasoning: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Round {
    pub number: u32,
    pub plans: Vec<Entry>,
    pub critiques: Vec<Entry>,
    pub consensus: Option<Consensus>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseUsage {
    pub phase: String,
    pub usage: TokenUsage,
    pub cost: f64,
}

#[derive(Debug, Clone)]
pub struct PlanOutcome {
    pub final_plan: String,
    pub confidence: Option<f64>,
    /// In words: who debated and who judged.
    pub method: String,
    /// How the plan was made, in a sentence for the agent that follows it
    /// (one model alone, a self-debate, judged, or not judged and why).
    pub made: String,
    pub rounds: Vec<Round>,
    /// What did not go as planned (failures, limits, garbage from the judge).
    pub notes: Vec<String>,
    pub phases: Vec<PhaseUsage>,
    pub usage: UsageReport,
    /// Calls made now, and calls replayed from checkpoints.
    pub calls: u32,
    pub replayed: u32,
}

impl PlanOutcome {
    /// The final plan's checklist items.
    pub fn checklist(&self) -> Vec<String> {
        checklist(&self.final_plan)
    }

    /// The final plan and how the debate went, for an MCP answer or a log.
    pub fn report(&self) -> String {
        let mut out = format!("{}\n\n---\n## How this plan was made\n\n", self.final_plan.trim());
        let _ = writeln!(out, "- Method: {}", self.method);
        if let Some(c) = self.confidence {
            let _ = writeln!(out, "- Judge's confidence: {c:.2}");
        }
        for round in &self.rounds {
            let _ = write!(
                out,
                "- Round {}: {} plan(s), {} critique(s)",
                round.number,
                round.plans.len(),
                round.critiques.len()
            );
            if let Some(c) = &round.consensus {
                let _ = write!(out, "; consensus {:.2} ({})", c.score, c.reasoning.trim());
            }
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "- Note: {note}");
        }
        for phase in &self.phases {
            let _ = writeln!(
                out,
                "- {}: {} input ({} cached) + {} output tokens, ${:.4}",
                phase.phase,
                phase.usage.input_tokens,
                phase.usage.cached_input_tokens,
                phase.usage.output_tokens,
                phase.cost
            );
        }
        let (cost, _) = self.usage.estimated_cost();
        let total = self.usage.total();
        let _ = writeln!(
            out,
            "- Total: {} input ({} cached) + {} output tokens, estimated ${cost:.4}; {} call(s) made, {} replayed",
            total.input_tokens, total.cached_input_tokens, total.output_tokens, self.calls, self.replayed
        );
        out
    }
}

/// Runs one planning of `request` over `context`.
pub struct Planner<'a> {
    pub model: &'a dyn ChatModel,
    pub settings: &'a DebateSettings,
    pub prices: &'a BTreeMap<String, Price>,
    pub checkpoints: &'a dyn Checkpoints,
    pub observer: Option<Observer>,
}

/// The running tally of a debate.
struct Tally {
    usage: UsageReport,
    phases: Vec<PhaseUsage>,
    notes: Vec<String>,
    calls: u32,
    replayed: u32,
    done: u32,
}

struct Run<'a> {
    planner: &'a Planner<'a>,
    context: &'a Context,
    request: &'a str,
    /// Prefix of every checkpoint key: changes when the input does.
    fingerprint: String,
    started: Instant,
    total_calls: u32,
    /// Kept for the judgement (nothing without a judge).
    reserve: call::Reserve,
    tally: Mutex<Tally>,
}

impl Planner<'_> {
    pub async fn plan(&self, context: &Context, request: &str) -> Result<PlanOutcome, PlanError> {
        let Lineup {
            debaters,
            judge,
            notes,
        } = lineup(self.settings, &self.model.models(), context.tokens)?;
        let (kind, total_calls) = match (self.settings.method, debaters.len()) {
            (Method::Single, _) => ("single", 1),
            (_, 1) => ("cort", 3 + self.settings.rounds.saturating_sub(1)),
            (_, n) => {
                let n = n as u32;
                let r = self.settings.rounds;
                // plans + critiques in round 1, then per round revisions,
                // consensus and critiques, and the judgement.
                ("debate", 2 * n + (r - 1) * (2 * n + 1) + 1)
            }
        };
        let mut hasher = Sha256::new();
        // The phases' texts too: an override changes every call.
        let texts = format!("{:?}", context.prompts.sage);
        for part in [
            kind,
            &debaters.join(","),
            &judge,
            &context.system,
            request,
            &texts,
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        hasher.update(self.settings.rounds.to_le_bytes());
        let fingerprint: String = hasher
            .finalize()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        let reserve = match kind {
            "debate" => call::Reserve::for_judge(self.settings, context.tokens, debaters.len()),
            _ => call::Reserve::default(),
        };
        let run = Run {
            planner: self,
            context,
            request,
            fingerprint,
            started: Instant::now(),
            total_calls,
            reserve,
            tally: Mutex::new(Tally {
                usage: UsageReport::new(self.prices.clone()),
                phases: Vec::new(),
                notes: Vec::new(),
                calls: 0,
                replayed: 0,
                done: 0,
            }),
        };
        for note in notes {
            run.note(note);
        }
        match kind {
            "single" => run.single().await,
            "cort" => run.self_debate(&debaters[0]).await,
            _ => run.debate(&debaters, &judge).await,
        }
    }
}

/// Letters for debaters: A, B, ..., Z, then A2, B2, ...
pub(super) fn letter(index: usize) -> String {
    let c = (b'A' + (index % 26) as u8) as char;
    match index / 26 {
        0 => c.to_string(),
        n => format!("{c}{}", n + 1),
    }
}

impl Run<'_> {
    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, note: impl Into<String>) {
        let note = note.into();
        tracing::warn!("plan debate: {note}");
        self.emit(DebateEvent::Note(note.clone()));
        self.tally().notes.push(note);
    }

    fn emit(&self, event: DebateEvent) {
        if let Some(observer) = &self.planner.observer {
            observer(event);
        }
    }

    fn phase(&self, name: &str) {
        let done = self.tally().done;
        tracing::info!(phase = name, done, total = self.total_calls, "plan debate");
        self.emit(DebateEvent::Phase {
            name: name.to_owned(),
            done,
            total: self.total_calls,
        });
    }

    fn outcome(
        self,
        final_plan: String,
        confidence: Option<f64>,
        (method, made): (String, String),
        rounds: Vec<Round>,
    ) -> PlanOutcome {
        let tally = self.tally.into_inner().unwrap_or_else(|p| p.into_inner());
        PlanOutcome {
            final_plan,
            confidence,
            method,
            made,
            rounds,
            notes: tally.notes,
            phases: tally.phases,
            usage: tally.usage,
            calls: tally.calls,
            replayed: tally.replayed,
        }
    }
}
