//! Best of N (`agent.attempts`): the change and its tests made N times,
//! each attempt in a sandbox of its own with an agent of its own, then one
//! chosen for delivery. With one attempt (the default) this is the change
//! and verify phases as they are.
//!
//! - **Side by side, within the operator's limit.** Attempts run at once
//!   in the task slots `daemon.max_concurrent_tasks` leaves free when they
//!   start (the task's own slot included), else one after another.
//! - **Within a share of the money.** Each attempt's model calls run under
//!   its share of what `budget.task_usd` leaves after planning (1/N), on
//!   top of the task's own caps: no attempt eats the others' money, and
//!   the task never passes its cap.
//! - **Chosen by the tests, then a judge.** The attempts whose tests passed
//!   qualify; when none passed, those that changed something. One
//!   qualifier is delivered as it is; several go to the judge
//!   ([`crate::task::phases::judge`]) with the request, the plan and each diff. The
//!   chosen one's sandbox and session go on to the push; the others'
//!   sandboxes are removed. The PR/MR says how many were tried, which
//!   passed, and why this one; the transcript labels every step with its
//!   attempt.

use crate::agent::StepRecorder;
use crate::budget::Budgeted;
use crate::git::Credentials;
use crate::task::handoff::Claimed;
use crate::task::handoff::Conversation;
use crate::task::handoff::Planned;
use crate::task::handoff::Prepared;
use crate::task::handoff::RepoEnvironment;
use crate::task::handoff::TaskSandbox;
use crate::task::handoff::Verified;
use crate::task::needs::{change_needs, recorded, verify_needs};
use crate::task::phases::change;
use crate::task::phases::judge::{self, Case, Entrant};
use crate::task::phases::prepare::{self, SetupRules};
use crate::task::phases::task_plan::TaskPlan;
use crate::task::phases::verify;
use crate::task::report::events::TaskEvent;
use crate::task::run::TaskRun;
use crate::task::state::error::TaskError;
use crate::task::workbench::start_sandbox;
use crate::task::workbench::workspace_handle::WorkspaceHandle;
use crate::task::{Accounts, TaskEnv};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;

/// The change and its tests: once, or the repository's number of
/// attempts (`agent.attempts` unless its settings say less or the
/// operator's entry for it says otherwise) with the best attempt kept.
pub(in crate::task) async fn change_and_verify(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    accounts: &Accounts,
    claimed: &Claimed,
    planned: Planned,
) -> Result<Verified, TaskError> {
    let attempts = planned.prepared.repo.settings.attempts;
    if attempts <= 1 {
        let recorder = accounts.transcript.clone().map(|t| t as Arc<dyn StepRecorder>);
        let mut needs = change_needs(env, recorder);
        // One run, one sandbox: its steps are kept for a resume.
        needs.checkpoints = Some(crate::task::state::checkpoint::Store::for_task(
            &env.config,
            &run.item,
            run.records.clone(),
        ));
        let changed = change::change(run, &needs, claimed, planned).await?;
        return verify::verify(run, &verify_needs(env), changed).await;
    }
    best_of(run, env, accounts, claimed, planned, attempts).await
}

/// The sandbox owner id of attempt `number` of the task `slug` (the
/// first attempt's is the task's own): each attempt's sandbox has a name
/// of its own.
fn attempt_owner(slug: &str, number: u32) -> String {
    match number {
        1 => slug.to_owned(),
        n => format!("{slug}.attempt-{n}"),
    }
}

/// Every sandbox owner id a running task `slug` may have (its attempts'
/// too), so none of its sandboxes is taken for an orphan.
pub fn sandbox_owners(slug: &str) -> Vec<String> {
    (1..=crate::config::MAX_ATTEMPTS)
        .map(|n| attempt_owner(slug, n))
        .collect()
}

