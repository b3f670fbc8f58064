//! The first phase, claiming: the label swap (read back), the progress
//! comment (found by its marker after a restart), the target branch and
//! the thread with each author's right to be heard.

use crate::config::LabelsConfig;
use crate::forge::{Comment, Item, ItemKind, LabelApplied, TextEdits};
use crate::git::attribution::CoAuthor;
use crate::journal::{Phase, TaskRecord, Transition};
use crate::task::handoff::{Claimed, Target, Thread};
use crate::task::phases::request::{self, Heard};
use crate::task::phases::review::{HeardThread, Writer};
use crate::task::report::events::TaskEvent;
use crate::task::report::progress::Step;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::TaskEnd;
use std::collections::HashMap;

/// What claiming needs besides the run.
pub(in crate::task) struct Needs<'a> {
    pub labels: &'a LabelsConfig,
    /// `delivery.branch_prefix`: an issue's branch is `<prefix>issue-N`.
    pub branch_prefix: &'a str,
    /// `trust.label_vouches_for_issue_text`.
    pub label_vouches: bool,
}

pub(in crate::task) enum Claim {
    Claimed(Box<Claimed>),
    /// Nothing more to do: closed, or delivered just before a restart.
    Ended(TaskEnd),
}

pub(in crate::task) async fn claim(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    record: &TaskRecord,
) -> Result<Claim, TaskError> {
    let labels = needs.labels;
    if let Some(end) = finish_delivered(run, labels, record).await? {
        return Ok(Claim::Ended(end));
    }
    let fresh = new_among_replicas(run, labels).await?;
    // Claim: idempotent label swap, then read back.
    run.forge
        .edit_labels(
            &run.item,
            &[labels.processing.as_str()],
            &[
                labels.trigger.as_str(),
                labels.done.as_str(),
                labels.failed.as_str(),
            ],
        )
        .await?;
    let item = run.forge.item(&run.item).await?;
    run.show_web_url(&item.web_url);
    if !item.open {
        run.forge
            .edit_labels(&run.item, &[], &[labels.processing.as_str()])
            .await?;
        run.journal.transition(
            &run.key,
            Transition::ended(Phase::Stopped, "closed before work began"),
        )?;
        return Ok(Claim::Ended(TaskEnd::Skipped {
            reason: "the item is closed".into(),
        }));
    }
    if !item.has_label(&labels.processing) {
        return Err(TaskError::Other(format!(
            "the label \"{}\" did not stick after claiming; check that it exists and the token may set labels",
            labels.processing
        )));
    }
    if fresh {
        // What an earlier task of the item left in the shared store is not this one's.
        run.records.forget_all();
    }
    // Independent reads and the comment at once: each is a forge round trip.
    let (comment, target, thread) = tokio::join!(
        run.locate_comment(),
        target(run, needs, &item),
        thread(run, needs, &item)
    );
    let comment = match comment? {
        Some(id) => id,
        None => {
            run.at(Step::Claim, "Claimed");
            run.post_comment().await?
        }
    };
    run.use_comment(comment)?;
    let target = target?;
    run.journal.transition(
        &run.key,
        Transition::Claimed {
            branch: &target.branch,
        },
    )?;
    run.emit(TaskEvent::Branch(target.branch.clone()));
    run.at(Step::Prepare, "Preparing the workspace");
    let thread = thread?;
    let withheld = request::withheld(&thread.author, &thread.comments, &run.forge.who_may_trigger());
    let asked_by = asked_by(run, needs, &item, &thread).await?;
    Ok(Claim::Claimed(Box::new(Claimed {
        item,
        target,
        thread,
        withheld,
        asked_by,
    })))
}

