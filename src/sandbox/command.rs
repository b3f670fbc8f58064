//! What every backend does the same way around a command: the in-sandbox
//! `timeout` wrapper, the host's deadline, and turning what came back into
//! an [`ExecOutput`] (a timeout said in stderr, the exit code dropped).

use super::mux::{RunOutput, Supervisor};
use super::{CappedOutput, ExecOutput};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Grace given after the in-sandbox `timeout` should have fired before the
/// host stops waiting for an exec.
pub const HOST_DEADLINE_GRACE: Duration = Duration::from_secs(15);
/// Seconds between SIGTERM and SIGKILL for a command that outlived its timeout.
pub const KILL_AFTER_SECS: u64 = 5;

/// Whole seconds of a command's timeout (at least one).
pub fn timeout_secs(timeout: Duration) -> u64 {
    timeout.as_secs().max(1)
}

/// How long the host waits for a command with `timeout` before it gives up.
pub fn host_deadline(timeout: Duration) -> Duration {
    Duration::from_secs(timeout_secs(timeout) + KILL_AFTER_SECS) + HOST_DEADLINE_GRACE
}

/// `text` as one word for `sh`.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `argv` that runs `command` with `sh -c`, bounded by `timeout` when the
/// image has the utility. `timeout` (coreutils or busybox) puts the command
/// in its own process group and signals the whole group, so children die
/// with it. Images without it still run the command, bounded by the host.
pub fn wrapped_argv(command: &str, timeout: Duration) -> Vec<String> {
    let secs = timeout_secs(timeout);
    let wrapper = format!(
        "if command -v timeout >/dev/null 2>&1; then exec timeout -k {KILL_AFTER_SECS} {secs} sh -c \"$1\"; else exec sh -c \"$1\"; fi"
    );
    vec![
        "sh".into(),
        "-c".into(),
        wrapper,
        "forgehand-exec".into(),
        command.to_owned(),
    ]
}

/// The result of a command run by a plain exec (one process each).
pub fn plain_output(
    stdout: CappedOutput,
    stderr: CappedOutput,
    exit_code: Option<i64>,
    host_timed_out: bool,
    timeout: Duration,
    started: Instant,
) -> ExecOutput {
    let secs = timeout_secs(timeout);
    let duration = started.elapsed();
    // 124: timeout's TERM worked; 137: it had to KILL.
    let timed_out = host_timed_out
        || (duration >= Duration::from_secs(secs) && matches!(exit_code, Some(124) | Some(137)));
    finish(
        stdout,
        stderr,
        if timed_out { None } else { exit_code },
        timed_out,
        secs,
        duration,
    )
}

/// A command over the supervisor's session, or `Err` when the session did
/// not take it (the caller falls back to a plain exec).
pub async fn run_supervised(
    supervisor: &Supervisor,
    command: &str,
    timeout: Duration,
    output_limit: usize,
) -> std::io::Result<ExecOutput> {
    let secs = timeout_secs(timeout);
    let started = Instant::now();
    let kill_after = Duration::from_secs(KILL_AFTER_SECS);
    let run: RunOutput = supervisor
        .run(command, timeout, kill_after, output_limit, host_deadline(timeout))
        .await?;
    let timed_out = run.exit.is_none_or(|e| e.timed_out);
    // A command ended by a signal (not ours) reports 128 + signal, as sh would.
    let exit_code = if timed_out {
        None
    } else {
        Some(run.exit.and_then(|e| e.code).map_or(137, i64::from))
    };
    Ok(finish(
        run.stdout,
        run.stderr,
        exit_code,
        timed_out,
        secs,
        started.elapsed(),
    ))
}

fn finish(
    stdout: CappedOutput,
    stderr: CappedOutput,
    exit_code: Option<i64>,
    timed_out: bool,
    secs: u64,
    duration: Duration,
) -> ExecOutput {
    let (stdout, stdout_truncated) = stdout.finish();
    let (mut stderr, stderr_truncated) = stderr.finish();
    if timed_out {
        stderr.push_str(&format!(
            "\n[forgehand: the command was stopped after the {secs} s timeout]\n"
        ));
    }
    ExecOutput {
        exit_code,
        stdout,
        stderr,
        duration,
        timed_out,
        stdout_truncated,
        stderr_truncated,
    }
}

/// An mpsc receiver as a `Stream`, without pulling in tokio-stream.
pub fn stream_from<T: Send + 'static>(
    rx: mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
}
