//! The agent's run kept at every step boundary, and resumed from there.
//!
//! After each step whose calls may have changed files, the sandbox commits
//! its tree on the side (a temporary index and `git commit-tree`, the new
//! objects in a folder of their own beside the project: the model's index,
//! HEAD, branches and objects stay as they are), and its `.git` and that
//! folder are taken out as data into a quarantine repository on the host,
//! the commit kept under a private ref, never pushed; the conversation so far goes to
//! the task's record with it (the journal, or a store the replicas share:
//! see [`store`]). Two quarantines take turns, so a kill while one is
//! written leaves the other whole.
//!
//! A task started again (SIGKILL, a restart, an engine restart, a takeover
//! by another replica sharing the store) resumes
//! its run in the new sandbox from the last checkpoint: the commit is
//! handed to the sandbox, its files become the work tree again (the
//! model's commits as they were, what it left uncommitted uncommitted),
//! and the model goes on with the conversation as it was. A checkpoint
//! made on another base or in another image is not used: the run starts
//! over, and says so.

mod resume;
mod store;

pub(in crate::task) use resume::{resume, Resumed};
pub use store::sweep;
pub(in crate::task) use store::Store;

use crate::agent::{Checkpointer, StepPoint};
use crate::config::CopyOutLimits;
use crate::git::untrusted::{self, UntrustedError};
use crate::git::workspace::DeliveryError;
use crate::journal::AgentCheckpoint;
use crate::sandbox::command::shell_quote;
use crate::sandbox::tree_out::read_tree;
use crate::sandbox::{Sandbox, SandboxError};
use crate::task::handoff::Prepared;
use crate::task::state::error::TaskError;
use crate::task::workbench::workspace_handle::WorkspaceHandle;
use git2::Oid;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Tools that change no file: a step of only these keeps the last tree.
const READ_ONLY_TOOLS: &[&str] = &["text_editor_view", crate::agent::plan::UPDATE_PLAN];

/// The folder, beside the project, the sandbox's side commit is made in.
const SIDE_DIR: &str = "checkpoint-objects";

/// The folder, beside the project, the checkpoint is handed over in.
const HANDOVER_DIR: &str = "checkpoint.git";

/// Most a checkpoint's `.git` may send (`sandbox.copy_out` when lower):
/// taken every step, it is held far below the one copy-out of delivery.
const MAX_CHECKPOINT_BYTES: u64 = 256 << 20;
const MAX_CHECKPOINT_ENTRIES: u64 = 100_000;

/// How long the sandbox may take to commit its tree on the side.
const SIDE_COMMIT_TIME: Duration = Duration::from_secs(120);

/// The side commit's exit code for a file over the cap.
const TOO_LARGE: i64 = 4;

