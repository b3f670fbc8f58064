//! Opening the PR where the forge does not support drafts (GitHub: private
//! repositories of accounts on GitHub Free answer `422 Draft pull requests
//! are not supported in this repository.`): a PR ready for review, marked
//! as forgehand's work in progress (a title prefix, a note in the body and
//! a label), said on the issue, and remembered for the repository so the
//! next task opens it that way at once. GitLab supports drafts everywhere.

use crate::forge::{ChangeInfo, Delivery, ForgeError, ItemKind, ItemRef};
use crate::journal::RepoFact;
use crate::task::run::TaskRun;

/// The title's prefix of a ready PR that is forgehand's work in progress.
pub(in crate::task) const TITLE_PREFIX: &str = "[WIP] ";

/// The label on such a PR.
pub(in crate::task) const LABEL: &str = "forgehand: work in progress";

/// The note at the top of such a PR's body.
const NOTE: &str = "> **Work in progress by forgehand.** This repository does not support draft pull requests, so this one is open for review. Review it as a draft: it is not ready to merge until a maintainer says so.";

/// Whether the repository is known not to support drafts.
pub(in crate::task) fn no_drafts(run: &TaskRun<'_>) -> bool {
    run.journal
        .repo_fact(run.item.forge.as_str(), &run.item.repo, RepoFact::NoDrafts)
        .unwrap_or_else(|e| {
            tracing::warn!(task = %run.item, "cannot read whether drafts are supported: {e}");
            None
        })
        .is_some()
}

/// Opens the draft, or, where drafts are not supported, the ready PR
/// marked as work in progress.
pub(in crate::task) async fn open(
    run: &TaskRun<'_>,
    forge: &dyn Delivery,
    (branch, base): (&str, &str),
    (title, body): (&str, &str),
) -> Result<ChangeInfo, ForgeError> {
    let repo = run.item.repo.as_str();
    if !no_drafts(run) {
        match forge.create_draft_change(repo, branch, base, title, body).await {
            Err(e) if e.is_drafts_unsupported() => {
                tracing::info!(task = %run.item, "drafts are not supported in {repo}: opening a ready pull request marked as work in progress");
                let learned =
                    run.journal
                        .learn_repo_fact(run.item.forge.as_str(), repo, RepoFact::NoDrafts, "yes");
                if let Err(e) = learned {
                    tracing::warn!(task = %run.item, "cannot remember that drafts are not supported: {e}");
                }
            }
            other => return other,
        }
    }
    let title = format!("{TITLE_PREFIX}{title}");
    let body = format!("{NOTE}\n\n{body}");
    let change = forge
        .create_ready_change(repo, branch, base, &title, &body)
        .await?;
    run.note(format!(
        "This repository does not support draft pull requests: the pull request is open for review, marked as work in progress (the `{TITLE_PREFIX}` title, a note, the `{LABEL}` label)"
    ));
    let pull = ItemRef {
        forge: run.item.forge,
        repo: repo.to_owned(),
        kind: ItemKind::Change,
        number: change.number,
    };
    if let Err(e) = run.forge.edit_labels(&pull, &[LABEL], &[]).await {
        tracing::warn!(task = %run.item, "cannot label the pull request as work in progress: {e}");
    }
    Ok(change)
}
