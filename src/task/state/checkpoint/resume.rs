//! A run resumed from its last checkpoint: the checkpoint's commit put
//! back into the new sandbox, or, when it cannot be used, the run started
//! over, saying why.

use crate::agent::Start;
use crate::git::untrusted;
use crate::journal::AgentCheckpoint;
use crate::sandbox::command::shell_quote;
use crate::task::handoff::Prepared;
use crate::task::run::TaskRun;
use crate::task::state::checkpoint::{CheckpointError, Store, HANDOVER_DIR};
use crate::task::state::error::TaskError;
use git2::Oid;
use std::time::Duration;

/// What a resumed run starts from, when the task's last checkpoint
/// (`saved`) can be used in `prepared`'s sandbox: its files are put back there first. `None`
/// (said on the progress comment): the run starts over.
pub(in crate::task) async fn resume(
    run: &mut TaskRun<'_>,
    store: &Store,
    saved: AgentCheckpoint,
    (prepared, asked): (&Prepared, &str),
    workspace_dir: &str,
) -> Result<Option<Resumed>, TaskError> {
    let base = prepared.workspace.with(|ws| ws.base).await?;
    let unusable = if saved.base != base.to_string() {
        Some("the branch it was made on has moved")
    } else if saved.image != prepared.sandbox.image {
        Some("the sandbox's image has changed")
    } else if !saved.asked.is_empty() && saved.asked != asked {
        Some("the request or the plan it was given has changed")
    } else {
        None
    };
    if let Some(why) = unusable {
        run.note(format!(
            "The model's run was interrupted after step {}; its checkpoint cannot be used ({why}), so the run starts over",
            saved.step
        ));
        store.forget();
        return Ok(None);
    }
    let commit = match put_back(store, &saved, prepared, workspace_dir).await {
        Ok(commit) => commit,
        Err(e) => return given_up(run, store, saved.step, e),
    };
    tracing::info!(task = %run.item, step = saved.step, "resuming the model's run from its checkpoint");
    run.note(format!(
        "Resumed the model's run after step {} from its checkpoint (the conversation and the sandbox's files as they were then)",
        saved.step
    ));
    Ok(Some(Resumed {
        writer: saved.writer.clone(),
        slot: saved.slot,
        commit,
        start: Start {
            messages: saved.messages,
            steps: saved.step,
            tool_calls: saved.tool_calls,
        },
    }))
}

/// A checkpoint that could not be put back: forgotten, and the run starts
/// over (said on the comment), or, when the sandbox was changed part of
/// the way, the attempt fails.
fn given_up(
    run: &mut TaskRun<'_>,
    store: &Store,
    step: u32,
    e: CheckpointError,
) -> Result<Option<Resumed>, TaskError> {
    // The reason may quote the sandbox (a git error): it goes to the
    // log; the comment says it in forgehand's own words.
    tracing::warn!(task = %run.item, "cannot put the checkpoint back into the sandbox: {e}");
    store.forget();
    if let CheckpointError::HalfRestored(_) = e {
        return Err(TaskError::Other(
            "the model's run could not be resumed in its new sandbox (git stopped while checking its checkpoint out); the next start begins it again".into(),
        ));
    }
    run.note(format!(
        "The model's run was interrupted after step {step}; its checkpoint could not be put back into the new sandbox, so the run starts over"
    ));
    Ok(None)
}

/// A run going on from its checkpoint: where the run starts, and which
/// quarantine holds the checkpoint (the next one goes to the other).
pub(in crate::task) struct Resumed {
    pub start: Start,
    /// The run whose quarantine holds it.
    pub writer: String,
    pub slot: u8,
    pub commit: Oid,
}

/// Hands the checkpoint's commit to the new sandbox and makes its files
/// the work tree again: the branch where the model's HEAD was, what it
/// had not committed left uncommitted.
async fn put_back(
    store: &Store,
    saved: &AgentCheckpoint,
    prepared: &Prepared,
    workspace_dir: &str,
) -> Result<Oid, CheckpointError> {
    let commit = Oid::from_str(&saved.commit)
        .map_err(|_| CheckpointError::Refused("its record names no commit".into()))?;
    let quarantine = store.slot_dir(&saved.writer, saved.slot);
    if !quarantine.exists() {
        return Err(CheckpointError::Refused(format!(
            "its repository {} is gone",
            quarantine.display()
        )));
    }
    let workspace = &prepared.workspace;
    workspace
        .with(move |ws| ws.take_checkpoint(&quarantine, commit))
        .await??;
    let sandbox = prepared.sandbox.sandbox.as_ref();
    let handover = format!("{}/{HANDOVER_DIR}", workspace_dir.trim_end_matches('/'));
    let refname = untrusted::CHECKPOINT_REF;
    // Every commit the model made since the base, however deep.
    let into = (workspace_dir, HANDOVER_DIR, None);
    let has = workspace.with(|ws| ws.history_tips()).await?;
    crate::task::workbench::sandbox_fetch::hand_over(workspace, sandbox, into, (refname, commit, has))
        .await?;
    // Nothing is changed unless the whole commit is there.
    let restore = format!(
        "git rev-parse -q --verify {commit}^ >/dev/null || exit 3; \
         git reset -q --hard {commit} && git reset -q {commit}^ && git update-ref -d {refname} && rm -rf {}",
        shell_quote(&handover)
    );
    let out = sandbox.exec(&restore, Some(Duration::from_secs(300))).await?;
    match out.exit_code {
        Some(0) => Ok(commit),
        Some(3) => Err(CheckpointError::Refused(
            "the sandbox did not get the checkpoint's whole history".into(),
        )),
        code => Err(CheckpointError::HalfRestored(format!(
            "git stopped while checking the checkpoint out in the sandbox (exit code {code:?})"
        ))),
    }
}
