//! The second phase, preparing: the clone on the host, the repository's
//! settings and instructions read from its default branch, the sandbox
//! from the image they choose (set up, or restored from a snapshot), the
//! conversation read into the context store, and the editor's session
//! started. With setup to run, all of it happens before any model call (a
//! broken file or a failed setup costs no tokens); without, the sandbox
//! starts while the thread is classified.

use crate::task::handoff::Claimed;
use crate::task::handoff::Conversation;
use crate::task::phases::context;
use crate::task::phases::packing::PackedCode;
use crate::task::report::events::TaskEvent;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::state::phase_records::{self, PreparedRecord};
use crate::task::workbench::snapshot::{self, SnapshotPlan, TreeOrigin};
use crate::task::workbench::start_sandbox::{self, SandboxHints};
// Re-exported for the phases that hold a started editor (change, attempts).
use crate::config::{
    ImagesConfig, PlanningConfig, RepositoriesConfig, SandboxConfig, SetupFailure, TextEditorMcpConfig,
};
use crate::git::workspace::{Branches, Workspace};
use crate::git::Credentials;
use crate::repo_settings::instructions::{AGENTS_FILE, FALLBACK_FILES};
use crate::repo_settings::{settings, Instructions, RepoSettings, SettingsError, SETTINGS_FILE};
use crate::sandbox::{Sandbox, SandboxBackend, SandboxSpec};
use crate::snapshots::SnapshotInfo;
pub(in crate::task) use crate::task::workbench::start_sandbox::EditorStart;
use crate::task::workbench::workspace_handle::{checkout_failed, CheckedOut, WorkspaceHandle};
use std::path::{Path, PathBuf};

use crate::repo_settings::setup::SetupFailed;
use crate::task::handoff::{Prepared, RepoEnvironment, TaskSandbox};

/// What preparing needs besides the run.
pub(in crate::task) struct Needs<'a> {
    /// The task's own folder under the state folder.
    pub work_dir: PathBuf,
    /// The repositories' mirrors the work tree borrows from.
    pub mirrors: crate::git::mirror::Mirrors,
    /// `git.history_depth`: commits of history the sandbox gets.
    pub history_depth: Option<u32>,
    /// `git.lfs`: Git LFS files fetched and uploaded on the host.
    pub lfs: &'a crate::config::LfsConfig,
    /// `git.submodules`: which submodules the work tree gets.
    pub submodules: &'a crate::config::SubmodulesConfig,
    /// `delivery.author_name` and `author_email`, for the clone's commits.
    pub author: (&'a str, &'a str),
    pub repositories: &'a RepositoriesConfig,
    pub images: &'a ImagesConfig,
    pub sandbox: &'a SandboxConfig,
    /// For packing the checkout (unless planning is off).
    pub planning: &'a PlanningConfig,
    pub text_editor: &'a TextEditorMcpConfig,
    pub backend: &'a dyn SandboxBackend,
    /// What each repository's last task ran its sandbox with.
    pub hints: &'a SandboxHints,
    /// What reading the conversation needs.
    pub conversation: context::Needs<'a>,
}

impl Needs<'_> {
    pub fn setup_rules(&self) -> SetupRules<'_> {
        SetupRules {
            on_failure: self.repositories.on_setup_failure,
            home_dir: &self.sandbox.home_dir,
        }
    }
}

/// How setup runs and what becomes of a failure.
pub(in crate::task) struct SetupRules<'a> {
    /// `repositories.on_setup_failure`.
    pub on_failure: SetupFailure,
    /// The sandbox's home folder, which a snapshot keeps.
    pub home_dir: &'a str,
}

