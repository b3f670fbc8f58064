//! Handing commits the host holds to the sandbox's repository: their
//! history the sandbox lacks, packed into a small repository beside the
//! project (borrowing the history it started with), fetched from there by
//! the sandbox's own git. A moved upstream for a rebase, a checkpoint for
//! a resumed run.

use crate::git::workspace::DeliveryError;
use crate::sandbox::command::shell_quote;
use crate::sandbox::Sandbox;
use crate::task::state::error::TaskError;
use crate::task::workbench::workspace_handle::WorkspaceHandle;
use git2::Oid;
use std::time::Duration;

/// Puts `tip` into the sandbox's project repository as `refname`, through
/// the repository `<workspace_dir>/<name>` (packed on the host as
/// `<root>/<name>`, at most `depth` commits deep, without what the
/// sandbox `has`: the tips of the history it started with).
pub(in crate::task) async fn hand_over(
    workspace: &WorkspaceHandle,
    sandbox: &dyn Sandbox,
    (workspace_dir, name, depth): (&str, &str, Option<u32>),
    (refname, tip, has): (&str, Oid, Vec<Oid>),
) -> Result<(), TaskError> {
    let workspace_dir = workspace_dir.trim_end_matches('/');
    let sandbox_dir = format!("{workspace_dir}/{name}");
    // What the sandbox started with, as it sees it.
    let borrowed = format!("{workspace_dir}/history.git/objects");
    let borrowed_shallow = workspace.history().await?.shallow;
    let (name, named) = (name.to_owned(), refname.to_owned());
    let pack = workspace
        .with(move |ws| -> Result<_, DeliveryError> {
            // Only what `tip` adds to the sandbox's history is packed.
            let pack = ws.history_pack(&name, (&[tip], &has), depth)?;
            pack.as_repository((&named, tip), (&borrowed, &borrowed_shallow))
                .map_err(|source| DeliveryError::Io {
                    path: pack.dir.clone(),
                    source,
                })?;
            Ok(pack)
        })
        .await??;
    sandbox.copy_in(&pack.dir, &sandbox_dir).await?;
    let fetched = sandbox
        .exec(
            &format!(
                "git fetch -q --update-shallow {} {}",
                shell_quote(&sandbox_dir),
                shell_quote(&format!("+{refname}:{refname}"))
            ),
            Some(Duration::from_secs(300)),
        )
        .await?;
    if !fetched.success() {
        return Err(TaskError::Other(format!(
            "cannot fetch {refname} into the sandbox: {}",
            fetched.stderr.trim()
        )));
    }
    Ok(())
}
