//! Plan approval (`triggers.plan_approval`): a run that must have its plan
//! approved stops after planning, with the plan and its checklist on the
//! progress comment and a line saying how to answer, and ends its run
//! "awaiting approval": no sandbox was made, the work folder goes, no model
//! is called while it waits. A writer (someone who may trigger tasks)
//! answers with a 👍 on that comment or a comment `@login go`; the checklist
//! as it stands on the comment then (writers may edit it) is the plan the
//! next run follows, without planning again. A writer's other comment
//! that mentions forgehand asks for changes: the next run plans again with
//! it and waits again. Nobody answering before the timeout ends the task.
//!
//! The wait is journalled ([`PlanWait`]); the daemon looks for answers at
//! each poll and starts the task again when one came (a mention starts it
//! at once). An outsider's reaction or comment answers nothing.

use crate::config::{Config, PlanApproval};
use crate::forge::{CommentPlace, ForgeError, Intake, Item, ItemRef, Thread};
use crate::journal::{Phase, PlanAnswer, PlanWait, Transition};
use crate::sanitize::for_model;
use crate::task::handoff::Claimed;
use crate::task::handoff::Conversation;
use crate::task::handoff::RepoEnvironment;
use crate::task::needs;
use crate::task::phases::context;
use crate::task::phases::packing::PackedCode;
use crate::task::phases::plan;
use crate::task::phases::prepare;
use crate::task::phases::task_plan::TaskPlan;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::workbench::workspace_handle::WorkspaceHandle;
use crate::task::{Accounts, TaskEnd, TaskEnv};
use std::collections::HashMap;

/// Words that approve a plan, alone in a comment (besides the mention).
const APPROVING: [&str; 5] = ["go", "approve", "approved", "lgtm", "go ahead"];

/// Whether `item`'s run must have its plan approved before any change.
pub(in crate::task) fn wanted(config: &Config, item: &Item) -> bool {
    if config.planning.mode == crate::config::PlanningMode::Off {
        return false;
    }
    let triggers = &config.triggers;
    match triggers.plan_approval_for(&item.reference.repo) {
        PlanApproval::Off => false,
        PlanApproval::Always => true,
        PlanApproval::Label => item.has_label(&triggers.plan_approval_label),
    }
}

/// At a run's start (`state::resume`): the plan waiting for approval is
/// looked at. `Some`: the run ends here (still waiting, or timed out).
/// Otherwise the run goes on, with the approved plan or the changes asked
/// for on `run`.
pub(in crate::task) async fn resume(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    mut wait: PlanWait,
) -> Result<Option<TaskEnd>, TaskError> {
    let answer = match wait.answer.clone() {
        Some(answer) => answer,
        None => match answer(run.forge.as_ref(), &run.item, &wait).await? {
            Some(answer) => {
                wait.answer = Some(answer.clone());
                run.journal.save_plan_wait(&run.key, &wait)?;
                answer
            }
            None => {
                tracing::info!(task = %run.item, "the plan still waits for approval");
                run.journal
                    .transition(&run.key, Transition::AwaitingApproval(None))?;
                return Ok(Some(TaskEnd::AwaitingApproval));
            }
        },
    };
    match answer {
        PlanAnswer::Approved { by, checklist } => {
            tracing::info!(task = %run.item, by = %by, "the plan was approved; going on from it");
            run.approved_plan = Some(approved_plan(&wait, &by, checklist));
            Ok(None)
        }
        PlanAnswer::Changes { by, text, .. } => {
            tracing::info!(task = %run.item, by = %by, "changes to the plan were asked for; planning again");
            run.plan_changes = Some(changes_section(&wait, &by, &text));
            Ok(None)
        }
        PlanAnswer::TimedOut => Ok(Some(timed_out(run, env).await?)),
    }
}

