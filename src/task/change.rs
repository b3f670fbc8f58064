//! The change: clone on the host, plan, a sandbox with the editor, the
//! command executor and the configured MCP servers, the agent loop under
//! the label gate, and the push loop (a rejected push is rebased by the
//! model in the sandbox).

use super::*;
use crate::agent::plan::{PlanStep, PlanTracker};

impl TaskRun<'_> {
    /// Workspace, sandbox, agent, push. `None`: the model changed nothing.
    pub(super) async fn work(
        &mut self,
        item: &Item,
        target: &Target,
        thread: Thread,
    ) -> Result<Option<String>, TaskError> {
        let config = &self.env.config;
        let credentials = self.forge.git_credentials().await?;
        // What was kept from the model: on the comment and in the request.
        let withheld = request::withheld(&thread.author, &thread.comments, &self.forge.who_may_trigger());
        let ws = {
            let (root, url, base, branch, creds) = (
                self.work_dir(),
                target.clone_url.clone(),
                target.base.clone(),
                target.branch.clone(),
                credentials.clone(),
            );
            let author = (
                config.delivery.author_name.clone(),
                config.delivery.author_email.clone(),
            );
            // For a PR/MR task the branch exists remotely and is checked out from there.
            let clone_branch = if target.change.is_some() {
                branch.clone()
            } else {
                base
            };
            let clone = blocking(move || {
                Workspace::prepare(
                    &root,
                    &url,
                    &clone_branch,
                    &branch,
                    &creds,
                    (&author.0, &author.1),
                )
            });
            let (cloned, ()) = tokio::join!(clone, self.report());
            WorkspaceHandle::new(cloned??)
        };
        // The repository's settings come first: a broken file costs no model call.
        // Never from the branch a PR targets, which its author chooses.
        let environment = self.read_environment(&ws, &target.default_branch).await?;
        // The planners' pack is read while the sandbox starts and the thread is classified.
        let packing = super::plan::PackedCode::start(&config.planning, ws.checkout_dir().to_owned());
        self.note_environment(&environment);
        let settings = &environment.settings;
        let checkout = ws.checkout_dir().to_owned();
        // With setup to run, the sandbox is made and set up before any model
        // call. Without setup, or with a snapshot of it to restore, the
        // sandbox starts while the thread is classified.
        let image = self.choose_image(&checkout, settings);
        let mut snapshot = if settings.setup.is_empty() {
            None
        } else {
            self.snapshot_plan(&checkout, &image, settings).await
        };
        let kept = snapshot.as_ref().and_then(|plan| plan.find());
        // A snapshot is unpacked in the background: classification, planning
        // and the agent's first request do not wait for it; tools do.
        let mut restoring = None;
        let (context, sandbox) = if settings.setup.is_empty() || kept.is_some() {
            let ready = async {
                let sandbox = self.start_sandbox(&checkout, settings, &image).await?;
                let restore = match (&snapshot, kept) {
                    (Some(plan), Some(info)) => Some(self.begin_restore(sandbox.clone(), plan, info)),
                    _ => None,
                };
                Ok::<_, TaskError>((sandbox, restore))
            };
            let (context, ready) = tokio::join!(self.gather_context(item, target, &thread, &withheld), ready);
            let (sandbox, restore) = ready?;
            let sandbox = self.adopt_sandbox(sandbox)?;
            self.progress.note(format!("Sandbox from image `{image}`"));
            restoring = restore;
            self.enter_agent_phase(sandbox.as_ref(), settings);
            (context, sandbox)
        } else {
            self.report().await;
            let sandbox = self.start_sandbox(&checkout, settings, &image).await?;
            let sandbox = self.adopt_sandbox(sandbox)?;
            self.progress.note(format!("Sandbox from image `{image}`"));
            let setup = self
                .setup(sandbox.as_ref(), settings, &checkout, &image, snapshot.take())
                .await;
            self.enter_agent_phase(sandbox.as_ref(), settings);
            setup?;
            (
                self.gather_context(item, target, &thread, &withheld).await,
                sandbox,
            )
        };
        // The editor's session starts now, beside planning: setup (and
        // what it left running) is over.
        let editor = config.text_editor_mcp.enabled.then(|| {
            let (sandbox, editor_config) = (sandbox.clone(), config.text_editor_mcp.clone());
            tokio::spawn(async move { crate::mcp::text_editor::start(sandbox, &editor_config).await })
        });
        let store = {
            let (store, notes, usage) = context?;
            for note in notes {
                self.progress.note(note);
            }
            self.merge_usage(&usage);
            store
        };
        let instructions = environment
            .instructions
            .render(&self.env.prompts.agent.repository_instructions);
        let setting = request::Setting {
            branch: &target.branch,
            base: &target.base,
            project_dir: &config.sandbox.project_dir,
        };
        // Every main request starts from the synthesised context: the
        // mission and every constraint, however long the run.
        // The planners get the task, the code and the constraints; the
        // working rules (commit, do not push, the summary) are the agent's.
        let synthesis = crate::planning::context::Synthesis {
            template: &self.env.prompts.context.synthesis,
            recent_turns: config.context.recent_turns,
            budgets: crate::planning::context::TierBudgets {
                mission: config.context.mission_tokens,
                recent: config.context.recent_tokens,
                current: config.context.current_tokens,
            },
            // On an issue chatter is no request; on a PR/MR the newest message is.
            current: match item.reference.kind {
                ItemKind::Issue => crate::planning::context::Current::NewestRequest,
                ItemKind::Change => crate::planning::context::Current::Newest,
            },
        };
        let mut request_text = store.synthesize(&synthesis);
        request_text.push_str(&request::task_header(item, &withheld));
        // An outsider's title the label does not vouch for reaches no model.
        let topic = match thread.author {
            super::Heard::Withheld { .. } => None,
            _ => Some(item.title.as_str()),
        };
        let planning_request = match &instructions {
            Some(section) => format!("{request_text}\n\n{section}"),
            None => request_text.clone(),
        };
        let plan = self.plan(packing, &planning_request, &store, item, topic).await?;

        self.env.journal.set_phase(&self.key, Phase::Working)?;

        let (mut tools, editor_enabled, servers) = self.tools(sandbox.clone(), editor).await?;
        let mut system = self.env.prompts.agent.system_prompt(editor_enabled);
        if let Some(section) = &instructions {
            system.push_str("\n\n");
            system.push_str(section);
        }
        self.progress
            .at(Step::Change, "Working: the model is making the change");
        // The comment's state while the agent runs: the gate (pause notes) and
        // the plan tool (checklist) both edit it; it is taken back afterwards.
        let live = Arc::new(std::sync::Mutex::new(self.progress.clone()));
        let mut first_message = request_text;
        first_message.push_str(&request::working_rules(item, &setting));
        let _checklist_updates = match &plan {
            Some(plan) => {
                let (tracker, updates) = self.plan_tracker(&plan.checklist, live.clone());
                tools.add_local(tracker);
                first_message.push_str(&request::plan_section(&plan.text, &plan.made));
                updates
            }
            None => None,
        };
        let gate = Arc::new(LabelGate {
            forge: self.forge.clone(),
            item: self.item.clone(),
            labels: self.labels().clone(),
            shutdown: self.shutdown.clone(),
            poll: config.scheduling.poll_interval,
            comment: self.comment_id.map(|id| (id, live.clone())),
            secrets: self.env.secrets.clone(),
        });
        let mut agent_limits = config.agent.limits.clone();
        agent_limits.max_output_tokens = config.llm.max_output_tokens;
        let mut agent = Agent::new(
            self.env.model.clone(),
            tools,
            agent_limits,
            crate::llm::router::price_table(&config.llm),
        )
        .with_gate(gate)
        .with_condensing(crate::agent::condense::CondenseSettings {
            at_tokens: config.context.transcript_tokens,
            keep_recent_steps: config.context.keep_recent_steps,
        })
        .with_ready(restoring.as_ref().map(|r| r.readiness()));
        self.report().await;
        let mut outcome = agent
            .run(&system, vec![Message::User(first_message.clone())])
            .await;
        self.progress = live.lock().unwrap_or_else(|p| p.into_inner()).clone();
        self.add_usage(&outcome);
        // A stopped task stops here, whatever became of the restore.
        self.check_halt(&outcome)?;
        if let Some(pending) = restoring {
            // Tests and delivery read the project folder: the restore must be over.
            if !self.note_restore(&pending.info, pending.finished().await) {
                self.setup(sandbox.as_ref(), settings, &checkout, &image, snapshot)
                    .await?;
                self.enter_agent_phase(sandbox.as_ref(), settings);
                if let StopReason::NotReady(_) = outcome.stop {
                    // No tool ran: the run starts over on the set-up sandbox.
                    *live.lock().unwrap_or_else(|p| p.into_inner()) = self.progress.clone();
                    agent = agent.with_ready(None);
                    outcome = agent.run(&system, vec![Message::User(first_message)]).await;
                    self.progress = live.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    self.add_usage(&outcome);
                }
            }
        }
        self.check_halt(&outcome)?;
        if let Some(line) = sandbox.egress().and_then(|e| e.summary("agent")) {
            self.progress.note(format!("Network: {line}"));
        }
        let tests = self
            .verify(
                &agent,
                &system,
                &mut outcome,
                sandbox.as_ref(),
                settings,
                &ws.with(|ws| ws.base).await?.to_string(),
                &live,
            )
            .await?;

        let protected = if config.delivery.allow_protected_paths {
            Vec::new()
        } else {
            config.delivery.protected_paths.clone()
        };
        let mut summary = outcome.answer.clone().unwrap_or_default();
        let mut round = 0;
        loop {
            round += 1;
            let collected = self.collect(&ws, sandbox.as_ref(), round, &protected).await?;
            let Some(collected) = collected else {
                if round == 1 {
                    if let StopReason::Answered = outcome.stop {
                        self.progress.note("The model finished without changing any file");
                        self.finish_summary = Some(summary.clone());
                        for s in servers {
                            s.shutdown().await;
                        }
                        return Ok(None);
                    }
                    return Err(TaskError::Other(format!(
                        "the model made no change and {}",
                        outcome.stop
                    )));
                }
                return Err(TaskError::Other(
                    "after the rebase the branch holds no change any more".into(),
                ));
            };
            if !collected.other_branches.is_empty() {
                self.progress.note(format!(
                    "Not pushed: other branches the model changed ({})",
                    collected.other_branches.join(", ")
                ));
            }
            self.progress.at(
                Step::Push,
                format!("Pushing {} commit(s) to `{}`", collected.commits, target.branch),
            );
            self.report().await;
            // Another replica may have taken the task over meanwhile.
            self.forge.before_push(&self.item).await?;
            let pushed = {
                let (creds, deadline) = (credentials.clone(), self.forge.write_deadline());
                ws.with(move |ws| ws.push(&creds, deadline)).await?
            };
            match pushed {
                Ok(()) => {
                    self.progress.note(format!(
                        "Pushed `{}` ({} files changed)",
                        target.branch,
                        collected.files.len()
                    ));
                    break;
                }
                Err(crate::git::GitError::Rejected { reason, .. })
                    if round < config.delivery.max_push_attempts =>
                {
                    tracing::info!(task = %self.item, "push rejected ({reason}); asking the model to rebase");
                    self.progress.note(format!(
                        "Push rejected ({reason}); rebasing onto the new remote branch"
                    ));
                    self.report().await;
                    let upstream_ref = self.deliver_upstream(&ws, sandbox.as_ref(), &credentials).await?;
                    let mut messages = outcome.messages.clone();
                    messages.push(Message::User(request::rebase_request(
                        &target.branch,
                        &upstream_ref,
                    )));
                    *live.lock().unwrap_or_else(|p| p.into_inner()) = self.progress.clone();
                    outcome = agent.run(&system, messages).await;
                    self.progress = live.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    self.add_usage(&outcome);
                    self.check_halt(&outcome)?;
                    if let Some(answer) = &outcome.answer {
                        if summary.trim().is_empty() {
                            summary = answer.clone();
                        }
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        for s in servers {
            s.shutdown().await;
        }
        if summary.trim().is_empty() {
            summary = format!("The run ended: {}.", outcome.stop);
        } else if outcome.stop != StopReason::Answered {
            summary.push_str(&format!("\n\n(The run ended early: {}.)", outcome.stop));
        }
        if let Some(tests) = &tests {
            summary.push_str("\n\n");
            summary.push_str(&tests.section());
            if !tests.passed && config.delivery.require_passing_tests {
                return Err(TaskError::TestsFailed {
                    reason: format!(
                        "`{}` {}; the change is on `{}`, and no {} was opened",
                        tests.command,
                        tests.outcome,
                        target.branch,
                        self.item.forge.change_noun()
                    ),
                    section: tests.section(),
                });
            }
        }
        self.env.journal.set_phase(&self.key, Phase::Pushed)?;
        self.env.journal.set_summary(&self.key, &summary)?;
        Ok(Some(summary))
    }

    /// The `update_plan` tool over `checklist`. Each update goes to the
    /// shared progress and, from a task of its own, to the comment; the
    /// handle stops that task when dropped.
    fn plan_tracker(
        &self,
        checklist: &[String],
        live: Arc<std::sync::Mutex<Progress>>,
    ) -> (Arc<PlanTracker>, Option<tokio_util::task::AbortOnDropHandle<()>>) {
        let (changed, mut updates) = tokio::sync::mpsc::unbounded_channel::<()>();
        let shared = live.clone();
        let tracker = Arc::new(PlanTracker::new(
            checklist,
            Some(Arc::new(move |steps: &[PlanStep]| {
                shared
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .set_plan(steps.to_vec());
                let _ = changed.send(());
            })),
        ));
        if let Ok(mut progress) = live.lock() {
            progress.set_plan(tracker.steps());
        }
        let Some(comment) = self.comment_id else {
            return (tracker, None);
        };
        let (forge, item, secrets) = (self.forge.clone(), self.item.clone(), self.env.secrets.clone());
        let editor = tokio::spawn(async move {
            while updates.recv().await.is_some() {
                // Several quick updates make one edit.
                while updates.try_recv().is_ok() {}
                let body = {
                    let progress = live.lock().unwrap_or_else(|p| p.into_inner());
                    secrets.scrub(&progress.render())
                };
                if let Err(e) = forge.edit_comment(&item, comment, &body).await {
                    tracing::warn!(task = %item, "cannot update the plan on the progress comment: {e}");
                }
            }
        });
        (tracker, Some(tokio_util::task::AbortOnDropHandle::new(editor)))
    }

    pub(super) fn add_usage(&mut self, outcome: &AgentOutcome) {
        match &mut self.usage {
            None => self.usage = Some(outcome.usage.clone()),
            Some(total) => {
                for (model, u) in outcome.usage.per_model() {
                    total.add(model, *u);
                }
            }
        }
    }

    /// Registers `sandbox` for removal when the task ends, however it ends
    /// (`remove_sandbox`); the caller goes on with it.
    fn adopt_sandbox(&mut self, sandbox: Arc<dyn Sandbox>) -> Result<Arc<dyn Sandbox>, TaskError> {
        self.sandbox = Some(sandbox.clone());
        crate::metrics::global().sandbox_started();
        self.env.journal.set_container(&self.key, Some(sandbox.id()))?;
        Ok(sandbox)
    }

    pub(super) fn check_halt(&self, outcome: &AgentOutcome) -> Result<(), TaskError> {
        match &outcome.stop {
            StopReason::Halted(_) if self.shutdown.is_cancelled() => Err(TaskError::Shutdown),
            StopReason::Halted(reason) => Err(TaskError::Stopped(reason.clone())),
            _ => Ok(()),
        }
    }

    /// The editor, the command executor and the configured MCP servers.
    /// The agent's tools: the editor (its session `starting` since the
    /// sandbox was ready), the command executor and the configured servers.
    pub(super) async fn tools(
        &mut self,
        sandbox: Arc<dyn Sandbox>,
        starting: Option<tokio::task::JoinHandle<Result<SandboxedServer, crate::mcp::McpError>>>,
    ) -> Result<(ToolRegistry, bool, Vec<Arc<SandboxedServer>>), TaskError> {
        let config = &self.env.config;
        let mut editor: Option<Arc<dyn McpClient>> = None;
        let mut started = Vec::new();
        if let Some(starting) = starting {
            let server = starting
                .await
                .map_err(|e| TaskError::Other(format!("starting the text editor failed: {e}")))?;
            match server {
                Ok(server) => {
                    let server = Arc::new(server);
                    started.push(server.clone());
                    editor = Some(server);
                }
                Err(e) => {
                    // Log it, go on without the editor, and say so on the issue.
                    tracing::error!(task = %self.item, "text editor unavailable: {e}");
                    self.progress.note(format!(
                        "The text editor could not start ({e}); working with the command executor only"
                    ));
                }
            }
        }
        let mut servers = Vec::new();
        for server in &config.mcp_servers {
            match SandboxedServer::start(
                server.name.clone(),
                sandbox.clone(),
                server.command.clone(),
                Duration::from_secs(30),
                config.text_editor_mcp.call_timeout,
                1,
            )
            .await
            {
                Ok(s) => {
                    let s = Arc::new(s);
                    started.push(s.clone());
                    servers.push(ServerTools {
                        client: s,
                        allowed_tools: server.allowed_tools.clone(),
                        excluded_tools: server.excluded_tools.clone(),
                    });
                }
                Err(e) => {
                    tracing::error!(task = %self.item, server = %server.name, "MCP server unavailable: {e}");
                    self.progress
                        .note(format!("MCP server `{}` could not start: {e}", server.name));
                }
            }
        }
        let executor: Arc<dyn CommandExecutor> = Arc::new(sandbox);
        let editor_enabled = editor.is_some();
        let registry = ToolRegistry::build(editor, Some(executor), servers)
            .await
            .map_err(|e| TaskError::Other(format!("cannot list the tools: {e}")))?;
        Ok((registry, editor_enabled, started))
    }
}

/// Pauses the agent while the paused label is on, stops it when the
/// processing label is removed or the daemon shuts down.
struct LabelGate {
    forge: Arc<dyn Forge>,
    item: ItemRef,
    labels: crate::config::LabelsConfig,
    shutdown: CancellationToken,
    poll: Duration,
    /// The progress comment and its state while the agent runs, to say
    /// "paused" on the issue.
    comment: Option<(u64, Arc<std::sync::Mutex<Progress>>)>,
    secrets: Arc<Secrets>,
}

impl LabelGate {
    /// Puts `status` on the progress comment; a failure is only logged.
    async fn announce(&self, status: String) {
        let Some((id, progress)) = &self.comment else {
            return;
        };
        let body = {
            let mut progress = progress.lock().unwrap_or_else(|p| p.into_inner());
            progress.status_now(status);
            self.secrets.scrub(&progress.render())
        };
        if let Err(e) = self.forge.edit_comment(&self.item, *id, &body).await {
            tracing::warn!(task = %self.item, "cannot update the progress comment: {e}");
        }
    }
}

#[async_trait]
impl StepGate for LabelGate {
    async fn before_step(&self, _step: u32) -> Option<String> {
        let mut paused_logged = false;
        loop {
            if self.shutdown.is_cancelled() {
                return Some("forgehand is shutting down".into());
            }
            match self.forge.item(&self.item).await {
                Ok(item) => {
                    if !item.has_label(&self.labels.processing) {
                        return Some(format!("the label \"{}\" was removed", self.labels.processing));
                    }
                    if !item.has_label(&self.labels.paused) {
                        if paused_logged {
                            tracing::info!(task = %self.item, "resumed");
                            self.announce("Working again: the pause label was removed".into())
                                .await;
                        }
                        return None;
                    }
                    if !paused_logged {
                        tracing::info!(task = %self.item, "paused by the \"{}\" label", self.labels.paused);
                        self.announce(format!(
                            "Paused before the next model turn; remove the \"{}\" label to continue",
                            self.labels.paused
                        ))
                        .await;
                        paused_logged = true;
                    }
                }
                Err(e) => {
                    tracing::warn!(task = %self.item, "cannot read the labels: {e}");
                    if !paused_logged {
                        return None;
                    }
                }
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => {}
                _ = tokio::time::sleep(self.poll) => {}
            }
        }
    }
}
