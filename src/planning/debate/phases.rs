//! The phases of a planning: one plan, the self-debate (Chain of Recursive
//! Thoughts) with one model, and the debate of several models with its
//! judgement.

use super::call::Ask;
use super::parse::{clip, critiques_of, final_plan, parse_confidence, parse_consensus};
use super::{letter, prompts, Entry, PlanError, PlanOutcome, Round, Run};
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
                &self.context.prompts.sage.self_debate,
                &[
                    ("id", "A"),
                    ("previous", &previous),
                    ("instruction", instruction),
                    ("number", &number),
                ],
            );
            match self
                .call(&format!("cort/{n}"), &phase, Some(model), &part, Ask::Debate)
                .await
            {
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
        let made = format!(
            "One model ({model}) wrote {} plans in turn, each examining the earlier ones; this is its last. No other model reviewed it.",
            plans.len()
        );
        Ok(self.outcome(last, None, (method, made), round_records))
    }

    pub(super) async fn debate(self, debaters: &[String], judge: &str) -> Result<PlanOutcome, PlanError> {
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
        let part_for = |id: &str| prompts::fill(&self.context.prompts.sage.generate, &[("id", id)]);
        let answers = join_all(active.iter().map(|(id, model)| {
            let part = part_for(id);
            async move {
                this.call(
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
                    &self.context.prompts.sage.synthesize,
                    &[("id", id), ("plan", own.trim()), ("critiques", &received)],
                );
                let phase = &phase;
                async move {
                    this.call(
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
                &self.context.prompts.sage.consensus,
                &[("plans", &plans_text), ("threshold", &threshold)],
            );
            match self
                .call(&format!("r{round}/consensus"), &phase, Some(judge), &part, Ask::Consensus)
                .await
            {
                Ok(answer) => match parse_consensus(&answer) {
                    Some(c) => current.consensus = Some(c),
                    None => self.note(format!(
                        "the judge's consensus answer in round {round} was not the JSON asked for; the debate goes on: {}",
                        clip(&answer, 200)
                    )),
                },
                Err(e) => self.note(format!("the consensus check of round {round} failed ({e}); the debate goes on")),
            }
            // Reached at the operator's threshold, unless the judge itself
            // says it is not (its score and its word disagree: debate on).
            let reached = current
                .consensus
                .as_ref()
                .is_some_and(|c| c.score >= settings.threshold && c.reached != Some(false));
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
        match judged {
            Ok(answer) => {
                let confidence = parse_confidence(&answer);
                let plan = final_plan(&answer);
                let made = format!(
                    "{} models ({}) wrote and critiqued plans over {} round(s); the judge, {judge}, chose or merged them into this plan{}.",
                    debaters.len(),
                    debaters.join(", "),
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
                    "{} models ({}) wrote and critiqued plans, but the judge ({judge}) gave no answer, so this is the plan of {} as it stands, not judged.",
                    debaters.len(),
                    debaters.join(", "),
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