/// After the claim: when the plan must be approved and none is, the task
/// is planned without a sandbox, its plan posted, and the run ends
/// waiting. `None`: the run goes on.
pub(in crate::task) async fn gate(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    accounts: &Accounts,
    claimed: &Claimed,
) -> Result<Option<TaskEnd>, TaskError> {
    if run.approved_plan.is_some() || !wanted(&env.config, &claimed.item) {
        return Ok(None);
    }
    let reading = needs::recorded(env, accounts, "reading the thread");
    let needs = needs::prepare_needs(&reading, &run.item);
    let (workspace, repo, conversation, packing) = prepare_for_planning(run, &needs, claimed).await?;
    let caps = repo.settings.budget;
    accounts
        .spend
        .lower_to(caps.task_usd, caps.daily_usd, caps.monthly_usd);
    let planning = needs::recorded(env, accounts, "planning");
    // The thread's images reach the planners of the run that follows the
    // approval; the plan waiting for it is made from the text.
    let no_images = crate::task::handoff::ThreadImages::default();
    let parts = plan::Parts {
        repo: &repo,
        conversation: &conversation,
        packing,
        images: &no_images,
        ground: None,
    };
    let (_, _, made) = plan::plan_parts(run, &needs::plan_needs(&planning), claimed, parts).await?;
    drop(workspace);
    let Some(made) = made else {
        return Err(TaskError::Other(
            "plan approval is on (triggers.plan_approval), but no plan was made (the notes above say why); fix planning, or take the approval label off to let the model work without a plan".into(),
        ));
    };
    wait_for_approval(run, env, claimed, made).await.map(Some)
}

/// The clone, the repository's settings, the pack and the conversation:
/// what planning reads, without a sandbox.
async fn prepare_for_planning(
    run: &mut TaskRun<'_>,
    needs: &prepare::Needs<'_>,
    claimed: &Claimed,
) -> Result<(WorkspaceHandle, RepoEnvironment, Conversation, Option<PackedCode>), TaskError> {
    let credentials = run.forge.git_credentials().await?;
    let (workspace, ()) = tokio::join!(prepare::clone(run, needs, claimed, &credentials), run.report());
    let workspace = workspace?;
    let repo = prepare::read_settings(run, needs, &workspace, &claimed.target.default_branch).await?;
    let packing = PackedCode::start(needs.planning, &workspace);
    prepare::note_settings(run, &repo);
    let conversation = context::read_conversation(run, &needs.conversation, claimed).await?;
    for note in &conversation.notes {
        run.note(note.clone());
    }
    run.add_usage(&conversation.usage);
    Ok((workspace, repo, conversation, packing))
}

/// Journals the wait, says on the comment how to answer, and ends the run.
async fn wait_for_approval(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    claimed: &Claimed,
    made: TaskPlan,
) -> Result<TaskEnd, TaskError> {
    let comment_id = match run.comment_id() {
        Some(id) => id,
        None => {
            run.ensure_comment().await?;
            run.comment_id().unwrap_or_default()
        }
    };
    let login = run.forge.identity().await?;
    // Only comments written after the plan answer it (the change request
    // that led to this plan among the earlier ones), and only new thumbs.
    let after_comment = claimed
        .thread
        .comments
        .iter()
        .filter(|(c, _)| c.place == CommentPlace::Thread)
        .map(|(c, _)| c.id)
        .max()
        .unwrap_or(0)
        .max(comment_id);
    let thumbs_before = run.forge.thumbs_up(&run.item, comment_id).await?;
    let timeout = env.config.triggers.plan_approval_timeout;
    let wait = PlanWait {
        comment_id,
        plan: made.text,
        checklist: made.checklist,
        made: made.made,
        after_comment,
        thumbs_before,
        deadline: crate::journal::now_secs().saturating_add(timeout.as_secs() as i64),
        answer: None,
    };
    run.journal
        .transition(&run.key, Transition::AwaitingApproval(Some(&wait)))?;
    run.finish(
        false,
        "Waiting for approval of the plan",
        how_to_answer(&login, timeout),
    );
    run.report().await;
    tracing::info!(task = %run.item, "the plan waits for approval");
    Ok(TaskEnd::AwaitingApproval)
}

/// The line under the plan that says how to answer it.
fn how_to_answer(login: &str, timeout: std::time::Duration) -> String {
    format!(
        "**Waiting for approval of the plan.** Someone who may trigger forgehand approves it with a 👍 on this comment or a comment `@{login} go`; edit the checklist above first to change the steps the change follows. To change the plan, comment `@{login}` with what to change: forgehand plans again with it and waits again. Nothing runs while it waits; without an answer within {} (triggers.plan_approval_timeout) the task ends.",
        humantime::format_duration(timeout)
    )
}

