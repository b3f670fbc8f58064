//! The sixth phase, pushing: what the model committed is taken out of the
//! sandbox (only `.git`, into an untrusted folder) and pushed from the
//! host; a rejected push brings the moved upstream into the sandbox for
//! the model to rebase onto, up to `delivery.max_push_attempts` times.
//! Once pushed, the summary is journalled: a restart goes straight on to
//! delivery.

use crate::agent::{AgentOutcome, StopReason};
use crate::config::DeliveryConfig;
use crate::git::attribution::{Attribution, Identity};
use crate::git::untrusted::{self, Layout, LeftoverCommit, UntrustedError};
use crate::git::workspace::{Collected, DeliveryError};
use crate::git::Credentials;
use crate::journal::Transition;
use crate::llm::Message;
use crate::sandbox::tree_out::read_tree;
use crate::sandbox::Sandbox;
use crate::sanitize;
use crate::task::handoff::Bench;
use crate::task::handoff::Claimed;
use crate::task::handoff::Verified;
use crate::task::phases::request;
use crate::task::report::progress::Step;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::state::phase_records::{PushedRecord, PushingRecord};
use crate::task::workbench::session::Session;
use crate::task::workbench::workspace_handle::WorkspaceHandle;

/// What pushing needs besides the run.
pub(in crate::task) struct Needs<'a> {
    pub delivery: &'a DeliveryConfig,
    /// `sandbox.workspace_dir`, where a moved upstream is put for a rebase.
    pub workspace_dir: &'a str,
    /// What may come out of the sandbox in one copy.
    pub copy_out: crate::config::CopyOutLimits,
    /// `git.history_depth`: how much of a moved upstream's history the
    /// sandbox gets.
    pub history_depth: Option<u32>,
    /// Where the run's checkpoints are kept until the push.
    pub checkpoints: Option<crate::task::state::checkpoint::Store>,
}

/// Names from the sandbox as one line of forgehand's own words: each made
/// safe for the forge and cut, at most [`LISTED`] of them.
fn listed(names: &[String]) -> String {
    let mut said: Vec<String> = names
        .iter()
        .take(LISTED)
        .map(|name| sanitize::for_forge_line(name, 200))
        .collect();
    if names.len() > LISTED {
        said.push(format!("and {} more", names.len() - LISTED));
    }
    said.join("; ")
}

/// Most names from the sandbox listed in a comment or a description.
const LISTED: usize = 20;

/// What one round took from the sandbox.
struct Taken {
    collected: Collected,
    /// Why forgehand made the last commit on the host, when it did.
    host_commit: Option<String>,
    /// Work-tree entries that were not committed, and why.
    left_out: Vec<String>,
    /// The files forgehand committed on the model's behalf.
    committed_for_model: Vec<String>,
}

/// What one round took out of the sandbox into the quarantine.
struct TakenOut {
    /// The sandbox's other local branches: (name, tip).
    other_branches: Vec<(String, git2::Oid)>,
    /// Whether the host made the last commit from the tree.
    committed_on_host: bool,
    /// Work-tree entries that were not taken.
    left_out: Vec<String>,
}

/// How the change left the sandbox.
pub(in crate::task) enum Pushed {
    /// The model changed nothing; what it answered.
    Nothing { answer: String },
    /// The branch is pushed; the summary for the PR/MR and the comment,
    /// and the sandbox with its session for rounds after the push (CI).
    Branch { summary: String, bench: Box<Bench> },
    /// A run before a restart pushed it (its record was not written); the
    /// summary it pushed with.
    Earlier { summary: String },
}

/// Whether a run killed between its push and the push's record pushed:
/// the remote branch (as `workspace` found it) is at the commit the
/// pushing record names. Then the push is recorded now.
pub(in crate::task) async fn pushed_before_a_restart(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    workspace: &WorkspaceHandle,
) -> Result<Option<Pushed>, TaskError> {
    let Some(pushing) = run.kept.pushing.take() else {
        return Ok(None);
    };
    let remote = workspace.with(|ws| ws.pushed_head()).await?;
    if remote.map(|c| c.to_string()).as_deref() != Some(pushing.commit.as_str()) {
        return Ok(None);
    }
    tracing::info!(task = %run.item, commit = %pushing.commit, "the push went out before a restart; going on to delivery");
    let pushed = (pushing.branch.as_str(), Some(pushing.commit.clone()));
    record_pushed(run, needs, pushed, &pushing.summary)?;
    Ok(Some(Pushed::Earlier {
        summary: pushing.summary,
    }))
}

