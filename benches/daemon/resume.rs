//! A run that survives a kill: a 20-step scripted run (each step a command
//! that changes a file; the 20th turn answers) on the 10 MB repository,
//! once uninterrupted and once with the daemon killed (SIGKILL) while the
//! model works on step 11 and started again. Measured: label to done,
//! the agent's model requests (each answer bills the same usage, so their
//! count is the tokens' multiple), and each checkpoint's cost as the daemon
//! logs it (the side commit in the sandbox, its `.git` taken out into the
//! quarantine, the conversation journalled). The same checkpoint cost on
//! the large generated repository (`-- resume large`). And among replicas
//! sharing `cluster.checkpoint_dir` (`-- resume takeover`): the replica
//! killed at step 11, another takes the task over once its Lease (3 s)
//! runs out and resumes the run.

use super::{config_yaml, generated_repo, stats, targets, ten_megabytes, Stage};
use forgehand_test_support::scripted_model::{call, text, view, Format, Reply, TurnModel};
use forgehand_test_support::{daemon_rig, fake_kube::FakeKube, kubeconfig};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const STEPS: usize = 19;
/// The step the model is working on when the daemon is killed.
const KILL_AT: usize = 11;
/// What each answer bills: a step of a long run.
const BILLED: (u64, u64) = (20_000, 500);

fn twenty_steps() -> Vec<(Reply, Option<Duration>)> {
    let mut turns: Vec<(Reply, Option<Duration>)> = (1..=STEPS)
        .map(|k| {
            let command = format!("echo {k} >> steps.txt && printf 'step {k}' > step-{k}.txt");
            (
                call(
                    "command_executor_execute_command",
                    serde_json::json!({ "command": command }),
                ),
                None,
            )
        })
        .collect();
    turns.push((text("Wrote the nineteen steps."), None));
    turns
}

/// What one run cost.
struct RunFigures {
    wall: Duration,
    requests: usize,
    /// Each checkpoint's cost, from the daemon's log.
    checkpoints: Vec<Duration>,
    resumed: bool,
}

/// What happens at step [`KILL_AT`].
#[derive(Clone, Copy, PartialEq)]
pub enum Kill {
    Never,
    /// The daemon killed and started again on its state folder.
    Restart,
    /// Replica 1 killed; replica 2 (its own state folder, the same
    /// `cluster.checkpoint_dir`) takes the task over.
    Takeover,
}

/// Replicas of a stage: the fake Lease API and what each replica runs with.
struct Replicas {
    _kube: FakeKube,
    env: Vec<(&'static str, String)>,
    shared: PathBuf,
}

impl Replicas {
    async fn start(dir: &Path) -> Replicas {
        let kube = FakeKube::start().await;
        let config = kubeconfig::write_kubeconfig(dir, &kube.url());
        let env = vec![
            ("RUST_LOG", "forgehand=debug".to_owned()),
            ("KUBECONFIG", config.display().to_string()),
        ];
        Replicas {
            _kube: kube,
            env,
            shared: dir.join("shared-checkpoints"),
        }
    }

    fn cluster_yaml(&self) -> String {
        format!(
            "cluster:\n  mode: \"kubernetes\"\n  namespace: \"default\"\n  lease_duration: \"3s\"\n  checkpoint_dir: \"{}\"\n",
            self.shared.display()
        )
    }

