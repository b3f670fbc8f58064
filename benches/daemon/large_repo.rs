//! Tasks in a row (five, or the count after `large`: `-- large 20`) on the
//! generated large repository (see `generated_repo`), served by the
//! smart-HTTP remote on loopback, one `forgehand run` kept running, the
//! scripted model answering at once and planning on, as by default
//! (`FORGEHAND_BENCH_PLANNING=off`: off). Per task: claim -> the agent's
//! first request (the first that offers tools), the bytes the git server sent, the daemon's peak and after-task resident memory, and the
//! state folder's size at its largest during the task and after it. One new commit lands on `main` between tasks 2 and
//! 3, so task 3 shows what fetching only new objects costs.

use super::first_tool_call::first_since;
use super::generated_repo;
use super::{config_yaml, root, rss_kib, stop, Stage};
use forgehand_test_support::scripted_model::{text, TurnModel};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tasks in a row unless a count follows `large` on the command line.
const TASKS: usize = 5;
/// A task still running after this long is reported as such and the run stops.
const TASK_LIMIT: Duration = Duration::from_secs(20 * 60);
/// How long the daemon idles after a task before its memory is read again.
const SETTLE: Duration = Duration::from_secs(15);
/// Reported beside a task's figures: the issue's upper bound for one clone.
const SLOW_TASK: Duration = Duration::from_secs(3 * 60);

/// What one task cost.
struct TaskFigures {
    outcome: String,
    label_to_end: Duration,
    claim_to_first_request: Option<Duration>,
    bytes_sent: u64,
    peak_kib: u64,
    after_kib: u64,
    /// Resident memory once the daemon has been idle for [`SETTLE`].
    settled_kib: u64,
    /// The state folder, then each folder in it: (name, KiB).
    state: Vec<(String, u64)>,
    /// The same when the state folder was largest during the task.
    state_peak: Vec<(String, u64)>,
}

pub fn bench_repos() -> PathBuf {
    root().join("target/bench-repos")
}

fn mb(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Sets the daemon's VmHWM back to its current RSS, so each task's peak is its own.
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// Disk use of `dir` in KiB (hard links counted once), as `du -sk` says.
fn du_kib(dir: &Path) -> u64 {
    let out = Command::new("du").arg("-sk").arg(dir).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The state folder's size, then each folder one level down, largest first.
fn state_sizes(state: &Path) -> Vec<(String, u64)> {
    let mut folders: Vec<(String, u64)> = std::fs::read_dir(state)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| (e.file_name().to_string_lossy().into_owned(), du_kib(&e.path())))
                .collect()
        })
        .unwrap_or_default();
    folders.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    folders.insert(0, ("total".into(), du_kib(state)));
    folders
}