/// Killed after the ending label went on: only the bookkeeping is left
/// (the claim's swap would take `done` off and put it back).
async fn finish_delivered(
    run: &TaskRun<'_>,
    labels: &LabelsConfig,
    record: &TaskRecord,
) -> Result<Option<TaskEnd>, TaskError> {
    let (Phase::Delivered, Some(url)) = (record.phase, &record.change_url) else {
        return Ok(None);
    };
    let item = run.forge.item(&run.item).await?;
    if !item.has_label(&labels.done) {
        return Ok(None);
    }
    run.forge
        .edit_labels(&run.item, &[], &[labels.processing.as_str()])
        .await?;
    run.journal
        .transition(&run.key, Transition::ended(Phase::Done, url))?;
    Ok(Some(TaskEnd::Delivered { url: url.clone() }))
}

/// Among replicas sharing their records: whether this is a new task of
/// the item (it does not carry the processing label yet; a takeover, or a
/// task tried again, finds it set).
async fn new_among_replicas(run: &TaskRun<'_>, labels: &LabelsConfig) -> Result<bool, TaskError> {
    if run.records.shared_dir().is_none() {
        return Ok(false);
    }
    Ok(!run.forge.item(&run.item).await?.has_label(&labels.processing))
}

/// The person who asked for the run, with the forge's noreply address (it
/// needs their numeric id and the forge's web host): a writer whose
/// mention of forgehand is newer than the trigger label (or there is no
/// label), else whoever applied the label. Asked again on every start, so
/// a resumed task still knows them. When the forge gives no id, the
/// commits name no one rather than someone else.
async fn asked_by(
    run: &TaskRun<'_>,
    needs: &Needs<'_>,
    item: &Item,
    thread: &Thread,
) -> Result<Option<CoAuthor>, TaskError> {
    let label = run.forge.label_applied(&run.item, &needs.labels.trigger).await?;
    let login = run.forge.identity().await?;
    let (by, id) = match (mentioned_since(label.as_ref(), &thread.comments, &login), label) {
        (Some(by), _) => match run.forge.user_id(by).await {
            Ok(id) => (by.to_owned(), id),
            Err(e) => {
                tracing::debug!(task = %run.item, by = %by, "cannot look up the id of who mentioned forgehand: {e}; the commits name no co-author");
                return Ok(None);
            }
        },
        (None, Some(label)) => (label.by, label.by_id),
        (None, None) => {
            tracing::debug!(task = %run.item, "no label event or mention names who asked; the commits name no co-author");
            return Ok(None);
        }
    };
    let host = url::Url::parse(&item.web_url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned));
    match (id, host) {
        (Some(id), Some(host)) => Ok(CoAuthor::noreply(run.item.forge, &host, &by, id)),
        _ => {
            tracing::debug!(task = %run.item, by = %by, "the forge gave no user id or web address; the commits name no co-author");
            Ok(None)
        }
    }
}

/// The writer whose mention of `login` is newest, when it is newer than
/// the label (or there is no label, or its time is unknown) and someone
/// else than the labeller.
fn mentioned_since<'c>(
    label: Option<&LabelApplied>,
    comments: &'c [(Comment, bool)],
    login: &str,
) -> Option<&'c str> {
    let (at, comment) = comments
        .iter()
        .filter(|(comment, writer)| {
            *writer
                && !comment.author.eq_ignore_ascii_case(login)
                && crate::forge::mentions(&comment.body, login)
        })
        .filter_map(|(comment, _)| Some((crate::forge::parse_time(Some(&comment.created_at))?, comment)))
        .max_by_key(|(at, _)| *at)?;
    let Some(label) = label else {
        return Some(comment.author.as_str());
    };
    let after_label = label.at.is_none_or(|labelled| at > labelled);
    (after_label && !comment.author.eq_ignore_ascii_case(&label.by)).then_some(comment.author.as_str())
}