    /// Replica 2's config: replica 1's with a state folder and an
    /// instance id of its own.
    fn second(config: &Path, dir: &Path, instance: &str) -> PathBuf {
        let state = dir.join("state").display().to_string();
        let text = std::fs::read_to_string(config)
            .unwrap()
            .replace(&state, &format!("{state}-2"))
            .replace(&format!("\"{instance}\""), &format!("\"{instance}-2\""));
        let second = dir.join("config-2.yaml");
        std::fs::write(&second, text).unwrap();
        second
    }
}

/// Runs the twenty steps on `stage`, interrupted at [`KILL_AT`] as `kill` says.
async fn one_run(stage: &Stage, kill: Kill) -> RunFigures {
    let model = TurnModel::start(twenty_steps()).await;
    model.bill(BILLED.0, BILLED.1);
    let config = stage.dir.path().join("config.yaml");
    let instance = format!("bench-resume-{}-{}", std::process::id(), kill as u8);
    let replicas = match kill {
        Kill::Takeover => Some(Replicas::start(stage.dir.path()).await),
        _ => None,
    };
    let mut yaml =
        config_yaml(stage.dir.path(), &instance, &stage.github.api_url(), 1) + "planning:\n  mode: \"off\"\n";
    if let Some(replicas) = &replicas {
        yaml.push_str(&replicas.cluster_yaml());
    }
    std::fs::write(&config, yaml).unwrap();
    let log = stage.dir.path().join("daemon.log");
    let _ = std::fs::remove_file(&log);
    let env = match &replicas {
        Some(replicas) => replicas.env.clone(),
        None => vec![("RUST_LOG", "forgehand=debug".to_owned())],
    };
    let mut child = stage.daemon(&config, &model.base_url(), &env);
    let issue = stage.labelled_issue();
    let started = Instant::now();
    let done = || {
        stage
            .github
            .issue("acme/app", issue)
            .labels
            .iter()
            .any(|l| l == "coding agent done")
    };
    if kill != Kill::Never {
        while !model
            .requests()
            .await
            .iter()
            .any(|r| view(Format::OpenAi, r).turns + 1 >= KILL_AT)
        {
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "step {KILL_AT} never came"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        child = match kill {
            Kill::Takeover => {
                let second = Replicas::second(&config, stage.dir.path(), &instance);
                stage.daemon(&second, &model.base_url(), &env)
            }
            _ => stage.daemon(&config, &model.base_url(), &env),
        };
    }
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the run did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wall = started.elapsed();
    super::stop(&mut child);
    if kill == Kill::Takeover {
        remove_sandboxes_of(&instance);
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    RunFigures {
        wall,
        requests: model.requests().await.len(),
        checkpoints: text
            .lines()
            .filter(|l| l.contains("checkpoint kept"))
            .filter_map(|l| {
                l.split("took_ms=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .map(Duration::from_millis)
            .collect(),
        resumed: text.contains("resuming the model's run from its checkpoint"),
    }
}

/// The killed replica's sandbox (no other daemon reaps it).
fn remove_sandboxes_of(instance: &str) {
    for id in daemon_rig::containers_of(instance) {
        let _ = Command::new("docker").args(["rm", "-fv", &id]).output();
    }
}

fn print_run(what: &str, run: &RunFigures) {
    let tokens = run.requests as u64 * (BILLED.0 + BILLED.1);
    println!(
        "{what:<44} label->done {:>6.1} s | {} agent requests, {:.2} M tokens billed{}",
        run.wall.as_secs_f64(),
        run.requests,
        tokens as f64 / 1e6,
        if run.resumed {
            " | resumed from its checkpoint"
        } else {
            ""
        }
    );
}

/// Prints the uninterrupted run and the run interrupted as `kill` says
/// (a restart, or a takeover among replicas sharing
/// `cluster.checkpoint_dir`) on the 10 MB repository.
pub async fn resume_figures(kill: Kill) {
    let files = ten_megabytes();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let stage = Stage::new(&refs).await;
    // The first task warms the git server and the image cache.
    let _ = one_run(&stage, Kill::Never).await;
    let whole = one_run(&stage, Kill::Never).await;
    let killed = one_run(&stage, kill).await;
    // The takeover's checkpoints are the shared store's; a restart's, the
    // uninterrupted run's on the daemon's own state.
    let (what, why, (store, mut costs)) = match kill {
        Kill::Takeover => (
            format!("replica killed at step {KILL_AT}, taken over"),
            "the Lease running out, a new sandbox, the checkpoint put back",
            ("shared store", killed.checkpoints.clone()),
        ),
        _ => (
            format!("SIGKILL at step {KILL_AT}, restart"),
            "the restart, a new sandbox, the checkpoint put back",
            ("10 MB repository", whole.checkpoints.clone()),
        ),
    };
    print_run("20 steps, uninterrupted (10 MB repository)", &whole);
    print_run(&format!("20 steps, {what}"), &killed);
    println!(
        "{what}: +{} model requests (+{:.0} % tokens), +{:.1} s wall time ({why})",
        killed.requests as i64 - whole.requests as i64,
        100.0 * (killed.requests as f64 / whole.requests.max(1) as f64 - 1.0),
        killed.wall.as_secs_f64() - whole.wall.as_secs_f64()
    );
    stats::report(&format!("checkpoint after a step, {store}"), &mut costs);
}

/// Quick mode (CI): the run killed at step [`KILL_AT`] and restarted
/// against the run uninterrupted, on a one-file repository with no
/// warm-up run; a kill costs at most one step's model request.
pub async fn quick() {
    let stage = Stage::new(&[("greet.py", "print('Hello')\n")]).await;
    let whole = one_run(&stage, Kill::Never).await;
    let killed = one_run(&stage, Kill::Restart).await;
    print_run("20 steps, uninterrupted (one file)", &whole);
    print_run(&format!("20 steps, SIGKILL at step {KILL_AT}, restart"), &killed);
    targets::check(
        &format!("model requests of a run killed at step {KILL_AT} and resumed"),
        format!("{} against {} uninterrupted", killed.requests, whole.requests),
        "at most 1 more (one step's tokens), resumed from its checkpoint",
        killed.resumed && killed.requests <= whole.requests + 1,
    );
}

/// Prints the checkpoint cost on the large generated repository, and the
/// same run killed at [`KILL_AT`].
pub async fn resume_large() {
    let cached =
        tokio::task::spawn_blocking(|| generated_repo::cached(&super::root().join("target/bench-repos")))
            .await
            .unwrap();
    println!("large repository: {}", generated_repo::describe(&cached));
    let dir = tempfile::tempdir_in(super::root().join("target/bench-repos")).unwrap();
    let served = dir.path().join("git/acme/app.git");
    let cloned = Command::new("git")
        .args(["clone", "--quiet", "--bare", "--local"])
        .arg(&cached)
        .arg(&served)
        .status()
        .unwrap();
    assert!(cloned.success());
    let stage = Stage::serving(dir).await;
    let run = one_run(&stage, Kill::Never).await;
    let killed = one_run(&stage, Kill::Restart).await;
    print_run("20 steps, uninterrupted (large repository)", &run);
    print_run(
        &format!("20 steps, SIGKILL at step {KILL_AT}, restart (large)"),
        &killed,
    );
    let mut costs = run.checkpoints.clone();
    stats::report("checkpoint after a step, large repository", &mut costs);
}
