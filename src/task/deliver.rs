//! Delivery: what the model committed is taken out of the sandbox (only
//! `.git`, into an untrusted folder), the moved upstream is handed back
//! in for a rebase, and the draft PR/MR is found or opened.

use super::*;

impl TaskRun<'_> {
    /// Commits leftovers in the sandbox, copies the repository out and takes the result.
    pub(super) async fn collect(
        &self,
        ws: &WorkspaceHandle,
        sandbox: &dyn Sandbox,
        round: u32,
        protected: &[String],
    ) -> Result<Option<Collected>, TaskError> {
        let message = format!("forgehand: commit changes left uncommitted for {}", self.item);
        let project = sandbox.project_dir().to_owned();
        let out_dir = ws.with(move |ws| ws.fresh_out_dir(round)).await??;
        // Commit inside the sandbox when it has git, then only .git needs to come out.
        let committed = sandbox
            .exec(
                &format!(
                    "git add -A && (git diff --cached --quiet || git -c user.name={} -c user.email={} commit -q -m {})",
                    shell_quote(&self.env.config.delivery.author_name),
                    shell_quote(&self.env.config.delivery.author_email),
                    shell_quote(&message)
                ),
                Some(Duration::from_secs(300)),
            )
            .await
            .map(|o| o.success())
            .unwrap_or(false);
        if committed {
            if let Err(e) = sandbox
                .copy_out(&format!("{project}/.git"), &out_dir.join(".git"))
                .await
            {
                return Err(e.into());
            }
        } else {
            tracing::info!(task = %self.item, "git did not run in the sandbox; copying the whole project out");
            sandbox.copy_out(&project, &out_dir).await?;
        }
        let author = (
            self.env.config.delivery.author_name.clone(),
            self.env.config.delivery.author_email.clone(),
        );
        let protected = protected.to_vec();
        Ok(ws
            .with(move |ws| ws.collect(&out_dir, !committed, &message, (&author.0, &author.1), &protected))
            .await??)
    }

    /// Puts the moved upstream branch into the sandbox as `origin/<branch>`.
    pub(super) async fn deliver_upstream(
        &self,
        ws: &WorkspaceHandle,
        sandbox: &dyn Sandbox,
        credentials: &Credentials,
    ) -> Result<String, TaskError> {
        let creds = credentials.clone();
        ws.with(move |ws| ws.fetch_upstream(&creds)).await??;
        let workspace_dir = &self.env.config.sandbox.workspace_dir;
        let upstream_dir = format!("{}/upstream.git", workspace_dir.trim_end_matches('/'));
        sandbox.copy_in(ws.git_dir(), &upstream_dir).await?;
        let upstream_ref = format!("origin/{}", ws.branch());
        let fetched = sandbox
            .exec(
                &format!(
                    "git fetch -q {} {}",
                    shell_quote(&upstream_dir),
                    shell_quote(&format!(
                        "+refs/remotes/origin/{b}:refs/remotes/origin/{b}",
                        b = ws.branch()
                    ))
                ),
                Some(Duration::from_secs(300)),
            )
            .await?;
        if !fetched.success() {
            return Err(TaskError::Other(format!(
                "cannot bring the new upstream into the sandbox: {}",
                fetched.stderr.trim()
            )));
        }
        Ok(upstream_ref)
    }

    pub(super) async fn deliver(
        &mut self,
        item: &Item,
        target: &Target,
        summary: &str,
    ) -> Result<TaskEnd, TaskError> {
        let change = match &target.change {
            Some(change) => change.clone(),
            None => {
                self.progress.at(Step::Review, "Opening the draft for review");
                let title = sanitize::for_model(&item.title);
                let title = format!("{} ({})", title.trim(), issue_ref(&self.item));
                let plan = self
                    .progress
                    .plan_details()
                    .map(|details| format!("\n\n{details}"))
                    .unwrap_or_default();
                let body = self.env.secrets.scrub(&format!(
                    "{}{plan}\n\nCloses {}\n\n---\nMade by forgehand for {}.",
                    summary.trim(),
                    issue_ref(&self.item),
                    item.web_url
                ));
                // Looked for first (and again after a failure that may have
                // opened it anyway), so there is never a second one.
                retry::find_or_create(
                    "open the draft PR/MR",
                    || async {
                        let found = self.forge.find_open_change(&self.item.repo, &target.branch).await?;
                        if let Some(found) = &found {
                            tracing::info!(task = %self.item, url = %found.web_url, "the PR/MR already exists");
                        }
                        Ok(found)
                    },
                    || {
                        self.forge
                            .create_draft_change(&self.item.repo, &target.branch, &target.base, &title, &body)
                    },
                )
                .await?
            }
        };
        self.env.journal.set_change(&self.key, &change.web_url)?;
        self.env.journal.set_phase(&self.key, Phase::Delivered)?;
        let noun = self.item.forge.change_noun();
        let mut outcome = format!("**Done.** Draft {noun}: {}\n", change.web_url);
        if !summary.trim().is_empty() {
            outcome.push_str(&format!("\n**Summary**\n\n{}\n", summary.trim()));
        }
        outcome.push_str(&self.usage_line());
        self.progress.finish(true, "Done", outcome);
        self.report().await;
        let labels = self.labels().clone();
        self.forge
            .edit_labels(&self.item, &[labels.done.as_str()], &[labels.processing.as_str()])
            .await?;
        self.env.journal.finish(&self.key, Phase::Done, &change.web_url)?;
        Ok(TaskEnd::Delivered { url: change.web_url })
    }

    pub(super) async fn no_changes(&mut self) -> Result<TaskEnd, TaskError> {
        let answer = self.finish_summary.take().unwrap_or_default();
        let mut outcome = "**Done without changes.** The model did not change any file.\n".to_owned();
        if !answer.trim().is_empty() {
            outcome.push_str(&format!("\n**Answer**\n\n{}\n", answer.trim()));
        }
        outcome.push_str(&self.usage_line());
        self.progress.finish(false, "Done (no changes)", outcome);
        self.report().await;
        let labels = self.labels().clone();
        self.forge
            .edit_labels(&self.item, &[labels.done.as_str()], &[labels.processing.as_str()])
            .await?;
        self.env.journal.finish(&self.key, Phase::Done, "no changes")?;
        Ok(TaskEnd::NoChanges)
    }
}
