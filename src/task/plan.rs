//! Planning: pack the checkout (all of it when it fits
//! `planning.context_tokens`, else a selection for the request), let the
//! models debate a plan, and hand the agreed plan to the change. Each
//! finished model call is journalled, so a restarted task replays the
//! debate up to where it stopped and pays for nothing twice. With no model
//! for planning, or no plan, the task goes on without one and says why.

use super::*;
use crate::agent::plan::{PlanStep, StepStatus};
use crate::config::IdeasMode;
use crate::journal::PlanCalls;
use crate::planning::context::ContextStore;
use crate::planning::debate::{CallRecord, Checkpoints, DebateEvent, DebateSettings, PlanError, Planner};
use crate::planning::ideas::{Generator, IdeaOutput, IdeaRequest};
use crate::planning::pack::PackOptions;
use crate::planning::prompts::Context;
use crate::planning::select;

/// The whole checkout, being read and packed for the planners in the
/// background from the moment it is cloned (the sandbox starts meanwhile).
pub(super) struct PackedCode(
    tokio::task::JoinHandle<Result<select::Whole, crate::planning::pack::PackError>>,
);

impl PackedCode {
    /// Starts packing `checkout`, unless planning is off.
    pub(super) fn start(config: &crate::config::PlanningConfig, checkout: PathBuf) -> Option<PackedCode> {
        if config.mode == crate::config::PlanningMode::Off {
            return None;
        }
        let options = PackOptions {
            max_file_bytes: config.max_file_bytes,
        };
        Some(PackedCode(tokio::task::spawn_blocking(move || {
            select::read_whole(&checkout, options)
        })))
    }
}

/// The agreed plan, for the agent's prompt and the progress checklist.
pub(super) struct TaskPlan {
    pub text: String,
    pub checklist: Vec<String>,
    /// How the plan was made, as the agent is told.
    pub made: String,
}

