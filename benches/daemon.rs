//! The daemon's own figures, against the fakes used by the end-to-end tests
//! (fake GitHub, a real git remote over smart HTTP, the scripted model) and
//! the real Docker engine:
//!
//! - claim to first model request for a 10 MB repository (images present):
//!   without setup, with a cold setup (a virtual environment and 30 MB of
//!   dependencies), and starting from that setup's snapshot;
//! - GitHub rate-limit units per poll cycle of 100 unchanged repositories;
//! - GitLab requests per poll cycle of 100 unchanged projects, one of them
//!   with an item whose label a Reporter applied (refused);
//! - resident memory of a running `forgehand run`: idle, with 1 task, and with 8 tasks at
//!   once on the scripted model (containers excluded: they are other processes);
//! - tasks per minute with 1, 2 and 3 replicas (`cluster.mode: kubernetes`
//!   on the fake Lease API), 24 issues whose model thinks 2 s each;
//! - tasks in a row (five, or `-- large 20`) on a generated large repository (50k commits,
//!   2,000 files): claim to the agent's first request, bytes fetched, memory and the
//!   state folder per task (only when asked for: `-- large`);
//! - label -> claim -> the agent's first request -> its first tool call
//!   done, on a small, a real (CPython's Lib) and the large repository
//!   (`-- first_tool_call`).
//! - best of 3 against one attempt: the task's extra wall time with three
//!   attempts side by side, and its cost multiple (`-- best_of`).
//! - plan approval: a writer's 👍 to the first edit (`-- approval`).
//! - a 20-step run killed at step 11 against the same run uninterrupted,
//!   and each checkpoint's cost (`-- resume`; on the large repository:
//!   `-- resume large`; a replica killed and the run taken over by another
//!   sharing `cluster.checkpoint_dir`: `-- resume takeover`).
//! - tasks waiting on their checks: 8 tasks' throughput with checks that
//!   run 60 s, and the memory of 100 tasks waiting (`-- ci_waits`).
//!
//! Run: `cargo bench --bench daemon` (needs Docker and the images, as
//! `scripts/test` prepares them); `cargo bench --bench daemon -- polling`
//! runs only the two polling costs (no Docker needed), and
//! `cargo bench --bench daemon -- memory` only the resident memory, and
//! `cargo bench --bench daemon -- replicas` only the replicas' throughput,
//! `cargo bench --bench daemon -- claim` only claim to first request (with
//! `RUST_LOG=forgehand=debug`, the tasks' timed steps on stderr), and
//! `cargo bench --bench daemon -- large [count]` only the large repository's
//! tasks (made once under `target/bench-repos`, a few minutes).
//!
//! Quick mode, as CI runs it (`cargo test --bench daemon -- quick`, a debug
//! build, under a minute): the two polling costs, a 20-step run killed at
//! step 11 against the same run uninterrupted, and 4 tasks waiting on
//! checks of 20 s; each figure checked against its target.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "daemon/best_of.rs"]
mod best_of;
#[path = "daemon/ci_waits.rs"]
mod ci_waits;
#[path = "daemon/first_tool_call.rs"]
mod first_tool_call;
#[path = "daemon/generated_repo.rs"]
mod generated_repo;
#[path = "daemon/large_repo.rs"]
mod large_repo;
#[path = "daemon/plan_approval.rs"]
mod plan_approval;
#[path = "daemon/real_repo.rs"]
mod real_repo;
#[path = "daemon/resume.rs"]
mod resume;
#[path = "support/targets.rs"]
mod targets;

use forgehand_test_support::fake_github;
use forgehand_test_support::fake_gitlab;
use forgehand_test_support::fake_kube;
use forgehand_test_support::git_http;
use forgehand_test_support::kubeconfig;
use forgehand_test_support::scripted_model;
use forgehand_test_support::stats;