pub(in crate::task) async fn prepare(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
) -> Result<Prepared, TaskError> {
    let credentials = run.forge.git_credentials().await?;
    // The sandbox the repository's last task ran starts while the clone is
    // made and the settings are read.
    let local = async {
        let (workspace, ()) = tokio::join!(clone(run, needs, claimed, &credentials), run.report());
        let workspace = workspace?;
        // The repository's settings come first: a broken file costs no model call.
        // Never from the branch a PR targets, which its author chooses.
        let repo = read_settings(run, needs, &workspace, &claimed.target.default_branch).await?;
        Ok::<_, TaskError>((workspace, repo))
    };
    let (early, local) = tokio::join!(start_sandbox::start_early(run, needs.backend, needs.hints), local);
    let (workspace, repo) = match local {
        Ok(local) => local,
        Err(err) => {
            start_sandbox::discard(run, early).await;
            return Err(err);
        }
    };
    // The planners' pack is read while the sandbox starts and the thread is classified.
    let packing = PackedCode::start(needs.planning, &workspace);
    let checkout = workspace.checkout();
    note_settings(run, &repo);
    let history = start_sandbox::SandboxHistory {
        pack: workspace.history_ready(),
        dir: format!(
            "{}/history.git",
            needs.sandbox.workspace_dir.trim_end_matches('/')
        ),
    };
    let (sandbox, editor, conversation) =
        sandbox_and_conversation(run, needs, claimed, &repo, (&checkout, &history, early)).await?;
    // Otherwise the editor's session starts now, beside planning: setup
    // (and what it left running) is over.
    // (Its root must be there: after the copy, if one is under way.)
    let editor = editor.or_else(|| {
        needs.text_editor.enabled.then(|| {
            let (sandbox_now, editor_config) = (sandbox.sandbox.clone(), needs.text_editor.clone());
            let copied = sandbox.filling.as_ref().map(|f| f.readiness());
            tokio::spawn(async move {
                if let Some(copied) = copied {
                    let _ = copied.await;
                }
                crate::mcp::text_editor::start(sandbox_now, &editor_config).await
            })
        })
    });
    for note in &conversation.notes {
        run.note(note.clone());
    }
    run.add_usage(&conversation.usage);
    let ground = record_ground(run, claimed, &workspace, &repo, &sandbox).await?;
    Ok(Prepared {
        workspace,
        credentials,
        repo,
        sandbox,
        editor,
        conversation,
        packing,
        ground,
    })
}

/// Where the prepared task stands, journalled as the phase's record; a
/// start on other ground than the last says what changed.
async fn record_ground(
    run: &mut TaskRun<'_>,
    claimed: &Claimed,
    workspace: &WorkspaceHandle,
    repo: &RepoEnvironment,
    sandbox: &TaskSandbox,
) -> Result<PreparedRecord, TaskError> {
    let base = workspace.with(|ws| ws.base).await?;
    let ground = PreparedRecord {
        branch: claimed.target.branch.clone(),
        base: base.to_string(),
        image: sandbox.image.clone(),
        language: format!("{:?}", repo.language),
        settings: phase_records::digest(&format!("{:?}", repo.settings)),
        snapshot: sandbox.snapshot.as_ref().map(|s| s.key().to_owned()),
    };
    if let Some(before) = run.kept.prepared.take() {
        let changes = before.changes(&ground);
        if !changes.is_empty() {
            tracing::info!(task = %run.item, "prepared on other ground than the last start: {}", changes.join(", "));
        }
    }
    run.records.keep(&ground)?;
    Ok(ground)
}

/// The sandbox, set up, and the conversation, read. With setup to run,
/// the sandbox is made and set up before any model call. Without setup,
/// or with a snapshot of it to restore, the sandbox starts while the
/// thread is classified.
async fn sandbox_and_conversation(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    repo: &RepoEnvironment,
    (checkout, history, early): (
        &(PathBuf, CheckedOut),
        &start_sandbox::SandboxHistory,
        Option<start_sandbox::Early>,
    ),
) -> Result<(TaskSandbox, Option<EditorStart>, Conversation), TaskError> {
    let settings = &repo.settings;
    let image = choose_image(run, needs, repo);
    let spec = start_sandbox::spec_for(run, settings, &image);
    let snapshot = if settings.setup.is_empty() {
        None
    } else {
        // The snapshot's key reads the files setup depends on.
        checkout.1.clone().await.map_err(checkout_failed)?;
        snapshot::plan(
            run,
            needs.backend,
            &needs.sandbox.snapshots,
            &checkout.0,
            &image,
            settings,
        )
        .await
    };
    let kept = snapshot.as_ref().and_then(|plan| plan.find(run));
    let start = SandboxStart {
        image,
        spec,
        snapshot,
        early,
        checkout,
        history,
    };
    if settings.setup.is_empty() || kept.is_some() {
        start_while_reading(run, needs, claimed, settings, start, kept).await
    } else {
        set_up_before_reading(run, needs, claimed, repo, start).await
    }
}

/// What starting the task's sandbox takes, once its image is chosen.
struct SandboxStart<'c> {
    image: String,
    spec: SandboxSpec,
    /// Where setup's snapshot is kept, when there is setup to run.
    snapshot: Option<SnapshotPlan>,
    /// The sandbox started early on the last task's hints, if any.
    early: Option<start_sandbox::Early>,
    checkout: &'c (PathBuf, CheckedOut),
    history: &'c start_sandbox::SandboxHistory,
}