/// A writer's answer to `wait`, if one came: the first approving or
/// mentioning comment after the plan, else a new 👍, else the timeout.
pub async fn answer<F: Intake + Thread + ?Sized>(
    forge: &F,
    item: &ItemRef,
    wait: &PlanWait,
) -> Result<Option<PlanAnswer>, ForgeError> {
    let login = forge.identity().await?;
    let comments = forge.comments(item).await?;
    let mut writers: HashMap<String, bool> = HashMap::new();
    let mut may_trigger = async |user: &str| -> Result<bool, ForgeError> {
        if let Some(known) = writers.get(user) {
            return Ok(*known);
        }
        let ok = forge.may_trigger(&item.repo, user).await?;
        writers.insert(user.to_owned(), ok);
        Ok(ok)
    };
    let checklist = || {
        comments
            .iter()
            .find(|c| c.id == wait.comment_id)
            .and_then(|c| checklist_on(&c.body))
            .unwrap_or_else(|| wait.checklist.clone())
    };
    let later = comments.iter().filter(|c| {
        c.place == CommentPlace::Thread && c.id > wait.after_comment && !c.author.eq_ignore_ascii_case(&login)
    });
    for comment in later {
        let approves = approves(&comment.body, &login);
        if !approves && !crate::forge::mentions(&comment.body, &login) {
            continue;
        }
        if !may_trigger(&comment.author).await? {
            tracing::info!(task = %item, by = %comment.author, "ignored: an answer to the plan by someone who may not trigger tasks");
            continue;
        }
        let by = comment.author.clone();
        return Ok(Some(match approves {
            true => PlanAnswer::Approved {
                by,
                checklist: checklist(),
            },
            false => PlanAnswer::Changes {
                by,
                comment_id: comment.id,
                text: comment.body.clone(),
            },
        }));
    }
    for user in forge.thumbs_up(item, wait.comment_id).await? {
        let earlier = wait.thumbs_before.iter().any(|u| u.eq_ignore_ascii_case(&user));
        if earlier || user.eq_ignore_ascii_case(&login) {
            continue;
        }
        if may_trigger(&user).await? {
            return Ok(Some(PlanAnswer::Approved {
                by: user,
                checklist: checklist(),
            }));
        }
        tracing::info!(task = %item, by = %user, "ignored: a 👍 on the plan by someone who may not trigger tasks");
    }
    Ok(wait.timed_out().then_some(PlanAnswer::TimedOut))
}

/// Whether `body` is an approval: one of [`APPROVING`], alone but for a
/// mention of forgehand and punctuation.
fn approves(body: &str, login: &str) -> bool {
    let mention = format!("@{}", login.to_ascii_lowercase());
    let words: String = body
        .to_ascii_lowercase()
        .replace(&mention, " ")
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    let words = words.split_whitespace().collect::<Vec<_>>().join(" ");
    APPROVING.contains(&words.as_str())
}

/// The plan's checklist as the progress comment shows it now (the lines
/// under its `**Plan**` heading).
fn checklist_on(body: &str) -> Option<Vec<String>> {
    let start = body.find("\n**Plan** (")?;
    let mut steps = Vec::new();
    for line in body[start + 1..].lines().skip(1) {
        let line = line.trim();
        let step = ["- [ ] ", "- [x] ", "- [X] ", "* [ ] ", "* [x] "]
            .iter()
            .find_map(|mark| line.strip_prefix(mark));
        match step {
            Some(step) => steps.push(step.trim_end_matches("*(in progress)*").trim().to_owned()),
            None if line.is_empty() && steps.is_empty() => {}
            None => break,
        }
    }
    steps.retain(|s| !s.is_empty());
    (!steps.is_empty()).then_some(steps)
}

