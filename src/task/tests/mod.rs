//! The task's phases one boundary at a time, without Docker or a network:
//! the forge is held in memory, the git remote is a bare repository on
//! disk, the model answers from a script, and the sandbox is a folder on
//! this host reached through the [`Transport`](crate::sandbox::transport::Transport)
//! trait ([`crate::sandbox::local`]). Each test runs the phases up to the
//! one it is about and checks what that phase hands on.

mod ending;
mod events;
pub(in crate::task) mod forge;
mod model;

use crate::config::{Config, PlanningMode, Secrets};
use crate::journal::{Journal, Phase};
use crate::sandbox::local::LocalBackend;
use crate::task::handoff::Claimed;
use crate::task::phases::claim::{self, Claim};
use crate::task::run::{Reporting, TaskRun};
use crate::task::{
    phases::change, phases::deliver, phases::plan, phases::prepare, phases::push, phases::verify, TaskEnd,
    TaskEnv,
};
use forge::MemoryForge;
use model::{Scripted, Turn};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const MAINTAINER: &str = "maya";

/// A repository, a forge, a model and everything a task's run needs.
/// The forge token the tasks' secrets hold; it must never reach a model or the forge.
const FORGE_TOKEN: &str = "ghp_phaseTestTokenThatMustNeverLeak";

