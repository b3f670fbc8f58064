//! Commands and streamed processes in a Docker sandbox: over the
//! supervisor's session when it runs (a stream each, about a millisecond),
//! else through a `docker exec` each (tens of milliseconds).

use super::docker::DockerSandbox;
use super::mux::Supervisor;
use super::{CappedOutput, ExecOutput, ExecStream, Sandbox, SandboxError};
use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bytes::Bytes;
use futures_util::StreamExt;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::io::StreamReader;

/// Grace given after the in-sandbox `timeout` should have fired before the
/// host stops waiting for an exec.
const HOST_DEADLINE_GRACE: Duration = Duration::from_secs(15);
/// Seconds between SIGTERM and SIGKILL for a command that outlived its timeout.
const KILL_AFTER_SECS: u64 = 5;

impl DockerSandbox {
    /// A command over the supervisor's session: the same timeout, kill,
    /// output caps and lossy decoding as [`DockerSandbox::exec_plain`].
    pub(super) async fn exec_supervised(
        &self,
        supervisor: &Supervisor,
        command: &str,
        timeout: Duration,
    ) -> Result<ExecOutput, SandboxError> {
        let secs = timeout.as_secs().max(1);
        let started = Instant::now();
        let kill_after = Duration::from_secs(KILL_AFTER_SECS);
        let deadline = Duration::from_secs(secs) + kill_after + HOST_DEADLINE_GRACE;
        let run = supervisor
            .run(command, timeout, kill_after, self.config.output_limit, deadline)
            .await;
        let run = match run {
            Ok(run) => run,
            Err(e) => {
                tracing::warn!(container = %self.short_id(), "the supervisor did not take a command ({e}); using docker exec");
                return self.exec_plain(command, timeout).await;
            }
        };
        let duration = started.elapsed();
        let timed_out = run.exit.is_none_or(|e| e.timed_out);
        let (stdout, stdout_truncated) = run.stdout.finish();
        let (mut stderr, stderr_truncated) = run.stderr.finish();
        if timed_out {
            stderr.push_str(&format!(
                "\n[forgehand: the command was stopped after the {secs} s timeout]\n"
            ));
        }
        Ok(ExecOutput {
            // A command ended by a signal (not ours) reports 128 + signal, as sh would.
            exit_code: if timed_out {
                None
            } else {
                Some(run.exit.and_then(|e| e.code).map_or(137, i64::from))
            },
            stdout,
            stderr,
            duration,
            timed_out,
            stdout_truncated,
            stderr_truncated,
        })
    }

