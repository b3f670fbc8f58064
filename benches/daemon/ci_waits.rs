//! Tasks waiting on their pull request's checks (`-- ci_waits`): a
//! `forgehand run` daemon with the default configuration but
//! `delivery.ci_poll: 1s` (two slots), the scripted model (edit, commit,
//! answer), the fake GitHub's scripted CI and the real Docker engine.
//!
//! - Throughput (`-- ci_waits throughput [SECONDS]`): 8 issues labelled at
//!   once, every commit's check passing T after the CI first sees it
//!   (T = 60 s unless SECONDS is given). Measured from the labelling to
//!   the 8th pull request open, and to all 8 issues done (green). The old
//!   design, where a task held its slot through its checks, is computed
//!   from the measured per-task time, not measured; both are projected to
//!   T = 10 min.
//! - Memory (`-- ci_waits memory`): the daemon's resident memory idle
//!   (before any task, and after one delivered task), then with 25, 50,
//!   75 and 100 tasks waiting on checks that run an hour (the last once
//!   no sandbox is left), and after 30 more looks of the watcher.

use super::{config_yaml, rss_kib, stop, Stage};
use forgehand_test_support::daemon_rig::containers_of;
use forgehand_test_support::fake_github::{Commit, JobEnd};
use forgehand_test_support::scripted_model::{replace, run, text, Reply, TurnModel};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const REPO: &str = "acme/app";
const FILES: [(&str, &str); 2] = [
    ("greet.py", "print('Hello')\n"),
    (
        ".github/workflows/ci.yml",
        "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n",
    ),
];
/// The daemon's log line of a task that begins to wait on its checks.
const WAITING: &str = "waiting on the checks";

/// The planners' answer (planning is on, the default): their requests
/// offer no tools, so the agent's turns would be refused.
const PLAN: &str = "1. Change the greeting in greet.py.\n2. Commit.";

/// The usual edit-and-commit turns. The message holds the time in
/// nanoseconds: the same change committed in the same second on two
/// branches would be one commit, sharing one CI job.
fn turns() -> Vec<(Reply, Option<Duration>)> {
    vec![
        (replace("Hello", "Hello, world"), None),
        (
            run("git add -A && git commit -qm \"Greet the world $(date +%s%N)\""),
            None,
        ),
        (text("Changed the greeting."), None),
    ]
}

/// A running daemon, stopped when dropped (a failed wait too).
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        stop(&mut self.0);
    }
}

/// `forgehand run` on `stage`, two slots, checks looked at every second;
/// its log (warnings, and the waits' lines) in the stage's daemon.log.
fn daemon(stage: &Stage, model: &TurnModel, name: &str) -> (Daemon, String) {
    let instance = format!("bench-ci-{name}-{}", std::process::id());
    let config = stage.dir.path().join("config.yaml");
    let yaml = config_yaml(stage.dir.path(), &instance, &stage.github.api_url(), 2)
        + "delivery:\n  ci_poll: \"1s\"\n";
    std::fs::write(&config, yaml).unwrap();
    let log = (
        "RUST_LOG",
        "forgehand=warn,forgehand::task::phases::ci=info".to_owned(),
    );
    (Daemon(stage.daemon(&config, &model.base_url(), &[log])), instance)
}

