//! Claiming the task: the label swap (read back), the progress comment
//! (found by its marker after a restart), the target branch and the
//! thread with each author's right to be heard; then the phases in order.

use super::*;

impl TaskRun<'_> {
    pub(super) async fn execute(&mut self, record: &TaskRecord) -> Result<TaskEnd, TaskError> {
        let labels = self.labels().clone();
        // Killed after the ending label went on: only the bookkeeping is
        // left (the claim's swap would take `done` off and put it back).
        if let (Phase::Delivered, Some(url)) = (record.phase, &record.change_url) {
            let item = self.forge.item(&self.item).await?;
            if item.has_label(&labels.done) {
                self.forge
                    .edit_labels(&self.item, &[], &[labels.processing.as_str()])
                    .await?;
                self.env.journal.finish(&self.key, Phase::Done, url)?;
                return Ok(TaskEnd::Delivered { url: url.clone() });
            }
        }
        // Claim: idempotent label swap, then read back.
        self.forge
            .edit_labels(
                &self.item,
                &[labels.processing.as_str()],
                &[
                    labels.trigger.as_str(),
                    labels.done.as_str(),
                    labels.failed.as_str(),
                ],
            )
            .await?;
        let item = self.forge.item(&self.item).await?;
        let url = item.web_url.clone();
        self.env.board.update(&self.key, |line| line.web_url = url);
        if !item.open {
            self.forge
                .edit_labels(&self.item, &[], &[labels.processing.as_str()])
                .await?;
            self.env
                .journal
                .finish(&self.key, Phase::Stopped, "closed before work began")?;
            return Ok(TaskEnd::Skipped {
                reason: "the item is closed".into(),
            });
        }
        if !item.has_label(&labels.processing) {
            return Err(TaskError::Other(format!(
                "the label \"{}\" did not stick after claiming; check that it exists and the token may set labels",
                labels.processing
            )));
        }
        // Independent reads and the comment at once: each is a forge round trip.
        let (comment, target, thread) =
            tokio::join!(self.locate_comment(), self.target(&item), self.thread(&item));
        let comment = match comment? {
            Some(id) => id,
            None => {
                self.progress.at(Step::Claim, "Claimed");
                self.post_comment().await?
            }
        };
        self.comment_id = Some(comment);
        self.env.journal.set_comment(&self.key, comment)?;
        let target = target?;
        self.env.journal.set_branch(&self.key, &target.branch)?;
        self.progress.set_branch(&target.branch);
        self.progress.at(Step::Workspace, "Preparing the workspace");

        let summary = if record.phase >= Phase::Pushed {
            tracing::info!(task = %self.item, "already pushed before a restart; opening or finding the PR/MR");
            self.report().await;
            record.outcome.clone().unwrap_or_default()
        } else {
            match self.work(&item, &target, thread?).await? {
                Some(summary) => summary,
                None => return self.no_changes().await,
            }
        };
        self.deliver(&item, &target, &summary).await
    }

    /// The progress comment: the journalled one, else one carrying this
    /// task's marker (posted before a restart), else `None`.
    pub(super) async fn locate_comment(&self) -> Result<Option<u64>, TaskError> {
        if let Some(id) = self.comment_id {
            return Ok(Some(id));
        }
        let found = self.locate_comment_on_forge().await?;
        if let Some(id) = found {
            tracing::info!(task = %self.item, comment = id, "continuing the existing progress comment");
        }
        Ok(found)
    }

    /// Posts the progress comment. A failure that may have posted it anyway
    /// (a 5xx, a lost answer) is followed by a look for its marker, so a
    /// flaky forge never gets two.
    async fn post_comment(&self) -> Result<u64, TaskError> {
        let body = self.env.secrets.scrub(&self.progress.render());
        Ok(retry::find_or_create(
            "post the progress comment",
            || self.locate_comment_on_forge(),
            || self.forge.create_comment(&self.item, &body),
        )
        .await?)
    }

    /// The comment carrying this task's marker on the forge, if any.
    async fn locate_comment_on_forge(&self) -> Result<Option<u64>, ForgeError> {
        let marker = progress::marker(&self.item);
        let existing = self.forge.comments(&self.item).await?;
        Ok(existing
            .iter()
            .rev()
            .find(|c| c.body.contains(&marker))
            .map(|c| c.id))
    }

    /// Makes sure there is a progress comment (used when failing early).
    pub(super) async fn ensure_comment(&mut self) -> Result<(), TaskError> {
        let id = match self.locate_comment().await? {
            Some(id) => id,
            None => self.post_comment().await?,
        };
        self.comment_id = Some(id);
        self.env.journal.set_comment(&self.key, id)?;
        Ok(())
    }

    pub(super) async fn target(&self, item: &Item) -> Result<Target, TaskError> {
        let repo = self.forge.repository(&self.item.repo).await?;
        match self.item.kind {
            ItemKind::Issue => Ok(Target {
                branch: format!(
                    "{}issue-{}",
                    self.env.config.delivery.branch_prefix, item.reference.number
                ),
                base: repo.default_branch.clone(),
                default_branch: repo.default_branch,
                change: None,
                clone_url: repo.clone_url,
            }),
            ItemKind::Change => {
                let change = self.forge.change(&self.item).await?;
                if !change.same_repo {
                    return Err(TaskError::Other(format!(
                        "this {} comes from a fork; forgehand can only push to branches of the repository itself",
                        self.item.forge.change_noun()
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
    pub(super) async fn thread(&self, item: &Item) -> Result<Thread, TaskError> {
        let mut trusted: HashMap<String, bool> = HashMap::new();
        let mut comments = self.forge.comments(&self.item).await?;
        // A follow-up left as a review is part of the thread too.
        let reviews = self.forge.reviews(&self.item).await?;
        if !reviews.is_empty() {
            comments.extend(reviews);
            // Stable: comments without a time keep their order.
            comments.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        }
        let mut out = Vec::with_capacity(comments.len());
        for c in comments {
            let ok = self.may_trigger(&mut trusted, &c.author).await?;
            out.push((c, ok));
        }
        let author = if self.may_trigger(&mut trusted, &item.author).await? {
            Heard::Member
        } else {
            self.vouched(&mut trusted).await?
        };
        Ok(Thread {
            author,
            comments: out,
        })
    }

    async fn may_trigger(&self, known: &mut HashMap<String, bool>, user: &str) -> Result<bool, TaskError> {
        if let Some(ok) = known.get(user) {
            return Ok(*ok);
        }
        let ok = self.forge.may_trigger(&self.item.repo, user).await?;
        known.insert(user.to_owned(), ok);
        Ok(ok)
    }

    /// An outsider's title and body: heard when a maintainer's trigger
    /// label vouches for them as they stood then (trust.label_vouches_for_issue_text).
    /// Fails closed: when the forge cannot say when the text was last
    /// edited, or the label's time is unknown, the text is withheld.
    async fn vouched(&self, known: &mut HashMap<String, bool>) -> Result<Heard, TaskError> {
        let outsider = format!(
            "written by someone who may not trigger tasks (only {} may)",
            self.forge.who_may_trigger()
        );
        let withheld = |why: String| Heard::Withheld { why };
        if !self.env.config.trust.label_vouches_for_issue_text {
            return Ok(withheld(format!(
                "{outsider} (trust.label_vouches_for_issue_text is off)"
            )));
        }
        let Some(label) = self
            .forge
            .label_applied(&self.item, &self.labels().trigger)
            .await?
        else {
            return Ok(withheld(format!(
                "{outsider}, and no label event says who asked for the task"
            )));
        };
        if !self.may_trigger(known, &label.by).await? {
            return Ok(withheld(format!(
                "{outsider}, and @{} who applied the label may not either",
                label.by
            )));
        }
        match (self.forge.text_edited_at(&self.item).await?, label.at) {
            (TextEdits::Never, _) => Ok(Heard::Vouched { by: label.by }),
            (TextEdits::LastAt(edited), Some(labelled)) if edited <= labelled => {
                Ok(Heard::Vouched { by: label.by })
            }
            (TextEdits::LastAt(_), Some(_)) => Ok(withheld(format!(
                "{outsider} and edited after @{} applied the label, so the label no longer vouches for it",
                label.by
            ))),
            (TextEdits::LastAt(_), None) => Ok(withheld(format!(
                "{outsider} and edited; the forge does not say whether before or after the label"
            ))),
            (TextEdits::Unknown(why), _) => {
                tracing::warn!(task = %self.item, "cannot tell when the issue text was last edited: {why}");
                Ok(withheld(format!(
                    "{outsider}, and the forge does not say when it was last edited, so the label cannot vouch for it"
                )))
            }
        }
    }
}
