//! What a task's change does to submodules, said on the progress comment
//! and in the PR/MR: edits the model made inside a submodule's folder
//! (read back from the sandbox as data and compared on the host with the
//! submodule's commit) are never pushed, and the superproject's gitlink
//! stays where it was; a gitlink the model's commits move on purpose is
//! delivered as that gitlink change, and said.

use crate::config::CopyOutLimits;
use crate::git::submodules::{edits, Present, Submodules};
use crate::sandbox::tree_out::read_tree;
use crate::sandbox::Sandbox;
use crate::sanitize;
use crate::task::workbench::workspace_handle::WorkspaceHandle;
use git2::{Oid, Repository};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

/// Most paths named per kind of change.
const LISTED: usize = 10;

/// A tree entry's mode for a gitlink.
const GITLINK: i32 = 0o160000;

/// Longest path or URL quoted on a line.
const QUOTED: usize = 200;

/// Repository text (a path, a URL, a reason) made safe to quote.
fn clean(text: &str) -> String {
    sanitize::for_forge_line(text, QUOTED)
}

/// Most submodules named on one progress line.
const LISTED_SUBMODULES: usize = 10;

/// The progress lines that say which submodules the work tree gets and
/// which it does not, and why.
pub(in crate::task) fn fetched_lines(found: &Submodules) -> Vec<String> {
    let mut lines = Vec::new();
    let present: Vec<String> = found
        .present
        .iter()
        .map(|p| format!("`{}` at {:.10}", clean(&p.path), p.commit.to_string()))
        .collect();
    if !present.is_empty() {
        lines.push(format!(
            "Submodules checked out: {} (edits inside them are not pushed)",
            listed(&present)
        ));
    }
    let left_out: Vec<String> = found
        .left_out
        .iter()
        .map(|l| format!("`{}`: {}", clean(&l.path), clean(&l.why)))
        .collect();
    if !left_out.is_empty() {
        lines.push(format!("Submodules not fetched: {}", listed(&left_out)));
    }
    lines
}

/// At most [`LISTED_SUBMODULES`] of `items`, and how many more.
fn listed(items: &[String]) -> String {
    let mut shown: Vec<String> = items.iter().take(LISTED_SUBMODULES).cloned().collect();
    if items.len() > LISTED_SUBMODULES {
        shown.push(format!("and {} more", items.len() - LISTED_SUBMODULES));
    }
    shown.join("; ")
}

/// Whether `path` lies inside `folder`.
fn is_inside(path: &str, folder: &str) -> bool {
    path.strip_prefix(folder)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// One line per submodule the model edited inside. Each outermost
/// submodule's folder is read once (those inside it are cut out of its
/// files), and all the reads share one budget of bytes and entries.
pub(in crate::task) async fn edits_said(
    sandbox: &dyn Sandbox,
    workspace: &WorkspaceHandle,
    limits: CopyOutLimits,
) -> Vec<String> {
    let present = workspace.submodules();
    let budget = Arc::new(Mutex::new(edits::Budget::new(&limits)));
    let project = sandbox.project_dir().trim_end_matches('/').to_owned();
    let mut lines: Vec<String> = workspace
        .unwritten_submodules()
        .iter()
        .map(|l| {
            format!(
                "The submodule `{}` was left out: its files could not be written into the work tree ({})",
                clean(&l.path),
                clean(&l.why)
            )
        })
        .collect();
    for top in present
        .iter()
        .filter(|p| !present.iter().any(|q| is_inside(&p.path, &q.path)))
    {
        let stream = match sandbox.read_out(&format!("{project}/{}", top.path)).await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::info!(submodule = %top.path, "cannot read the submodule's folder back: {e}");
                continue;
            }
        };
        let family: Vec<Present> = present
            .iter()
            .filter(|p| p.path == top.path || is_inside(&p.path, &top.path))
            .cloned()
            .collect();
        let (top_path, budget) = (top.path.clone(), budget.clone());
        let compared = read_tree(stream, move |input| {
            compare_family(input, &top_path, &family, &budget)
        })
        .await;
        match compared.map(|read| read.read) {
            Ok(Ok(found)) => lines.extend(found.iter().filter_map(|(submodule, edits)| match edits {
                Ok(edits) if edits.is_empty() => None,
                Ok(edits) => Some(describe(submodule, edits)),
                Err(why) => Some(not_compared(&submodule.path, why)),
            })),
            Ok(Err(why)) => lines.push(not_compared(&top.path, &why)),
            Err(e) => {
                tracing::info!(submodule = %top.path, "cannot read the submodule's folder back: {e}")
            }
        }
    }
    lines
}

fn not_compared(path: &str, why: &str) -> String {
    format!(
        "Not pushed: whatever changed inside the submodule `{}` (it could not be compared: {})",
        clean(path),
        clean(why)
    )
}

/// A submodule and what it changed inside it (or why that is not known).
type Compared = (Present, Result<edits::Edits, String>);