/// The plan the run follows: the one posted, with the checklist as
/// approved (a writer's edits taken in).
fn approved_plan(wait: &PlanWait, by: &str, checklist: Vec<String>) -> TaskPlan {
    let checklist: Vec<String> = checklist.iter().map(|s| for_model(s).trim().to_owned()).collect();
    let text = if checklist == wait.checklist {
        wait.plan.clone()
    } else {
        let before = wait
            .plan
            .find("## Checklist")
            .map_or(wait.plan.as_str(), |at| &wait.plan[..at]);
        let steps: Vec<String> = checklist.iter().map(|s| format!("- [ ] {s}")).collect();
        format!(
            "{}\n\n## Checklist (as @{by} approved it, edited by the maintainers)\n{}\n",
            before.trim_end(),
            steps.join("\n")
        )
    };
    TaskPlan {
        text,
        checklist,
        made: format!("{} A maintainer (@{by}) approved this plan.", wait.made.trim()),
    }
}

/// The planners' section for a change request on the earlier plan.
fn changes_section(wait: &PlanWait, by: &str, text: &str) -> String {
    format!(
        "\n\n## Changes a maintainer asked for to the earlier plan\n\n@{by} read the earlier plan and asked for changes. Make a new plan that takes them in.\n\n<earlier_plan>\n{}\n</earlier_plan>\n\n<requested_changes>\n{}\n</requested_changes>\n",
        for_model(&wait.plan).trim(),
        for_model(text).trim()
    )
}

/// Nobody answered in time: a comment says so, the task ends.
async fn timed_out(run: &mut TaskRun<'_>, env: &TaskEnv) -> Result<TaskEnd, TaskError> {
    let config = &env.config;
    let waited = humantime::format_duration(config.triggers.plan_approval_timeout);
    let text = format!(
        "**Stopped.** The plan waited {waited} for approval (triggers.plan_approval_timeout) and nobody who may trigger forgehand approved it or asked for changes. Nothing was changed. Apply the \"{}\" label again to start over.",
        config.labels.trigger
    );
    tracing::info!(task = %run.item, "the plan was not approved in time; ending the task");
    run.forge.create_comment(&run.item, &text).await?;
    run.forge
        .edit_labels(&run.item, &[], &[config.labels.processing.as_str()])
        .await?;
    run.journal.transition(
        &run.key,
        Transition::ended(Phase::Stopped, "the plan was not approved in time"),
    )?;
    Ok(TaskEnd::Stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_are_short_and_checklists_are_read_from_the_comment() {
        assert!(approves("@forgehand go", "forgehand"));
        assert!(approves("Approve!", "forgehand"));
        assert!(approves("@Forgehand LGTM.", "forgehand"));
        assert!(!approves("@forgehand go, but use the other file", "forgehand"));
        assert!(!approves("do not go", "forgehand"));
        let body = "### forgehand\n\n- [x] Claim the task\n\n**Plan** (0 of 2 done)\n\n- [ ] Change the greeting\n- [x] Test it *(in progress)*\n\n<details>";
        assert_eq!(
            checklist_on(body),
            Some(vec!["Change the greeting".to_owned(), "Test it".to_owned()])
        );
        assert_eq!(checklist_on("no plan here"), None);
    }

    #[test]
    fn an_edited_checklist_replaces_the_plans_own() {
        let wait = PlanWait {
            comment_id: 1,
            plan: "# Plan\nDo it.\n\n## Checklist\n- [ ] A\n- [ ] B\n".into(),
            checklist: vec!["A".into(), "B".into()],
            made: "One model wrote this plan.".into(),
            after_comment: 1,
            thumbs_before: vec![],
            deadline: 0,
            answer: None,
        };
        let same = approved_plan(&wait, "maya", vec!["A".into(), "B".into()]);
        assert_eq!(same.text, wait.plan);
        assert!(same.made.ends_with("A maintainer (@maya) approved this plan."));
        let edited = approved_plan(&wait, "maya", vec!["A".into(), "C".into()]);
        assert!(edited
            .text
            .starts_with("# Plan\nDo it.\n\n## Checklist (as @maya approved it"));
        assert!(edited.text.contains("- [ ] C") && !edited.text.contains("- [ ] B"));
        assert_eq!(edited.checklist, vec!["A".to_owned(), "C".to_owned()]);
    }
}
