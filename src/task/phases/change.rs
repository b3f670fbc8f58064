//! The fourth phase, the change: the agent's tools in the sandbox (the
//! editor, the command executor, the configured MCP servers), the agent
//! loop under the label gate with the plan's checklist, and, when a setup
//! snapshot was being restored meanwhile, setup in its place if it could
//! not be. The agent's session goes on through the phases after this one
//! (test fixes, a rebase), so it is part of what this phase hands on.

use crate::agent::plan::{PlanStep, PlanTracker};
use crate::agent::tools::{CommandExecutor, ServerTools, ToolRegistry};
use crate::agent::{Agent, AgentOutcome, ChatModel, StopReason};
use crate::config::{AgentConfig, ContextConfig, LabelsConfig, McpServerConfig, TextEditorMcpConfig};
use crate::journal::Transition;
use crate::llm::usage::Price;
use crate::llm::Message;
use crate::mcp::{McpClient, SandboxedServer};
use crate::metrics::Metrics;
use crate::prompts::Prompts;
use crate::sandbox::Sandbox;
use crate::task::handoff::Changed;
use crate::task::handoff::Claimed;
use crate::task::handoff::Planned;
use crate::task::handoff::Prepared;
use crate::task::phases::gate::LabelGate;
use crate::task::phases::prepare::{self, SetupRules};
use crate::task::phases::request;
use crate::task::report::events::{Flush, TaskEvent};
use crate::task::report::progress::Step;
use crate::task::run::TaskRun;
use crate::task::state::checkpoint;
use crate::task::state::error::TaskError;
use crate::task::workbench::session::Session;
use futures_util::future::FutureExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::task::AbortOnDropHandle;

/// What changing needs besides the run.
pub(in crate::task) struct Needs<'a> {
    pub agent: &'a AgentConfig,
    /// `llm.max_output_tokens`.
    pub max_output_tokens: u32,
    /// When the transcript is condensed.
    pub context: &'a ContextConfig,
    pub mcp_servers: &'a [McpServerConfig],
    pub text_editor: &'a TextEditorMcpConfig,
    /// `sandbox.project_dir`, as the model is told.
    pub project_dir: &'a str,
    /// The labels the gate watches, every `poll`.
    pub labels: &'a LabelsConfig,
    pub poll: Duration,
    pub prices: BTreeMap<String, Price>,
    pub model: Arc<dyn ChatModel>,
    pub prompts: &'a Prompts,
    pub metrics: Arc<Metrics>,
    /// For running setup when a snapshot could not be restored.
    pub setup: SetupRules<'a>,
    /// The run's transcript, told of every step.
    pub recorder: Option<Arc<dyn crate::agent::StepRecorder>>,
    /// Where the mentions heard while the run works wait for its agent
    /// (none: it hears none).
    pub journal: Option<Arc<crate::journal::Journal>>,
    /// Where the run's step boundaries are kept (none: nothing is kept,
    /// as with several attempts side by side).
    pub checkpoints: Option<checkpoint::Store>,
    /// What may come out of the sandbox in one copy (a checkpoint's `.git`).
    pub copy_out: crate::config::CopyOutLimits,
    /// `sandbox.workspace_dir`, where a checkpoint is handed back.
    pub workspace_dir: &'a str,
}