/// What every attempt shares.
struct Field<'a> {
    env: &'a TaskEnv,
    accounts: &'a Accounts,
    claimed: &'a Claimed,
    attempts: u32,
    /// Each attempt's money; `None`: the task has no cap of its own.
    share: Option<f64>,
    /// What a fresh attempt starts from.
    start: Start,
}

/// One attempt as it ended.
struct Candidate {
    number: u32,
    result: Result<Verified, TaskError>,
    /// What it changed against the branch's start (scrubbed).
    diff: String,
    spent: f64,
}

impl Candidate {
    fn passed(&self) -> bool {
        matches!(&self.result, Ok(v) if v.tests.as_ref().is_some_and(|t| t.passed))
    }

    fn changed(&self) -> bool {
        self.result.is_ok() && !self.diff.trim().is_empty()
    }

    /// How its tests ended, in words.
    fn tests(&self) -> String {
        match &self.result {
            Err(e) => format!("did not finish: {e}"),
            Ok(v) => match (&v.tests, &v.outcome.stop) {
                (Some(t), _) if t.passed => "passed".to_owned(),
                (Some(t), _) => format!("failed: `{}` {}", t.command, t.outcome),
                (None, crate::agent::StopReason::Answered) if self.diff.trim().is_empty() => {
                    "not run: nothing changed".to_owned()
                }
                (None, crate::agent::StopReason::Answered) => "no test command".to_owned(),
                (None, stop) => format!("not run: the attempt stopped early ({stop})"),
            },
        }
    }
}

async fn best_of(
    run: &mut TaskRun<'_>,
    env: &TaskEnv,
    accounts: &Accounts,
    claimed: &Claimed,
    planned: Planned,
    attempts: u32,
) -> Result<Verified, TaskError> {
    let side_by_side = slots(env, attempts);
    let share = accounts.spend.task_left().map(|left| left / f64::from(attempts));
    run.emit(TaskEvent::Note {
        line: format!(
            "Best of {attempts}: {attempts} attempts, {side_by_side} at a time{}",
            share
                .map(|usd| format!(", each within ${usd:.4} of budget.task_usd"))
                .unwrap_or_default()
        ),
        transcript: Some(format!("Best of {attempts}: the attempts begin")),
    });
    let field = Field {
        env,
        accounts,
        claimed,
        attempts,
        share,
        start: Start::of(&planned, env),
    };
    let mut others: Vec<TaskRun<'_>> = (2..=attempts)
        .map(|n| run.attempt(format!("Attempt {n}/{attempts}")))
        .collect();
    let mut first = Some(planned);
    run.set_label(Some(format!("Attempt 1/{attempts}")));
    let runs = std::iter::once(&mut *run).chain(others.iter_mut());
    // Boxed as `Send` here: a stream of the bare futures loses that proof.
    let mut futures: Vec<futures_util::future::BoxFuture<'_, Candidate>> = Vec::new();
    for (i, attempt_run) in runs.enumerate() {
        futures.push(Box::pin(attempt(attempt_run, &field, first.take(), i as u32 + 1)));
    }
    let mut candidates: Vec<Candidate> = futures_util::stream::iter(futures)
        .buffer_unordered(side_by_side)
        .collect()
        .await;
    candidates.sort_by_key(|c| c.number);
    run.set_label(None);
    let chosen = choose(run, &field, &candidates).await;
    settle(run, &mut others, candidates, chosen, attempts).await
}

/// How many attempts may run at once: the task's own slot and those
/// `daemon.max_concurrent_tasks` leaves free now.
fn slots(env: &TaskEnv, attempts: u32) -> usize {
    let running = env.board.keyed_snapshot().len().max(1);
    let free = env.config.scheduling.max_concurrent_tasks.saturating_sub(running);
    (1 + free).min(attempts as usize)
}

