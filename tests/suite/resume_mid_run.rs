//! A run killed mid-way resumes from its last step: the daemon is killed
//! with SIGKILL at a random step of a 20-step scripted run and started
//! again; the run goes on in a new sandbox from its checkpoint (the
//! conversation and the sandbox's files as they were), ends delivered
//! once, and asks the model at most one step more than an uninterrupted
//! run does. The same among replicas sharing `cluster.checkpoint_dir`:
//! the replica killed, another takes the task over and resumes it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::{containers_of, remove_containers_of, wait_until, DaemonProcess};
use forgehand_test_support::github_world::World;
use forgehand_test_support::scripted_model::{self, call, text, Format, Reply};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Steps that run a command (the 20th answers).
const STEPS: usize = 19;

/// The step to kill at: FORGEHAND_TEST_KILL_STEP, else a random one.
fn kill_step() -> usize {
    let kill_at = std::env::var("FORGEHAND_TEST_KILL_STEP")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::usize(2..=STEPS));
    eprintln!(
        "killing the daemon while the model works on step {kill_at} (FORGEHAND_TEST_KILL_STEP={kill_at})"
    );
    kill_at
}

/// A run killed at `kill_at` and resumed from its checkpoint (as the
/// daemon's log `text` says, and the progress comment), delivered once
/// with every step's effect once, having asked the model at most one step
/// more than the uninterrupted run's twenty.
async fn assert_resumed_and_delivered(world: &World, issue: u64, text: &str, kill_at: usize) {
    world.assert_delivered_once(issue);
    assert_every_step_once(world, issue);
    let asked = world.model.requests().await.len();
    assert!(
        asked <= STEPS + 2,
        "{asked} agent requests for a run of {} (killed at step {kill_at})",
        STEPS + 1
    );
    // The kill came after step `kill_at - 1`'s checkpoint: the run resumed.
    assert!(
        text.contains("resuming the model's run from its checkpoint"),
        "the run resumed from its checkpoint:\n{text}"
    );
    let progress = world.progress_comment(issue);
    assert!(
        progress.contains("Resumed the model's run after step"),
        "{progress}"
    );
}

/// The pushed branch holds every step's effect exactly once (a step whose
/// tool ran before the kill was not run twice on the files it had
/// changed), and the model's own commit.
fn assert_every_step_once(world: &World, issue: u64) {
    let branch = format!("forgehand/issue-{issue}");
    let expected: String = (1..=STEPS).map(|k| format!("{k}\n")).collect();
    assert_eq!(pushed_file(&world.bare, &branch, "steps.txt"), expected);
    for k in [1, 10, STEPS] {
        assert_eq!(
            pushed_file(&world.bare, &branch, &format!("step-{k}.txt")),
            format!("step {k}")
        );
    }
    let subjects = forgehand_test_support::git_http::log(&world.bare, &branch);
    assert!(
        subjects.iter().any(|s| s == "The first ten steps"),
        "the model's own commit is kept: {subjects:?}"
    );
}

/// Step `k` appends its number to `steps.txt` and writes `step-k.txt`;
/// step 10 also commits; the last turn answers.
fn twenty_steps(delay: Duration) -> Vec<(Reply, Option<Duration>)> {
    let mut turns: Vec<(Reply, Option<Duration>)> = (1..=STEPS)
        .map(|k| {
            let mut command = format!("echo {k} >> steps.txt && printf 'step {k}' > step-{k}.txt");
            if k == 10 {
                command.push_str(" && git add -A && git commit -qm 'The first ten steps'");
            }
            let reply = call("command_executor_execute_command", json!({ "command": command }));
            (reply, Some(delay))
        })
        .collect();
    turns.push((text("Wrote the nineteen steps."), Some(delay)));
    turns
}

