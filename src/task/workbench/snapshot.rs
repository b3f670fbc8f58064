//! The task's setup snapshots: restore one instead of running setup when
//! the inputs match, keep one after a setup that passed. Neither ever
//! fails the task: without a snapshot, setup simply runs.

use crate::config::SnapshotsConfig;
use crate::forge::ItemKind;
use crate::repo_settings::RepoSettings;
use crate::sandbox::{Sandbox, SandboxBackend};
use crate::snapshots::key::{self as snapshot_key, SnapshotKey};
use crate::snapshots::{human_bytes, now_secs, SnapshotInfo, SnapshotStore};
use crate::task::report::events::TaskEvent;
use crate::task::run::TaskRun;
use futures_util::future::{BoxFuture, FutureExt, Shared};
use std::path::Path;
use std::sync::Arc;

/// Whose code the task's checkout is. Setup runs the project's own hooks
/// (`preinstall`, `setup.py`, build scripts), so it gets the egress
/// credentials only where every commit is the default branch's: a
/// follow-up starts from the task branch, which holds what the model
/// pushed on an earlier run (or a change's author wrote).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::task) enum TreeOrigin {
    /// The default branch's tip, or a commit below it.
    DefaultBranch,
    /// A branch with commits the default branch does not have.
    OtherCommits,
}

/// A snapshot being unpacked into the sandbox while the task goes on.
pub(in crate::task) struct PendingRestore {
    pub(in crate::task) info: SnapshotInfo,
    done: Shared<BoxFuture<'static, Result<std::time::Duration, String>>>,
}

impl PendingRestore {
    /// For the agent: its tools wait until the snapshot is in place.
    pub(in crate::task) fn readiness(&self) -> crate::agent::Readiness {
        self.done
            .clone()
            .map(|restored| restored.map(|_| ()))
            .boxed()
            .shared()
    }

    /// How the restore went (waiting for it if it is still under way).
    pub(in crate::task) async fn finished(&self) -> Result<std::time::Duration, String> {
        self.done.clone().await
    }
}

/// Where this task's setup snapshot would be.
pub(in crate::task) struct SnapshotPlan {
    store: SnapshotStore,
    key: SnapshotKey,
    image_id: String,
}

impl SnapshotPlan {
    /// The setup's key the snapshot is kept under.
    pub(in crate::task) fn key(&self) -> &str {
        &self.key.key
    }

    /// The snapshot kept for this key, if any.
    pub(in crate::task) fn find(&self, run: &TaskRun<'_>) -> Option<SnapshotInfo> {
        let found = self.store.find(&self.key.key);
        if found.is_none() {
            run.emit(TaskEvent::RepositoryStep {
                step: "snapshot",
                outcome: "miss",
            });
        }
        found
    }
}

/// The snapshot key for this setup, when snapshots are on and the backend
/// can name the image.
pub(in crate::task) async fn plan(
    run: &TaskRun<'_>,
    backend: &dyn SandboxBackend,
    config: &SnapshotsConfig,
    checkout: &Path,
    image: &str,
    settings: &RepoSettings,
) -> Option<SnapshotPlan> {
    if !config.enabled {
        return None;
    }
    let image_id = match backend.image_id(image).await {
        Ok(Some(id)) => id,
        Ok(None) => return None,
        Err(err) => {
            tracing::warn!(task = %run.item, image, error = %err, "no setup snapshot: the image's id is unknown");
            return None;
        }
    };
    let (dir, id, wanted) = (checkout.to_owned(), image_id.clone(), settings.clone());
    let repository = format!("{}:{}", run.item.forge.as_str(), run.item.repo);
    match tokio::task::spawn_blocking(move || snapshot_key::compute(&repository, &dir, &id, &wanted)).await {
        Ok(Ok(key)) => Some(SnapshotPlan {
            store: SnapshotStore::new(config),
            key,
            image_id,
        }),
        Ok(Err(err)) => {
            tracing::warn!(task = %run.item, error = %err, "no setup snapshot: a dependency file could not be read");
            None
        }
        Err(err) => {
            tracing::warn!(task = %run.item, error = %err, "no setup snapshot: computing its key failed");
            None
        }
    }
}

/// Starts unpacking `info` into `sandbox`'s `home_dir` in the background:
/// planning and the agent's first request go on meanwhile; its tools wait.
pub(in crate::task) fn begin_restore(
    sandbox: Arc<dyn Sandbox>,
    plan: &SnapshotPlan,
    info: SnapshotInfo,
    home_dir: &str,
) -> PendingRestore {
    let store = plan.store.clone();
    let home = home_dir.to_owned();
    let kept = info.clone();
    // Aborted if the task ends first: the sandbox goes with it anyway.
    let unpacking = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        let started = std::time::Instant::now();
        let restored = store.restore(sandbox.as_ref(), &home, &kept).await;
        if restored.is_err() {
            // Setup runs instead and keeps a new one under the same key.
            if let Err(err) = store.remove_where(|s| s.key == kept.key) {
                tracing::warn!(snapshot = %kept.short_key(), error = %err, "a snapshot that could not be restored could not be removed either");
            }
        }
        restored.map(|()| started.elapsed()).map_err(|e| e.to_string())
    }));
    let done = async move {
        match unpacking.await {
            Ok(restored) => restored,
            Err(err) => Err(format!("the restore stopped: {err}")),
        }
    }
    .boxed()
    .shared();
    PendingRestore { info, done }
}