async fn target(run: &TaskRun<'_>, needs: &Needs<'_>, item: &Item) -> Result<Target, TaskError> {
    let repo = run.forge.repository(&run.item.repo).await?;
    match run.item.kind {
        ItemKind::Issue => Ok(Target {
            branch: format!("{}issue-{}", needs.branch_prefix, item.reference.number),
            base: repo.default_branch.clone(),
            default_branch: repo.default_branch,
            change: None,
            clone_url: repo.clone_url,
        }),
        ItemKind::Change => {
            let change = run.forge.change(&run.item).await?;
            if !change.same_repo {
                return Err(TaskError::Other(format!(
                    "this {} comes from a fork; forgehand can only push to branches of the repository itself",
                    run.item.forge.change_noun()
                )));
            }
            Ok(Target {
                branch: change.source_branch.clone(),
                base: change.target_branch.clone(),
                default_branch: repo.default_branch,
                change: Some(change),
                clone_url: repo.clone_url,
            })
        }
    }
}

/// The item's thread with each author's right to be heard.
async fn thread(run: &TaskRun<'_>, needs: &Needs<'_>, item: &Item) -> Result<Thread, TaskError> {
    let mut trusted = Trusted {
        run,
        known: HashMap::new(),
    };
    let mut comments = run.forge.comments(&run.item).await?;
    // A follow-up left as a review is part of the thread too.
    let reviews = run.forge.reviews(&run.item).await?;
    if !reviews.is_empty() {
        comments.extend(reviews);
        // Stable: comments without a time keep their order.
        comments.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    }
    let mut out = Vec::with_capacity(comments.len());
    for c in comments {
        let ok = trusted.may_trigger(&c.author).await?;
        out.push((c, ok));
    }
    let author = if trusted.may_trigger(&item.author).await? {
        Heard::Member
    } else {
        vouched(run, needs, &mut trusted).await?
    };
    let review = match run.item.kind {
        ItemKind::Change => review_threads(run, &mut trusted).await?,
        ItemKind::Issue => Vec::new(),
    };
    Ok(Thread {
        author,
        comments: out,
        review,
    })
}

/// The change's review threads that wait for forgehand and whose opener
/// and last writer may trigger tasks (an outsider's thread is not heard),
/// each with its outsiders' replies left out.
async fn review_threads(
    run: &TaskRun<'_>,
    trusted: &mut Trusted<'_, '_>,
) -> Result<Vec<HeardThread>, TaskError> {
    let login = run.forge.identity().await?;
    let mut waiting = Vec::new();
    for thread in run.forge.review_threads(&run.item).await? {
        if !thread.awaits(&login) {
            continue;
        }
        let mut writers = Vec::with_capacity(thread.comments.len());
        for comment in &thread.comments {
            writers.push(if comment.author.eq_ignore_ascii_case(&login) {
                Writer::Forgehand
            } else if trusted.may_trigger(&comment.author).await? {
                Writer::Member
            } else {
                Writer::Outsider
            });
        }
        waiting.extend(HeardThread::hear(thread, &writers));
    }
    Ok(waiting)
}

/// Who may trigger tasks, asked of the forge once per user.
struct Trusted<'r, 'a> {
    run: &'r TaskRun<'a>,
    known: HashMap<String, bool>,
}

impl Trusted<'_, '_> {
    async fn may_trigger(&mut self, user: &str) -> Result<bool, TaskError> {
        if let Some(ok) = self.known.get(user) {
            return Ok(*ok);
        }
        let ok = self.run.forge.may_trigger(&self.run.item.repo, user).await?;
        self.known.insert(user.to_owned(), ok);
        Ok(ok)
    }
}