use fake_github::FakeGitHub;
use forgehand::config::{Config, Secrets};
use forgehand::daemon::intake::Intake;
use forgehand::daemon::setup;
use forgehand::forge::{Forge, ForgeKind, ItemKind, ItemRef};
use scripted_model::{text, TurnModel};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "ghp_benchToken000000000000000000000";
const ROUNDS: usize = 10;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn editor_binary() -> String {
    std::env::var("FORGEHAND_EDITOR_BINARY").unwrap_or_else(|_| {
        root()
            .join("target/x86_64-unknown-linux-gnu/release/forgehand-editor")
            .display()
            .to_string()
    })
}

/// A fake GitHub with `acme/app` (holding `files`) behind a real git
/// remote, where maya may label issues.
struct Stage {
    dir: tempfile::TempDir,
    github: FakeGitHub,
    git: git_http::GitHttpServer,
}

impl Stage {
    async fn new(files: &[(&str, &str)]) -> Stage {
        let dir = tempfile::tempdir().unwrap();
        git_http::bare_repo(&dir.path().join("git"), "acme/app.git", files);
        Stage::serving(dir).await
    }

    /// A stage in `dir` whose `git/acme/app.git` is the bare repository of `acme/app`.
    async fn serving(dir: tempfile::TempDir) -> Stage {
        let git_root = dir.path().join("git");
        let git = git_http::GitHttpServer::start(&git_root, "x-access-token", TOKEN).await;
        let github = FakeGitHub::start(TOKEN).await;
        github.add_repo(
            "acme/app",
            &git.url("acme/app.git"),
            Some(git_root.join("acme/app.git")),
        );
        github.set_permission("acme/app", "maya", "write");
        Stage { dir, github, git }
    }

    fn bare(&self) -> PathBuf {
        self.dir.path().join("git/acme/app.git")
    }

    /// Opens an issue and labels it for forgehand; its number.
    fn labelled_issue(&self) -> u64 {
        let number = self.github.open_issue("acme/app", "maya", "Look", "Have a look.");
        self.github.add_label("acme/app", number, "coding agent", "maya");
        number
    }

    /// How many of issues 1..=`count` ended done.
    fn done(&self, count: u64) -> usize {
        (1..=count)
            .filter(|n| {
                self.github
                    .issue("acme/app", *n)
                    .labels
                    .iter()
                    .any(|l| l == "coding agent done")
            })
            .count()
    }

    /// `forgehand run` with `config`, the model at `model_url`, and `env`;
    /// its warnings go to `daemon.log` in the stage's folder.
    fn daemon(&self, config: &Path, model_url: &str, env: &[(&str, String)]) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("daemon.log"))
            .unwrap();
        Command::new(env!("CARGO_BIN_EXE_forgehand"))
            .arg("--config")
            .arg(config)
            .arg("run")
            .env("GITHUB_TOKEN", TOKEN)
            .env("OPENAI_API_KEY", "sk-bench")
            .env("OPENAI_BASE_URL", model_url)
            // FORGEHAND_BENCH_DAEMON_LOG=debug keeps the daemon's timed steps in daemon.log.
            .env(
                "RUST_LOG",
                std::env::var("FORGEHAND_BENCH_DAEMON_LOG")
                    .map_or_else(|_| "warn".to_owned(), |l| format!("forgehand={l}")),
            )
            // A bench may set its own (after the default, so it wins).
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap()
    }
}

/// Stops a daemon as systemd would, and waits for it.
fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
}

/// 200 files of 50 KiB: a 10 MB repository.
fn ten_megabytes() -> Vec<(String, String)> {
    let line = "def handler(event):\n    return {\"status\": 200}\n";
    let body: String = line.repeat(50 * 1024 / line.len());
    (0..200)
        .map(|i| (format!("pkg{:02}/module{i:03}.py", i / 5), body.clone()))
        .collect()
}