pub(in crate::task) async fn push(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    verified: Verified,
) -> Result<Pushed, TaskError> {
    let Verified {
        prepared,
        session,
        mut outcome,
        tests,
    } = verified;
    let sandbox = prepared.sandbox.sandbox.as_ref();
    let mut rounds = Rounds {
        run,
        needs,
        workspace: &prepared.workspace,
        sandbox,
        credentials: &prepared.credentials,
        branch: &claimed.target.branch,
        attribution: attribution(needs, claimed),
    };
    let pushed = rounds.push_until_taken(&session, &mut outcome).await;
    let mut summary = match pushed {
        Ok(Some(summary)) => summary,
        Ok(None) => {
            session.close().await;
            // Stopped at a cap with nothing to deliver: the task ends with that reason.
            if let StopReason::Budget(why) = &outcome.stop {
                return Err(TaskError::Other(format!(
                    "the run stopped at the budget before it changed anything: {why}"
                )));
            }
            return Ok(Pushed::Nothing {
                answer: outcome.answer.unwrap_or_default(),
            });
        }
        Err(e) => {
            session.close().await;
            return Err(e);
        }
    };
    if summary.trim().is_empty() {
        summary = format!("The run ended: {}.", outcome.stop);
    } else if outcome.stop != StopReason::Answered {
        summary.push_str(&format!("\n\n(The run ended early: {}.)", outcome.stop));
    }
    if let Some(tests) = &tests {
        summary.push_str("\n\n");
        summary.push_str(&tests.section());
        if !tests.passed && needs.delivery.require_passing_tests {
            return Err(TaskError::TestsFailed {
                reason: format!(
                    "`{}` {}; the change is on `{}`, and no {} was opened",
                    tests.command,
                    tests.outcome,
                    claimed.target.branch,
                    run.item.forge.change_noun()
                ),
                section: tests.section(),
            });
        }
    }
    let head = prepared.workspace.with(|ws| ws.pushed_head()).await?;
    let pushed = (claimed.target.branch.as_str(), head.map(|c| c.to_string()));
    crate::kill_point::reached(crate::kill_point::PUSHED);
    record_pushed(run, needs, pushed, &summary)?;
    Ok(Pushed::Branch {
        summary,
        bench: Box::new(Bench {
            prepared,
            session,
            outcome,
        }),
    })
}

/// The push journalled: the phase, its record (the branch and its head,
/// the summary for the PR/MR); the agent's checkpoints forgotten, since a
/// restart now goes on to delivery.
fn record_pushed(
    run: &TaskRun<'_>,
    needs: &Needs<'_>,
    (branch, commit): (&str, Option<String>),
    summary: &str,
) -> Result<(), TaskError> {
    let record = PushedRecord {
        branch: branch.to_owned(),
        commit,
        summary: summary.to_owned(),
    };
    // The record before the phase: a restart that sees the phase finds it.
    run.records.keep(&record)?;
    run.journal.transition(&run.key, Transition::Pushed)?;
    if let Some(checkpoints) = &needs.checkpoints {
        checkpoints.forget();
    }
    Ok(())
}

/// Pushes what a later round (a CI fix) committed in the bench's
/// sandbox; the pushed commit, or `None` when the round changed nothing.
pub(in crate::task) async fn push_again(
    run: &mut TaskRun<'_>,
    needs: &Needs<'_>,
    claimed: &Claimed,
    bench: &mut Bench,
) -> Result<Option<git2::Oid>, TaskError> {
    let before = bench.prepared.workspace.with(|ws| ws.pushed_head()).await?;
    let mut rounds = Rounds {
        run,
        needs,
        workspace: &bench.prepared.workspace,
        sandbox: bench.prepared.sandbox.sandbox.as_ref(),
        credentials: &bench.prepared.credentials,
        branch: &claimed.target.branch,
        attribution: attribution(needs, claimed),
    };
    if rounds
        .push_until_taken(&bench.session, &mut bench.outcome)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let after = bench.prepared.workspace.with(|ws| ws.pushed_head()).await?;
    Ok(after.filter(|head| Some(*head) != before))
}

/// What the task's commits get on the host before each push: forgehand
/// as author and committer, the person who asked as co-author, and the
/// operator's signature.
fn attribution(needs: &Needs<'_>, claimed: &Claimed) -> Attribution {
    Attribution {
        identity: Identity {
            name: needs.delivery.author_name.clone(),
            email: needs.delivery.author_email.clone(),
        },
        co_author: claimed.asked_by.clone(),
        signer: needs.delivery.signing.as_ref().map(|s| s.signer.clone()),
    }
}

