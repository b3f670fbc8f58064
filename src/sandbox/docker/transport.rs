//! One Docker container as a [`Transport`]: a process is a `docker exec`
//! (its exit code read from the engine once its output ends), a copy in
//! or out is the engine's archive API.

use super::{docker_error, remove_container, status_of};
use crate::sandbox::egress_socket::EgressSocket;
use crate::sandbox::transport::{Process, ProcessExit, TarOut, TransferError, Transport};
use crate::sandbox::SandboxError;
use async_trait::async_trait;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{
    ContainerArchiveInfoOptionsBuilder, DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::{FutureExt, StreamExt, TryStreamExt};
use std::pin::Pin;
use std::time::Duration;
use tokio::io::AsyncRead;
use tokio::sync::{mpsc, watch};
use tokio_util::io::{ReaderStream, StreamReader};

/// How long the engine is asked, after a process's output ended, whether
/// it has exited (its streams close a moment before).
const EXIT_WAIT: Duration = Duration::from_secs(5);

pub struct DockerTransport {
    pub(super) docker: Docker,
    pub(super) id: String,
    /// `sandbox.user`: every process runs as it.
    pub(super) user: String,
    pub(super) project_dir: String,
    /// The egress tunnel's socket, listening as long as the sandbox lives.
    pub(super) _egress_socket: Option<EgressSocket>,
}

impl DockerTransport {
    pub(super) fn short_id(&self) -> &str {
        &self.id[..12.min(self.id.len())]
    }

    /// After a failed call, tells whether the container itself is gone,
    /// which is the error worth reporting.
    pub(super) async fn explain(&self, action: &str, err: bollard::errors::Error) -> SandboxError {
        match self.docker.inspect_container(&self.id, None).await {
            Ok(info) => {
                let state = info.state.unwrap_or_default();
                if state.running == Some(true) {
                    return docker_error(action, err);
                }
                let mut how = format!(
                    "state {}",
                    state
                        .status
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "unknown".into())
                );
                if let Some(code) = state.exit_code {
                    how.push_str(&format!(", exit code {code}"));
                }
                if state.oom_killed == Some(true) {
                    how.push_str(", killed for exceeding sandbox.memory");
                }
                SandboxError::Gone {
                    sandbox: self.short_id().to_owned(),
                    state: how,
                }
            }
            Err(inspect) if status_of(&inspect) == Some(404) => SandboxError::Gone {
                sandbox: self.short_id().to_owned(),
                state: "removed".into(),
            },
            Err(_) => docker_error(action, err),
        }
    }

    async fn create_exec(&self, argv: Vec<String>, stdin: bool) -> Result<String, SandboxError> {
        let options = CreateExecOptions {
            attach_stdin: Some(stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            cmd: Some(argv),
            user: Some(self.user.clone()),
            working_dir: Some(self.project_dir.clone()),
            ..Default::default()
        };
        match self.docker.create_exec(&self.id, options).await {
            Ok(created) => Ok(created.id),
            Err(err) => Err(self.explain("start a process in the sandbox", err).await),
        }
    }
}

#[async_trait]
impl Transport for DockerTransport {
    fn id(&self) -> &str {
        &self.id
    }

    fn plain_exec_name(&self) -> &'static str {
        "docker exec"
    }

    async fn spawn(&self, argv: Vec<String>, stdin: bool) -> Result<Process, SandboxError> {
        let exec_id = self.create_exec(argv, stdin).await?;
        let (output, input) = match self
            .docker
            .start_exec(&exec_id, Some(StartExecOptions::default()))
            .await
        {
            Ok(StartExecResults::Attached { output, input }) => (output, input),
            Ok(StartExecResults::Detached) => {
                return Err(SandboxError::InSandbox {
                    action: "start a process".into(),
                    detail: "Docker started the exec detached".into(),
                })
            }
            Err(err) => return Err(self.explain("start a process in the sandbox", err).await),
        };
        let (stdout_tx, stdout) = mpsc::channel(64);
        let (stderr_tx, stderr) = mpsc::channel(256);
        let (exit_tx, exit) = watch::channel(None);
        let docker = self.docker.clone();
        tokio::spawn(async move {
            let mut output = output;
            let mut stderr_dropped = 0usize;
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                        // A reader that went away still wants the exit code.
                        let _ = stdout_tx.send(Ok(message)).await;
                    }
                    // Nobody may be reading stderr: never let it block stdout.
                    Ok(LogOutput::StdErr { message }) => {
                        if stderr_tx.try_send(Ok(message)).is_err() {
                            stderr_dropped += 1;
                        }
                    }
                    Ok(LogOutput::StdIn { .. }) => {}
                    Err(err) => {
                        let _ = stdout_tx
                            .send(Err(std::io::Error::other(format!(
                                "the exec stream broke: {err}"
                            ))))
                            .await;
                        break;
                    }
                }
            }
            if stderr_dropped > 0 {
                tracing::debug!(
                    chunks = stderr_dropped,
                    "stderr of a process was not read; chunks dropped"
                );
            }
            drop((stdout_tx, stderr_tx));
            let _ = exit_tx.send(Some(exit_of(&docker, &exec_id).await));
        });
        Ok(Process {
            stdin: stdin.then_some(input),
            stdout,
            stderr,
            exit,
        })
    }

    async fn put_tar(&self, parent: &str, tar: Pin<Box<dyn AsyncRead + Send>>) -> Result<(), SandboxError> {
        let body = bollard::body_try_stream(ReaderStream::new(tar));
        let options = UploadToContainerOptionsBuilder::default().path(parent).build();
        match self
            .docker
            .upload_to_container(&self.id, Some(options), body)
            .await
        {
            Ok(()) => Ok(()),
            Err(err) => Err(self.explain(&format!("copy files into {parent}"), err).await),
        }
    }

    async fn get_tar(&self, path: &str) -> Result<TarOut, TransferError> {
        // Ask once up front so a missing path or a dead container gets its
        // own clear error rather than a broken stream.
        let info_options = ContainerArchiveInfoOptionsBuilder::default().path(path).build();
        if let Err(err) = self
            .docker
            .get_container_archive_info(&self.id, Some(info_options))
            .await
        {
            return Err(match status_of(&err) {
                Some(404) if self.docker.inspect_container(&self.id, None).await.is_ok() => {
                    TransferError::NoSuchPath
                }
                _ => self.explain(&format!("read {path}"), err).await.into(),
            });
        }
        let options = DownloadFromContainerOptionsBuilder::default().path(path).build();
        let stream = self
            .docker
            .download_from_container(&self.id, Some(options))
            .map_err(std::io::Error::other);
        Ok(TarOut {
            reader: Box::pin(StreamReader::new(stream)),
            done: async { Ok(()) }.boxed(),
        })
    }

    async fn remove(&self) -> Result<(), SandboxError> {
        remove_container(&self.docker, &self.id).await?;
        tracing::info!(container = %self.short_id(), "sandbox removed");
        Ok(())
    }
}

/// The exit code of an exec whose streams have ended.
async fn exit_of(docker: &Docker, exec_id: &str) -> ProcessExit {
    let started = std::time::Instant::now();
    loop {
        match docker.inspect_exec(exec_id).await {
            Ok(info) if info.running != Some(true) => {
                return ProcessExit {
                    code: info.exit_code,
                    message: None,
                }
            }
            Ok(_) if started.elapsed() < EXIT_WAIT => tokio::time::sleep(Duration::from_millis(5)).await,
            Ok(_) => {
                return ProcessExit {
                    code: None,
                    message: Some("the process closed its output but is still running".into()),
                }
            }
            Err(err) => {
                return ProcessExit {
                    code: None,
                    message: Some(format!("cannot read the exit code: {err}")),
                }
            }
        }
    }
}
