//! Starting the task's sandbox, off the critical path where it can be:
//!
//! - **Early.** A repository's tasks almost always run the same image with
//!   the same variables, so the sandbox the last task of the repository
//!   ran is started again while the clone is made and the settings are
//!   read. When the settings ask for something else after all, that
//!   sandbox is removed (it never got a file or a command) and the right
//!   one is made.
//! - **The copy in the background.** The checkout goes into the sandbox
//!   while the thread is read and the model is first asked; the agent's
//!   tools, setup, tests and delivery wait for it ([`Filling`]).
//! - **The editor beside the copy.** Without setup to run first, the
//!   editor's MCP session starts while the checkout is copied in.

use crate::config::TextEditorMcpConfig;
use crate::git::history_pack::HistoryPack;
use crate::mcp::SandboxedServer;
use crate::repo_settings::RepoSettings;
use crate::sandbox::command::shell_quote;
use crate::sandbox::{Sandbox, SandboxBackend, SandboxError, SandboxSpec};
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::workbench::workspace_handle::{CheckedOut, HistoryReady};
use futures_util::future::FutureExt;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What each repository's last task ran its sandbox with, for the next
/// task to start the same one early.
#[derive(Default)]
pub struct SandboxHints(Mutex<HashMap<String, Hint>>);

/// The image and the variables a sandbox ran with.
#[derive(Clone)]
struct Hint {
    image: String,
    env: Vec<(String, String)>,
}

impl SandboxHints {
    /// The sandbox `run`'s repository ran last, for this task.
    fn guess(&self, run: &TaskRun<'_>) -> Option<SandboxSpec> {
        let hints = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Hint { image, env } = hints.get(&repository_key(run))?.clone();
        Some(SandboxSpec {
            task_id: run.item.slug(),
            forge: run.item.forge.as_str().to_owned(),
            repository: run.item.repo.clone(),
            image,
            env,
        })
    }

    fn remember(&self, run: &TaskRun<'_>, spec: &SandboxSpec) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(
            repository_key(run),
            Hint {
                image: spec.image.clone(),
                env: spec.env.clone(),
            },
        );
    }
}

fn repository_key(run: &TaskRun<'_>) -> String {
    format!("{}:{}", run.item.forge.as_str(), run.item.repo)
}

/// A sandbox started before the repository's settings were read.
pub(in crate::task) struct Early {
    spec: SandboxSpec,
    started: Result<Box<dyn Sandbox>, SandboxError>,
}

/// Starts the sandbox the repository's last task ran, if there was one.
pub(in crate::task) async fn start_early(
    run: &TaskRun<'_>,
    backend: &dyn SandboxBackend,
    hints: &SandboxHints,
) -> Option<Early> {
    let spec = hints.guess(run)?;
    let started = backend.prepare(&spec, None).await;
    Some(Early { spec, started })
}

/// Removes a sandbox started early that the task will not use.
pub(in crate::task) async fn discard(run: &TaskRun<'_>, early: Option<Early>) {
    if let Some(Early {
        started: Ok(sandbox), ..
    }) = early
    {
        if let Err(e) = sandbox.remove().await {
            tracing::warn!(task = %run.item, "cannot remove the sandbox started early: {e}");
        }
    }
}

/// The sandbox the task's settings ask for.
pub(in crate::task) fn spec_for(run: &TaskRun<'_>, settings: &RepoSettings, image: &str) -> SandboxSpec {
    SandboxSpec {
        task_id: run.item.slug(),
        forge: run.item.forge.as_str().to_owned(),
        repository: run.item.repo.clone(),
        image: image.to_owned(),
        env: settings.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    }
}

/// The history the project's `.git` borrows (a pack made on the host, in
/// the background), and the folder of the sandbox it goes to.
pub(in crate::task) struct SandboxHistory {
    pub pack: HistoryReady,
    pub dir: String,
}

/// The files that make the project's `.git` read `pack` in the sandbox's
/// `dir`, relative to the project: `objects/info/alternates` and, when
/// cut, `shallow`.
fn git_files(pack: &HistoryPack, dir: &str) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![(
        ".git/objects/info/alternates".to_owned(),
        format!("{dir}/objects\n").into_bytes(),
    )];
    if !pack.shallow.is_empty() {
        files.push((".git/shallow".to_owned(), pack.shallow_file().into_bytes()));
    }
    files
}

/// The project's files on their way into the sandbox while the task goes
/// on: the model's first request does not wait for them, its first tool
/// call and anything that reads the project (setup, tests, delivery) do.
pub(in crate::task) struct Filling {
    ready: crate::agent::Readiness,
    job: tokio_util::task::AbortOnDropHandle<Result<(), SandboxError>>,
}

impl Filling {
    /// For the agent: its tools wait until the project is in place.
    pub fn readiness(&self) -> crate::agent::Readiness {
        self.ready.clone()
    }