/// One attempt, from its sandbox (the task's own for the first) to its
/// tests, under its share of the money.
async fn attempt(run: &mut TaskRun<'_>, field: &Field<'_>, given: Option<Planned>, number: u32) -> Candidate {
    let spend = field.share.map(|usd| Arc::new(field.accounts.spend.share(usd)));
    let result = async {
        let mut planned = match given {
            Some(planned) => planned,
            None => field.start.fresh(run, field.env, number).await?,
        };
        planned.request.push_str(&attempt_line(number, field.attempts));
        let recorder = field.accounts.transcript.clone().map(|transcript| {
            Arc::new(crate::transcript::AttemptSteps {
                transcript,
                attempt: number,
            }) as Arc<dyn StepRecorder>
        });
        let mut needs = change_needs(field.env, recorder);
        if let Some(spend) = &spend {
            needs.model = Arc::new(Budgeted::new(field.env.model.clone(), spend.clone()));
        }
        let changed = change::change(run, &needs, field.claimed, planned).await?;
        verify::verify(run, &verify_needs(field.env), changed).await
    }
    .await;
    let diff = match &result {
        Ok(verified) => diff_of(run, verified).await,
        Err(_) => String::new(),
    };
    let candidate = Candidate {
        number,
        result,
        diff,
        spent: spend.map(|s| s.task_spent()).unwrap_or_default(),
    };
    run.emit(TaskEvent::Note {
        line: format!("done; tests {}", candidate.tests()),
        transcript: Some(format!("Attempt {number}: tests {}", candidate.tests())),
    });
    candidate
}

/// What the model of attempt `number` is told besides the request.
fn attempt_line(number: u32, attempts: u32) -> String {
    format!(
        "\n\nThis is attempt {number} of {attempts}: {attempts} attempts make this change independently, each in its own sandbox; the one whose tests pass and that a reviewer judges best is delivered, so make the change you would defend."
    )
}

/// What an attempt's sandbox holds against where the branch started: the
/// diff of the tracked files, and the names of new files not committed.
async fn diff_of(run: &TaskRun<'_>, verified: &Verified) -> String {
    let base = match verified.prepared.workspace.with(|ws| ws.base).await {
        Ok(base) => base.to_string(),
        Err(e) => return format!("(the diff could not be read: {e})"),
    };
    let command = format!(
        "git diff --no-color --no-ext-diff {base} -- . 2>&1; git ls-files --others --exclude-standard | sed 's/^/new file, not committed: /'",
        base = crate::sandbox::command::shell_quote(&base)
    );
    let sandbox = verified.prepared.sandbox.sandbox.as_ref();
    match sandbox.exec(&command, Some(Duration::from_secs(120))).await {
        Ok(output) => run.secrets.scrub(&output.stdout),
        Err(e) => format!("(the diff could not be read: {e})"),
    }
}

/// Which attempt is delivered (an index into `candidates`) and why.
struct Choice {
    index: usize,
    why: String,
}

/// The attempt to deliver: the only one that qualifies, or the judge's
/// pick among several (the first when the judge cannot choose).
async fn choose(run: &mut TaskRun<'_>, field: &Field<'_>, candidates: &[Candidate]) -> Option<Choice> {
    let passed: Vec<usize> = (0..candidates.len())
        .filter(|&i| candidates[i].passed())
        .collect();
    let (pool, kind) = if passed.is_empty() {
        let changed = (0..candidates.len())
            .filter(|&i| candidates[i].changed())
            .collect();
        (changed, "none passed the tests; ")
    } else {
        (passed, "")
    };
    match pool.as_slice() {
        [] => {
            let index = candidates.iter().position(|c| c.result.is_ok())?;
            Some(Choice {
                index,
                why: "no attempt changed anything; the first that finished is reported".into(),
            })
        }
        [only] => Some(Choice {
            index: *only,
            why: match kind.is_empty() {
                true => "the only attempt whose tests passed".into(),
                false => "none passed the tests; the only attempt that changed something".into(),
            },
        }),
        several => Some(judged(run, field, candidates, several, kind).await),
    }
}