    /// A command through its own `docker exec`, bounded by `timeout` (the
    /// in-sandbox `timeout` utility) and a host deadline.
    pub(super) async fn exec_plain(
        &self,
        command: &str,
        timeout: Duration,
    ) -> Result<ExecOutput, SandboxError> {
        let secs = timeout.as_secs().max(1);
        // `timeout` (coreutils or busybox) puts the command in its own process
        // group and signals the whole group, so children die with it. Images
        // without it still run the command, bounded by the host deadline.
        let wrapper = format!(
            "if command -v timeout >/dev/null 2>&1; then exec timeout -k {KILL_AFTER_SECS} {secs} sh -c \"$1\"; else exec sh -c \"$1\"; fi"
        );
        let argv = vec![
            "sh".into(),
            "-c".into(),
            wrapper,
            "forgehand-exec".into(),
            command.to_owned(),
        ];
        let started = Instant::now();
        let exec_id = self.create_exec(argv, false).await?;
        let output = match self
            .docker
            .start_exec(&exec_id, Some(StartExecOptions::default()))
            .await
        {
            Ok(StartExecResults::Attached { output, .. }) => output,
            Ok(StartExecResults::Detached) => return Err(detached("run a command")),
            Err(err) => return Err(self.explain("run a command", err).await),
        };
        let limit = self.config.output_limit;
        let mut stdout = CappedOutput::new(limit);
        let mut stderr = CappedOutput::new(limit);
        let deadline = Duration::from_secs(secs + KILL_AFTER_SECS) + HOST_DEADLINE_GRACE;
        let collect = async {
            let mut output = output;
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                        stdout.push(&message)
                    }
                    Ok(LogOutput::StdErr { message }) => stderr.push(&message),
                    Ok(LogOutput::StdIn { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
            Ok(())
        };
        let host_timed_out = match tokio::time::timeout(deadline, collect).await {
            Ok(Ok(())) => false,
            Ok(Err(err)) => return Err(self.explain("read a command's output", err).await),
            Err(_) => true,
        };
        let duration = started.elapsed();
        let exit_code = if host_timed_out {
            None
        } else {
            self.exec_status(&exec_id).await?.exit_code
        };
        // 124: timeout's TERM worked; 137: it had to KILL.
        let timed_out = host_timed_out
            || (duration >= Duration::from_secs(secs) && matches!(exit_code, Some(124) | Some(137)));
        let (stdout, stdout_truncated) = stdout.finish();
        let (mut stderr, stderr_truncated) = stderr.finish();
        if timed_out {
            stderr.push_str(&format!(
                "\n[forgehand: the command was stopped after the {secs} s timeout]\n"
            ));
        }
        Ok(ExecOutput {
            exit_code: if timed_out { None } else { exit_code },
            stdout,
            stderr,
            duration,
            timed_out,
            stdout_truncated,
            stderr_truncated,
        })
    }

    /// `argv` as its own `docker exec` with stdin attached.
    pub(super) async fn exec_stream_plain(&self, argv: &[String]) -> Result<ExecStream, SandboxError> {
        let exec_id = self.create_exec(argv.to_vec(), true).await?;
        let (output, input) = match self
            .docker
            .start_exec(&exec_id, Some(StartExecOptions::default()))
            .await
        {
            Ok(StartExecResults::Attached { output, input }) => (output, input),
            Ok(StartExecResults::Detached) => return Err(detached("start a streamed process")),
            Err(err) => return Err(self.explain("start a streamed process", err).await),
        };
        let (stdout_tx, stdout_rx) = mpsc::channel::<std::io::Result<Bytes>>(64);
        let (stderr_tx, stderr_rx) = mpsc::channel::<std::io::Result<Bytes>>(256);
        let short_id = self.short_id().to_owned();
        tokio::spawn(async move {
            let mut output = output;
            let mut stderr_dropped = 0usize;
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                        if stdout_tx.send(Ok(message)).await.is_err() {
                            break;
                        }
                    }
                    // Nobody may be reading stderr: never let it block stdout.
                    Ok(LogOutput::StdErr { message }) => {
                        if stderr_tx.try_send(Ok(message)).is_err() {
                            stderr_dropped += 1;
                        }
                    }
                    Ok(LogOutput::StdIn { .. }) => {}
                    Err(err) => {
                        let _ = stdout_tx.send(Err(std::io::Error::other(err.to_string()))).await;
                        break;
                    }
                }
            }
            if stderr_dropped > 0 {
                tracing::debug!(container = %short_id, chunks = stderr_dropped, "stderr of a streamed process was not read; chunks dropped");
            }
        });
        Ok(ExecStream {
            id: exec_id,
            stdin: input,
            stdout: Box::pin(StreamReader::new(tokio_stream_from(stdout_rx))),
            stderr: Box::pin(StreamReader::new(tokio_stream_from(stderr_rx))),
        })
    }
}

/// We always attach; an engine that starts the exec detached broke that.
fn detached(action: &str) -> SandboxError {
    SandboxError::Docker {
        action: action.into(),
        detail: "Docker started the exec detached".into(),
        retryable: false,
    }
}

/// An mpsc receiver as a `Stream`, without pulling in tokio-stream.
fn tokio_stream_from<T: Send + 'static>(
    rx: mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
}
