//! `sage-plan`: the plan debate of seed 000.
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

use super::prompts::{self, Context};
use crate::config::PlanningConfig;
use crate::llm::usage::{Price, UsageReport};
use crate::llm::{ChatModel, LlmError, ModelInfo, TokenUsage};
use futures_util::future::join_all;
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
    /// Model names; empty: every usable model that fits the context.
    pub debaters: Vec<String>,
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
            judge: config.judge.clone(),
            rounds: config.rounds,
            threshold: config.consensus_threshold,
            token_budget: config.token_budget,
            time_limit: config.time_limit,
            call_timeout: config.call_timeout,
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
    pub reached: bool,
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

/// `- [ ] step` lines of the plan's checklist; without one, its top-level
/// numbered steps.
pub fn checklist(plan: &str) -> Vec<String> {
    const MAX: usize = 20;
    let boxed: Vec<String> = plan
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            l.strip_prefix("- [ ]")
                .or_else(|| l.strip_prefix("- [x]"))
                .or_else(|| l.strip_prefix("* [ ]"))
                .map(|s| s.trim().to_owned())
        })
        .filter(|s| !s.is_empty())
        .take(MAX)
        .collect();
    if !boxed.is_empty() {
        return boxed;
    }
    plan.lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('\t'))
        .filter_map(|l| {
            let (number, rest) = l.split_once(". ")?;
            number.parse::<u32>().ok()?;
            Some(rest.trim().trim_matches('*').trim().to_owned())
        })
        .filter(|s| !s.is_empty())
        .take(MAX)
        .collect()
}

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
        for part in [kind, &debaters.join(","), &judge, &context.system, request] {
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
        let run = Run {
            planner: self,
            context,
            request,
            fingerprint,
            started: Instant::now(),
            total_calls,
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
fn letter(index: usize) -> String {
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

    /// Why the debate must wrap up now, if it must.
    fn limit_reached(&self) -> Option<String> {
        let settings = self.planner.settings;
        if self.started.elapsed() >= settings.time_limit {
            return Some(format!(
                "the time limit of {} s was reached (planning.time_limit)",
                settings.time_limit.as_secs()
            ));
        }
        let used = self.tally().usage.total().total();
        (used >= settings.token_budget).then(|| {
            format!(
                "the token budget was reached: {used} of {} tokens used (planning.token_budget)",
                settings.token_budget
            )
        })
    }

    /// One model call, replayed from its checkpoint when it has one.
    /// `model` `None`: the router chooses by size.
    async fn call(&self, step: &str, phase: &str, model: Option<&str>, part: &str) -> Result<String, String> {
        let key = format!("{}/{step}", self.fingerprint);
        let planner = self.planner;
        if let Some(record) = planner.checkpoints.load(&key) {
            self.account(phase, &record, true);
            self.emit(DebateEvent::Call {
                step: step.to_owned(),
                model: record.model.clone(),
                usage: record.usage,
                replayed: true,
            });
            return Ok(record.text);
        }
        let request = prompts::call(
            self.context,
            self.request,
            part,
            planner.settings.max_output_tokens,
        );
        let remaining = planner
            .settings
            .time_limit
            .checked_sub(self.started.elapsed())
            .unwrap_or_default();
        let timeout = planner
            .settings
            .call_timeout
            .min(remaining.max(Duration::from_millis(1)));
        let answer = match model {
            Some(name) => tokio::time::timeout(timeout, planner.model.chat_on(name, &request)).await,
            None => tokio::time::timeout(timeout, planner.model.chat(&request)).await,
        };
        let who = model.unwrap_or("the chosen model");
        let response = match answer {
            Err(_) => {
                return Err(format!(
                    "{who} did not answer within {} s",
                    timeout.as_secs_f64().round()
                ))
            }
            Ok(Err(e)) => return Err(describe(&e)),
            Ok(Ok(r)) => r,
        };
        if response.text.trim().is_empty() {
            return Err(format!("{who} answered with no text"));
        }
        let record = CallRecord {
            model: response.model.clone(),
            text: response.text,
            usage: response.usage,
        };
        planner.checkpoints.save(&key, &record);
        self.account(phase, &record, false);
        self.emit(DebateEvent::Call {
            step: step.to_owned(),
            model: record.model.clone(),
            usage: record.usage,
            replayed: false,
        });
        Ok(record.text)
    }

    fn account(&self, phase: &str, record: &CallRecord, replayed: bool) {
        let mut tally = self.tally();
        tally.usage.add(&record.model, record.usage);
        let cost = tally.usage.cost_of(&record.model, record.usage).unwrap_or(0.0);
        match tally.phases.iter_mut().find(|p| p.phase == phase) {
            Some(p) => {
                p.usage.add(record.usage);
                p.cost += cost;
            }
            None => tally.phases.push(PhaseUsage {
                phase: phase.to_owned(),
                usage: record.usage,
                cost,
            }),
        }
        tally.done += 1;
        if replayed {
            tally.replayed += 1;
        } else {
            tally.calls += 1;
        }
    }

    fn outcome(
        self,
        final_plan: String,
        confidence: Option<f64>,
        method: String,
        rounds: Vec<Round>,
    ) -> PlanOutcome {
        let tally = self.tally.into_inner().unwrap_or_else(|p| p.into_inner());
        PlanOutcome {
            final_plan,
            confidence,
            method,
            rounds,
            notes: tally.notes,
            phases: tally.phases,
            usage: tally.usage,
            calls: tally.calls,
            replayed: tally.replayed,
        }
    }

    async fn single(self) -> Result<PlanOutcome, PlanError> {
        self.phase("single plan");
        let part = prompts::fill(prompts::GENERATE, &[("id", "A")]);
        let text = self
            .call("single", "single plan", None, &part)
            .await
            .map_err(PlanError::NoPlan)?;
        let model = self
            .tally()
            .usage
            .per_model()
            .keys()
            .next()
            .cloned()
            .unwrap_or_default();
        let round = Round {
            number: 1,
            plans: vec![Entry {
                id: "A".into(),
                model: model.clone(),
                text: text.clone(),
            }],
            critiques: Vec::new(),
            consensus: None,
        };
        Ok(self.outcome(text, None, format!("one plan by {model}"), vec![round]))
    }

    /// Chain of Recursive Thoughts with one model.
    async fn self_debate(self, model: &str) -> Result<PlanOutcome, PlanError> {
        let rounds = self.planner.settings.rounds;
        let mut plans: Vec<String> = Vec::new();
        let mut round_records = Vec::new();
        let total = 3 + rounds.saturating_sub(1) as usize;
        for n in 1..=total {
            if n > 1 {
                if let Some(why) = self.limit_reached() {
                    self.note(format!("{why}; the self-debate ends with plan {}", plans.len()));
                    break;
                }
            }
            let phase = if n <= 3 {
                "self-debate: initial plans".to_owned()
            } else {
                format!("self-debate: round {}", n - 2)
            };
            self.phase(&phase);
            let previous = if plans.is_empty() {
                String::new()
            } else {
                let listed: Vec<String> = plans
                    .iter()
                    .enumerate()
                    .map(|(i, p)| format!("--- PLAN {} ---\n{}", i + 1, p.trim()))
                    .collect();
                format!(
                    "\nYou have already written these plans:\n\n{}\n",
                    listed.join("\n\n")
                )
            };
            let instruction = if n < 3 {
                "Write a NEW implementation plan that takes a different approach from any previous plan."
            } else if n == 3 {
                "Write a third plan, again with a different approach from the previous ones."
            } else if n == total {
                "Examine every previous plan, find its weaknesses, and write your FINAL implementation plan: the best approach, overcoming their limits."
            } else {
                "Examine every previous plan, find its strengths and weaknesses, and write one improved plan that overcomes their limits."
            };
            let number = n.to_string();
            let part = prompts::fill(
                prompts::SELF_DEBATE,
                &[
                    ("id", "A"),
                    ("previous", &previous),
                    ("instruction", instruction),
                    ("number", &number),
                ],
            );
            match self.call(&format!("cort/{n}"), &phase, Some(model), &part).await {
                Ok(text) => {
                    round_records.push(Round {
                        number: n as u32,
                        plans: vec![Entry {
                            id: number,
                            model: model.to_owned(),
                            text: text.clone(),
                        }],
                        critiques: Vec::new(),
                        consensus: None,
                    });
                    plans.push(text);
                }
                Err(e) => {
                    self.note(format!("plan {n} of the self-debate failed: {e}"));
                    if plans.is_empty() && n >= 3 {
                        break;
                    }
                }
            }
        }
        let Some(last) = plans.last().cloned() else {
            return Err(PlanError::NoPlan(format!(
                "{model} wrote no plan in the self-debate: {}",
                self.tally().notes.join("; ")
            )));
        };
        let method = format!("Chain of Recursive Thoughts by {model} ({} plans)", plans.len());
        Ok(self.outcome(last, None, method, round_records))
    }

    async fn debate(self, debaters: &[String], judge: &str) -> Result<PlanOutcome, PlanError> {
        let settings = self.planner.settings;
        // Parallel calls borrow the run; it is consumed only at the end.
        let this = &self;
        // (id, model) of the debaters still in the debate.
        let mut active: Vec<(String, String)> = debaters
            .iter()
            .enumerate()
            .map(|(i, m)| (letter(i), m.clone()))
            .collect();
        let method = format!(
            "debate of {} judged by {judge}",
            active
                .iter()
                .map(|(id, m)| format!("{m} ({id})"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut rounds: Vec<Round> = Vec::new();

        // Round 1: plans in parallel.
        self.phase("round 1: plans");
        let part_for = |id: &str| prompts::fill(prompts::GENERATE, &[("id", id)]);
        let answers = join_all(active.iter().map(|(id, model)| {
            let part = part_for(id);
            async move {
                this.call(&format!("r1/plan/{id}"), "round 1: plans", Some(model), &part)
                    .await
            }
        }))
        .await;
        let mut plans = self.keep_answers(&mut active, answers, "round 1 plan");
        if plans.is_empty() {
            return Err(PlanError::NoPlan(format!(
                "no debater wrote a plan: {}",
                self.tally().notes.join("; ")
            )));
        }
        let mut current = Round {
            number: 1,
            plans: plans.clone(),
            critiques: Vec::new(),
            consensus: None,
        };
        let mut stop_reason: Option<String> = None;
        if plans.len() < 2 {
            stop_reason = Some("only one plan is left, so there is nothing to debate".into());
        } else if settings.rounds > 1 {
            stop_reason = self.limit_reached();
            if stop_reason.is_none() {
                current.critiques = self.critiques(1, &active, &plans).await;
            }
        }
        rounds.push(current);

        let mut round = 2;
        while stop_reason.is_none() && round <= settings.rounds {
            if let Some(why) = self.limit_reached() {
                stop_reason = Some(why);
                break;
            }
            // Revisions in parallel, each with the critiques of its own plan.
            let phase = format!("round {round}: revisions");
            self.phase(&phase);
            let critiques = rounds.last().map(|r| r.critiques.clone()).unwrap_or_default();
            let answers = join_all(active.iter().map(|(id, model)| {
                let own = plans
                    .iter()
                    .find(|p| &p.id == id)
                    .map(|p| p.text.clone())
                    .unwrap_or_default();
                let received = critiques_of(id, &critiques);
                let part = prompts::fill(
                    prompts::SYNTHESIZE,
                    &[("id", id), ("plan", own.trim()), ("critiques", &received)],
                );
                let phase = &phase;
                async move {
                    this.call(&format!("r{round}/plan/{id}"), phase, Some(model), &part)
                        .await
                }
            }))
            .await;
            let revised = self.keep_answers(&mut active, answers, &format!("round {round} revision"));
            // A debater that failed to revise keeps its earlier plan out of the debate.
            if revised.is_empty() {
                self.note(format!(
                    "no debater revised its plan in round {round}; the last plans stand"
                ));
                break;
            }
            plans = revised;
            let mut current = Round {
                number: round,
                plans: plans.clone(),
                critiques: Vec::new(),
                consensus: None,
            };
            if plans.len() < 2 {
                rounds.push(current);
                stop_reason = Some("only one plan is left, so there is nothing to debate".into());
                break;
            }
            // Consensus, judged.
            let phase = format!("round {round}: consensus");
            self.phase(&phase);
            let threshold = format!("{}", settings.threshold);
            let plans_text = prompts::plans_section(plans.iter().map(|p| (p.id.as_str(), p.text.as_str())));
            let part = prompts::fill(
                prompts::CONSENSUS,
                &[("plans", &plans_text), ("threshold", &threshold)],
            );
            match self.call(&format!("r{round}/consensus"), &phase, Some(judge), &part).await {
                Ok(answer) => match parse_consensus(&answer) {
                    Some(c) => current.consensus = Some(c),
                    None => self.note(format!(
                        "the judge's consensus answer in round {round} was not the JSON asked for; the debate goes on: {}",
                        clip(&answer, 200)
                    )),
                },
                Err(e) => self.note(format!("the consensus check of round {round} failed ({e}); the debate goes on")),
            }
            let reached = current
                .consensus
                .as_ref()
                .is_some_and(|c| c.score >= settings.threshold);
            if reached {
                rounds.push(current);
                tracing::info!(round, "plan debate reached consensus");
                break;
            }
            if round < settings.rounds {
                match self.limit_reached() {
                    Some(why) => stop_reason = Some(why),
                    None => current.critiques = self.critiques(round, &active, &plans).await,
                }
            }
            rounds.push(current);
            round += 1;
        }
        if let Some(why) = &stop_reason {
            if rounds.len() < settings.rounds as usize && !why.starts_with("only one") {
                self.note(format!(
                    "{why}; the debate goes to judgement with the plans it has"
                ));
            } else if why.starts_with("only one") {
                self.note(why.clone());
            }
        }

        // Judgement.
        if plans.len() == 1 {
            let only = plans.remove(0);
            let method = format!(
                "{method}; the only plan left, by {} ({}), stands",
                only.model, only.id
            );
            return Ok(self.outcome(only.text, None, method, rounds));
        }
        self.phase("judgement");
        let timed_out = self.started.elapsed() >= settings.time_limit;
        let plans_text = prompts::plans_section(plans.iter().map(|p| (p.id.as_str(), p.text.as_str())));
        let part = prompts::fill(prompts::JUDGE, &[("plans", &plans_text)]);
        let judged = if timed_out {
            Err("no time was left for the judge".to_owned())
        } else {
            self.call("judge", "judgement", Some(judge), &part).await
        };
        match judged {
            Ok(answer) => {
                let confidence = parse_confidence(&answer);
                let plan = final_plan(&answer);
                Ok(self.outcome(plan, confidence, method, rounds))
            }
            Err(e) => {
                let first = plans.remove(0);
                self.note(format!(
                    "the judgement failed ({e}); the plan of {} ({}) was taken as it stands",
                    first.model, first.id
                ));
                Ok(self.outcome(first.text, None, method, rounds))
            }
        }
    }

    /// Critiques in parallel: each debater on every other plan.
    async fn critiques(&self, round: u32, active: &[(String, String)], plans: &[Entry]) -> Vec<Entry> {
        let phase = format!("round {round}: critiques");
        self.phase(&phase);
        let answers = join_all(active.iter().map(|(id, model)| {
            let others = prompts::plans_section(
                plans
                    .iter()
                    .filter(|p| &p.id != id)
                    .map(|p| (p.id.as_str(), p.text.as_str())),
            );
            let part = prompts::fill(prompts::CRITIQUE, &[("id", id), ("plans", &others)]);
            let phase = &phase;
            async move {
                let answer = self
                    .call(&format!("r{round}/critique/{id}"), phase, Some(model), &part)
                    .await;
                (id.clone(), model.clone(), answer)
            }
        }))
        .await;
        let mut critiques = Vec::new();
        for (id, model, answer) in answers {
            match answer {
                Ok(text) => critiques.push(Entry { id, model, text }),
                // A missing critique weakens the debate but ends nothing.
                Err(e) => self.note(format!("{model} ({id}) wrote no critique in round {round}: {e}")),
            }
        }
        critiques
    }

    /// Plans from the answers; debaters that failed leave the debate.
    fn keep_answers(
        &self,
        active: &mut Vec<(String, String)>,
        answers: Vec<Result<String, String>>,
        what: &str,
    ) -> Vec<Entry> {
        let mut kept = Vec::new();
        let mut still = Vec::new();
        for ((id, model), answer) in active.drain(..).zip(answers) {
            match answer {
                Ok(text) => {
                    kept.push(Entry {
                        id: id.clone(),
                        model: model.clone(),
                        text,
                    });
                    still.push((id, model));
                }
                Err(e) => self.note(format!("{model} ({id}) left the debate: its {what} failed: {e}")),
            }
        }
        *active = still;
        kept
    }
}

/// What the critics said about plan `id`: the `## Critique of Plan <id>`
/// section of each critique, or the whole critique when it has no sections.
fn critiques_of(id: &str, critiques: &[Entry]) -> String {
    let heading = format!("critique of plan {}", id.to_ascii_lowercase());
    let mut out = Vec::new();
    for critique in critiques.iter().filter(|c| c.id != id) {
        let lines: Vec<&str> = critique.text.lines().collect();
        let start = lines.iter().position(|l| {
            let l = l.trim_start_matches('#').trim().to_ascii_lowercase();
            l == heading || l.starts_with(&format!("{heading} ")) || l.starts_with(&format!("{heading}:"))
        });
        let section = match start {
            Some(start) => {
                let end = lines[start + 1..]
                    .iter()
                    .position(|l| l.starts_with("## ") || l.starts_with("# "))
                    .map(|e| start + 1 + e)
                    .unwrap_or(lines.len());
                lines[start..end].join("\n")
            }
            None => critique.text.clone(),
        };
        out.push(format!("### From MODEL {}\n{}", critique.id, section.trim()));
    }
    if out.is_empty() {
        "(no critiques were received)".into()
    } else {
        out.join("\n\n")
    }
}

/// The judge's JSON, also when wrapped in a code fence or surrounded by words.
pub fn parse_consensus(answer: &str) -> Option<Consensus> {
    let start = answer.find('{')?;
    let end = answer.rfind('}')?;
    let value: serde_json::Value = serde_json::from_str(answer.get(start..=end)?).ok()?;
    let score = value.get("consensusScore")?.as_f64()?;
    if !(0.0..=1.0).contains(&score) {
        return None;
    }
    Some(Consensus {
        score,
        reached: value
            .get("consensusReached")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        reasoning: value
            .get("reasoning")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned(),
    })
}

/// `Confidence Score: 0.8` anywhere in the judge's answer.
pub fn parse_confidence(answer: &str) -> Option<f64> {
    let lower = answer.to_ascii_lowercase();
    let at = lower.rfind("confidence score")?;
    let rest = &answer[at + "confidence score".len()..];
    let number: String = rest
        .trim_start_matches(|c: char| c == ':' || c == '*' || c.is_whitespace())
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    number.parse::<f64>().ok().filter(|c| (0.0..=1.0).contains(c))
}

/// From `# Final Implementation Plan` on, without the confidence line.
fn final_plan(answer: &str) -> String {
    let start = answer.find("# Final Implementation Plan").unwrap_or(0);
    answer[start..]
        .lines()
        .filter(|l| !l.to_ascii_lowercase().contains("confidence score"))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned()
}

fn describe(error: &LlmError) -> String {
    error.to_string()
}

fn clip(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].replace('\n', " ");
    if end < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consensus_json_is_found_in_fences_and_garbage_is_none() {
        let c = parse_consensus(
            "```json\n{\"consensusScore\": 0.93, \"consensusReached\": true, \"reasoning\": \"same\"}\n```",
        )
        .unwrap();
        assert_eq!((c.score, c.reached, c.reasoning.as_str()), (0.93, true, "same"));
        assert!(parse_consensus("I think they agree.").is_none());
        assert!(parse_consensus("{\"consensusScore\": 7}").is_none());
    }

    #[test]
    fn confidence_and_final_plan_are_read_from_the_judge() {
        let answer = "Some words\n# Final Implementation Plan\n1. Do it\n## Checklist\n- [ ] Write the parser\n- [ ] Test it\n\nConfidence Score: 0.85";
        assert_eq!(parse_confidence(answer), Some(0.85));
        let plan = final_plan(answer);
        assert!(plan.starts_with("# Final Implementation Plan"));
        assert!(!plan.contains("Confidence"));
        assert_eq!(checklist(&plan), vec!["Write the parser", "Test it"]);
    }

    #[test]
    fn checklist_falls_back_to_numbered_steps() {
        assert_eq!(
            checklist("# Plan\n1. First\n   1. nested\n2. **Second**\n"),
            vec!["First", "Second"]
        );
    }

    #[test]
    fn each_plan_gets_the_critique_sections_about_it() {
        let critiques = vec![
            Entry {
                id: "A".into(),
                model: "m1".into(),
                text: "## Critique of Plan B\nB is slow\n## Critique of Plan C\nC is wrong".into(),
            },
            Entry {
                id: "C".into(),
                model: "m3".into(),
                text: "Plan B lacks tests".into(),
            },
        ];
        let b = critiques_of("B", &critiques);
        assert!(
            b.contains("B is slow") && !b.contains("C is wrong") && b.contains("lacks tests"),
            "{b}"
        );
    }
}
