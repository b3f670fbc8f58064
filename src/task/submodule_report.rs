//! What a task's change does to submodules, said on the progress comment
//! and in the PR/MR: edits the model made inside a submodule's folder
//! (read back from the sandbox as data and compared on the host with the
//! submodule's commit) are never pushed, and the superproject's gitlink
//! stays where it was; a gitlink the model's commits move on purpose is
//! delivered as that gitlink change, and said.

use super::sanitize;
use super::workspace_handle::WorkspaceHandle;
use crate::config::CopyOutLimits;
use crate::git::submodules::{edits, Present};
use crate::sandbox::tree_out::read_tree;
use crate::sandbox::Sandbox;
use git2::{Oid, Repository};
use std::path::Path;

/// Most paths named per kind of change.
const LISTED: usize = 10;

/// The lines to say, given the delivered `head` (`None`: nothing of the
/// superproject changed).
pub(super) async fn report(
    sandbox: &dyn Sandbox,
    workspace: &WorkspaceHandle,
    head: Option<Oid>,
    limits: CopyOutLimits,
) -> Vec<String> {
    let present = workspace.submodules().to_vec();
    if present.is_empty() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    let project = sandbox.project_dir().trim_end_matches('/').to_owned();
    for submodule in &present {
        let prefix = format!("{}/", submodule.path);
        let inner: Vec<String> = present
            .iter()
            .filter_map(|p| p.path.strip_prefix(&prefix).map(str::to_owned))
            .collect();
        let stream = match sandbox.read_out(&format!("{project}/{}", submodule.path)).await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::info!(submodule = %submodule.path, "cannot read the submodule's folder back: {e}");
                continue;
            }
        };
        let one = submodule.clone();
        let compared = read_tree(stream, move |input| edits::compare(input, &one, &inner, &limits)).await;
        match compared.map(|read| read.read) {
            Ok(Ok(found)) if found.is_empty() => {}
            Ok(Ok(found)) => lines.push(describe(submodule, &found)),
            Ok(Err(why)) => lines.push(format!(
                "Not pushed: whatever changed inside the submodule `{}` (it could not be compared: {})",
                submodule.path,
                sanitize::for_forge_line(&why, 200)
            )),
            Err(e) => {
                tracing::info!(submodule = %submodule.path, "cannot read the submodule's folder back: {e}")
            }
        }
    }
    if let Some(head) = head {
        let moved = workspace
            .with(move |ws| gitlink_moves(&ws.checkout_dir(), (ws.base, head), &present))
            .await;
        lines.extend(moved.unwrap_or_default());
    }
    lines
}

/// One line for the edits inside `submodule`.
fn describe(submodule: &Present, found: &edits::Edits) -> String {
    let mut parts = Vec::new();
    for (verb, paths) in [
        ("changed", &found.modified),
        ("added", &found.added),
        ("deleted", &found.deleted),
    ] {
        if paths.is_empty() {
            continue;
        }
        let mut named: Vec<String> = paths
            .iter()
            .take(LISTED)
            .map(|p| sanitize::for_forge_line(p, 200))
            .collect();
        if paths.len() > LISTED {
            named.push(format!("and {} more", paths.len() - LISTED));
        }
        parts.push(format!("{verb} {}", named.join(", ")));
    }
    format!(
        "Not pushed: edits inside the submodule `{}` ({}), its own repository at {}; the superproject still names its commit {:.10}",
        submodule.path,
        parts.join("; "),
        submodule.url,
        submodule.commit.to_string()
    )
}

/// The superproject's gitlinks of `present` that `head` moves from
/// `base`: delivered as they are, and said.
fn gitlink_moves(dir: &Path, (base, head): (Oid, Oid), present: &[Present]) -> Vec<String> {
    let Ok(repo) = Repository::open(dir) else {
        return Vec::new();
    };
    let gitlink = |commit: Oid, path: &str| -> Option<Oid> {
        let tree = repo.find_commit(commit).and_then(|c| c.tree()).ok()?;
        let entry = tree.get_path(Path::new(path)).ok()?;
        (entry.kind() == Some(git2::ObjectType::Commit)).then(|| entry.id())
    };
    let mut lines = Vec::new();
    for submodule in present {
        let (before, after) = (gitlink(base, &submodule.path), gitlink(head, &submodule.path));
        if before.is_none() || before == after {
            continue;
        }
        lines.push(match after {
            None => format!("The change removes the submodule `{}`", submodule.path),
            Some(after) => {
                let known =
                    Repository::open_bare(&submodule.mirror).is_ok_and(|m| m.find_commit(after).is_ok());
                format!(
                    "The change moves the submodule `{}` from {:.10} to {:.10} (a gitlink change; {} {})",
                    submodule.path,
                    submodule.commit.to_string(),
                    after.to_string(),
                    submodule.url,
                    if known {
                        "has that commit"
                    } else {
                        "has no branch holding that commit"
                    }
                )
            }
        });
    }
    lines
}