/// Waits (up to `limit`) until `done` holds; the time since `since`.
async fn until(what: &str, since: Instant, limit: Duration, done: impl Fn() -> bool) -> Duration {
    while !done() {
        assert!(since.elapsed() < limit, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    since.elapsed()
}

/// How many waits on checks the daemon's log shows so far.
fn waits(stage: &Stage) -> usize {
    std::fs::read_to_string(stage.dir.path().join("daemon.log"))
        .unwrap_or_default()
        .matches(WAITING)
        .count()
}

/// Prints the figures of the scenarios the arguments name (both by default).
pub async fn figures() {
    forgehand_test_support::ensure_images().await;
    let args: Vec<String> = std::env::args().collect();
    let seconds = args.iter().find_map(|a| a.parse::<u64>().ok()).unwrap_or(60);
    let (throughput_only, memory_only) = (
        args.iter().any(|a| a == "throughput"),
        args.iter().any(|a| a == "memory"),
    );
    if !memory_only {
        throughput(Duration::from_secs(seconds)).await;
    }
    if !throughput_only {
        memory().await;
    }
}

/// 8 issues, each commit's check passing after `check`.
async fn throughput(check: Duration) {
    let run = labelled_to_done(8, check).await;
    print_throughput(check, run.opened / 4, run.after_checks, run.wall);
}

/// Quick mode (CI): 4 issues on 2 slots, each check passing after T = 20 s.
/// Tasks holding their slots through their checks could not all be done
/// before (4 / 2) x T; tasks waiting in the journal are, by the tasks'
/// own time.
pub async fn quick() {
    const ISSUES: u64 = 4;
    let check = Duration::from_secs(20);
    let run = labelled_to_done(ISSUES, check).await;
    let bound = check * (ISSUES as u32 / 2);
    println!(
        "{:<40} {ISSUES} issues, 2 slots, checks passing after T = {} s: labelled -> {ISSUES} pull requests open {:.1} s; last check's end -> all done {:.1} s",
        "ci_waits throughput (quick)",
        check.as_secs(),
        run.opened.as_secs_f64(),
        run.after_checks.as_secs_f64(),
    );
    super::targets::check(
        "ci_waits: 4 issues labelled -> all done (green), 2 slots",
        format!("{:.1} s", run.wall.as_secs_f64()),
        &format!(
            "under {} s, (4 / 2) x T: no slot held through the checks",
            bound.as_secs()
        ),
        run.wall < bound,
    );
}

/// When a throughput run's pull requests were all open and its issues all
/// done, from the labelling; and from the last check's end to all done.
struct Throughput {
    opened: Duration,
    wall: Duration,
    after_checks: Duration,
}

/// `issues` labelled at once, each commit's check passing after `check`;
/// every issue must end green.
async fn labelled_to_done(issues: u64, check: Duration) -> Throughput {
    let stage = Stage::new(&FILES).await;
    let end = JobEnd::PassAfter(check);
    stage.github.run_ci(Arc::new(move |_: &Commit<'_>| {
        vec![("test".to_owned(), end.clone())]
    }));
    let model = TurnModel::start_with_plan(turns(), Some(PLAN.to_owned())).await;
    let (daemon, _) = daemon(&stage, &model, "throughput");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let started = Instant::now();
    for _ in 0..issues {
        stage.labelled_issue();
    }
    let limit = check * 2 + Duration::from_secs(600);
    let opened = until("the pull requests", started, limit, || {
        stage.github.pulls(REPO).len() == issues as usize
    })
    .await;
    let wall = until("the issues done", started, limit, || {
        stage.done(issues) == issues as usize
    })
    .await;
    drop(daemon);
    for n in 1..=issues {
        let comments = stage.github.issue(REPO, n).comments;
        assert!(
            comments.iter().any(|c| c.2.contains("Green: 1 passed.")),
            "issue {n} ended green: {comments:?}"
        );
    }
    // The last check's end: its job's first look, plus `check`.
    let last_check = stage.github.jobs().iter().map(|j| j.since).max().unwrap() + check;
    let after_checks = wall.saturating_sub(last_check.duration_since(started));
    Throughput {
        opened,
        wall,
        after_checks,
    }
}

/// The measured figures, the old design's computed ones, and both at T = 10 min.
fn print_throughput(check: Duration, per_task: Duration, after: Duration, wall: Duration) {
    let per_hour = |d: Duration| 8.0 * 3600.0 / d.as_secs_f64();
    let old = |t: Duration| (per_task + t + after) * 4;
    let ten = Duration::from_secs(600);
    let new_ten = wall + ten - check;
    let name = "ci_waits throughput";
    println!(
        "{name:<40} 8 issues, 2 slots, each check passing after T = {} s: labelled -> 8 pull requests open {:.1} s ({:.1} s per task, 2 at a time); last check's end -> all done {:.1} s; labelled -> all 8 done {:.1} s: {:.1} tasks/h (measured)",
        check.as_secs(),
        per_task.as_secs_f64() * 4.0,
        per_task.as_secs_f64(),
        after.as_secs_f64(),
        wall.as_secs_f64(),
        per_hour(wall),
    );
    println!(
        "{name:<40} old design (slot held through the checks), computed, not measured: 4 x ({:.1} s + T + {:.1} s) = {:.1} s: {:.1} tasks/h",
        per_task.as_secs_f64(),
        after.as_secs_f64(),
        old(check).as_secs_f64(),
        per_hour(old(check)),
    );
    println!(
        "{name:<40} projected to T = 10 min: {:.0} s, {:.1} tasks/h; old design {:.0} s, {:.1} tasks/h (x{:.2})",
        new_ten.as_secs_f64(),
        per_hour(new_ten),
        old(ten).as_secs_f64(),
        per_hour(old(ten)),
        old(ten).as_secs_f64() / new_ten.as_secs_f64(),
    );
}

/// The daemon's memory idle, and with 100 tasks waiting on checks that
/// run an hour.
async fn memory() {
    let stage = Stage::new(&FILES).await;
    // The warm-up task's check passes; the others' run an hour.
    let hold = Arc::new(AtomicBool::new(false));
    let held = hold.clone();
    stage.github.run_ci(Arc::new(move |_: &Commit<'_>| {
        let end = match held.load(Ordering::SeqCst) {
            true => JobEnd::PassAfter(Duration::from_secs(3600)),
            false => JobEnd::Pass,
        };
        vec![("test".to_owned(), end)]
    }));
    let model = TurnModel::start_with_plan(turns(), Some(PLAN.to_owned())).await;
    let (daemon, instance) = daemon(&stage, &model, "memory");
    let (pid, started) = (daemon.0.id(), Instant::now());
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cold = rss_kib(pid, "VmRSS:");
    stage.labelled_issue();
    let limit = Duration::from_secs(1800);
    until("the warm-up task done", started, limit, || stage.done(1) == 1).await;
    let no_sandbox = || containers_of(&instance).is_empty();
    until("no sandbox left", started, limit, no_sandbox).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = rss_kib(pid, "VmRSS:");
    hold.store(true, Ordering::SeqCst);
    let before = waits(&stage);
    let issues: Vec<u64> = (0..100).map(|_| stage.labelled_issue()).collect();
    let mut readings = Vec::new();
    for mark in [25, 50, 75, 100] {
        let what = format!("{mark} tasks waiting");
        until(&what, started, limit, || waits(&stage) - before >= mark).await;
        if mark == 100 {
            until("no sandbox left", started, limit, no_sandbox).await;
        }
        readings.push((mark, rss_kib(pid, "VmRSS:")));
    }
    let github = &stage.github;
    let (requests, units, ticks) = (github.requests().len(), github.rate_used(), cpu_ticks(pid));
    tokio::time::sleep(Duration::from_secs(30)).await;
    let later = rss_kib(pid, "VmRSS:");
    let per_second = |now: usize, then: usize| (now - then) as f64 / 30.0;
    let sent = per_second(github.requests().len(), requests);
    let charged = per_second(github.rate_used() as usize, units as usize);
    let cpu = per_second(cpu_ticks(pid) as usize, ticks as usize);
    let peak = rss_kib(pid, "VmHWM:");
    drop(daemon);
    let ended = issues.iter().filter(|n| labelled_done(&stage, **n)).count();
    assert_eq!(ended, 0, "no waiting task ended during the measurement");
    print_memory(cold, idle, &readings, later, peak);
    println!(
        "{:<40} the watcher with 100 waits, every 1 s: a second, {sent:.0} forge requests ({charged:.0} rate-limit units) and {cpu:.0} ms of the daemon's CPU",
        "ci_waits looks",
    );
}