/// Most a checkpoint's conversation may weigh in its record, written
/// every step.
const MAX_CONVERSATION_BYTES: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("the sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Untrusted(#[from] UntrustedError),
    #[error(transparent)]
    Records(#[from] crate::task::state::records::RecordError),
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
    #[error(transparent)]
    Task(#[from] Box<TaskError>),
    #[error("{0}")]
    Refused(String),
    /// The sandbox's files were changed part of the way: it can neither
    /// resume nor start over in it.
    #[error("{0}")]
    HalfRestored(String),
}

impl From<TaskError> for CheckpointError {
    fn from(err: TaskError) -> CheckpointError {
        CheckpointError::Task(Box::new(err))
    }
}

/// The last checkpoint this run kept.
#[derive(Clone)]
struct Kept {
    /// The run that wrote its quarantine, and which of its two.
    writer: String,
    slot: u8,
    commit: Oid,
    /// The sandbox's tree and HEAD then: an unchanged state is not taken again.
    state: String,
}

/// Keeps the run's step boundaries (the agent's [`Checkpointer`]).
pub(in crate::task) struct Keeper {
    store: Store,
    sandbox: Arc<dyn Sandbox>,
    workspace: WorkspaceHandle,
    base: Oid,
    image: String,
    /// A digest of the request and the plan the run was given.
    asked: String,
    limits: CopyOutLimits,
    /// `<workspace_dir>/checkpoint-objects` in the sandbox.
    side: String,
    last: Mutex<Option<Kept>>,
    /// Set when what the sandbox holds could not be kept: the run keeps
    /// none after it (each would pay the same again).
    given_up: std::sync::atomic::AtomicBool,
    /// Set once a record names this run's own quarantine: the earlier
    /// runs' are removed then.
    own_named: std::sync::atomic::AtomicBool,
}

impl Keeper {
    pub async fn new(
        store: Store,
        prepared: &Prepared,
        (limits, workspace_dir): (CopyOutLimits, &str),
        (resumed_from, asked): (Option<&Resumed>, String),
    ) -> Result<Keeper, TaskError> {
        let base = prepared.workspace.with(|ws| ws.base).await?;
        let last = resumed_from.map(|resumed| Kept {
            writer: resumed.writer.clone(),
            slot: resumed.slot,
            commit: resumed.commit,
            state: String::new(),
        });
        Ok(Keeper {
            store,
            sandbox: prepared.sandbox.sandbox.clone(),
            workspace: prepared.workspace.share(),
            base,
            image: prepared.sandbox.image.clone(),
            asked,
            limits: CopyOutLimits {
                bytes: limits.bytes.min(MAX_CHECKPOINT_BYTES),
                entries: limits.entries.min(MAX_CHECKPOINT_ENTRIES),
                depth: limits.depth,
            },
            side: format!("{}/{SIDE_DIR}", workspace_dir.trim_end_matches('/')),
            last: Mutex::new(last),
            given_up: std::sync::atomic::AtomicBool::new(false),
            own_named: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn last(&self) -> Option<Kept> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Keeps step `point`: the tree when it changed, the conversation always.
    async fn keep(&self, point: &StepPoint<'_>) -> Result<(), CheckpointError> {
        let last = self.last();
        let read_only = point
            .calls
            .iter()
            .all(|c| READ_ONLY_TOOLS.contains(&c.name.as_str()));
        let kept = match (&last, read_only) {
            (Some(last), true) => last.clone(),
            _ => {
                let (commit, state) = self.commit_in_sandbox().await?;
                match &last {
                    Some(last) if last.state == state => last.clone(),
                    _ => {
                        let writer = self.store.writer().to_owned();
                        // This run's two quarantines take turns.
                        let slot = match &last {
                            Some(last) if last.writer == writer => 1 - last.slot,
                            _ => 0,
                        };
                        // The claim may have run out while the sandbox committed.
                        if !self.store.held() {
                            return Err(crate::task::state::records::RecordError::Fenced.into());
                        }
                        self.take_out(slot, commit).await?;
                        crate::kill_point::reached(crate::kill_point::CHECKPOINT_TAKEN_OUT);
                        Kept {
                            writer,
                            slot,
                            commit,
                            state,
                        }
                    }
                }
            }
        };
        let checkpoint = AgentCheckpoint {
            step: point.step,
            tool_calls: point.tool_calls,
            commit: kept.commit.to_string(),
            slot: kept.slot,
            writer: kept.writer.clone(),
            base: self.base.to_string(),
            image: self.image.clone(),
            asked: self.asked.clone(),
            messages: point.messages.to_vec(),
        };
        let store = self.store.clone();
        let weight = tokio::task::spawn_blocking(move || store.save(&checkpoint, MAX_CONVERSATION_BYTES))
            .await
            .map_err(|e| CheckpointError::Refused(format!("the checkpoint's writer stopped: {e}")))??;
        if weight > MAX_CONVERSATION_BYTES {
            return Err(CheckpointError::Refused(format!(
                "the conversation weighs {weight} bytes, over the {MAX_CONVERSATION_BYTES} a checkpoint keeps"
            )));
        }
        let own = kept.writer == self.store.writer();
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(kept);
        if own && !self.own_named.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.store.remove_earlier_writers();
        }
        Ok(())
    }

    /// Commits the sandbox's tree on the side; (the commit, the state it
    /// stands for). Only the commit id is read from what the sandbox says,
    /// and only as a name to look for in what it sends.
    async fn commit_in_sandbox(&self) -> Result<(Oid, String), CheckpointError> {
        // The side commit's objects go to a folder of their own beside the
        // project (the model's `.git` gets none of them), made anew each time.
        // A file over the byte cap (a sparse terabyte) is never read:
        // `git add` would hash all of it.
        let script = format!(
            "set -e; if find . -path ./.git -prune -o -type f -size +{cap}c -print | head -n 1 | grep -q .; then exit {TOO_LARGE}; fi; \
             dir=$(git rev-parse --git-dir); side={side}; rm -rf \"$side\"; mkdir -p \"$side/objects\"; \
             objects=$(cd \"$dir/objects\" && pwd); idx=\"$side/index\"; \
             if [ -f \"$dir/index\" ]; then cp \"$dir/index\" \"$idx\"; fi; \
             export GIT_OBJECT_DIRECTORY=\"$side/objects\" GIT_ALTERNATE_OBJECT_DIRECTORIES=\"$objects\"; \
             GIT_INDEX_FILE=\"$idx\" git add -A; tree=$(GIT_INDEX_FILE=\"$idx\" git write-tree); rm -f \"$idx\"; \
             head=$(git rev-parse -q --verify HEAD); \
             commit=$(echo checkpoint | git -c user.name=forgehand -c user.email=forgehand@localhost commit-tree \"$tree\" -p \"$head\"); \
             echo \"$commit $tree $head\"",
            side = shell_quote(&self.side),
            cap = self.limits.bytes,
        );
        let out = self.sandbox.exec(&script, Some(SIDE_COMMIT_TIME)).await?;
        match out.exit_code {
            Some(0) => {}
            Some(TOO_LARGE) => {
                return Err(CheckpointError::Refused(format!(
                    "the project holds a file over the checkpoint's cap of {} bytes",
                    self.limits.bytes
                )))
            }
            None => {
                return Err(CheckpointError::Refused(format!(
                    "committing the sandbox's tree took over {} s",
                    SIDE_COMMIT_TIME.as_secs()
                )))
            }
            Some(code) => {
                return Err(CheckpointError::Refused(format!(
                    "git could not commit the sandbox's tree (exit code {code})"
                )))
            }
        }
        let line = out.stdout.trim();
        let commit = line
            .split(' ')
            .next()
            .and_then(|id| Oid::from_str(id).ok())
            .filter(|_| line.len() <= 200)
            .ok_or_else(|| CheckpointError::Refused("the sandbox named no commit".into()))?;
        let state = line
            .split_once(' ')
            .map(|(_, rest)| rest.to_owned())
            .unwrap_or_default();
        Ok((commit, state))
    }

    /// Takes the sandbox's `.git` out into quarantine `slot`, keeping `commit`.
    async fn take_out(&self, slot: u8, commit: Oid) -> Result<(), CheckpointError> {
        let project = self.sandbox.project_dir().to_owned();
        let (trusted, known) = self
            .workspace
            .with(|ws| (ws.object_dirs(), ws.history_tips()))
            .await?;
        let (into, limits) = (self.store.slot_dir(self.store.writer(), slot), self.limits);
        if let Some(parent) = into.parent() {
            std::fs::create_dir_all(parent).map_err(|source| UntrustedError::Io {
                path: parent.to_owned(),
                source,
            })?;
        }
        // The model's objects (its commits), then the side commit's own.
        for (folder, fresh) in [(format!("{project}/.git"), true), (self.side.clone(), false)] {
            let tree = self.sandbox.read_out(&folder).await?;
            let into = into.clone();
            let read = read_tree(tree, move |input| {
                untrusted::take_objects(input, &into, &limits, fresh)
            })
            .await?;
            match (read.read, read.sandbox) {
                (Ok(()), Ok(())) => {}
                // A broken stream is best explained by the sandbox's side.
                (Err(UntrustedError::Stream(_)), Err(e)) | (Ok(()), Err(e)) => return Err(e.into()),
                (Err(e), _) => return Err(e.into()),
            }
        }
        tokio::task::spawn_blocking(move || {
            untrusted::keep_commit(&into, commit, &limits, (&known, &trusted))
        })
        .await
        .map_err(|e| CheckpointError::Refused(format!("the quarantine's reader stopped: {e}")))??;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Checkpointer for Keeper {
    async fn step_done(&self, point: &StepPoint<'_>) {
        use std::sync::atomic::Ordering;
        // Given up, or the task stops (among replicas: its claim is lost
        // and another replica may take it over from the last one).
        if self.given_up.load(Ordering::Relaxed) || !self.store.held() {
            return;
        }
        let started = std::time::Instant::now();
        match self.keep(point).await {
            Ok(()) => tracing::debug!(
                task = %self.store.key,
                step = point.step,
                took_ms = started.elapsed().as_millis() as u64,
                "checkpoint kept"
            ),
            // The sandbox away (an engine restart): the last checkpoint
            // stays, the task is deferred and resumes from it.
            Err(
                e @ (CheckpointError::Sandbox(_)
                | CheckpointError::Records(crate::task::state::records::RecordError::Fenced)),
            ) => {
                tracing::warn!(
                    task = %self.store.key,
                    step = point.step,
                    "no checkpoint after this step ({e}); a resume starts from the one before"
                )
            }
            // What the sandbox holds cannot be kept (over a cap, refused):
            // each later step would pay the same again.
            Err(e) => {
                tracing::warn!(
                    task = %self.store.key,
                    step = point.step,
                    "no checkpoint after this step ({e}); this run keeps none from here, a resume starts from the one before"
                );
                self.given_up.store(true, Ordering::Relaxed);
            }
        }
    }
}