/// Reads the folder of `top` from `input` once and compares each of
/// `family` (`top` and the submodules inside it) with its commit.
fn compare_family(
    input: &mut dyn Read,
    top: &str,
    family: &[Present],
    budget: &Mutex<edits::Budget>,
) -> Result<Vec<Compared>, String> {
    let seen = {
        let mut budget = budget.lock().unwrap_or_else(PoisonError::into_inner);
        edits::read_folder(input, &mut budget)?
    };
    let prefix = format!("{top}/");
    Ok(family
        .iter()
        .map(|member| {
            let view = match member.path.strip_prefix(&prefix) {
                Some(folder) => edits::within(&seen, folder),
                None => seen.clone(),
            };
            let inner: Vec<String> = family
                .iter()
                .filter_map(|p| {
                    p.path
                        .strip_prefix(&format!("{}/", member.path))
                        .map(str::to_owned)
                })
                .collect();
            (member.clone(), edits::compare(&view, member, &inner))
        })
        .collect())
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
        let mut named: Vec<String> = paths.iter().take(LISTED).map(|p| clean(p)).collect();
        if paths.len() > LISTED {
            named.push(format!("and {} more", paths.len() - LISTED));
        }
        parts.push(format!("{verb} {}", named.join(", ")));
    }
    format!(
        "Not pushed: edits inside the submodule `{}` ({}), its own repository at {}; the superproject still names its commit {:.10}",
        clean(&submodule.path),
        parts.join("; "),
        clean(&submodule.url),
        submodule.commit.to_string()
    )
}

/// What `head` changes from the task's base in gitlinks (every one, not
/// only the fetched submodules') and in `.gitmodules`: delivered as it is,
/// and said.
pub(in crate::task) async fn gitlink_changes(workspace: &WorkspaceHandle, head: Oid) -> Vec<String> {
    let present = workspace.submodules();
    workspace
        .with(move |ws| gitlink_lines(&ws.checkout_dir(), (ws.base, head), &present))
        .await
        .unwrap_or_default()
}

/// One line per gitlink added, moved or removed between `base` and `head`,
/// and one if `.gitmodules` changed.
fn gitlink_lines(dir: &Path, (base, head): (Oid, Oid), present: &[Present]) -> Vec<String> {
    let Ok(repo) = Repository::open(dir) else {
        return Vec::new();
    };
    let tree = |commit: Oid| repo.find_commit(commit).and_then(|c| c.tree()).ok();
    let (Some(before), Some(after)) = (tree(base), tree(head)) else {
        return Vec::new();
    };
    let (old, new) = (gitlinks_of(&before), gitlinks_of(&after));
    let mut lines = Vec::new();
    for (path, to) in &new {
        match old.get(path) {
            None => lines.push(format!(
                "The change adds a submodule at `{}` (a gitlink to {:.10}; its files are not part of this change)",
                clean(path),
                to.to_string()
            )),
            Some(from) if from != to => lines.push(moved(path, (*from, *to), present)),
            Some(_) => {}
        }
    }
    for path in old.keys().filter(|path| !new.contains_key(*path)) {
        lines.push(format!("The change removes the submodule `{}`", clean(path)));
    }
    let gitmodules = |tree: &git2::Tree<'_>| tree.get_path(Path::new(".gitmodules")).ok().map(|e| e.id());
    if gitmodules(&before) != gitmodules(&after) {
        lines.push(
            "The change edits `.gitmodules` (which submodules the repository has, and from where)".into(),
        );
    }
    lines
}

/// Every gitlink of `tree`: path -> the commit it names.
fn gitlinks_of(tree: &git2::Tree<'_>) -> BTreeMap<String, Oid> {
    let mut found = BTreeMap::new();
    let _ = tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.filemode() == GITLINK {
            let name = String::from_utf8_lossy(entry.name_bytes());
            found.insert(format!("{dir}{name}"), entry.id());
        }
        git2::TreeWalkResult::Ok
    });
    found
}

/// The line for the gitlink at `path` moved `from` one commit `to` another.
fn moved(path: &str, (from, to): (Oid, Oid), present: &[Present]) -> String {
    let fetched = present.iter().find(|p| p.path == path);
    let known = match fetched {
        Some(submodule) => {
            let has = Repository::open_bare(&submodule.mirror).is_ok_and(|m| m.find_commit(to).is_ok());
            format!(
                "; {} {}",
                clean(&submodule.url),
                if has {
                    "has that commit"
                } else {
                    "has no branch holding that commit"
                }
            )
        }
        None => String::new(),
    };
    format!(
        "The change moves the submodule `{}` from {:.10} to {:.10} (a gitlink change{known})",
        clean(path),
        from.to_string(),
        to.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::submodules::LeftOut;

    const HOSTILE: &str = "lib\n<!-- hidden -->\n@team please merge";

    fn assert_safe(line: &str) {
        assert!(!line.contains('\n'), "{line}");
        assert!(!line.contains("<!--"), "{line}");
        assert!(!line.contains("@team"), "{line}");
    }

    #[test]
    fn hostile_paths_urls_and_reasons_are_quoted_safely() {
        let present = Present {
            path: HOSTILE.into(),
            commit: Oid::ZERO_SHA1,
            url: format!("https://forge.example/{HOSTILE}"),
            mirror: "/nowhere".into(),
        };
        let found = Submodules {
            present: vec![present.clone()],
            left_out: vec![LeftOut {
                path: HOSTILE.into(),
                why: format!("the fetch failed ({HOSTILE})"),
            }],
        };
        let mut lines = fetched_lines(&found);
        let edits = edits::Edits {
            modified: vec![HOSTILE.into()],
            ..edits::Edits::default()
        };
        lines.push(describe(&present, &edits));
        lines.push(not_compared(HOSTILE, HOSTILE));
        lines.push(moved(HOSTILE, (Oid::ZERO_SHA1, Oid::ZERO_SHA1), &[present]));
        assert_eq!(lines.len(), 5);
        for line in &lines {
            assert_safe(line);
            assert!(line.contains("&#64;team"), "{line}");
        }
    }
}