fn labelled_done(stage: &Stage, number: u64) -> bool {
    let labels = stage.github.issue(REPO, number).labels;
    labels.iter().any(|l| l == "coding agent done")
}

/// The process's user and system CPU time so far, in milliseconds.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's name (in parentheses), utime and stime: fields 14 and 15 of stat(5).
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<u64>().ok())
        .sum();
    ticks * 10 // USER_HZ is 100 on Linux
}

fn print_memory(cold: u64, idle: u64, readings: &[(usize, u64)], later: u64, peak: u64) {
    let mb = |kib: u64| kib as f64 / 1024.0;
    let marks: Vec<String> = readings
        .iter()
        .map(|(n, kib)| format!("{n}: {:.1} MB", mb(*kib)))
        .collect();
    let (first, last) = (readings[0], readings[readings.len() - 1]);
    let per_wait = (last.1 as f64 - first.1 as f64) / (last.0 - first.0) as f64;
    println!(
        "{:<40} idle {:.1} MB before any task, {:.1} MB after one task delivered; tasks waiting on checks {}; 30 s later {:.1} MB; peak {:.1} MB. 100 waiting - idle: {:+.1} MB (goal within 10 MB); {:+.1} KB per waiting task (25 -> 100)",
        "ci_waits daemon resident memory",
        mb(cold),
        mb(idle),
        marks.join(", "),
        mb(later),
        mb(peak),
        mb(last.1) - mb(idle),
        per_wait,
    );
}
