//! Delivering: the draft PR/MR found or opened (never twice), then, after
//! the checks were followed, the comment's outcome and the `done` label. A
//! task whose model changed nothing ends here too, with its answer.

use crate::config::LabelsConfig;
use crate::forge::{retry, ChangeInfo, Delivery};
use crate::journal::{Phase, Transition};
use crate::sanitize;
use crate::task::handoff::Claimed;
use crate::task::item_ref::issue_ref;
use crate::task::report::progress::Step;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::TaskEnd;

/// Finds the draft PR/MR of the branch or opens it (never twice); the
/// task is journalled as delivered.
pub(in crate::task) async fn open_change(
    run: &mut TaskRun<'_>,
    claimed: &Claimed,
    summary: &str,
) -> Result<ChangeInfo, TaskError> {
    let (item, target) = (&claimed.item, &claimed.target);
    let change = match &target.change {
        Some(change) => change.clone(),
        None => {
            run.at(Step::Deliver, "Opening the draft for review");
            let title = sanitize::for_model(&item.title);
            let title = format!("{} ({})", title.trim(), issue_ref(&run.item));
            let plan = run
                .plan_details()
                .map(|details| format!("\n\n{details}"))
                .unwrap_or_default();
            let asked = claimed
                .asked_by
                .as_ref()
                .map(|person| format!(" Asked for by @{}, the commits' co-author.", person.name))
                .unwrap_or_default();
            let body = run.secrets.scrub(&format!(
                "{}{plan}\n\nCloses {}\n\n---\nMade by forgehand for {}.{asked}",
                summary.trim(),
                issue_ref(&run.item),
                item.web_url
            ));
            let forge: &dyn Delivery = run.forge.as_ref();
            // Looked for first (and again after a failure that may have
            // opened it anyway), so there is never a second one.
            retry::find_or_create(
                "open the draft PR/MR",
                || async {
                    let found = forge.find_open_change(&run.item.repo, &target.branch).await?;
                    if let Some(found) = &found {
                        tracing::info!(task = %run.item, url = %found.web_url, "the PR/MR already exists");
                    }
                    Ok(found)
                },
                || {
                    crate::task::phases::ready_pr::open(
                        run,
                        forge,
                        (&target.branch, &target.base),
                        (&title, &body),
                    )
                },
            )
            .await?
        }
    };
    crate::kill_point::reached(crate::kill_point::CHANGE_OPENED);
    run.journal
        .transition(&run.key, Transition::Delivered { url: &change.web_url })?;
    Ok(change)
}

/// Ends a delivered task: the comment's outcome (with what became of the
/// checks, when they were followed) and the `done` label.
pub(in crate::task) async fn finish(
    run: &mut TaskRun<'_>,
    labels: &LabelsConfig,
    change: &ChangeInfo,
    summary: &str,
    ci: Option<&str>,
) -> Result<TaskEnd, TaskError> {
    let noun = run.item.forge.change_noun();
    let mut outcome = match crate::task::phases::ready_pr::no_drafts(run) {
        true => format!(
            "**Done.** {noun} (open for review, marked as work in progress: this repository does not support drafts): {}\n",
            change.web_url
        ),
        false => format!("**Done.** Draft {noun}: {}\n", change.web_url),
    };
    if let Some(ci) = ci {
        outcome.push_str(&format!("\n**CI**\n\n{}\n", ci.trim()));
    }
    if !summary.trim().is_empty() {
        outcome.push_str(&format!("\n**Summary**\n\n{}\n", summary.trim()));
    }
    outcome.push_str(&run.usage_line());
    run.finish(true, "Done", outcome);
    run.report().await;
    run.forge
        .edit_labels(&run.item, &[labels.done.as_str()], &[labels.processing.as_str()])
        .await?;
    run.journal
        .transition(&run.key, Transition::ended(Phase::Done, &change.web_url))?;
    Ok(TaskEnd::Delivered {
        url: change.web_url.clone(),
    })
}

/// The model changed nothing: its answer goes on the comment.
pub(in crate::task) async fn no_changes(
    run: &mut TaskRun<'_>,
    labels: &LabelsConfig,
    answer: &str,
) -> Result<TaskEnd, TaskError> {
    let mut outcome = "**Done without changes.** The model did not change any file.\n".to_owned();
    if !answer.trim().is_empty() {
        outcome.push_str(&format!("\n**Answer**\n\n{}\n", answer.trim()));
    }
    outcome.push_str(&run.usage_line());
    run.finish(false, "Done (no changes)", outcome);
    run.report().await;
    run.forge
        .edit_labels(&run.item, &[labels.done.as_str()], &[labels.processing.as_str()])
        .await?;
    run.journal
        .transition(&run.key, Transition::ended(Phase::Done, "no changes"))?;
    Ok(TaskEnd::NoChanges)
}