/// The push and its rebase rounds.
struct Rounds<'r, 'a> {
    run: &'r mut TaskRun<'a>,
    needs: &'r Needs<'r>,
    workspace: &'r WorkspaceHandle,
    sandbox: &'r dyn Sandbox,
    credentials: &'r Credentials,
    branch: &'r str,
    attribution: Attribution,
}

impl Rounds<'_, '_> {
    /// Pushes what the model made, rebasing when the remote moved.
    /// `None`: the model changed nothing (and answered). The summary is
    /// the model's first answer that said anything.
    async fn push_until_taken(
        &mut self,
        session: &Session,
        outcome: &mut AgentOutcome,
    ) -> Result<Option<String>, TaskError> {
        let delivery = self.needs.delivery;
        let mut summary = outcome.answer.clone().unwrap_or_default();
        let mut round = 0;
        loop {
            round += 1;
            // Read each round: a refusal in the last one is remembered.
            let rules = crate::task::report::left_out::Rules::for_run(self.run, delivery);
            let protected = rules.paths();
            let taken = self.collect(round, &protected).await?;
            let head = taken.as_ref().map(|t| t.collected.head);
            let submodules = self.submodules_said(round, head).await;
            let Some(Taken {
                collected,
                host_commit,
                left_out,
                committed_for_model,
            }) = taken
            else {
                for said in submodules {
                    self.run.note(said);
                }
                return self.nothing_taken(round, outcome);
            };
            self.tell_taken(&mut summary, (&host_commit, &committed_for_model, &left_out));
            for (withheld, why) in rules.split(collected.withheld.as_ref()) {
                self.tell_left_out(&mut summary, &withheld, &why);
            }
            for said in submodules {
                self.tell(&mut summary, said);
            }
            if !collected.other_branches.is_empty() {
                self.run.note(format!(
                    "Not pushed: other branches the model changed ({})",
                    listed(&collected.other_branches)
                ));
            }
            self.run.at(
                Step::Push,
                format!("Pushing {} commit(s) to `{}`", collected.commits, self.branch),
            );
            self.run.report().await;
            match self.push_once(&mut summary).await? {
                Ok(()) => {
                    self.run.note(format!(
                        "Pushed `{}` ({} files changed)",
                        self.branch,
                        collected.files.len()
                    ));
                    return Ok(Some(summary));
                }
                // A refusal is never sent again, nor rebased.
                Err(crate::git::GitError::Rejected { reason, .. })
                    if crate::task::report::left_out::workflow_refusal(&reason).is_some() =>
                {
                    return Err(TaskError::Other(format!(
                        "the forge refused the push again: {reason}"
                    )));
                }
                Err(crate::git::GitError::Rejected { reason, .. }) if round < delivery.max_push_attempts => {
                    *outcome = self.rebase(session, outcome, &reason).await?;
                    if let Some(answer) = &outcome.answer {
                        if summary.trim().is_empty() {
                            summary = answer.clone();
                        }
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// What forgehand did with what the model left, told on the comment
    /// and in the summary: the last commit made on the host (and why), the
    /// files it committed for the model, and those not committed.
    fn tell_taken(
        &mut self,
        summary: &mut String,
        (host_commit, committed_for_model, left_out): (&Option<String>, &[String], &[String]),
    ) {
        if let Some(why) = host_commit {
            self.tell(
                summary,
                format!("forgehand made the last commit on the host, from the files the model left, because {why}."),
            );
        }
        if !committed_for_model.is_empty() {
            self.tell(
                summary,
                format!(
                    "forgehand committed what the model left uncommitted, on its behalf: {}",
                    listed(committed_for_model)
                ),
            );
        }
        if !left_out.is_empty() {
            self.tell(summary, format!("Not committed: {}", listed(left_out)));
        }
    }

    /// One push of the branch (with its LFS objects first), and again
    /// without the files the forge refused for want of a permission.
    async fn push_once(
        &mut self,
        summary: &mut String,
    ) -> Result<Result<(), crate::git::GitError>, TaskError> {
        // Another replica may have taken the task over meanwhile.
        self.run.forge.before_push(&self.run.item).await?;
        crate::task::report::lfs_note::upload_before_push(self.run, self.workspace).await?;
        let mut pushed = self.push_branch(summary).await?;
        if let Err(crate::git::GitError::Rejected { reason, .. }) = &pushed {
            if let Some(refusal) = crate::task::report::left_out::workflow_refusal(reason) {
                pushed = self.push_without_refused(&refusal, summary).await?;
            }
        }
        Ok(pushed)
    }

    /// Pushes the task branch as it stands.
    async fn push_branch(&self, summary: &str) -> Result<Result<(), crate::git::GitError>, TaskError> {
        // What goes out, recorded first: a kill after the push but before
        // its record is recognised by the remote branch at this commit.
        let commit = self.workspace.with(|ws| ws.branch_head()).await??;
        self.run.records.keep(&PushingRecord {
            branch: self.branch.to_owned(),
            commit: commit.to_string(),
            summary: summary.to_owned(),
        })?;
        let (creds, deadline) = (self.credentials.clone(), self.run.forge.write_deadline());
        self.workspace.with(move |ws| ws.push(&creds, deadline)).await
    }

    /// The forge refused the push for its workflow files: they are left
    /// out (and remembered for the repository), and the rest is pushed
    /// once. The same refused push is never sent again.
    async fn push_without_refused(
        &mut self,
        refusal: &crate::task::report::left_out::WorkflowRefusal,
        summary: &mut String,
    ) -> Result<Result<(), crate::git::GitError>, TaskError> {
        crate::task::report::left_out::remember_refusal(self.run, refusal);
        let (permission, attribution) = (refusal.permission.clone(), self.attribution.clone());
        let withheld = self
            .workspace
            .with(move |ws| {
                ws.leave_out_refused(
                    &[crate::task::report::left_out::WORKFLOWS.to_owned()],
                    &permission,
                    &attribution,
                )
            })
            .await??;
        let Some(withheld) = withheld else {
            return Err(TaskError::Other(format!(
                "the forge refused the push: forgehand's token lacks {}",
                refusal.permission
            )));
        };
        let why = crate::task::report::left_out::Why::Forge {
            permission: refusal.permission.clone(),
        };
        self.tell_left_out(summary, &withheld, &why);
        self.run.report().await;
        self.push_branch(summary).await
    }

    /// Names the files left out (and why) on the progress comment, and
    /// adds their diff, folded, to the PR's summary.
    fn tell_left_out(
        &mut self,
        summary: &mut String,
        withheld: &crate::git::workspace::Withheld,
        why: &crate::task::report::left_out::Why,
    ) {
        let section = crate::task::report::left_out::section(withheld, why);
        if !summary.contains(&section) {
            summary.push_str(&format!("\n\n{section}"));
        }
        self.run.note(crate::task::report::left_out::line(withheld, why));
    }

    /// What the change does to submodules: in the first round, edits
    /// inside their folders (never pushed); in every round, each gitlink
    /// and `.gitmodules` change from the base to `head`.
    async fn submodules_said(&self, round: u32, head: Option<git2::Oid>) -> Vec<String> {
        use crate::task::report::submodule_report::{edits_said, gitlink_changes};
        let mut lines = match round {
            1 => edits_said(self.sandbox, self.workspace, self.needs.copy_out).await,
            _ => Vec::new(),
        };
        if let Some(head) = head {
            lines.extend(gitlink_changes(self.workspace, head).await);
        }
        lines
    }

    /// The end of a round that took no change.
    fn nothing_taken(&mut self, round: u32, outcome: &AgentOutcome) -> Result<Option<String>, TaskError> {
        match (round, &outcome.stop) {
            (1, StopReason::Answered) => {
                self.run.note("The model finished without changing any file");
                Ok(None)
            }
            (1, stop) => Err(TaskError::Other(format!("the model made no change and {stop}"))),
            _ => Err(TaskError::Other(
                "after the rebase the branch holds no change any more".into(),
            )),
        }
    }

    /// Says `said` on the progress comment and, once, in the PR's summary.
    fn tell(&mut self, summary: &mut String, said: String) {
        if !summary.contains(&said) {
            summary.push_str(&format!("\n\n{said}"));
        }
        self.run.note(said);
    }

    /// Asks the model to rebase onto the moved upstream.
    async fn rebase(
        &mut self,
        session: &Session,
        outcome: &AgentOutcome,
        reason: &str,
    ) -> Result<AgentOutcome, TaskError> {
        tracing::info!(task = %self.run.item, "push rejected ({reason}); asking the model to rebase");
        self.run.note(format!(
            "Push rejected ({reason}); rebasing onto the new remote branch"
        ));
        self.run.report().await;
        let upstream_ref = self.bring_upstream().await?;
        let mut messages = outcome.messages.clone();
        messages.push(Message::User(request::rebase_request(self.branch, &upstream_ref)));
        session.resume(self.run, messages).await
    }

    /// Commits leftovers in the sandbox, streams the repository out as
    /// data into a quarantine and takes the result from there.
    async fn collect(&self, round: u32, protected: &[String]) -> Result<Option<Taken>, TaskError> {
        let message = crate::task::workbench::sandbox_commit::message(&self.run.item);
        let project = self.sandbox.project_dir().to_owned();
        let (quarantine_dir, trusted) = self
            .workspace
            .with(move |ws| (ws.quarantine_dir(round), ws.object_dirs()))
            .await?;
        let host_commit =
            crate::task::workbench::sandbox_commit::commit(self.sandbox, self.needs.delivery, &message).await;
        let (layout, folder) = match &host_commit {
            None => (Layout::GitDir, format!("{project}/.git")),
            Some(why) => {
                tracing::info!(task = %self.run.item, "{why}; taking the whole project out to commit it on the host");
                (Layout::Project, project)
            }
        };
        let TakenOut {
            other_branches: branches,
            committed_on_host,
            left_out,
        } = self
            .take_out(
                layout,
                &folder,
                message.clone(),
                (quarantine_dir.clone(), trusted),
            )
            .await?;
        let (protected, attribution) = (protected.to_vec(), self.attribution.clone());
        let said = message.clone();
        let collected = self
            .workspace
            .with(move |ws| {
                let collected = ws.collect(&quarantine_dir, &branches, &protected, &attribution)?;
                Ok::<_, DeliveryError>(collected.map(|c| (c, ws.committed_as(&said))))
            })
            .await??;
        Ok(collected.map(|(collected, committed_for_model)| Taken {
            collected,
            host_commit: host_commit.filter(|_| committed_on_host),
            left_out,
            committed_for_model,
        }))
    }

    /// Streams `folder` out of the sandbox as data into the quarantine
    /// `into`, taking the branch's commits since the base (and, from a
    /// whole project, committing the leftovers on the host with `message`).
    async fn take_out(
        &self,
        layout: Layout,
        folder: &str,
        message: String,
        (into, trusted): (std::path::PathBuf, Vec<std::path::PathBuf>),
    ) -> Result<TakenOut, TaskError> {
        let delivery = self.needs.delivery;
        let tree = self.sandbox.read_out(folder).await?;
        let author = (delivery.author_name.clone(), delivery.author_email.clone());
        let (branch, limits) = (self.branch.to_owned(), self.needs.copy_out);
        // The walk of the result's history stops at what the trusted clone holds.
        let base = self.workspace.with(|ws| ws.base).await?;
        let read = read_tree(tree, move |input| {
            let author =
                git2::Signature::now(&author.0, &author.1).map_err(|source| UntrustedError::Git {
                    action: "make the commit author".into(),
                    source,
                })?;
            let leftovers = (layout == Layout::Project).then_some(LeftoverCommit {
                message: &message,
                author: &author,
            });
            untrusted::take_since(
                input,
                layout,
                &branch,
                &into,
                &limits,
                leftovers,
                (&[base], &trusted),
            )
            // The quarantine's repository is closed here, before the host reads it.
            .map(|q| TakenOut {
                other_branches: q.other_branches,
                committed_on_host: q.committed_on_host,
                left_out: q.left_out,
            })
        })
        .await?;
        match (read.read, read.sandbox) {
            (Ok(taken), Ok(())) => Ok(taken),
            // A broken stream is best explained by the sandbox's side.
            (Err(UntrustedError::Stream(_)), Err(e)) | (Ok(_), Err(e)) => Err(e.into()),
            (Err(e), _) => Err(DeliveryError::from_untrusted(e, self.branch).into()),
        }
    }

    /// Puts the moved upstream branch into the sandbox as `origin/<branch>`.
    async fn bring_upstream(&self) -> Result<String, TaskError> {
        let creds = self.credentials.clone();
        // What the sandbox has is read before the fetch moves the remote branch.
        let (has, upstream) = self
            .workspace
            .with(move |ws| -> Result<_, DeliveryError> {
                Ok((ws.history_tips(), ws.fetch_upstream(&creds)?))
            })
            .await??;
        let branch = self.workspace.branch().to_owned();
        crate::task::workbench::sandbox_fetch::hand_over(
            self.workspace,
            self.sandbox,
            (self.needs.workspace_dir, "upstream.git", self.needs.history_depth),
            (&format!("refs/remotes/origin/{branch}"), upstream, has),
        )
        .await?;
        Ok(format!("origin/{branch}"))
    }
}