/// Without setup, or with a snapshot of it to restore (`kept`): the
/// sandbox starts while the thread is classified, and a snapshot is
/// unpacked in the background (classification, planning and the agent's
/// first request do not wait for it; tools do). The editor's session
/// starts while the checkout is copied in.
async fn start_while_reading(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    settings: &RepoSettings,
    start: SandboxStart<'_>,
    kept: Option<SnapshotInfo>,
) -> Result<(TaskSandbox, Option<EditorStart>, Conversation), TaskError> {
    let SandboxStart {
        image,
        spec,
        snapshot,
        early,
        checkout,
        history,
    } = start;
    let editor = needs.text_editor.enabled.then_some(needs.text_editor);
    let ready = async {
        let (sandbox, editor, filling) = start_sandbox::start(
            run,
            needs.backend,
            needs.hints,
            (early, spec),
            (checkout, history),
            editor,
        )
        .await?;
        let restoring = match (&snapshot, kept) {
            (Some(plan), Some(info)) => Some(snapshot::begin_restore(
                sandbox.clone(),
                plan,
                info,
                &needs.sandbox.home_dir,
            )),
            _ => None,
        };
        Ok::<_, TaskError>((sandbox, editor, filling, restoring))
    };
    let (conversation, ready) = tokio::join!(
        context::read_conversation(run, &needs.conversation, claimed),
        ready
    );
    let (sandbox, editor, filling, restoring) = ready?;
    run.note(format!("Sandbox from image `{image}`"));
    enter_agent_phase(run, sandbox.as_ref(), settings);
    let sandbox = TaskSandbox {
        sandbox,
        image,
        filling: Some(filling),
        restoring,
        snapshot,
    };
    Ok((sandbox, editor, conversation?))
}

/// With setup to run and no snapshot of it: the sandbox is made, filled
/// and set up before any model call (setup runs in the project, so the
/// copy comes first); the editor waits for the agent's phase.
async fn set_up_before_reading(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    repo: &RepoEnvironment,
    start: SandboxStart<'_>,
) -> Result<(TaskSandbox, Option<EditorStart>, Conversation), TaskError> {
    let settings = &repo.settings;
    run.report().await;
    let (sandbox, _, filling) = start_sandbox::start(
        run,
        needs.backend,
        needs.hints,
        (start.early, start.spec),
        (start.checkout, start.history),
        None,
    )
    .await?;
    filling.finished().await?;
    run.note(format!("Sandbox from image `{}`", start.image));
    let mut sandbox = TaskSandbox {
        sandbox,
        image: start.image,
        filling: None,
        restoring: None,
        snapshot: start.snapshot,
    };
    let set_up = setup(
        run,
        &needs.setup_rules(),
        &mut sandbox,
        (settings, repo.tree),
        &start.checkout.0,
    )
    .await;
    enter_agent_phase(run, sandbox.sandbox.as_ref(), settings);
    set_up?;
    let conversation = context::read_conversation(run, &needs.conversation, claimed).await?;
    Ok((sandbox, None, conversation))
}

/// Brings the repository's mirror up to date, makes the task's work tree
/// from it and packs the history the sandbox gets.
pub(in crate::task) async fn clone(
    run: &TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    credentials: &Credentials,
) -> Result<WorkspaceHandle, TaskError> {
    let target = &claimed.target;
    let (root, url, creds, mirrors, depth) = (
        needs.work_dir.clone(),
        target.clone_url.clone(),
        credentials.clone(),
        needs.mirrors.clone(),
        needs.history_depth,
    );
    let branches = Branches {
        base: target.base.clone(),
        default: target.default_branch.clone(),
        task: target.branch.clone(),
    };
    let author = (needs.author.0.to_owned(), needs.author.1.to_owned());
    let started = std::time::Instant::now();
    let (lfs, rules) = (needs.lfs.clone(), needs.submodules.clone());
    let (workspace, submodules) = crate::task::workbench::workspace_handle::blocking(move || {
        let mut ws = Workspace::prepare(&root, &url, &mirrors, &branches, &creds, (&author.0, &author.1))?;
        ws.use_lfs(&lfs, &creds)?;
        let source = crate::git::submodules::Source {
            forge_url: &url,
            mirrors: &mirrors,
            credentials: &creds,
            rules: &rules,
        };
        let commits = crate::git::submodules::Superproject {
            checkout: ws.base,
            declared_in: ws.default_tip()?,
        };
        let submodules = crate::git::submodules::for_work_tree(&ws.checkout_dir(), commits, &source);
        Ok::<_, crate::git::workspace::DeliveryError>((ws, submodules))
    })
    .await??;
    for line in crate::task::report::submodule_report::fetched_lines(&submodules) {
        run.note(line);
    }
    tracing::debug!(
        task = %run.item,
        ms = started.elapsed().as_millis() as u64,
        "repository made from the mirror (its files are written and its history packed in the background)"
    );
    let handle = WorkspaceHandle::new(workspace, depth, submodules.present);
    run.adopt_checkout(handle.checkout().1);
    Ok(handle)
}