/// Measures the state folder every half second until `stop`; the
/// measurement with the largest total.
fn sample_state_peak(state: PathBuf, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<(String, u64)>> {
    tokio::spawn(async move {
        let mut peak = vec![("total".to_owned(), 0)];
        while !stop.load(Ordering::SeqCst) {
            let dir = state.clone();
            let sizes = tokio::task::spawn_blocking(move || state_sizes(&dir))
                .await
                .unwrap();
            if sizes[0].1 > peak[0].1 {
                peak = sizes;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        peak
    })
}

/// Waits until the daemon has removed the task's work folder (the task's
/// very end, after its labels), at most 60 s.
pub async fn work_folder_gone(state: &Path) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let busy = std::fs::read_dir(state.join("work")).is_ok_and(|mut d| d.next().is_some());
        if !busy {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Whatever the task's end still frees (the sandbox's removal is awaited before).
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Labels one issue and follows its task to the end.
async fn one_task(stage: &Stage, model: &TurnModel, pid: u32, state: &Path) -> TaskFigures {
    let sent_before = stage.git.bytes_sent();
    let requests_before = model.arrivals().len();
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampler = sample_state_peak(state.to_owned(), stop_sampling.clone());
    let number = stage.labelled_issue();
    let started = Instant::now();
    let (mut claimed, mut first_request) = (None, None);
    let outcome = loop {
        let issue = stage.github.issue("acme/app", number);
        let now = Instant::now();
        let swapped = issue.events.iter().any(|e| e.2 == "coding agent processing");
        if claimed.is_none() && swapped {
            claimed = Some(now);
        }
        if first_request.is_none() {
            first_request = first_since(model, requests_before, |a| a.agent && a.offers_tools);
        }
        let ended = ["coding agent done", "coding agent failed"]
            .into_iter()
            .find(|l| issue.labels.iter().any(|have| have == l));
        if let Some(label) = ended {
            break label.trim_start_matches("coding agent ").to_owned();
        }
        if started.elapsed() > TASK_LIMIT {
            break format!("still running after {} s", TASK_LIMIT.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let label_to_end = started.elapsed();
    work_folder_gone(state).await;
    stop_sampling.store(true, Ordering::SeqCst);
    let state_peak = sampler.await.unwrap();
    let (peak_kib, after_kib) = (rss_kib(pid, "VmHWM:"), rss_kib(pid, "VmRSS:"));
    tokio::time::sleep(SETTLE).await;
    TaskFigures {
        outcome,
        label_to_end,
        claim_to_first_request: claimed
            .zip(first_request)
            .map(|(c, f)| f.saturating_duration_since(c)),
        bytes_sent: stage.git.bytes_sent() - sent_before,
        peak_kib,
        after_kib,
        settled_kib: rss_kib(pid, "VmRSS:"),
        state: state_sizes(state),
        state_peak,
    }
}

fn print_row(n: usize, figures: &TaskFigures) {
    let first = figures
        .claim_to_first_request
        .map_or("-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
    let slow = if figures.label_to_end > SLOW_TASK {
        "  (over 3 min)"
    } else {
        ""
    };
    println!(
        "{n:>4} | {:<7} | {:>14} | {:>8.1} s | {:>11.1} MB | {:>5.0} MB | {:>6.0} MB | {:>8.0} MB | {:>7.0} MB | {:>8.1} MB{slow}",
        figures.outcome,
        first,
        figures.label_to_end.as_secs_f64(),
        figures.bytes_sent as f64 / 1e6,
        mb(figures.peak_kib),
        mb(figures.after_kib),
        mb(figures.settled_kib),
        mb(figures.state_peak[0].1),
        mb(figures.state[0].1),
    );
}

/// The resident memory 15 s after each task from the second on: its range
/// and how far the last is from the second's.
fn print_level(rows: &[TaskFigures]) {
    let settled: Vec<f64> = rows.iter().skip(1).map(|r| mb(r.settled_kib)).collect();
    if let (Some(first), Some(last)) = (settled.first(), settled.last()) {
        let low = settled.iter().copied().fold(f64::MAX, f64::min);
        let high = settled.iter().copied().fold(0.0, f64::max);
        println!(
            "RSS 15 s after tasks 2..{}: {low:.1}-{high:.1} MB, last - task 2: {:+.1} MB",
            rows.len(),
            last - first
        );
    }
}

fn print_state_folders(rows: &[TaskFigures]) {
    let folders = |sizes: &[(String, u64)]| -> String {
        let named: Vec<String> = sizes[1..]
            .iter()
            .map(|(name, kib)| format!("{name} {:.1}", mb(*kib)))
            .collect();
        named.join(", ")
    };
    println!("state folder one level down, MB (at its largest during the task; after it):");
    for (n, figures) in rows.iter().enumerate() {
        println!(
            "  task {}: during: {}; after: {}",
            n + 1,
            folders(&figures.state_peak),
            folders(&figures.state)
        );
    }
}

/// A stage serving a copy of the cached generated repository.
pub async fn large_stage() -> Stage {
    let cached = tokio::task::spawn_blocking(|| generated_repo::cached(&bench_repos()))
        .await
        .unwrap();
    println!("large repository: {}", generated_repo::describe(&cached));
    served_copy(&cached).await
}

/// A copy of the cached repository `cached` to serve (hard links: the pack
/// is not copied), in a stage under `target/bench-repos` so the state folder is too.
pub async fn served_copy(cached: &Path) -> Stage {
    let dir = tempfile::tempdir_in(bench_repos()).unwrap();
    let served = dir.path().join("git/acme/app.git");
    let clone = Command::new("git")
        .args(["clone", "--quiet", "--bare", "--local"])
        .arg(cached)
        .arg(&served)
        .status()
        .unwrap();
    assert!(
        clone.success(),
        "git clone --bare --local of the cached repository"
    );
    Stage::serving(dir).await
}

/// The count after `large` on the command line, else [`TASKS`].
fn task_count() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "large")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(TASKS)
}

pub async fn tasks_in_a_row() {
    let stage = large_stage().await;
    // The model answers at once with no change: each task ends right after the first request.
    let model = TurnModel::start(vec![(text("Nothing to change."), None)]).await;
    let config = stage.dir.path().join("config.yaml");
    let instance = format!("bench-large-{}", std::process::id());
    // The default configuration (planning on) unless FORGEHAND_BENCH_PLANNING=off.
    let planning_off = std::env::var("FORGEHAND_BENCH_PLANNING").is_ok_and(|v| v == "off");
    let mut yaml = config_yaml(stage.dir.path(), &instance, &stage.github.api_url(), 1);
    println!(
        "planning {}",
        if planning_off { "off" } else { "on (the default)" }
    );
    if planning_off {
        yaml.push_str("planning:\n  mode: \"off\"\n");
    }
    std::fs::write(&config, yaml).unwrap();
    let state = stage.dir.path().join("state");
    let mut child = stage.daemon(&config, &model.base_url(), &[]);
    let pid = child.id();
    tokio::time::sleep(Duration::from_secs(5)).await;
    println!(
        "daemon idle before the first task: VmRSS {:.1} MB; state folder {:.1} MB",
        mb(rss_kib(pid, "VmRSS:")),
        mb(du_kib(&state))
    );
    println!("task | outcome | claim->agent | label->end | git bytes sent | peak RSS | RSS after | RSS 15 s on | state peak | state after");
    let mut rows = Vec::new();
    for n in 1..=task_count() {
        if n == 3 {
            generated_repo::push_commit(&stage.bare(), generated_repo::COMMITS + 1);
            println!("     (one new commit pushed to main: one file changed)");
        }
        if !reset_peak(pid) {
            println!("     (cannot reset VmHWM: peak RSS is since the daemon's start)");
        }
        let figures = one_task(&stage, &model, pid, &state).await;
        print_row(n, &figures);
        let stuck = figures.outcome.starts_with("still running");
        rows.push(figures);
        if stuck {
            break;
        }
    }
    print_state_folders(&rows);
    print_level(&rows);
    stop(&mut child);
    if let Ok(keep) = std::env::var("FORGEHAND_BENCH_KEEP_LOG") {
        let _ = std::fs::copy(stage.dir.path().join("daemon.log"), keep);
    }
    if rows.iter().any(|r| r.outcome != "done") {
        let log = std::fs::read_to_string(stage.dir.path().join("daemon.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        println!(
            "daemon log, last lines:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}
