//! Commands and streamed processes in a Docker sandbox: over the
//! supervisor's session when it runs (a stream each, about a millisecond),
//! else through a `docker exec` each (tens of milliseconds).

use super::docker::DockerSandbox;
use super::mux::Supervisor;
use super::{command, CappedOutput, ExecOutput, ExecStream, Sandbox, SandboxError};
use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bytes::Bytes;
use futures_util::StreamExt;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::io::StreamReader;

impl DockerSandbox {
    /// A command over the supervisor's session: the same timeout, kill,
    /// output caps and lossy decoding as [`DockerSandbox::exec_plain`].
    pub(super) async fn exec_supervised(
        &self,
        supervisor: &Supervisor,
        command: &str,
        timeout: Duration,
    ) -> Result<ExecOutput, SandboxError> {
        match command::run_supervised(supervisor, command, timeout, self.config.output_limit).await {
            Ok(output) => Ok(output),
            Err(e) => {
                tracing::warn!(container = %self.short_id(), "the supervisor did not take a command ({e}); using docker exec");
                self.exec_plain(command, timeout).await
            }
        }
    }

    /// A command through its own `docker exec`, bounded by `timeout` (the
    /// in-sandbox `timeout` utility) and a host deadline.
    pub(super) async fn exec_plain(
        &self,
        command: &str,
        timeout: Duration,
    ) -> Result<ExecOutput, SandboxError> {
        let argv = command::wrapped_argv(command, timeout);
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
        let deadline = command::host_deadline(timeout);
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
        let exit_code = if host_timed_out {
            None
        } else {
            self.exec_status(&exec_id).await?.exit_code
        };
        Ok(command::plain_output(
            stdout,
            stderr,
            exit_code,
            host_timed_out,
            timeout,
            started,
        ))
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
            stdout: Box::pin(StreamReader::new(command::stream_from(stdout_rx))),
            stderr: Box::pin(StreamReader::new(command::stream_from(stderr_rx))),
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