/// Reads `.forgehand.yaml` and the instruction files from the default
/// branch and merges the settings with the operator's.
pub(in crate::task) async fn read_settings(
    run: &TaskRun<'_>,
    needs: &Needs<'_>,
    workspace: &WorkspaceHandle,
    base: &str,
) -> Result<RepoEnvironment, TaskError> {
    let repositories = needs.repositories.clone();
    let repository = run.item.repo.clone();
    let base = base.to_owned();
    let environment = workspace
        .with(move |ws| -> Result<RepoEnvironment, TaskError> {
            let mut wanted = vec![SETTINGS_FILE.to_owned()];
            wanted.extend(FALLBACK_FILES.iter().map(|p| (*p).to_owned()));
            let agents_files = ws.base_paths_named(&base, AGENTS_FILE)?;
            wanted.extend(agents_files.iter().cloned());
            let mut files = ws.read_base(&base, &wanted)?;
            let file = match files.get(SETTINGS_FILE) {
                Some(bytes) => {
                    let text = String::from_utf8(bytes.clone()).map_err(|_| {
                        TaskError::Settings(SettingsError::Syntax {
                            message: "the file is not UTF-8 text".into(),
                        })
                    })?;
                    Some(settings::parse_file(&text).map_err(TaskError::Settings)?)
                }
                None => None,
            };
            let language = crate::images::detect_language_by(|name| ws.head_has_file(name));
            let tree = if ws.checkout_is_default_history() {
                TreeOrigin::DefaultBranch
            } else {
                TreeOrigin::OtherCommits
            };
            let resolved = settings::resolve(&repositories, &repository, file.as_ref(), language);
            if let Some(named) = &resolved.instructions {
                files.extend(ws.read_base(&base, named)?);
            }
            let instructions = Instructions::gather(
                resolved.instructions.as_deref(),
                &|path| files.get(path).cloned(),
                &agents_files,
                repositories.instructions_tokens,
            );
            Ok(RepoEnvironment {
                settings: resolved,
                instructions,
                has_file: file.is_some(),
                language,
                tree,
            })
        })
        .await??;
    check_env_values(run, &environment.settings)?;
    Ok(environment)
}

/// A value equal to a configured secret would carry it into the sandbox.
fn check_env_values(run: &TaskRun<'_>, settings: &RepoSettings) -> Result<(), TaskError> {
    for (name, value) in &settings.env {
        if run.secrets.holds_own_value(value) {
            return Err(TaskError::Settings(SettingsError::Invalid {
                key: format!("env.{name}"),
                message: "the value holds one of forgehand's secrets; no secret ever enters a sandbox, so env holds plain settings only".into(),
            }));
        }
    }
    Ok(())
}

/// The progress lines about the repository's settings.
pub(in crate::task) fn note_settings(run: &TaskRun<'_>, environment: &RepoEnvironment) {
    let s = &environment.settings;
    if environment.has_file {
        let mut parts = Vec::new();
        if !s.setup.is_empty() {
            parts.push(format!("{} setup command(s)", s.setup.len()));
        }
        if let Some(test) = &s.test {
            parts.push(format!("tests `{test}`"));
        }
        if !s.env.is_empty() {
            parts.push(format!("{} variable(s)", s.env.len()));
        }
        run.note(format!(
            "Settings: `{SETTINGS_FILE}` from the default branch{}",
            if parts.is_empty() {
                String::new()
            } else {
                format!(" ({})", parts.join(", "))
            }
        ));
    }
    for note in &s.notes {
        run.note(note.clone());
    }
    if let Some(line) = environment.instructions.summary() {
        run.note(line);
    }
}

/// The image the task's sandbox runs: a pin, the settings' choice, or
/// detection.
fn choose_image(run: &TaskRun<'_>, needs: &Needs<'_>, repo: &RepoEnvironment) -> String {
    crate::images::chosen_image(
        needs.images,
        &run.item.repo,
        repo.settings.image.as_deref(),
        repo.language,
    )
}