    /// Waits for the copy; its error, if it failed.
    pub async fn finished(self) -> Result<(), TaskError> {
        match self.job.await {
            Ok(copied) => Ok(copied?),
            Err(e) => Err(TaskError::Other(format!(
                "copying the project into the sandbox stopped: {e}"
            ))),
        }
    }
}

/// The editor's session as it starts in the background.
pub(in crate::task) type EditorStart = tokio::task::JoinHandle<Result<SandboxedServer, crate::mcp::McpError>>;

/// The sandbox for `spec`, registered for removal, with the checkout (its
/// `.git` reading the history from beside the project) being copied in:
/// the one started early when it was started for this very spec, else a
/// new one. With `editor`, the editor's session starts while the checkout
/// is copied in.
pub(in crate::task) async fn start(
    run: &TaskRun<'_>,
    backend: &dyn SandboxBackend,
    hints: &SandboxHints,
    (early, spec): (Option<Early>, SandboxSpec),
    (checkout, history): (&(PathBuf, CheckedOut), &SandboxHistory),
    editor: Option<&TextEditorMcpConfig>,
) -> Result<(Arc<dyn Sandbox>, Option<EditorStart>, Filling), TaskError> {
    let sandbox = match early {
        Some(Early {
            spec: guessed,
            started,
        }) if guessed == spec => match started {
            Ok(sandbox) => {
                tracing::debug!(task = %run.item, "the sandbox started early is the one the settings ask for");
                sandbox
            }
            Err(e) => {
                tracing::info!(task = %run.item, "the sandbox started early did not start ({e}); trying once more");
                backend.prepare(&spec, None).await?
            }
        },
        other => {
            if other.is_some() {
                tracing::info!(task = %run.item, image = %spec.image, "the settings ask for another sandbox than the last task's; starting it");
            }
            discard(run, other).await;
            backend.prepare(&spec, None).await?
        }
    };
    let sandbox: Arc<dyn Sandbox> = Arc::from(sandbox);
    run.adopt_sandbox(&sandbox)?;
    hints.remember(run, &spec);
    let project = sandbox.project_dir().to_owned();
    let editor = match editor {
        Some(config) => {
            // The editor's root must exist before the copy fills it.
            let made = sandbox
                .exec(
                    &format!("mkdir -p {}", shell_quote(&project)),
                    Some(Duration::from_secs(60)),
                )
                .await?;
            made.success().then(|| {
                let (sandbox, config) = (sandbox.clone(), config.clone());
                tokio::spawn(async move { crate::mcp::text_editor::start(sandbox, &config).await })
            })
        }
        None => None,
    };
    let filling = fill(run, &sandbox, &spec.image, checkout, history);
    Ok((sandbox, editor, filling))
}

/// Copies the checkout and the history pack into `sandbox` in the
/// background, each once it is made.
fn fill(
    run: &TaskRun<'_>,
    sandbox: &Arc<dyn Sandbox>,
    image: &str,
    (checkout, checked_out): &(PathBuf, CheckedOut),
    history: &SandboxHistory,
) -> Filling {
    let (sandbox, checkout, checked_out, packed, history_dir) = (
        sandbox.clone(),
        checkout.to_owned(),
        checked_out.clone(),
        history.pack.clone(),
        history.dir.clone(),
    );
    let (task, image) = (run.item.to_string(), image.to_owned());
    let (told, heard) = tokio::sync::oneshot::channel();
    let job = tokio::spawn(async move {
        let project = sandbox.project_dir().to_owned();
        let not_made = |detail| SandboxError::CopyInSource {
            path: checkout.clone(),
            detail,
        };
        let copying = std::time::Instant::now();
        let copied = async {
            let pack = packed.await.map_err(not_made)?;
            // The work tree's `.git` came from the host: its alternates name
            // the host's mirror, its shallow edge the mirror's. The same copy
            // puts the sandbox's own in their place.
            let git_files = git_files(&pack, &history_dir);
            let project_copied = async {
                checked_out.await.map_err(not_made)?;
                sandbox.copy_in_replacing(&checkout, &project, &git_files).await
            };
            let (project_copied, history_copied) =
                tokio::join!(project_copied, sandbox.copy_in(&pack.dir, &history_dir));
            project_copied.and(history_copied)
        }
        .await;
        match &copied {
            Ok(()) => {
                tracing::info!(
                    task,
                    image,
                    copy_ms = copying.elapsed().as_millis() as u64,
                    "sandbox ready"
                );
            }
            Err(e) => tracing::warn!(task, "cannot copy the project into the sandbox: {e}"),
        }
        let _ = told.send(copied.as_ref().map(|_| ()).map_err(|e| e.to_string()));
        copied
    });
    let ready = heard
        .map(|told| told.unwrap_or_else(|_| Err("the copy into the sandbox stopped".to_owned())))
        .boxed()
        .shared();
    Filling {
        ready,
        job: tokio_util::task::AbortOnDropHandle::new(job),
    }
}