fn config_yaml(dir: &Path, instance: &str, api: &str, concurrency: usize) -> String {
    format!(
        r#"daemon:
  instance_id: "{instance}"
  state_dir: "{state}"
  poll_interval: "1s"
  poll_jitter: "0s"
  max_concurrent_tasks: {concurrency}
  shutdown_grace: "1s"
images:
  dir: "{images}"
text_editor_mcp:
  editor_binary: "{editor}"
llm:
  models:
    - provider: "openai"
      model: "gpt-4o-mini"
      max_input_tokens: 100000
github:
  api_url: "{api}"
  repositories: ["acme/app"]
"#,
        state = dir.join("state").display(),
        images = root().join("images").display(),
        editor = editor_binary(),
    )
}

/// A repository whose setup makes a virtual environment and 30 MB of
/// dependencies in it (300 files), as an install would.
const SETUP: &str = "image: python\nsetup:\n  - python3 -m venv .venv\n  - mkdir -p .venv/deps && for i in $(seq 1 300); do head -c 100000 /dev/urandom > .venv/deps/f$i; done\n";

async fn claim_to_first_request(what: &str, extra_files: &[(&str, &str)], extra_yaml: &str, rounds: usize) {
    let files = ten_megabytes();
    let mut refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    refs.extend_from_slice(extra_files);
    let stage = Stage::new(&refs).await;
    let (dir, github) = (&stage.dir, &stage.github);
    // The model answers at once with no change: the task ends right after the first request.
    let model = TurnModel::start(vec![(text("Nothing to change."), None)]).await;
    let base = model.base_url();
    let lookup = move |var: &str| match var {
        "OPENAI_BASE_URL" => Some(base.clone()),
        _ => None,
    };
    let yaml = config_yaml(
        dir.path(),
        &format!("bench-claim-{}", std::process::id()),
        &github.api_url(),
        1,
    ) + extra_yaml;
    let config = Config::from_yaml(&yaml, Path::new("bench.yaml"), dir.path(), &lookup).unwrap();
    let secrets = Secrets::from_lookup(&|v| match v {
        "GITHUB_TOKEN" => Some(TOKEN.to_owned()),
        "OPENAI_API_KEY" => Some("sk-bench".to_owned()),
        _ => None,
    });
    let assembly = setup::assemble(config, secrets, Some(&[ForgeKind::GitHub]))
        .await
        .unwrap();
    let forge = assembly.forges[0].clone();
    let mut samples = Vec::new();
    for round in 0..=rounds {
        let number = stage.labelled_issue();
        let item = ItemRef {
            forge: ForgeKind::GitHub,
            repo: "acme/app".into(),
            kind: ItemKind::Issue,
            number,
        };
        let before = model.arrivals().len();
        let env = assembly.env.clone();
        let forge = forge.clone();
        let started = Instant::now();
        let task =
            tokio::spawn(
                async move { forgehand::task::run(&env, forge, item, CancellationToken::new()).await },
            );
        // The agent's first request (the first that offers tools), not the classification beside it.
        let agent_request = |a: &scripted_model::Arrival| a.agent && a.offers_tools;
        let elapsed = loop {
            if let Some(at) = first_tool_call::first_since(&model, before, agent_request) {
                break at - started;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        task.await.unwrap();
        if round > 0 {
            // Round 0 warms the git server and the image cache.
            samples.push(elapsed);
        }
    }
    stats::report(
        &format!("claim -> agent's first request (10 MB repo{what})"),
        &mut samples,
    );
}

async fn polling_cost() {
    let github = FakeGitHub::start(TOKEN).await;
    let mut repos = Vec::new();
    for i in 0..100 {
        let name = format!("acme/repo{i:03}");
        github.add_repo(&name, "http://127.0.0.1:9/none.git", None);
        repos.push(format!("\"{name}\""));
    }
    let yaml = format!(
        "github:\n  api_url: \"{}\"\n  repositories: [{}]\n",
        github.api_url(),
        repos.join(", ")
    );
    let config = Config::from_yaml(&yaml, Path::new("bench.yaml"), &root(), &|_| None).unwrap();
    let secrets = Secrets::from_lookup(&|v| (v == "GITHUB_TOKEN").then(|| TOKEN.to_owned()));
    let forge: Arc<dyn Forge> = Arc::new(
        forgehand::forge::github::GitHub::new(&config.github, &secrets, Duration::from_secs(30)).unwrap(),
    );
    let mut intake = Intake::new(config.labels.clone());
    let mut per_cycle = Vec::new();
    let mut times = Vec::new();
    for _ in 0..targets::pick(6, 3) {
        let used = github.rate_used();
        let started = Instant::now();
        intake.poll(forge.as_ref()).await;
        times.push(started.elapsed());
        per_cycle.push(github.rate_used() - used);
    }
    println!(
        "{:<40} first cycle {} units, then {:?} units per cycle",
        "GitHub poll of 100 unchanged repos",
        per_cycle[0],
        &per_cycle[1..]
    );
    targets::check(
        "GitHub rate-limit units per poll cycle after the first",
        format!("{:?}", &per_cycle[1..]),
        "0 each",
        per_cycle[1..].iter().all(|units| *units == 0),
    );
    stats::report(
        "GitHub poll cycle, 100 repos (after first)",
        &mut times[1..].to_vec(),
    );
}

async fn gitlab_polling_cost() {
    const GL_TOKEN: &str = "glpat-benchToken0000000000000000001";
    let gitlab = fake_gitlab::FakeGitLab::start(GL_TOKEN).await;
    let mut projects = Vec::new();
    for i in 0..100 {
        let name = format!("acme/team/project{i:03}");
        gitlab.add_project(&name, "http://127.0.0.1:9/none.git");
        projects.push(format!("\"{name}\""));
    }
    gitlab.add_member("acme/team/project042", "rita", 20);
    let refused = gitlab.open_issue("acme/team/project042", "rita", "Rewrite", "everything");
    gitlab.add_label("acme/team/project042", refused, "coding agent", "rita");
    let yaml = format!(
        "gitlab:\n  url: \"{}\"\n  projects: [{}]\n",
        gitlab.url(),
        projects.join(", ")
    );
    let config = Config::from_yaml(&yaml, Path::new("bench.yaml"), &root(), &|_| None).unwrap();
    let secrets = Secrets::from_lookup(&|v| (v == "GITLAB_TOKEN").then(|| GL_TOKEN.to_owned()));
    let forge = forgehand::forge::gitlab::GitLab::connect(&config.gitlab, &secrets)
        .await
        .unwrap();
    let mut intake = Intake::new(config.labels.clone());
    let mut cycles = Vec::new();
    let mut times = Vec::new();
    for _ in 0..targets::pick(6, 3) {
        let before = gitlab.request_count();
        let started = Instant::now();
        intake.poll(&forge).await;
        times.push(started.elapsed());
        let sent = gitlab.requests()[before..].to_vec();
        let lists = sent
            .iter()
            .filter(|r| r.contains("/issues?") || r.contains("/merge_requests?"))
            .count();
        cycles.push((lists, sent.len() - lists));
    }
    println!(
        "{:<40} first cycle {} list + {} other requests, then (list, other) per cycle {:?}",
        "GitLab poll of 100 unchanged projects, one refused item",
        cycles[0].0,
        cycles[0].1,
        &cycles[1..]
    );
    targets::check(
        "GitLab (lists, other requests) per poll cycle after the first",
        format!("{:?}", &cycles[1..]),
        "(200, 0) each: one list of each kind per project, the refused item not checked again",
        cycles[1..].iter().all(|c| *c == (200, 0)),
    );
    stats::report(
        "GitLab poll cycle, 100 projects (after first)",
        &mut times[1..].to_vec(),
    );
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Resident memory of a daemon: idle, then the most while `count` tasks
/// run at once, and the high-water mark.
async fn daemon_memory_with(count: u64) -> (u64, u64, u64, (u64, u64)) {
    let stage = Stage::new(&[("greet.py", "print('Hello')\n")]).await;
    // Every task waits 8 s for its first answer: all of them are in flight together.
    let model = TurnModel::start(vec![(text("Nothing to change."), Some(Duration::from_secs(8)))]).await;
    let instance = format!("bench-mem-{}-{count}", std::process::id());
    let config = stage.dir.path().join("config.yaml");
    let yaml = config_yaml(stage.dir.path(), &instance, &stage.github.api_url(), 8);
    std::fs::write(&config, yaml).unwrap();
    let mut child = stage.daemon(&config, &model.base_url(), &[]);
    let pid = child.id();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = rss_kib(pid, "VmRSS:");
    // What the idle figure is made of: heap and stacks, and the pages of
    // the executable (and libraries) in use.
    let idle_parts = (rss_kib(pid, "RssAnon:"), rss_kib(pid, "RssFile:"));
    for _ in 0..count {
        stage.labelled_issue();
    }
    let started = Instant::now();
    let mut busy_max = 0;
    while started.elapsed() < Duration::from_secs(60) {
        busy_max = busy_max.max(rss_kib(pid, "VmRSS:"));
        if stage.done(count) == count as usize {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let peak = rss_kib(pid, "VmHWM:");
    stop(&mut child);
    (idle, busy_max, peak, idle_parts)
}

async fn daemon_memory() {
    let mb = |kib: u64| kib as f64 / 1024.0;
    // One task pays the one-time costs (the o200k tokenizer's index, about
    // 12 MB); eight show what a task itself adds.
    let (idle, one, _, (anonymous, file)) = daemon_memory_with(1).await;
    let (_, eight, peak, _) = daemon_memory_with(8).await;
    println!(
        "{:<40} idle {:.1} MB ({:.1} MB heap and stacks, {:.1} MB of mapped files)   1 task: max {:.1} MB   8 concurrent tasks: max {:.1} MB (peak since start {:.1} MB)",
        "daemon resident memory",
        mb(idle),
        mb(anonymous),
        mb(file),
        mb(one),
        mb(eight),
        mb(peak)
    );
}

/// Tasks per minute of `replicas` daemons sharing one repository's issues.
async fn replicas_throughput(replicas: usize) -> f64 {
    const ISSUES: u64 = 24;
    let stage = Stage::new(&[("greet.py", "print('Hello')\n")]).await;
    let model = TurnModel::start(vec![(text("Nothing to change."), Some(Duration::from_secs(2)))]).await;
    let kube = fake_kube::FakeKube::start().await;
    let kubeconfig = kubeconfig::write_kubeconfig(stage.dir.path(), &kube.url());
    let mut children = Vec::new();
    for n in 0..replicas {
        let home = stage.dir.path().join(format!("replica-{n}"));
        std::fs::create_dir_all(&home).unwrap();
        let config = home.join("config.yaml");
        let instance = format!("bench-rep-{}-{n}", std::process::id());
        let yaml = config_yaml(&home, &instance, &stage.github.api_url(), 2)
            + "cluster:\n  mode: \"kubernetes\"\n  namespace: \"default\"\n";
        std::fs::write(&config, yaml).unwrap();
        let env = [
            ("KUBECONFIG", kubeconfig.display().to_string()),
            ("HOSTNAME", format!("replica-{n}")),
        ];
        children.push(stage.daemon(&config, &model.base_url(), &env));
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let started = Instant::now();
    for _ in 0..ISSUES {
        stage.labelled_issue();
    }
    loop {
        let done = stage.done(ISSUES);
        if done == ISSUES as usize || started.elapsed() > Duration::from_secs(600) {
            assert_eq!(done, ISSUES as usize, "every issue done");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    for child in &mut children {
        stop(child);
    }
    ISSUES as f64 / minutes
}

async fn replicas_scaling() {
    let one = replicas_throughput(1).await;
    println!(
        "{:<40} 1 replica: {one:.1} tasks/min (2 at a time each; the model thinks 2 s)",
        "replicas throughput"
    );
    for n in [2usize, 3] {
        let rate = replicas_throughput(n).await;
        println!(
            "{:<40} {n} replicas: {rate:.1} tasks/min ({:.0} % of linear)",
            "replicas throughput",
            100.0 * rate / (one * n as f64)
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if targets::quick() {
        quick_figures().await;
    } else {
        figures().await;
    }
    targets::finish();
}

/// What CI runs (`cargo test --bench daemon -- quick`, a debug build): the
/// polling costs, a killed run's resume, and tasks waiting on their checks.
async fn quick_figures() {
    println!("forgehand daemon benchmarks, quick mode (reproduce: cargo test --bench daemon -- quick)");
    polling_cost().await;
    gitlab_polling_cost().await;
    forgehand_test_support::ensure_images().await;
    resume::quick().await;
    ci_waits::quick().await;
}

/// The figures the arguments name (all but the large repository's by default).
async fn figures() {
    if std::env::args().any(|a| a == "ci_waits") {
        ci_waits::figures().await;
        return;
    }
    if std::env::args().any(|a| a == "replicas") {
        replicas_scaling().await;
        return;
    }
    if std::env::args().any(|a| a == "first_tool_call") {
        first_tool_call::figures().await;
        return;
    }
    if std::env::args().any(|a| a == "large") && !std::env::args().any(|a| a == "resume") {
        large_repo::tasks_in_a_row().await;
        return;
    }
    if std::env::args().any(|a| a == "best_of") {
        best_of::best_of_three().await;
        return;
    }
    if std::env::args().any(|a| a == "resume") {
        if std::env::args().any(|a| a == "large") {
            resume::resume_large().await;
        } else if std::env::args().any(|a| a == "takeover") {
            resume::resume_figures(resume::Kill::Takeover).await;
        } else {
            resume::resume_figures(resume::Kill::Restart).await;
        }
        return;
    }
    if std::env::args().any(|a| a == "approval") {
        plan_approval::approval_to_first_edit(ROUNDS).await;
        return;
    }
    println!("forgehand daemon benchmarks (reproduce: cargo bench --bench daemon)");
    // With RUST_LOG set, the in-process tasks' logs go to stderr (timed steps).
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .try_init();
    }
    // Planning on (the default) with no model whose window holds the pack:
    // the pack is read and counted beside the sandbox's start, then the
    // agent starts without a plan. With planning off nothing is packed.
    let planning_off = "planning:\n  mode: \"off\"\n";
    if std::env::args().any(|a| a == "claim") {
        claim_to_first_request("", &[], "", ROUNDS).await;
        claim_to_first_request(", planning off", &[], planning_off, ROUNDS).await;
        return;
    }
    let only_memory = std::env::args().any(|a| a == "memory");
    if !only_memory {
        polling_cost().await;
        gitlab_polling_cost().await;
    }
    if std::env::args().any(|a| a == "polling") {
        return;
    }
    if std::env::args().any(|a| a == "memory") {
        daemon_memory().await;
        return;
    }
    claim_to_first_request("", &[], "", ROUNDS).await;
    claim_to_first_request(", planning off", &[], planning_off, ROUNDS).await;
    let with_setup = [(".forgehand.yaml", SETUP), (".gitignore", ".venv/\n")];
    let no_snapshots = "sandbox:\n  snapshots:\n    enabled: false\n";
    claim_to_first_request(", cold setup", &with_setup, no_snapshots, 3).await;
    claim_to_first_request(", setup snapshot hit", &with_setup, "", ROUNDS).await;
    plan_approval::approval_to_first_edit(ROUNDS).await;
    daemon_memory().await;
    replicas_scaling().await;
}