impl TaskRun<'_> {
    pub(super) async fn plan(
        &mut self,
        code: Option<PackedCode>,
        request_text: &str,
        store: &ContextStore,
        item: &Item,
        title: Option<&str>,
    ) -> Result<Option<TaskPlan>, TaskError> {
        let env = self.env;
        let config = &env.config.planning;
        // Packing starts unless planning is off.
        let Some(code) = code else {
            return Ok(None);
        };
        let widened = self.ideas(store, item, title, request_text).await;
        let request_text = widened.as_deref().unwrap_or(request_text);
        self.progress.at(Step::Plan, "Planning: packing the code");
        self.report().await;
        let (budget, request) = (config.context_tokens, request_text.to_owned());
        let selection = match code.0.await {
            Ok(whole) => blocking(move || whole.map(|whole| select::choose(whole, &request, budget))).await?,
            Err(e) => return Err(TaskError::Other(format!("packing the code failed: {e}"))),
        };
        let selection = match selection {
            Ok(s) => s,
            Err(e) => {
                self.progress
                    .note(format!("Planning skipped: the code could not be packed ({e})"));
                return Ok(None);
            }
        };
        self.note_selection(&selection);
        let context = Context::new(
            env.prompts.clone(),
            &selection.packed.xml,
            selection.packed.tokens,
        );
        drop(selection);

        let settings = DebateSettings::from_config(config, env.config.llm.max_output_tokens);
        // Its own copy of the key, so the task can be changed while the debate runs.
        let key = self.key.clone();
        let checkpoints = PlanCalls {
            journal: &env.journal,
            task: &key,
        };
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel::<DebateEvent>();
        let planner = Planner {
            model: env.model.as_ref(),
            settings: &settings,
            prices: &crate::llm::router::price_table(&env.config.llm),
            checkpoints: &checkpoints,
            observer: Some(Arc::new(move |event| {
                let _ = events.send(event);
            })),
        };
        let planning = planner.plan(&context, request_text);
        tokio::pin!(planning);
        let shutdown = self.shutdown.clone();
        let result = loop {
            tokio::select! {
                result = &mut planning => break result,
                Some(event) = received.recv() => {
                    if let DebateEvent::Phase { name, done, total } = event {
                        self.progress.status_now(format!("Planning: {name} ({done} of about {total} model calls done)"));
                        self.report().await;
                    }
                }
                _ = shutdown.cancelled() => return Err(TaskError::Shutdown),
            }
        };
        match result {
            Ok(outcome) => {
                self.merge_usage(&outcome.usage);
                let checklist = outcome.checklist();
                self.progress.set_plan(
                    checklist
                        .iter()
                        .map(|step| PlanStep {
                            step: step.clone(),
                            status: StepStatus::Pending,
                        })
                        .collect(),
                );
                let (cost, _) = outcome.usage.estimated_cost();
                // How it was made, for the history line and the plan's section.
                let mut line = outcome.method.clone();
                if let Some(c) = outcome.rounds.iter().rev().find_map(|r| r.consensus.as_ref()) {
                    line.push_str(&format!("; consensus {:.2}", c.score));
                }
                if let Some(c) = outcome.confidence {
                    line.push_str(&format!("; judge's confidence {c:.2}"));
                }
                line.push_str(&format!(
                    "; {} tokens ({} cached), estimated ${cost:.4}",
                    outcome.usage.total().total(),
                    outcome.usage.total().cached_input_tokens
                ));
                if outcome.replayed > 0 {
                    line.push_str(&format!(
                        "; {} call(s) replayed from before a restart",
                        outcome.replayed
                    ));
                }
                self.progress.set_plan_details(&line, &outcome.final_plan);
                self.progress.note(format!("Planned: {line}"));
                for note in outcome.notes.iter().take(5) {
                    self.progress.note(format!("Planning: {note}"));
                }
                Ok(Some(TaskPlan {
                    text: outcome.final_plan,
                    checklist,
                    made: outcome.made,
                }))
            }
            Err(PlanError::NoModel(why)) => {
                self.progress
                    .note(format!("No plan: {why}. The model works from the request alone"));
                Ok(None)
            }
            Err(e) => {
                self.progress
                    .note(format!("No plan: {e}. The model works from the request alone"));
                Ok(None)
            }
        }
    }

    /// Idea options as perspectives for the debate (planning.ideas):
    /// the request with them appended, or `None` when not wanted or not
    /// available (the comment says why).
    /// `title`: the item's title when it may be heard; otherwise the topic
    /// is only the item's name (nothing withheld reaches any model).
    async fn ideas(
        &mut self,
        store: &ContextStore,
        item: &Item,
        title: Option<&str>,
        request_text: &str,
    ) -> Option<String> {
        let env = self.env;
        let wanted = match env.config.planning.ideas {
            IdeasMode::Always => true,
            IdeasMode::Never => false,
            IdeasMode::Auto => store.open_ended(),
        };
        if !wanted {
            return None;
        }
        self.progress.status_now("Planning: generating idea options");
        self.report().await;
        // The smallest sizes the tool allows: perspectives, not a catalogue.
        let request = IdeaRequest {
            target_categories: 10,
            target_options_per_category: 10,
            randomize_selection: true,
            random_sample_size: 5,
            domain_context: Some(request_text.to_owned()),
            ..IdeaRequest::new(
                "senior software engineer and maintainer of this repository",
                &title.map(str::to_owned).unwrap_or_else(|| {
                    let noun = match item.reference.kind {
                        crate::forge::ItemKind::Issue => "issue",
                        crate::forge::ItemKind::Change => item.reference.forge.change_noun(),
                    };
                    format!("{noun} {}", item.reference)
                }),
            )
        };
        // The options a task used are journalled under its request: a
        // restart sends the debate the same request, so its saved calls
        // replay instead of being paid again.
        let key = self.key.clone();
        let checkpoints = PlanCalls {
            journal: &env.journal,
            task: &key,
        };
        let saved_as = ideas_key(&request);
        let saved = checkpoints
            .load(&saved_as)
            .and_then(|record| serde_json::from_str::<IdeaOutput>(&record.text).ok());
        let replayed = saved.is_some();
        let generated = match saved {
            Some(output) => Ok(output),
            None => {
                let meter = crate::llm::usage::Meter::new(UsageReport::new(crate::llm::router::price_table(
                    &env.config.llm,
                )));
                let generator = Generator {
                    model: env.model.as_ref(),
                    model_name: env.config.ideas.model.as_deref(),
                    pacer: &env.ideas_pacer,
                    max_output_tokens: env.config.llm.max_output_tokens,
                    usage: Some(&meter),
                    prompts: &env.prompts.ideas,
                };
                let generated = tokio::select! {
                    result = generator.generate(&request) => result,
                    _ = self.shutdown.cancelled() => return None,
                };
                self.merge_usage(&meter.into_inner().unwrap_or_else(|p| p.into_inner()));
                if let Ok(output) = &generated {
                    if let Ok(text) = serde_json::to_string(output) {
                        let record = CallRecord {
                            model: env.config.ideas.model.clone().unwrap_or_default(),
                            text,
                            usage: Default::default(),
                        };
                        checkpoints.save(&saved_as, &record);
                    }
                }
                generated
            }
        };
        match generated {
            Ok(output) => {
                self.progress.note(format!(
                    "Idea options: {} categories, {} options as perspectives for the debate{}",
                    output.metadata.total_categories,
                    output.metadata.total_options,
                    if replayed {
                        " (as journalled before a restart)"
                    } else {
                        ""
                    }
                ));
                Some(format!(
                    "{request_text}\n\n## Perspectives to consider (idea options)\n\nThese options widen the plan. Weigh them; take those that serve the request and its constraints. The final plan must have a section \"## Perspectives taken\", placed just before its \"## Checklist\", that names the options it took (or says none fit, and why).\n\n{}",
                    output.perspectives()
                ))
            }
            Err(e) => {
                self.progress
                    .note(format!("No idea options ({e}); the debate goes on without them"));
                None
            }
        }
    }

    /// Says on the comment what a partial pack left out.
    fn note_selection(&mut self, selection: &select::Selection) {
        let packed = &selection.packed;
        let real_files = packed
            .files
            .iter()
            .filter(|f| f.path != select::LEFT_OUT_SOURCE)
            .count();
        if selection.whole {
            self.progress.note(format!(
                "Packed the whole checkout for planning: {real_files} files, {} tokens",
                packed.tokens
            ));
        } else {
            const NAMED: usize = 10;
            let mut line = format!(
                "Packed {real_files} files ({} tokens) for planning; the checkout is {} tokens, over planning.context_tokens, so {} files were left out",
                packed.tokens,
                selection.whole_tokens,
                selection.left_out.len()
            );
            let named: Vec<&str> = selection
                .left_out
                .iter()
                .take(NAMED)
                .map(String::as_str)
                .collect();
            if !named.is_empty() {
                line.push_str(&format!(": {}", named.join(", ")));
                if selection.left_out.len() > NAMED {
                    line.push_str(&format!(" and {} more", selection.left_out.len() - NAMED));
                }
            }
            self.progress.note(line);
        }
        let unreadable = packed
            .skipped
            .iter()
            .filter(|s| !matches!(s.reason, crate::planning::pack::SkipReason::OverBudget { .. }))
            .count();
        if unreadable > 0 {
            tracing::info!(task = %self.item, "left out of the pack:\n{}", packed.skip_report());
        }
    }
}

/// Where a task's idea options are journalled: by what they were asked
/// for, so a changed request (a new message) gets new ones.
fn ideas_key(request: &IdeaRequest) -> String {
    use sha2::{Digest, Sha256};
    let asked = serde_json::to_string(request).unwrap_or_default();
    let digest = Sha256::digest(asked.as_bytes());
    let short: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("ideas:{short}")
}