/// The judge's pick among `pool`; the first of them when it cannot choose.
async fn judged(
    run: &mut TaskRun<'_>,
    field: &Field<'_>,
    candidates: &[Candidate],
    pool: &[usize],
    kind: &str,
) -> Choice {
    let tests: Vec<String> = pool.iter().map(|&i| candidates[i].tests()).collect();
    let entrants: Vec<Entrant<'_>> = pool
        .iter()
        .zip(&tests)
        .map(|(&i, tests)| Entrant {
            number: candidates[i].number,
            tests,
            diff: &candidates[i].diff,
        })
        .collect();
    let case = Case {
        request: &field.start.request,
        plan: field.start.plan.as_ref().map(|p| p.text.as_str()),
        entrants: &entrants,
    };
    run.status_now(format!(
        "Best of {}: the judge compares {} attempts",
        field.attempts,
        pool.len()
    ));
    run.report().await;
    let env = recorded(field.env, field.accounts, "judging the attempts");
    let judge_name = field.env.config.planning.judge.as_deref();
    match judge::judge(env.model.as_ref(), judge_name, &case).await {
        Ok(verdict) => {
            let mut usage =
                crate::llm::usage::UsageReport::new(crate::llm::router::price_table(&env.config.llm));
            usage.add(&verdict.model, verdict.usage);
            run.add_usage(&usage);
            let index = pool
                .iter()
                .copied()
                .find(|&i| candidates[i].number == verdict.choice)
                .unwrap_or(pool[0]);
            Choice {
                index,
                why: format!("{kind}the judge ({}) chose it: {}", verdict.model, verdict.reason),
            }
        }
        Err(e) => {
            tracing::warn!(task = %run.item, "best of N: {e}");
            Choice {
                index: pool[0],
                why: format!("{kind}the judge could not choose ({e}); the first of them is delivered"),
            }
        }
    }
}