/// `path` on the pushed `branch` of the bare repository.
fn pushed_file(bare: &Path, branch: &str, path: &str) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(["show", &format!("{branch}:{path}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{path} is not on {branch}");
    String::from_utf8(out.stdout).unwrap()
}

/// Kills `daemon` with SIGKILL while the model works on `step`; the
/// agent's requests before the kill.
async fn kill_at_step(world: &World, daemon: &mut DaemonProcess, step: usize) -> usize {
    wait_until(
        "the model asked for the step to kill at",
        Duration::from_secs(180),
        async || asked_at_least(world, step).await,
        &world.log_path(),
    )
    .await;
    daemon.kill9();
    let asked_before = world.model.requests().await.len();
    assert!(
        asked_before >= step,
        "{asked_before} requests before the kill at step {step}"
    );
    asked_before
}

/// The daemon killed while the model works on step 5 of the twenty: the
/// world, the issue, and the agent's requests before the kill.
async fn killed_at_step_five() -> (World, u64, usize) {
    let world =
        World::with_daemon_settings(twenty_steps(Duration::from_millis(200)), "  max_task_attempts: 4").await;
    let issue = world.labelled_issue("Write the nineteen steps");
    let mut daemon = world.start();
    let asked_before = kill_at_step(&world, &mut daemon, 5).await;
    (world, issue, asked_before)
}

/// The planners' calls so far (the context store's are not planning).
async fn planning_calls(world: &World) -> usize {
    let all = world.model.all_requests().await;
    all.iter()
        .filter(|r| {
            scripted_model::view(Format::OpenAi, r)
                .system
                .starts_with(scripted_model::SAGE_SYSTEM)
        })
        .count()
}

/// The agent's requests that asked for step `n` or later.
async fn asked_at_least(world: &World, n: usize) -> bool {
    world
        .model
        .requests()
        .await
        .iter()
        .any(|r| scripted_model::view(Format::OpenAi, r).turns + 1 >= n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_at_a_random_step_resumes_from_its_checkpoint_and_is_delivered_once() {
    let kill_at = kill_step();
    let world =
        World::with_daemon_settings(twenty_steps(Duration::from_millis(400)), "  max_task_attempts: 4").await;
    let issue = world.labelled_issue("Write the nineteen steps");

    let mut daemon = world.start();
    kill_at_step(&world, &mut daemon, kill_at).await;

    let mut daemon = world.start();
    world.wait_for_end(issue).await;
    assert_resumed_and_delivered(&world, issue, &daemon.log_text(), kill_at).await;
    let transcript = world.transcript(issue);
    assert!(transcript.contains("Resumed after step"), "{transcript}");
    assert!(daemon.terminate().success());
    assert!(
        containers_of(&world.instance).is_empty(),
        "no container left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_made_on_a_base_that_moved_is_not_used_and_the_run_starts_over_saying_why() {
    let (world, issue, asked_before) = killed_at_step_five().await;
    // Someone pushes to main meanwhile: the task branch starts from there now.
    forgehand_test_support::git_http::push_commit(&world.bare, "main", "NOTES.md", "notes\n", "Notes");

    let mut daemon = world.start();
    world.wait_for_end(issue).await;
    world.assert_delivered_once(issue);
    let progress = world.progress_comment(issue);
    assert!(
        progress.contains(
            "its checkpoint cannot be used (the branch it was made on has moved), so the run starts over"
        ),
        "{progress}"
    );
    // Started over on the new base: every step once, the new commit below.
    let branch = format!("forgehand/issue-{issue}");
    let expected: String = (1..=STEPS).map(|k| format!("{k}\n")).collect();
    assert_eq!(pushed_file(&world.bare, &branch, "steps.txt"), expected);
    assert_eq!(pushed_file(&world.bare, &branch, "NOTES.md"), "notes\n");
    assert_eq!(world.model.requests().await.len(), asked_before + STEPS + 1);
    assert!(!daemon
        .log_text()
        .contains("resuming the model's run from its checkpoint"));
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_run_is_taken_over_and_the_other_replica_resumes_from_the_shared_checkpoint() {
    use super::cluster_replicas::{replica, CLUSTER};
    let kill_at = kill_step();
    let kube = forgehand_test_support::fake_kube::FakeKube::start().await;
    let shared = tempfile::tempdir().unwrap();
    let cluster = format!("{CLUSTER}  checkpoint_dir: \"{}\"\n", shared.path().display());
    const PLAN: &str =
        "# Implementation Plan\n\nWrite the steps.\n\n## Checklist\n- [ ] Write the nineteen steps\n";
    let world = World::with_planned_repository(
        twenty_steps(Duration::from_millis(400)),
        &[("greet.py", "print('Hello')\n"), ("README.md", "# app\n")],
        PLAN,
        &cluster,
    )
    .await;
    let kube_config = forgehand_test_support::kubeconfig::write_kubeconfig(world.dir.path(), &kube.url());
    let log = world.log_path();
    let issue = world.labelled_issue("Write the nineteen steps");

    let mut first = replica(&world, &kube_config, 1);
    kill_at_step(&world, &mut first, kill_at).await;
    let planned = planning_calls(&world).await;
    assert!(planned > 0, "the first replica planned");

    // The other replica takes the task over once the Lease runs out.
    let mut second = replica(&world, &kube_config, 2);
    world.wait_for_end(issue).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("took over a claim whose holder went silent"),
        "{text}"
    );
    assert_resumed_and_delivered(&world, issue, &text, kill_at).await;
    let progress = world.progress_comment(issue);
    // The plan the first replica made, followed without a new debate.
    assert_eq!(
        planning_calls(&world).await,
        planned,
        "no planning call after the takeover"
    );
    assert!(
        progress.contains("Planning: following the plan made before the task was interrupted"),
        "{progress}"
    );
    // Ended: the shared store keeps nothing of the task (removed as the
    // task's run ends, just after its labels say so).
    let emptied = async || std::fs::read_dir(shared.path()).unwrap().next().is_none();
    wait_until("the shared store emptied", Duration::from_secs(30), emptied, &log).await;
    assert!(second.terminate().success());
    // The killed replica's sandbox is its own (another daemon never reaps it).
    remove_containers_of(&format!("{}-1", world.instance));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_after_planning_follows_its_journalled_plan_without_a_new_debate() {
    const PLAN: &str =
        "# Implementation Plan\n\nWrite the steps.\n\n## Checklist\n- [ ] Write the nineteen steps\n";
    let world = World::with_planning(twenty_steps(Duration::from_millis(200)), PLAN).await;
    let issue = world.labelled_issue("Write the nineteen steps");
    let mut daemon = world.start();
    kill_at_step(&world, &mut daemon, 5).await;
    let planned = planning_calls(&world).await;
    assert!(planned > 0, "the first start planned");

    let mut daemon = world.start();
    world.wait_for_end(issue).await;
    world.assert_delivered_once(issue);
    assert_every_step_once(&world, issue);
    assert_eq!(
        planning_calls(&world).await,
        planned,
        "no planning call after the restart"
    );
    let progress = world.progress_comment(issue);
    assert!(
        progress.contains("Planning: following the plan made before the task was interrupted"),
        "{progress}"
    );
    assert!(
        !progress.contains("replayed from before a restart"),
        "no debate, not even replayed: {progress}"
    );
    assert!(
        progress.contains("Write the nineteen steps"),
        "the plan's checklist: {progress}"
    );
    assert!(
        progress.contains("Resumed the model's run after step"),
        "{progress}"
    );
    assert!(daemon.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_made_for_another_request_is_not_used_and_the_run_starts_over_saying_why() {
    let (world, issue, asked_before) = killed_at_step_five().await;
    // A writer asks for more while no daemon runs: the request is another.
    world.github.comment(
        forgehand_test_support::github_world::REPO,
        issue,
        "maya",
        "Please also keep the steps in order.",
    );

    let mut daemon = world.start();
    world.wait_for_end(issue).await;
    world.assert_delivered_once(issue);
    let progress = world.progress_comment(issue);
    assert!(
        progress.contains("its checkpoint cannot be used (the request or the plan it was given has changed), so the run starts over"),
        "{progress}"
    );
    // Started over: every step once, all twenty asked again.
    assert_every_step_once(&world, issue);
    assert_eq!(world.model.requests().await.len(), asked_before + STEPS + 1);
    let first = world.model.requests().await[asked_before].to_string();
    assert!(
        first.contains("keep the steps in order"),
        "the new run reads the new request"
    );
    assert!(daemon.terminate().success());
}