pub(in crate::task) async fn change(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    planned: Planned,
) -> Result<Changed, TaskError> {
    let Planned {
        mut prepared,
        request,
        instructions,
        plan,
        images,
    } = planned;
    run.journal.transition(&run.key, Transition::Working)?;
    // What the run is given: a checkpoint made for another is not resumed.
    let asked = crate::task::state::phase_records::digest(&format!(
        "{request}\n{}",
        plan.as_ref().map_or("", |p| p.text.as_str())
    ));
    let sandbox = prepared.sandbox.sandbox.clone();
    let (mut session, plan_section) =
        open_session(run, needs, &mut prepared, instructions, plan.as_ref()).await?;
    run.at(Step::Change, "Working: the model is making the change");
    let resumed = resume(run, needs, &mut prepared, &asked).await?;
    if let Some(store) = &needs.checkpoints {
        let limits = (needs.copy_out, needs.workspace_dir);
        let keeper =
            checkpoint::Keeper::new(store.clone(), &prepared, limits, (resumed.as_ref(), asked)).await?;
        session.agent.set_checkpointer(Some(Arc::new(keeper)));
        session
            .suspendable
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let opening = match resumed {
        Some(resumed) => Opening::Resumed(resumed.start),
        None => Opening::New(first_message(run, needs, claimed, request, &prepared, plan_section).await?),
    };
    run.report().await;
    let outcome = match opening {
        Opening::Resumed(start) => session.resume_from(run, start).await?,
        Opening::New(text) => {
            let mut first = vec![Message::User(text)];
            // The thread's images follow the first turn's text (a model without
            // vision reads their alt text instead: llm::history).
            first.extend(images.messages());
            first_run(run, needs, &mut session, &mut prepared, first).await?
        }
    };
    if let Some(line) = sandbox.egress().and_then(|e| e.summary("agent")) {
        run.note(format!("Network: {line}"));
    }
    // The rounds after this phase (tests, a rebase, CI fixes) are not
    // resumed: a restart before the push starts again from the change.
    session.agent.set_checkpointer(None);
    session
        .suspendable
        .store(false, std::sync::atomic::Ordering::SeqCst);
    Ok(Changed {
        prepared,
        session,
        outcome,
    })
}

/// The agent's session over a new sandbox, for a round after the task
/// waited (a CI fix once its checks failed): the run's system prompt and
/// tools, without the plan's checklist; the sandbox filled (the project,
/// setup or its snapshot) before the model's tools run.
pub(in crate::task) async fn reopen(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    prepared: &mut Prepared,
) -> Result<Session, TaskError> {
    let instructions = prepared
        .repo
        .instructions
        .render(&needs.prompts.agent.repository_instructions);
    let (session, _) = open_session(run, needs, prepared, instructions, None).await?;
    sandbox_filled(run, &needs.setup, prepared).await?;
    Ok(session)
}

/// How the run opens: from a checkpoint, or with its first message.
enum Opening {
    Resumed(crate::agent::Start),
    New(String),
}

/// The agent's session: its tools in the sandbox, its system prompt (with
/// the repository's instructions) and, with a plan, the checklist tool;
/// with the plan's section for the first message.
async fn open_session(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    prepared: &mut Prepared,
    instructions: Option<String>,
    plan: Option<&crate::task::phases::task_plan::TaskPlan>,
) -> Result<(Session, Option<String>), TaskError> {
    let sandbox = prepared.sandbox.sandbox.clone();
    if !needs.mcp_servers.is_empty() {
        // The operator's servers may read the project as they start.
        if let Some(filling) = prepared.sandbox.filling.take() {
            filling.finished().await?;
        }
    }
    let (mut tools, editor_enabled, servers) = tools(run, needs, sandbox, prepared.editor.take()).await?;
    let mut system = needs.prompts.agent.system_prompt(editor_enabled);
    if let Some(section) = &instructions {
        system.push_str("\n\n");
        system.push_str(section);
    }
    let (checklist_updates, plan_section) = match plan {
        Some(plan) => {
            let (tracker, updates) = plan_tracker(run, &plan.checklist);
            tools.add_local(tracker);
            (updates, Some(request::plan_section(&plan.text, &plan.made)))
        }
        None => (None, None),
    };
    let suspendable = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let session = Session {
        agent: agent(run, needs, tools, suspendable.clone()).with_ready(readiness(&prepared.sandbox)),
        suspendable,
        system,
        servers,
        _checklist_updates: checklist_updates,
    };
    Ok((session, plan_section))
}

/// The run's first message: the request, the working rules, the Git LFS
/// files left as pointers, the plan.
async fn first_message(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    request: String,
    prepared: &Prepared,
    plan_section: Option<String>,
) -> Result<String, TaskError> {
    let target = &claimed.target;
    let mut first_message = request;
    first_message.push_str(&request::working_rules(
        &claimed.item,
        &request::Setting {
            branch: &target.branch,
            base: &target.base,
            project_dir: needs.project_dir,
        },
    ));
    if let Some(fetched) = prepared.workspace.lfs_fetched().await? {
        if let Some(section) = fetched.for_agent() {
            first_message.push_str(&section);
        }
        run.note(crate::task::report::lfs_note::progress_line(&fetched));
    }
    if let Some(section) = plan_section {
        first_message.push_str(&section);
    }
    Ok(first_message)
}

/// A new run from `first`. Its first turn overlaps the project's copy and
/// a snapshot's restore; when the snapshot could not be restored, setup
/// runs instead and a run whose tools never ran starts over on it.
async fn first_run(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    session: &mut Session,
    prepared: &mut Prepared,
    first: Vec<Message>,
) -> Result<AgentOutcome, TaskError> {
    let mut outcome = session.resume(run, first.clone()).await?;
    // Tests and delivery read the project folder: the copy and a restore must be over.
    if sandbox_filled(run, &needs.setup, prepared).await? {
        if let StopReason::NotReady(_) = outcome.stop {
            // No tool ran: the run starts over on the set-up sandbox.
            session.agent.set_ready(None);
            outcome = session.resume(run, first).await?;
        }
    }
    Ok(outcome)
}

/// The conversation to go on from when the task's run was interrupted and
/// its checkpoint can be used; its files are put back into the sandbox
/// (once the project's copy and a snapshot's restore are over) first.
async fn resume(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    prepared: &mut Prepared,
    asked: &str,
) -> Result<Option<checkpoint::Resumed>, TaskError> {
    let Some(store) = &needs.checkpoints else {
        return Ok(None);
    };
    let Some(saved) = run.kept.checkpoint.take() else {
        return Ok(None);
    };
    sandbox_filled(run, &needs.setup, prepared).await?;
    let resumed = checkpoint::resume(run, store, saved, (prepared, asked), needs.workspace_dir).await?;
    if let (Some(resumed), Some(recorder)) = (&resumed, &needs.recorder) {
        recorder.resumed(resumed.start.steps);
    }
    Ok(resumed)
}

/// What the agent's tools wait for: the project copied in, then the
/// snapshot restored.
fn readiness(sandbox: &crate::task::handoff::TaskSandbox) -> Option<crate::agent::Readiness> {
    let filling = sandbox.filling.as_ref().map(|f| f.readiness());
    let restoring = sandbox.restoring.as_ref().map(|r| r.readiness());
    match (filling, restoring) {
        (Some(filling), Some(restoring)) => Some(
            async move {
                filling.await?;
                restoring.await
            }
            .boxed()
            .shared(),
        ),
        (filling, restoring) => filling.or(restoring),
    }
}

/// Waits for the project's copy into the sandbox, then for the snapshot
/// being restored, if any; when it could not be, runs setup instead.
/// `true`: setup ran again.
async fn sandbox_filled(
    run: &mut TaskRun<'_>,
    rules: &SetupRules<'_>,
    prepared: &mut Prepared,
) -> Result<bool, TaskError> {
    if let Some(filling) = prepared.sandbox.filling.take() {
        filling.finished().await?;
    }
    let Some(pending) = prepared.sandbox.restoring.take() else {
        return Ok(false);
    };
    if crate::task::workbench::snapshot::note_restore(run, &pending.info, pending.finished().await) {
        return Ok(false);
    }
    let settings = &prepared.repo.settings;
    let checkout = prepared.workspace.checked_out().await?.to_owned();
    let tree = prepared.repo.tree;
    prepare::setup(run, rules, &mut prepared.sandbox, (settings, tree), &checkout).await?;
    prepare::enter_agent_phase(run, prepared.sandbox.sandbox.as_ref(), settings);
    Ok(true)
}

/// The agent over `tools`, under the label gate.
fn agent(
    run: &TaskRun<'_>,
    needs: &Needs<'_>,
    tools: ToolRegistry,
    suspendable: Arc<std::sync::atomic::AtomicBool>,
) -> Agent {
    let gate = Arc::new(LabelGate {
        suspendable,
        forge: run.forge.clone(),
        item: run.item.clone(),
        labels: needs.labels.clone(),
        shutdown: run.shutdown.clone(),
        poll: needs.poll,
        progress: run.comment_id().map(|_| run.task_events()),
        steering: needs.journal.as_ref().map(|journal| {
            crate::task::phases::steer::Steering::new(
                run.forge.clone(),
                run.forge.clone(),
                run.item.clone(),
                journal.clone(),
            )
        }),
    });
    let mut limits = needs.agent.limits.clone();
    limits.max_output_tokens = needs.max_output_tokens;
    Agent::new(needs.model.clone(), tools, limits, needs.prices.clone())
        .with_gate(gate)
        .with_condensing(crate::agent::condense::CondenseSettings {
            at_tokens: needs.context.transcript_tokens,
            keep_recent_steps: needs.context.keep_recent_steps,
        })
        .with_metrics(needs.metrics.clone())
        .with_recorder(needs.recorder.clone())
}

/// The `update_plan` tool over `checklist`. Each update is an event of
/// the task, and, from a task of its own, a flush of the comment; the
/// handle stops that task when dropped.
fn plan_tracker(
    run: &TaskRun<'_>,
    checklist: &[String],
) -> (Arc<PlanTracker>, Option<AbortOnDropHandle<()>>) {
    let (changed, mut updates) = tokio::sync::mpsc::unbounded_channel::<()>();
    let events = run.task_events();
    let told = events.clone();
    let tracker = Arc::new(PlanTracker::new(
        checklist,
        Some(Arc::new(move |steps: &[PlanStep]| {
            told.emit(TaskEvent::Plan(steps.to_vec()));
            let _ = changed.send(());
        })),
    ));
    run.emit(TaskEvent::Plan(tracker.steps()));
    if run.comment_id().is_none() {
        return (tracker, None);
    }
    let editor = tokio::spawn(async move {
        while updates.recv().await.is_some() {
            // Several quick updates make one edit.
            while updates.try_recv().is_ok() {}
            events.flush(Flush::Live).await;
        }
    });
    (tracker, Some(AbortOnDropHandle::new(editor)))
}

/// The agent's tools: the editor (its session `starting` since the sandbox
/// was ready), the command executor and the configured servers.
async fn tools(
    run: &TaskRun<'_>,
    needs: &Needs<'_>,
    sandbox: Arc<dyn Sandbox>,
    starting: Option<prepare::EditorStart>,
) -> Result<(ToolRegistry, bool, Vec<Arc<SandboxedServer>>), TaskError> {
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
                tracing::error!(task = %run.item, "text editor unavailable: {e}");
                run.note(format!(
                    "The text editor could not start ({e}); working with the command executor only"
                ));
            }
        }
    }
    let mut servers = Vec::new();
    for server in needs.mcp_servers {
        match SandboxedServer::start(
            server.name.clone(),
            sandbox.clone(),
            server.command.clone(),
            Duration::from_secs(30),
            needs.text_editor.call_timeout,
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
                tracing::error!(task = %run.item, server = %server.name, "MCP server unavailable: {e}");
                run.note(format!("MCP server `{}` could not start: {e}", server.name));
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