/// Says on the comment how a restore went; `true` when setup need not run.
pub(in crate::task) fn note_restore(
    run: &TaskRun<'_>,
    info: &SnapshotInfo,
    restored: Result<std::time::Duration, String>,
) -> bool {
    match restored {
        Ok(took) => {
            run.emit(TaskEvent::RepositoryStep {
                step: "snapshot",
                outcome: "hit",
            });
            tracing::info!(task = %run.item, snapshot = %info.short_key(), took_ms = took.as_millis() as u64, "setup snapshot restored");
            run.note(format!(
                "Setup: not run; snapshot `{}` restored in {:.1} s ({}, from a setup of {:.1} s, {} ago)",
                info.short_key(),
                took.as_secs_f64(),
                human_bytes(info.bytes),
                info.setup_seconds,
                humantime::format_duration(std::time::Duration::from_secs(
                    now_secs().saturating_sub(info.created_at)
                ))
            ));
            true
        }
        Err(err) => {
            run.emit(TaskEvent::RepositoryStep {
                step: "snapshot",
                outcome: "restore_failed",
            });
            tracing::warn!(task = %run.item, snapshot = %info.short_key(), error = %err, "setup snapshot could not be restored; running setup");
            run.note(format!(
                "Setup snapshot `{}` could not be restored ({}); running setup",
                info.short_key(),
                run.secrets.scrub(&err)
            ));
            false
        }
    }
}

/// A setup that passed, to keep as a snapshot.
pub(in crate::task) struct Kept<'a> {
    pub plan: SnapshotPlan,
    pub image: &'a str,
    pub settings: &'a RepoSettings,
    /// Whose code setup ran in.
    pub tree: TreeOrigin,
    pub setup_took: std::time::Duration,
    /// The sandbox's home folder, which the snapshot holds.
    pub home_dir: &'a str,
}

/// Keeps what setup wrote as a snapshot for the next task.
pub(in crate::task) async fn save(run: &TaskRun<'_>, sandbox: &dyn Sandbox, checkout: &Path, kept: Kept<'_>) {
    let Kept {
        plan,
        image,
        settings,
        tree,
        setup_took,
        home_dir,
    } = kept;
    // A branch with commits of its own (a pull request's, or the task
    // branch of a follow-up, which holds what the model pushed) is not the
    // default branch's: what its setup wrote is not kept for the tasks
    // that start from the default branch (restoring a snapshot the
    // default branch made is fine).
    if tree == TreeOrigin::OtherCommits {
        tracing::info!(task = %run.item, "no setup snapshot kept: the setup ran on a branch with commits the default branch does not have");
        let whose = match run.item.kind {
            ItemKind::Change => format!("this {}'s own files", run.item.forge.change_noun()),
            _ => "the task branch's own commits".to_owned(),
        };
        run.note(format!(
            "No setup snapshot kept: the setup ran on {whose}; snapshots come from the default branch only"
        ));
        return;
    }
    let info = SnapshotInfo {
        key: plan.key.key.clone(),
        repository: run.item.repo.clone(),
        image: image.to_owned(),
        image_id: plan.image_id.clone(),
        inputs: plan.key.inputs.clone(),
        setup_commands: settings.setup.clone(),
        setup_seconds: setup_took.as_secs_f64(),
        created_at: 0,
        last_used_at: 0,
        bytes: 0,
    };
    let started = std::time::Instant::now();
    let home = home_dir.to_owned();
    let secrets = run.secrets;
    match plan
        .store
        .save(sandbox, &home, checkout, info, &secrets.values())
        .await
    {
        Ok(info) => {
            run.emit(TaskEvent::RepositoryStep {
                step: "snapshot",
                outcome: "saved",
            });
            tracing::info!(task = %run.item, snapshot = %info.short_key(), bytes = info.bytes, took_ms = started.elapsed().as_millis() as u64, "setup snapshot saved");
            run.note(format!(
                "Snapshot `{}` kept ({}, {:.1} s): the next task with the same setup and dependency files skips setup",
                info.short_key(),
                human_bytes(info.bytes),
                started.elapsed().as_secs_f64()
            ));
        }
        Err(err) => {
            run.emit(TaskEvent::RepositoryStep {
                step: "snapshot",
                outcome: "not_saved",
            });
            tracing::warn!(task = %run.item, error = %err, "no setup snapshot kept");
            run.note(format!(
                "No setup snapshot kept: {}",
                secrets.scrub(&err.to_string())
            ));
        }
    }
}
