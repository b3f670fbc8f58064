//! The phases of a planning: one plan, the self-debate (Chain of Recursive
//! Thoughts) with one model, and the debate of several models with its
//! judgement.

use super::call::Ask;
use super::parse::{clip, critiques_of, final_plan, parse_confidence, parse_consensus};
use super::{letter, prompts, Consensus, Entry, PlanError, PlanOutcome, Round, Run};
use futures_util::future::join_all;

impl Run<'_> {
    pub(super) async fn single(self) -> Result<PlanOutcome, PlanError> {
        self.phase("single plan");
        let part = prompts::fill(&self.context.prompts.sage.generate, &[("id", "A")]);
        let text = self
            .call("single", "single plan", None, &part, Ask::Debate)
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
        let round = one_plan_round(1, "A".into(), &model, &text);
        let made =
            format!("One model ({model}) read the code and wrote this plan; no other model reviewed it.");
        Ok(self.outcome(text, None, (format!("one plan by {model}"), made), vec![round]))
    }

    /// Chain of Recursive Thoughts with one model.
    pub(super) async fn self_debate(self, model: &str) -> Result<PlanOutcome, PlanError> {
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
            let number = n.to_string();
            let part = prompts::fill(
                &self.context.prompts.sage.self_debate,
                &[
                    ("id", "A"),
                    ("previous", &earlier_plans(&plans)),
                    ("instruction", self_debate_instruction(n, total)),
                    ("number", &number),
                ],
            );
            match self
                .call(&format!("cort/{n}"), &phase, Some(model), &part, Ask::Debate)
                .await
            {
                Ok(text) => {
                    round_records.push(one_plan_round(n as u32, number, model, &text));
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
        let made = format!(
            "One model ({model}) wrote {} plans in turn, each examining the earlier ones; this is its last. No other model reviewed it.",
            plans.len()
        );
        Ok(self.outcome(last, None, (method, made), round_records))
    }

    /// Several models plan, critique each other and revise until the judge
    /// finds consensus, a limit is reached or the rounds run out; then the
    /// judge chooses or merges.
    pub(super) async fn debate(self, debaters: &[String], judge: &str) -> Result<PlanOutcome, PlanError> {
        let settings = self.planner.settings;
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
        let mut plans = self.first_plans(&mut active).await?;
        let mut current = Round {
            number: 1,
            plans: plans.clone(),
            critiques: Vec::new(),
            consensus: None,
        };
        let mut stop_reason: Option<String> = None;
        if plans.len() < 2 {
            stop_reason = Some(ONLY_ONE_LEFT.into());
        } else if settings.rounds > 1 {
            stop_reason = self.limit_reached();
            if stop_reason.is_none() {
                current.critiques = self.critiques(1, &active, &plans).await;
            }
        }
        let mut rounds = vec![current];
        if stop_reason.is_none() {
            stop_reason = self
                .later_rounds(judge, &mut active, &mut plans, &mut rounds)
                .await;
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
        self.judgement(debaters, judge, method, plans, rounds).await
    }

    /// Round 1: every debater's plan, in parallel. Debaters that wrote
    /// none leave the debate; with no plan at all there is nothing to do.
    async fn first_plans(&self, active: &mut Vec<(String, String)>) -> Result<Vec<Entry>, PlanError> {
        self.phase("round 1: plans");
        let part_for = |id: &str| prompts::fill(&self.context.prompts.sage.generate, &[("id", id)]);
        let answers = join_all(active.iter().map(|(id, model)| {
            let part = part_for(id);
            async move {
                self.call(
                    &format!("r1/plan/{id}"),
                    "round 1: plans",
                    Some(model),
                    &part,
                    Ask::Debate,
                )
                .await
            }
        }))
        .await;
        let plans = self.keep_answers(active, answers, "round 1 plan");
        if plans.is_empty() {
            return Err(PlanError::NoPlan(format!(
                "no debater wrote a plan: {}",
                self.tally().notes.join("; ")
            )));
        }
        Ok(plans)
    }

    /// Rounds 2 and on: revisions, the judge's consensus check, and
    /// critiques for the next round. Returns why the debate stopped early
    /// (`None`: consensus, no revision, or the rounds ran out).
    async fn later_rounds(
        &self,
        judge: &str,
        active: &mut Vec<(String, String)>,
        plans: &mut Vec<Entry>,
        rounds: &mut Vec<Round>,
    ) -> Option<String> {
        let settings = self.planner.settings;
        for round in 2..=settings.rounds {
            if let Some(why) = self.limit_reached() {
                return Some(why);
            }
            let critiques = rounds.last().map(|r| r.critiques.clone()).unwrap_or_default();
            let revised = self.revisions(round, active, plans, &critiques).await;
            // A debater that failed to revise keeps its earlier plan out of the debate.
            if revised.is_empty() {
                self.note(format!(
                    "no debater revised its plan in round {round}; the last plans stand"
                ));
                return None;
            }
            *plans = revised;
            let mut current = Round {
                number: round,
                plans: plans.clone(),
                critiques: Vec::new(),
                consensus: None,
            };
            if plans.len() < 2 {
                rounds.push(current);
                return Some(ONLY_ONE_LEFT.into());
            }
            current.consensus = self.consensus(round, judge, plans).await;
            // Reached at the operator's threshold, unless the judge itself
            // says it is not (its score and its word disagree: debate on).
            let reached = current
                .consensus
                .as_ref()
                .is_some_and(|c| c.score >= settings.threshold && c.reached != Some(false));
            if reached {
                rounds.push(current);
                tracing::info!(round, "plan debate reached consensus");
                return None;
            }
            if round < settings.rounds {
                if let Some(why) = self.limit_reached() {
                    rounds.push(current);
                    return Some(why);
                }
                current.critiques = self.critiques(round, active, plans).await;
            }
            rounds.push(current);
        }
        None
    }

    /// Revisions in parallel, each with the critiques of its own plan;
    /// debaters whose revision failed leave the debate.
    async fn revisions(
        &self,
        round: u32,
        active: &mut Vec<(String, String)>,
        plans: &[Entry],
        critiques: &[Entry],
    ) -> Vec<Entry> {
        let phase = format!("round {round}: revisions");
        self.phase(&phase);
        let answers = join_all(active.iter().map(|(id, model)| {
            let own = plans
                .iter()
                .find(|p| &p.id == id)
                .map(|p| p.text.clone())
                .unwrap_or_default();
            let received = critiques_of(id, critiques);
            let part = prompts::fill(
                &self.context.prompts.sage.synthesize,
                &[("id", id), ("plan", own.trim()), ("critiques", &received)],
            );
            let phase = &phase;
            async move {
                self.call(
                    &format!("r{round}/plan/{id}"),
                    phase,
                    Some(model),
                    &part,
                    Ask::Debate,
                )
                .await
            }
        }))
        .await;
        self.keep_answers(active, answers, &format!("round {round} revision"))
    }

    /// The judge's consensus check of this round's plans; an answer that
    /// fails or cannot be read lets the debate go on.
    async fn consensus(&self, round: u32, judge: &str, plans: &[Entry]) -> Option<Consensus> {
        let phase = format!("round {round}: consensus");
        self.phase(&phase);
        let threshold = format!("{}", self.planner.settings.threshold);
        let plans_text = prompts::plans_section(plans.iter().map(|p| (p.id.as_str(), p.text.as_str())));
        let part = prompts::fill(
            &self.context.prompts.sage.consensus,
            &[("plans", &plans_text), ("threshold", &threshold)],
        );
        match self
            .call(
                &format!("r{round}/consensus"),
                &phase,
                Some(judge),
                &part,
                Ask::Consensus,
            )
            .await
        {
            Ok(answer) => {
                let consensus = parse_consensus(&answer);
                if consensus.is_none() {
                    self.note(format!(
                        "the judge's consensus answer in round {round} was not the JSON asked for; the debate goes on: {}",
                        clip(&answer, 200)
                    ));
                }
                consensus
            }
            Err(e) => {
                self.note(format!(
                    "the consensus check of round {round} failed ({e}); the debate goes on"
                ));
                None
            }
        }
    }

    /// The judge chooses or merges the last plans. A lone plan stands
    /// unjudged; without the judge's answer the first plan stands.
    async fn judgement(
        self,
        debaters: &[String],
        judge: &str,
        method: String,
        mut plans: Vec<Entry>,
        rounds: Vec<Round>,
    ) -> Result<PlanOutcome, PlanError> {
        if plans.len() == 1 {
            let only = plans.remove(0);
            let method = format!(
                "{method}; the only plan left, by {} ({}), stands",
                only.model, only.id
            );
            let made = format!(
                "{} models were to debate, but only the plan of {} was left (the others failed), so it was neither critiqued nor judged.",
                debaters.len(),
                only.model
            );
            return Ok(self.outcome(only.text, None, (method, made), rounds));
        }
        self.phase("judgement");
        // The judge always runs: its share of time and tokens was kept.
        let plans_text = prompts::plans_section(plans.iter().map(|p| (p.id.as_str(), p.text.as_str())));
        let part = prompts::fill(&self.context.prompts.sage.judge, &[("plans", &plans_text)]);
        let judged = self
            .call("judge", "judgement", Some(judge), &part, Ask::Judge)
            .await;
        let models = debaters.join(", ");
        match judged {
            Ok(answer) => {
                let confidence = parse_confidence(&answer);
                let plan = final_plan(&answer);
                let made = format!(
                    "{} models ({models}) wrote and critiqued plans over {} round(s); the judge, {judge}, chose or merged them into this plan{}.",
                    debaters.len(),
                    rounds.len(),
                    confidence
                        .map(|c| format!(" with a confidence of {c:.2}"))
                        .unwrap_or_default()
                );
                Ok(self.outcome(plan, confidence, (method, made), rounds))
            }
            Err(e) => {
                let first = plans.remove(0);
                self.note(format!(
                    "the judge gave no plan ({e}); the plan of {} ({}) was taken as it stands",
                    first.model, first.id
                ));
                let made = format!(
                    "{} models ({models}) wrote and critiqued plans, but the judge ({judge}) gave no answer, so this is the plan of {} as it stands, not judged.",
                    debaters.len(),
                    first.model
                );
                Ok(self.outcome(first.text, None, (method, made), rounds))
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
            let part = prompts::fill(
                &self.context.prompts.sage.critique,
                &[("id", id), ("plans", &others)],
            );
            let phase = &phase;
            async move {
                let answer = self
                    .call(
                        &format!("r{round}/critique/{id}"),
                        phase,
                        Some(model),
                        &part,
                        Ask::Debate,
                    )
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

/// A round of one model's one plan (the single plan, a self-debate's step).
fn one_plan_round(number: u32, id: String, model: &str, text: &str) -> Round {
    Round {
        number,
        plans: vec![Entry {
            id,
            model: model.to_owned(),
            text: text.to_owned(),
        }],
        critiques: Vec::new(),
        consensus: None,
    }
}

/// Why a debate stops when one debater is left.
const ONLY_ONE_LEFT: &str = "only one plan is left, so there is nothing to debate";

/// The self-debate's earlier plans, numbered, for the next prompt.
fn earlier_plans(plans: &[String]) -> String {
    if plans.is_empty() {
        return String::new();
    }
    let listed: Vec<String> = plans
        .iter()
        .enumerate()
        .map(|(i, p)| format!("--- PLAN {} ---\n{}", i + 1, p.trim()))
        .collect();
    format!(
        "\nYou have already written these plans:\n\n{}\n",
        listed.join("\n\n")
    )
}

/// What plan `n` of `total` in the self-debate is asked for: three
/// different plans first, then improvements, the last one final.
fn self_debate_instruction(n: usize, total: usize) -> &'static str {
    if n < 3 {
        "Write a NEW implementation plan that takes a different approach from any previous plan."
    } else if n == 3 {
        "Write a third plan, again with a different approach from the previous ones."
    } else if n == total {
        "Examine every previous plan, find its weaknesses, and write your FINAL implementation plan: the best approach, overcoming their limits."
    } else {
        "Examine every previous plan, find its strengths and weaknesses, and write one improved plan that overcomes their limits."
    }
}