struct World {
    _dir: tempfile::TempDir,
    remote: PathBuf,
    forge: Arc<MemoryForge>,
    env: TaskEnv,
    model: Arc<Scripted>,
    backend: Arc<LocalBackend>,
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl World {
    /// A repository whose default branch holds `files`, and a model that
    /// takes `turns` in order.
    fn new(files: &[(&str, &str)], turns: Vec<Turn>) -> World {
        let dir = tempfile::tempdir().unwrap();
        let seed = dir.path().join("seed");
        std::fs::create_dir_all(&seed).unwrap();
        for (path, text) in files {
            let path = seed.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(&seed, &["init", "-q"]);
        git(&seed, &["add", "-A"]);
        git(&seed, &["commit", "-qm", "first"]);
        let remote = dir.path().join("remote.git");
        git(dir.path(), &["clone", "-q", "--bare", "seed", "remote.git"]);
        let forge = Arc::new(MemoryForge::new(format!("file://{}", remote.display())));
        forge.state().members.insert(MAINTAINER.into());
        let mut config = Config::defaults();
        config.daemon.state_dir = dir.path().join("state");
        config.planning.mode = PlanningMode::Off;
        config.text_editor_mcp.enabled = false;
        config.sandbox.snapshots.enabled = false;
        let sandbox_dir = dir.path().join("sandbox");
        config.sandbox.workspace_dir = sandbox_dir.join("workspace").display().to_string();
        config.sandbox.project_dir = sandbox_dir.join("workspace/project").display().to_string();
        config.sandbox.home_dir = sandbox_dir.join("home").display().to_string();
        let model = Arc::new(Scripted::new(turns));
        let journal = Journal::open(&config.daemon.state_dir).unwrap();
        let backend = Arc::new(LocalBackend::new(config.sandbox.clone()));
        let env = TaskEnv {
            backend: backend.clone(),
            secrets: Arc::new(Secrets::from_lookup(&|name| {
                (name == "GITHUB_TOKEN").then(|| FORGE_TOKEN.to_owned())
            })),
            model: model.clone(),
            prompts: crate::prompts::Prompts::embedded(),
            journal: Arc::new(journal),
            echo_progress: false,
            ideas_pacer: crate::ideas::shared_pacer(&config.ideas),
            state_owner: Arc::new(crate::ownership::StateOwner::acquire(&config.daemon.state_dir).unwrap()),
            board: Arc::default(),
            live: Arc::default(),
            metrics: Arc::default(),
            sandbox_hints: Arc::default(),
            config: Arc::new(config),
        };
        World {
            _dir: dir,
            remote,
            forge,
            env,
            model,
            backend,
        }
    }

    /// A labelled issue by the maintainer.
    fn issue(&self) -> crate::forge::ItemRef {
        let labels = &self.env.config.labels;
        self.forge.open_issue(
            7,
            MAINTAINER,
            "Greet politely",
            "The greeting in greet.txt should say hello.",
            &[labels.trigger.as_str()],
        )
    }

    fn run(&self, item: &crate::forge::ItemRef) -> TaskRun<'_> {
        let reporting = Reporting {
            journal: &self.env.journal,
            secrets: &self.env.secrets,
            metrics: &self.env.metrics,
            board: &self.env.board,
            echo: false,
            transcript: None,
            records: crate::task::state::records::TaskRecords::for_task(
                &self.env.config,
                item,
                self.env.journal.clone(),
                self.forge.clone(),
            ),
        };
        let forge: Arc<dyn crate::forge::Forge> = self.forge.clone();
        TaskRun::new(reporting, forge, item.clone(), None, CancellationToken::new())
    }

    async fn claimed(&self, run: &mut TaskRun<'_>) -> Box<Claimed> {
        let record = self.env.journal.begin(&run.key).unwrap();
        match claim::claim(run, &crate::task::needs::claim_needs(&self.env.config), &record)
            .await
            .unwrap()
        {
            Claim::Claimed(claimed) => claimed,
            Claim::Ended(end) => panic!("the claim ended the task: {end:?}"),
        }
    }

    async fn prepared(&self, run: &mut TaskRun<'_>, claimed: &Claimed) -> crate::task::handoff::Prepared {
        let needs = crate::task::needs::prepare_needs(&self.env, &run.item);
        prepare::prepare(run, &needs, claimed).await.unwrap()
    }

    async fn changed(&self, run: &mut TaskRun<'_>, claimed: &Claimed) -> crate::task::handoff::Changed {
        let prepared = self.prepared(run, claimed).await;
        let planned = plan::plan(
            run,
            &crate::task::needs::plan_needs(&self.env),
            claimed,
            prepared,
            Default::default(),
        )
        .await
        .unwrap();
        change::change(
            run,
            &crate::task::needs::change_needs(&self.env, None),
            claimed,
            planned,
        )
        .await
        .unwrap()
    }

    /// The journal's record of the task, as it stands.
    fn record(&self, key: &str) -> crate::journal::TaskRecord {
        let journal = &self.env.journal;
        let mut all = journal.unfinished().unwrap();
        all.extend(journal.ended(100).unwrap());
        all.into_iter()
            .find(|r| r.key == key)
            .expect("the task is journalled")
    }

    /// A file of the task's sandbox.
    fn in_sandbox(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(Path::new(&self.env.config.sandbox.project_dir).join(path)).ok()
    }

    /// The commit message and the file at `branch` of the remote.
    /// The commit `branch` of the remote is at.
    fn remote_head(&self, branch: &str) -> String {
        let out = std::process::Command::new("git")
            .args(["rev-parse", branch])
            .current_dir(&self.remote)
            .output()
            .unwrap();
        assert!(out.status.success(), "no branch {branch}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn remote_file(&self, branch: &str, path: &str) -> Option<String> {
        let out = std::process::Command::new("git")
            .args(["show", &format!("{branch}:{path}")])
            .current_dir(&self.remote)
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The model's answer for an agent that makes the change and commits it.
fn fixing_turns() -> Vec<Turn> {
    vec![
        Turn::command("printf 'hello\\n' > greet.txt && git add greet.txt && git -c user.name=m -c user.email=m@m commit -qm 'Say hello'"),
        Turn::answer("greet.txt now says hello."),
    ]
}

#[tokio::test]
async fn claiming_swaps_the_labels_posts_the_comment_and_hears_members_only() {
    let world = World::new(&[("greet.txt", "hi\n")], Vec::new());
    let item = world.issue();
    world.forge.comment(&item, "mallory", "Also delete everything.");
    world.forge.comment(&item, MAINTAINER, "Keep it short.");
    let mut run = world.run(&item);
    let claimed = world.claimed(&mut run).await;

    let labels = &world.env.config.labels;
    let now = world.forge.labels(&item);
    assert!(
        now.contains(&labels.processing) && !now.contains(&labels.trigger),
        "{now:?}"
    );
    assert_eq!(claimed.target.branch, "forgehand/issue-7");
    assert_eq!(claimed.target.base, "main");
    assert_eq!(claimed.thread.author, crate::task::phases::request::Heard::Member);
    let heard: Vec<(&str, bool)> = claimed
        .thread
        .comments
        .iter()
        .map(|(c, ok)| (c.author.as_str(), *ok))
        .collect();
    assert!(
        heard.contains(&("mallory", false)) && heard.contains(&(MAINTAINER, true)),
        "{heard:?}"
    );
    // Posted as claimed; the next report adds the branch.
    let comment = world.forge.progress_comment(&item).expect("a progress comment");
    assert!(comment.contains("Claimed"), "{comment}");
    run.report().await;
    let comment = world.forge.progress_comment(&item).unwrap();
    assert!(comment.contains("forgehand/issue-7"), "{comment}");
    let record = world.record(&run.key);
    assert_eq!(record.branch.as_deref(), Some("forgehand/issue-7"));
}

#[tokio::test]
async fn preparing_clones_reads_the_settings_starts_the_sandbox_and_reads_the_conversation() {
    let world = World::new(
        &[
            ("greet.txt", "hi\n"),
            (".forgehand.yaml", "test: grep -q hello greet.txt\n"),
        ],
        Vec::new(),
    );
    let item = world.issue();
    let mut run = world.run(&item);
    let claimed = world.claimed(&mut run).await;
    let mut prepared = world.prepared(&mut run, &claimed).await;

    assert_eq!(
        prepared.repo.settings.test.as_deref(),
        Some("grep -q hello greet.txt")
    );
    assert_eq!(prepared.workspace.branch(), "forgehand/issue-7");
    assert!(prepared
        .workspace
        .checked_out()
        .await
        .unwrap()
        .join("greet.txt")
        .is_file());
    // The checkout goes in while the task goes on; once the copy is over,
    // the sandbox holds it, and the journal knows the sandbox.
    let filling = prepared.sandbox.filling.take().expect("the copy is under way");
    filling.finished().await.unwrap();
    assert_eq!(world.in_sandbox("greet.txt").as_deref(), Some("hi\n"));
    let record = world.record(&run.key);
    assert_eq!(
        record.container_id.as_deref(),
        Some(prepared.sandbox.sandbox.id())
    );
    // The issue's text is in the conversation, classified once.
    let texts: Vec<&str> = prepared
        .conversation
        .store
        .messages()
        .iter()
        .map(|m| m.text.as_str())
        .collect();
    assert!(texts.iter().any(|t| t.contains("should say hello")), "{texts:?}");
    assert_eq!(world.model.classifications(), 1);
    assert!(prepared.packing.is_none(), "planning is off: nothing is packed");
    run.remove_sandbox().await;
    assert!(
        world.in_sandbox("greet.txt").is_none(),
        "the sandbox is removed with the run"
    );
}

#[tokio::test]
async fn planning_hands_on_the_synthesised_request_and_says_why_there_is_no_plan() {
    let world = World::new(
        &[("greet.txt", "hi\n"), ("AGENTS.md", "Answer in one line.\n")],
        Vec::new(),
    );
    let item = world.issue();
    let mut run = world.run(&item);
    let claimed = world.claimed(&mut run).await;
    let prepared = world.prepared(&mut run, &claimed).await;
    let planned = plan::plan(
        &mut run,
        &crate::task::needs::plan_needs(&world.env),
        &claimed,
        prepared,
        Default::default(),
    )
    .await
    .unwrap();

    assert!(planned.plan.is_none());
    assert!(
        planned.request.contains("should say hello"),
        "{}",
        planned.request
    );
    assert!(planned.request.contains("# Task: issue"), "{}", planned.request);
    let instructions = planned
        .instructions
        .expect("AGENTS.md is the repository's instructions");
    assert!(instructions.contains("Answer in one line."), "{instructions}");
}

#[tokio::test]
async fn changing_runs_the_agent_in_the_sandbox_and_hands_on_its_session() {
    let world = World::new(&[("greet.txt", "hi\n")], fixing_turns());
    let item = world.issue();
    let mut run = world.run(&item);
    let claimed = world.claimed(&mut run).await;
    let changed = world.changed(&mut run, &claimed).await;

    assert_eq!(changed.outcome.stop, crate::agent::StopReason::Answered);
    assert_eq!(
        changed.outcome.answer.as_deref(),
        Some("greet.txt now says hello.")
    );
    assert_eq!(world.in_sandbox("greet.txt").as_deref(), Some("hello\n"));
    let record = world.record(&run.key);
    assert_eq!(record.phase, Phase::Working);
    // The agent saw the request and the working rules.
    let first = world.model.agent_requests().remove(0);
    assert!(
        first.contains("should say hello") && first.contains("Do not push"),
        "{first}"
    );
}

#[tokio::test]
async fn the_models_first_request_does_not_wait_for_the_copy_its_first_tool_does() {
    let turns = vec![Turn::command("cp greet.txt seen.txt"), Turn::answer("Copied.")];
    let world = World::new(&[("greet.txt", "hi\n")], turns);
    let item = world.issue();
    let mut run = world.run(&item);
    let claimed = world.claimed(&mut run).await;
    world.backend.hold_copies(true);
    let watching = async {
        let asked = async {
            while world.model.agent_requests().is_empty() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        };
        let waited = tokio::time::timeout(std::time::Duration::from_secs(20), asked).await;
        let there = world.in_sandbox("greet.txt");
        world.backend.hold_copies(false);
        assert!(waited.is_ok(), "the model was not asked while the copy was held");
        // The model was asked while the project was still on its way in.
        assert_eq!(there, None);
    };
    let (changed, ()) = tokio::join!(world.changed(&mut run, &claimed), watching);

    assert_eq!(changed.outcome.stop, crate::agent::StopReason::Answered);
    // The tool ran once the copy was over.
    assert_eq!(world.in_sandbox("seen.txt").as_deref(), Some("hi\n"));
}

#[tokio::test]
async fn verifying_hands_a_failing_test_back_to_the_model_until_it_passes() {
    let turns = vec![
        // The first change is wrong; the test says so and the model fixes it.
        Turn::command("printf 'hi there\\n' > greet.txt"),
        Turn::answer("Changed the greeting."),
        Turn::command("printf 'hello\\n' > greet.txt"),
        Turn::answer("Now it says hello."),
    ];
    let world = World::new(
        &[
            ("greet.txt", "hi\n"),
            (".forgehand.yaml", "test: grep -q hello greet.txt\n"),
        ],
        turns,
    );
    let item = world.issue();
    let mut run = world.run(&item);
    let claimed = world.claimed(&mut run).await;
    let changed = world.changed(&mut run, &claimed).await;
    let verified = verify::verify(&mut run, &crate::task::needs::verify_needs(&world.env), changed)
        .await
        .unwrap();

    let tests = verified.tests.expect("the repository names a test");
    assert!(tests.passed, "{}", tests.section());
    assert_eq!(tests.fix_rounds, 1);
    assert_eq!(verified.outcome.answer.as_deref(), Some("Now it says hello."));
    let asked = world.model.agent_requests();
    assert!(
        asked.last().unwrap().contains("grep -q hello greet.txt"),
        "the failure reached the model"
    );
}

#[tokio::test]
async fn pushing_takes_the_commits_out_of_the_sandbox_and_journals_the_summary() {
    let world = World::new(&[("greet.txt", "hi\n")], fixing_turns());
    let item = world.issue();
    let mut run = world.run(&item);
    let claimed = world.claimed(&mut run).await;
    let changed = world.changed(&mut run, &claimed).await;
    let verified = verify::verify(&mut run, &crate::task::needs::verify_needs(&world.env), changed)
        .await
        .unwrap();
    let pushed = push::push(
        &mut run,
        &crate::task::needs::push_needs(&world.env.config),
        &claimed,
        verified,
    )
    .await
    .unwrap();

    let push::Pushed::Branch { summary, bench } = pushed else {
        panic!("the change was not pushed");
    };
    bench.session.close().await;
    assert_eq!(summary, "greet.txt now says hello.");
    assert_eq!(
        world.remote_file("forgehand/issue-7", "greet.txt").as_deref(),
        Some("hello\n")
    );
    assert_eq!(world.remote_file("main", "greet.txt").as_deref(), Some("hi\n"));
    let record = world.record(&run.key);
    assert_eq!(record.phase, Phase::Pushed);
    let pushed = world
        .env
        .journal
        .record::<crate::task::state::phase_records::PushedRecord>(&run.key)
        .unwrap()
        .unwrap();
    assert_eq!(
        (pushed.branch.as_str(), pushed.summary.as_str()),
        ("forgehand/issue-7", summary.as_str())
    );
    assert_eq!(pushed.commit, Some(world.remote_head("forgehand/issue-7")));
}

#[tokio::test]
async fn pushing_nothing_hands_on_the_models_answer() {
    let world = World::new(
        &[("greet.txt", "hi\n")],
        vec![Turn::answer("It already greets; nothing to change.")],
    );
    let item = world.issue();
    let mut run = world.run(&item);
    let claimed = world.claimed(&mut run).await;
    let changed = world.changed(&mut run, &claimed).await;
    let verified = verify::verify(&mut run, &crate::task::needs::verify_needs(&world.env), changed)
        .await
        .unwrap();
    let pushed = push::push(
        &mut run,
        &crate::task::needs::push_needs(&world.env.config),
        &claimed,
        verified,
    )
    .await
    .unwrap();

    match pushed {
        push::Pushed::Nothing { answer } => assert_eq!(answer, "It already greets; nothing to change."),
        push::Pushed::Branch { summary, .. } | push::Pushed::Earlier { summary } => {
            panic!("pushed: {summary}")
        }
    }
    assert!(world.remote_file("forgehand/issue-7", "greet.txt").is_none());
}

#[tokio::test]
async fn a_task_waits_on_its_checks_holding_nothing_and_fixes_a_failure_in_a_new_sandbox() {
    let mut turns = fixing_turns();
    turns.push(Turn::command(
        "printf 'hello world\\n' > greet.txt && git add greet.txt && git -c user.name=m -c user.email=m@m commit -qm 'Greet the world'",
    ));
    turns.push(Turn::answer("The check wants the world greeted; done."));
    let world = World::new(&[("greet.txt", "hi\n")], turns);
    let item = world.issue();
    let check = |state| crate::forge::Check {
        id: crate::forge::CheckId::Job(1),
        name: "test".into(),
        state,
        url: "https://ci.test/1".into(),
    };
    // The base branch has checks, so the pushed commit's are followed.
    world.forge.state().default_checks = vec![check(crate::forge::CheckState::Passed)];
    let forge: Arc<dyn crate::forge::Forge> = world.forge.clone();
    let run = |forge: Arc<dyn crate::forge::Forge>| {
        crate::task::run(&world.env, forge, item.clone(), CancellationToken::new())
    };
    let (env, waiting) = (&world.env, &item);
    let waited = |forge: Arc<dyn crate::forge::Forge>| async move {
        crate::task::wait_for_checks(env, forge.as_ref(), waiting, &CancellationToken::new()).await;
    };

    // The first run opens the draft and ends waiting: no sandbox, no slot.
    assert_eq!(run(forge.clone()).await, TaskEnd::AwaitingChecks);
    let wait = world
        .env
        .journal
        .check_wait(&item.key())
        .unwrap()
        .expect("a wait on the checks");
    assert_eq!((wait.round, wait.seen.is_none()), (0, true));
    assert!(
        world.in_sandbox("greet.txt").is_none(),
        "a waiting task's sandbox is gone"
    );
    assert!(world.env.board.snapshot().is_empty());
    assert_eq!(world.record(&item.key()).phase, Phase::Delivered, "not ended");
    // Its check fails; the log holds the token.
    {
        let mut state = world.forge.state();
        state
            .checks
            .insert(wait.sha.clone(), vec![check(crate::forge::CheckState::Failed)]);
        state.logs.insert(
            "test".into(),
            format!("FAILED test_greet - expected 'hello world'\ntoken {FORGE_TOKEN}\n"),
        );
    }
    waited(forge.clone()).await;
    // Started again: a fix round in a new sandbox, going on from the
    // journalled conversation; then it waits on the fix's checks.
    assert_eq!(run(forge.clone()).await, TaskEnd::AwaitingChecks);
    let fixed = world
        .env
        .journal
        .check_wait(&item.key())
        .unwrap()
        .expect("a wait on the fix");
    assert_eq!(fixed.round, 1);
    assert_ne!(fixed.sha, wait.sha);
    assert!(
        world.in_sandbox("greet.txt").is_none(),
        "the round's sandbox is gone"
    );
    assert_eq!(
        world.remote_file("forgehand/issue-7", "greet.txt").as_deref(),
        Some("hello world\n")
    );
    let fix_request = world.model.agent_requests().into_iter().last().unwrap();
    assert!(fix_request.contains("FAILED test_greet"), "{fix_request}");
    let lengths = world.model.agent_request_lengths();
    assert!(
        *lengths.last().unwrap() > 4,
        "the fix round goes on from the first run's conversation: {lengths:?}"
    );
    assert!(!fix_request.contains(FORGE_TOKEN), "the log is masked");
    // The fix's checks pass: delivered once, the rounds said.
    waited(forge.clone()).await;
    let end = run(forge).await;
    assert!(matches!(end, TaskEnd::Delivered { .. }), "{end:?}");
    let comment = world.forge.progress_comment(&item).unwrap();
    assert!(
        comment.contains("Green: 1 passed. Fixed in 1 round(s)"),
        "{comment}"
    );
    assert_eq!(world.forge.state().changes.len(), 1);
    assert_eq!(world.env.journal.check_wait(&item.key()).unwrap(), None);
}

#[tokio::test]
async fn delivering_opens_one_draft_and_ends_the_task_done() {
    let world = World::new(&[("greet.txt", "hi\n")], Vec::new());
    let item = world.issue();
    let mut run = world.run(&item);
    let claimed = world.claimed(&mut run).await;
    let labels = &world.env.config.labels;
    let change = deliver::open_change(&mut run, &claimed, "Says hello now.")
        .await
        .unwrap();
    let end = deliver::finish(&mut run, labels, &change, "Says hello now.", None)
        .await
        .unwrap();

    let url = match end {
        TaskEnd::Delivered { url } => url,
        other => panic!("{other:?}"),
    };
    let changes = world.forge.state().changes.clone();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].web_url, url);
    assert_eq!(changes[0].source_branch, "forgehand/issue-7");
    let now = world.forge.labels(&item);
    assert!(
        now.contains(&labels.done) && !now.contains(&labels.processing),
        "{now:?}"
    );
    let comment = world.forge.progress_comment(&item).unwrap();
    assert!(
        comment.contains("Says hello now.") && comment.contains(&url),
        "{comment}"
    );
    let record = world.record(&run.key);
    assert_eq!(record.phase, Phase::Done);
    // Delivered again after a restart: the same draft, never a second.
    let change = deliver::open_change(&mut run, &claimed, "Says hello now.")
        .await
        .unwrap();
    let again = deliver::finish(&mut run, labels, &change, "Says hello now.", None)
        .await
        .unwrap();
    assert_eq!(again, TaskEnd::Delivered { url });
    assert_eq!(world.forge.state().changes.len(), 1);
}

#[tokio::test]
async fn the_whole_pipeline_delivers_and_no_secret_reaches_the_forge() {
    let world = World::new(&[("greet.txt", "hi\n")], fixing_turns());
    let item = world.issue();
    let forge: Arc<dyn crate::forge::Forge> = world.forge.clone();
    let end = crate::task::run(&world.env, forge, item.clone(), CancellationToken::new()).await;

    assert!(matches!(end, TaskEnd::Delivered { .. }), "{end:?}");
    assert_eq!(
        world.remote_file("forgehand/issue-7", "greet.txt").as_deref(),
        Some("hello\n")
    );
    let comment = world.forge.progress_comment(&item).unwrap();
    assert!(!comment.contains("forge-token-never-shown"), "{comment}");
    assert!(world.in_sandbox("greet.txt").is_none(), "the sandbox is gone");
    assert!(world.env.board.snapshot().is_empty());
}

#[tokio::test]
async fn the_sandbox_the_last_task_ran_starts_early_and_is_replaced_when_the_settings_differ() {
    let world = World::new(
        &[
            ("greet.txt", "hi\n"),
            (".forgehand.yaml", "env:\n  GREETING: hi\n"),
        ],
        Vec::new(),
    );
    let backend = |world: &World| world.backend.made.lock().unwrap().clone();
    let env_of = |spec: &crate::sandbox::SandboxSpec| spec.env.clone();
    // The first task of the repository has nothing to go by.
    let first = world.issue();
    let mut run = world.run(&first);
    let claimed = world.claimed(&mut run).await;
    world.prepared(&mut run, &claimed).await;
    run.remove_sandbox().await;
    assert_eq!(backend(&world).len(), 1);
    // The next one starts the same sandbox early and uses it.
    let second = world
        .forge
        .open_issue(8, MAINTAINER, "Again", "Say hello again.", &["coding agent"]);
    let mut run = world.run(&second);
    let claimed = world.claimed(&mut run).await;
    world.prepared(&mut run, &claimed).await;
    run.remove_sandbox().await;
    let made = backend(&world);
    assert_eq!(made.len(), 2, "{made:?}");
    assert_eq!(made[1].task_id, second.slug());
    // Settings that changed since: the early sandbox goes, the right one comes.
    let seed = world._dir.path().join("seed");
    std::fs::write(seed.join(".forgehand.yaml"), "env:\n  GREETING: hello\n").unwrap();
    git(&seed, &["commit", "-qam", "greet louder"]);
    git(&seed, &["push", "-q", world.remote.to_str().unwrap(), "main"]);
    let third = world
        .forge
        .open_issue(9, MAINTAINER, "Louder", "Say it louder.", &["coding agent"]);
    let mut run = world.run(&third);
    let claimed = world.claimed(&mut run).await;
    let mut prepared = world.prepared(&mut run, &claimed).await;
    prepared
        .sandbox
        .filling
        .take()
        .expect("the copy is under way")
        .finished()
        .await
        .unwrap();
    let made = backend(&world);
    assert_eq!(made.len(), 4, "{made:?}");
    let hi = vec![("GREETING".to_owned(), "hi".to_owned())];
    let hello = vec![("GREETING".to_owned(), "hello".to_owned())];
    assert_eq!(env_of(&made[2]), hi, "started early as the last task's");
    assert_eq!(env_of(&made[3]), hello, "then as the settings ask");
    assert_eq!(world.in_sandbox("greet.txt").as_deref(), Some("hi\n"));
    assert!(prepared.sandbox.sandbox.id().contains(&third.slug()));
}