/// Keeps the chosen attempt (its sandbox becomes the task's), ends the
/// others' sessions and removes their sandboxes, and adds the attempts'
/// section to the chosen one's summary. A stop or a shutdown during any
/// attempt ends the task as it would have ended one attempt.
async fn settle(
    run: &mut TaskRun<'_>,
    others: &mut [TaskRun<'_>],
    candidates: Vec<Candidate>,
    chosen: Option<Choice>,
    attempts: u32,
) -> Result<Verified, TaskError> {
    for other in others.iter() {
        run.absorb(other);
    }
    let halted = candidates
        .iter()
        .any(|c| matches!(&c.result, Err(TaskError::Shutdown | TaskError::Stopped(_))));
    let keep = chosen.as_ref().filter(|_| !halted).map(|c| c.index);
    let section = keep.map(|index| attempts_section(&candidates, index, chosen.as_ref(), attempts));
    let kept_number = keep.map(|index| candidates[index].number);
    let (mut kept, mut error) = (None, None);
    for (index, candidate) in candidates.into_iter().enumerate() {
        match candidate.result {
            Ok(verified) if Some(index) == keep => kept = Some(verified),
            Ok(verified) => verified.session.close().await,
            Err(e) => {
                let halts = matches!(e, TaskError::Shutdown | TaskError::Stopped(_));
                if halts || error.is_none() {
                    error = Some(e);
                }
            }
        }
    }
    if let Some(number) = kept_number.filter(|n| *n > 1) {
        run.take_sandbox_of(&others[number as usize - 2]).await;
    }
    for other in others.iter_mut() {
        other.remove_sandbox().await;
    }
    match (kept, section) {
        (Some(mut verified), Some(section)) => {
            run.note(section.note);
            let mut answer = verified.outcome.answer.take().unwrap_or_default();
            answer.push_str("\n\n");
            answer.push_str(&section.text);
            verified.outcome.answer = Some(answer);
            Ok(verified)
        }
        _ => Err(error.unwrap_or_else(|| TaskError::Other("no attempt at the change finished".into()))),
    }
}

/// The attempts' section of the summary, and its line for the comment.
struct Section {
    text: String,
    note: String,
}

fn attempts_section(
    candidates: &[Candidate],
    index: usize,
    choice: Option<&Choice>,
    attempts: u32,
) -> Section {
    let passed: Vec<String> = candidates
        .iter()
        .filter(|c| c.passed())
        .map(|c| c.number.to_string())
        .collect();
    let number = candidates[index].number;
    let why = choice.map(|c| c.why.as_str()).unwrap_or_default();
    let which = match passed.is_empty() {
        true => String::new(),
        false => format!(" (attempt {})", passed.join(", ")),
    };
    let mut text = format!(
        "### Attempts\n\nBest of {attempts}: **{} tried, {} passed**{which}. Attempt {number} is delivered: {why}.\n\n| Attempt | Tests | Lines changed | Spent |\n| --- | --- | --- | --- |\n",
        candidates.len(),
        passed.len(),
    );
    for c in candidates {
        let (added, removed) = lines_changed(&c.diff);
        text.push_str(&format!(
            "| {}{} | {} | +{added} −{removed} | ${:.4} |\n",
            c.number,
            if c.number == number { " (delivered)" } else { "" },
            crate::sanitize::for_forge_line(&c.tests(), 300).replace('|', "\\|"),
            c.spent
        ));
    }
    Section {
        text,
        note: format!(
            "Best of {attempts}: {} tried, {} passed; attempt {number} is delivered ({why})",
            candidates.len(),
            passed.len()
        ),
    }
}

/// Lines a diff adds and removes (its file headers left out).
fn lines_changed(diff: &str) -> (usize, usize) {
    let added = diff
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .count();
    let removed = diff
        .lines()
        .filter(|l| l.starts_with('-') && !l.starts_with("---"))
        .count();
    (added, removed)
}

/// What an attempt after the first starts from: the planned task's
/// workspace, settings, request and plan, and the image of its sandbox.
struct Start {
    workspace: WorkspaceHandle,
    credentials: Credentials,
    repo: RepoEnvironment,
    conversation: Conversation,
    image: String,
    request: String,
    instructions: Option<String>,
    plan: Option<TaskPlan>,
    /// The thread's images, for each attempt's first turn.
    images: crate::task::handoff::ThreadImages,
    /// `sandbox.workspace_dir`, where the history pack goes.
    workspace_dir: String,
    ground: crate::task::state::phase_records::PreparedRecord,
}

impl Start {
    fn of(planned: &Planned, env: &TaskEnv) -> Start {
        let prepared = &planned.prepared;
        let repo = &prepared.repo;
        let conversation = &prepared.conversation;
        Start {
            workspace: prepared.workspace.share(),
            credentials: prepared.credentials.clone(),
            repo: RepoEnvironment {
                settings: repo.settings.clone(),
                instructions: repo.instructions.clone(),
                has_file: repo.has_file,
                language: repo.language,
                tree: repo.tree,
            },
            conversation: Conversation {
                store: conversation.store.clone(),
                notes: Vec::new(),
                usage: crate::llm::usage::UsageReport::default(),
                follow_up: conversation.follow_up,
                new_problem: conversation.new_problem,
            },
            image: prepared.sandbox.image.clone(),
            request: planned.request.clone(),
            instructions: planned.instructions.clone(),
            plan: planned.plan.clone(),
            images: planned.images.clone(),
            workspace_dir: env.config.sandbox.workspace_dir.clone(),
            ground: prepared.ground.clone(),
        }
    }

    /// A planned task of its own for an attempt after the first: a new
    /// sandbox from the same image, with the checkout copied in and
    /// setup run (each attempt starts from the same state).
    async fn fresh(&self, run: &mut TaskRun<'_>, env: &TaskEnv, number: u32) -> Result<Planned, TaskError> {
        let config = &env.config;
        let settings = &self.repo.settings;
        let mut spec = start_sandbox::spec_for(run, settings, &self.image);
        spec.task_id = attempt_owner(&spec.task_id, number);
        let checkout = self.workspace.checkout();
        let history = start_sandbox::SandboxHistory {
            pack: self.workspace.history_ready(),
            dir: format!("{}/history.git", self.workspace_dir.trim_end_matches('/')),
        };
        let set_up_first = !settings.setup.is_empty();
        let editor_now = (config.text_editor_mcp.enabled && !set_up_first).then_some(&config.text_editor_mcp);
        let (sandbox, mut editor, filling) = start_sandbox::start(
            run,
            env.backend.as_ref(),
            &env.sandbox_hints,
            (None, spec),
            (&checkout, &history),
            editor_now,
        )
        .await?;
        run.note(format!("Sandbox from image `{}`", self.image));
        let mut task_sandbox = TaskSandbox {
            sandbox,
            image: self.image.clone(),
            filling: Some(filling),
            restoring: None,
            snapshot: None,
        };
        if set_up_first {
            if let Some(filling) = task_sandbox.filling.take() {
                filling.finished().await?;
            }
            let rules = SetupRules {
                on_failure: config.repositories.on_setup_failure,
                home_dir: &config.sandbox.home_dir,
            };
            prepare::setup(
                run,
                &rules,
                &mut task_sandbox,
                (settings, self.repo.tree),
                &checkout.0,
            )
            .await?;
            if config.text_editor_mcp.enabled {
                let (sandbox, editor_config) = (task_sandbox.sandbox.clone(), config.text_editor_mcp.clone());
                editor = Some(tokio::spawn(async move {
                    crate::mcp::text_editor::start(sandbox, &editor_config).await
                }));
            }
        }
        prepare::enter_agent_phase(run, task_sandbox.sandbox.as_ref(), settings);
        Ok(Planned {
            prepared: self.prepared(task_sandbox, editor),
            request: self.request.clone(),
            instructions: self.instructions.clone(),
            plan: self.plan.clone(),
            images: self.images.clone(),
        })
    }

    fn prepared(&self, sandbox: TaskSandbox, editor: Option<prepare::EditorStart>) -> Prepared {
        Prepared {
            workspace: self.workspace.share(),
            credentials: self.credentials.clone(),
            repo: RepoEnvironment {
                settings: self.repo.settings.clone(),
                instructions: self.repo.instructions.clone(),
                has_file: self.repo.has_file,
                language: self.repo.language,
                tree: self.repo.tree,
            },
            sandbox,
            editor,
            conversation: Conversation {
                store: self.conversation.store.clone(),
                notes: Vec::new(),
                usage: crate::llm::usage::UsageReport::default(),
                follow_up: self.conversation.follow_up,
                new_problem: self.conversation.new_problem,
            },
            packing: None,
            ground: self.ground.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_lines_a_diff_adds_and_removes() {
        let diff = "diff --git a/g.py b/g.py\n--- a/g.py\n+++ b/g.py\n@@ -1 +1,2 @@\n-print('Hello')\n+print('Hello, world')\n+print('again')\n";
        assert_eq!(lines_changed(diff), (2, 1));
    }

    #[test]
    fn each_attempt_has_a_sandbox_of_its_own_that_is_no_orphan() {
        let owners = sandbox_owners("github-acme-app-issue-7");
        assert_eq!(owners[0], "github-acme-app-issue-7");
        assert!(owners.contains(&"github-acme-app-issue-7.attempt-3".to_owned()));
        assert_eq!(owners.len(), crate::config::MAX_ATTEMPTS as usize);
    }

    #[test]
    fn each_attempt_is_told_its_number() {
        assert!(attempt_line(2, 3).contains("This is attempt 2 of 3"));
    }
}