/// Setup for `settings` in the task's sandbox, with the outcome on the
/// comment; a setup that passed is kept as a snapshot. A failure stops the
/// task unless the operator lets it go on.
pub(in crate::task) async fn setup(
    run: &mut TaskRun<'_>,
    rules: &SetupRules<'_>,
    task_sandbox: &mut TaskSandbox,
    (settings, tree): (&RepoSettings, TreeOrigin),
    checkout: &Path,
) -> Result<(), TaskError> {
    if settings.setup.is_empty() {
        return Ok(());
    }
    let sandbox = task_sandbox.sandbox.as_ref();
    enter_setup_phase(run, sandbox, settings, tree);
    run.at(
        crate::task::report::progress::Step::Change,
        format!("Setting up the repository ({} command(s))", settings.setup.len()),
    );
    run.report().await;
    let phase = crate::sandbox::phase_processes::phase_start(sandbox).await?;
    let outcome = crate::repo_settings::setup::run(sandbox, settings).await?;
    // What setup left running (a daemon it started, a process that
    // escaped its group) must not run on beside the model.
    let ended = crate::sandbox::phase_processes::end_phase(sandbox, phase).await?;
    if ended > 0 {
        tracing::warn!(task = %run.item, processes = ended, "setup left processes running; they were ended");
        run.note(format!("Setup: ended {ended} process(es) it left running"));
    }
    match outcome {
        Ok(took) => {
            run.emit(TaskEvent::RepositoryStep {
                step: "setup",
                outcome: "passed",
            });
            run.note(format!("Setup: done in {:.1} s", took.as_secs_f64()));
            if let Some(plan) = task_sandbox.snapshot.take() {
                let kept = snapshot::Kept {
                    plan,
                    image: &task_sandbox.image,
                    settings,
                    tree,
                    setup_took: took,
                    home_dir: rules.home_dir,
                };
                snapshot::save(run, task_sandbox.sandbox.as_ref(), checkout, kept).await;
            }
            Ok(())
        }
        Err(failed) => {
            let text = run.secrets.scrub(&failed.tail);
            run.emit(TaskEvent::RepositoryStep {
                step: "setup",
                outcome: failed.metric_outcome(),
            });
            if rules.on_failure == SetupFailure::Continue {
                run.note(format!(
                    "Setup failed: `{}` {}; the model works without it (repositories.on_setup_failure: continue)",
                    failed.command, failed.outcome
                ));
                return Ok(());
            }
            Err(TaskError::SetupFailed(SetupFailed { tail: text, ..failed }))
        }
    }
}

/// From here on the sandbox may reach only setup's hosts, with the egress
/// credentials only when the checkout is the default branch's own code.
fn enter_setup_phase(run: &TaskRun<'_>, sandbox: &dyn Sandbox, settings: &RepoSettings, tree: TreeOrigin) {
    let Some(egress) = sandbox.egress() else {
        return;
    };
    match tree {
        TreeOrigin::DefaultBranch => egress.set_phase("setup", settings.setup_hosts.clone()),
        TreeOrigin::OtherCommits => {
            egress.set_phase_without_credentials("setup", settings.setup_hosts.clone());
            if egress.adds_credentials() {
                tracing::info!(task = %run.item, "setup runs without the egress credentials: the checkout holds commits the default branch does not have");
                let line = "Setup: runs without the egress credentials (`sandbox.egress.credentials`): the task branch holds commits that are not on the default branch, and no credential goes to code they may have changed".to_owned();
                run.emit(TaskEvent::Note {
                    line: line.clone(),
                    transcript: Some(line),
                });
            }
        }
    }
}

/// From here on the sandbox may reach only the agent's hosts; what setup
/// reached goes on the comment.
pub(in crate::task) fn enter_agent_phase(run: &TaskRun<'_>, sandbox: &dyn Sandbox, settings: &RepoSettings) {
    match sandbox.egress() {
        Some(egress) => {
            if let Some(line) = egress.summary("setup") {
                run.note(format!("Network: {line}"));
            }
            egress.set_phase("agent", settings.agent_hosts.clone());
        }
        None if !settings.setup.is_empty() || !settings.agent_hosts.is_empty() => {
            run.note(
                "Network: none (this sandbox has no forgehand supervisor, so `network` settings cannot apply)",
            );
        }
        None => {}
    }
}