/// An outsider's title and body: heard when a maintainer's trigger label
/// vouches for them as they stood then (trust.label_vouches_for_issue_text).
/// Fails closed: when the forge cannot say when the text was last edited,
/// or the label's time is unknown, or the two are the same (GitHub's times
/// are whole seconds), the text is withheld.
async fn vouched(
    run: &TaskRun<'_>,
    needs: &Needs<'_>,
    trusted: &mut Trusted<'_, '_>,
) -> Result<Heard, TaskError> {
    let outsider = format!(
        "written by someone who may not trigger tasks (only {} may)",
        run.forge.who_may_trigger()
    );
    let withheld = |why: String| Heard::Withheld { why };
    if !needs.label_vouches {
        return Ok(withheld(format!(
            "{outsider} (trust.label_vouches_for_issue_text is off)"
        )));
    }
    let Some(label) = run.forge.label_applied(&run.item, &needs.labels.trigger).await? else {
        return Ok(withheld(format!(
            "{outsider}, and no label event says who asked for the task"
        )));
    };
    if !trusted.may_trigger(&label.by).await? {
        return Ok(withheld(format!(
            "{outsider}, and @{} who applied the label may not either",
            label.by
        )));
    }
    match (run.forge.text_edited_at(&run.item).await?, label.at) {
        (TextEdits::Never, _) => Ok(Heard::Vouched { by: label.by }),
        // Strictly before: GitHub's times are whole seconds, so an edit in
        // the second the label was applied may have come after it.
        (TextEdits::LastAt(edited), Some(labelled)) if edited < labelled => {
            Ok(Heard::Vouched { by: label.by })
        }
        (TextEdits::LastAt(edited), Some(labelled)) if edited == labelled => Ok(withheld(format!(
            "{outsider} and edited after @{} applied the label, or in the same second, which the forge's times cannot tell apart, so the label does not vouch for it",
            label.by
        ))),
        (TextEdits::LastAt(_), Some(_)) => Ok(withheld(format!(
            "{outsider} and edited after @{} applied the label, so the label no longer vouches for it",
            label.by
        ))),
        (TextEdits::LastAt(_), None) => Ok(withheld(format!(
            "{outsider} and edited; the forge does not say whether before or after the label"
        ))),
        (TextEdits::Unknown(why), _) => {
            tracing::warn!(task = %run.item, "cannot tell when the issue text was last edited: {why}");
            Ok(withheld(format!(
                "{outsider}, and the forge does not say when it was last edited, so the label cannot vouch for it"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::{parse_time, CommentPlace};

    fn said(author: &str, body: &str, at: &str, writer: bool) -> (Comment, bool) {
        let comment = Comment {
            id: 1,
            author: author.into(),
            body: body.into(),
            place: CommentPlace::Thread,
            created_at: at.into(),
        };
        (comment, writer)
    }

    #[test]
    fn a_writers_mention_after_the_label_asked_instead_of_the_labeller() {
        let label = LabelApplied {
            by: "maya".into(),
            at: parse_time(Some("2026-11-01T10:00:00Z")),
            by_id: Some(1),
        };
        let before = said("lena", "@forgehand try", "2026-11-01T09:00:00Z", true);
        let after = said("lena", "@forgehand again please", "2026-11-02T09:00:00Z", true);
        let outsider = said("otto", "@forgehand now", "2026-11-03T09:00:00Z", false);
        let own = said("maya", "@forgehand go", "2026-11-03T09:00:00Z", true);
        let plain = said("lena", "no mention", "2026-11-04T09:00:00Z", true);
        assert_eq!(
            mentioned_since(
                Some(&label),
                &[before.clone(), outsider.clone(), plain],
                "forgehand"
            ),
            None
        );
        assert_eq!(
            mentioned_since(
                Some(&label),
                &[before.clone(), after.clone(), outsider],
                "forgehand"
            ),
            Some("lena")
        );
        assert_eq!(
            mentioned_since(Some(&label), &[after, own], "forgehand"),
            None,
            "the labeller asked again"
        );
        let untimed = LabelApplied { at: None, ..label };
        assert_eq!(
            mentioned_since(Some(&untimed), std::slice::from_ref(&before), "forgehand"),
            Some("lena")
        );
        assert_eq!(
            mentioned_since(None, &[before], "forgehand"),
            Some("lena"),
            "with no label, the mention asked"
        );
    }
}
