//! What a sandbox backend provides, and nothing more: a process started in
//! the sandbox with its stdio as streams, and tar streams in and out. The
//! Docker engine does it with `docker exec` and its archive API, a pod with
//! the API server's exec WebSocket. Everything built on that (the
//! supervisor and its fallback, commands, copies, `put_file`, the egress
//! tunnel) is written once, in [`super::supervised`].

use super::{CappedOutput, SandboxError};
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use std::pin::Pin;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

/// Chunks of a process's output as they come.
pub type Chunks = mpsc::Receiver<std::io::Result<Bytes>>;

/// How a process in the sandbox ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessExit {
    /// `None`: the process could not start, or its end went unsaid.
    pub code: Option<i64>,
    /// The backend's words when it was not a plain exit code.
    pub message: Option<String>,
}

impl ProcessExit {
    /// The stream ended before the process's exit status.
    pub fn unsaid() -> ProcessExit {
        ProcessExit {
            code: None,
            message: Some("the stream ended before the process's exit status".into()),
        }
    }
}

/// One process started in the sandbox.
pub struct Process {
    /// Its stdin, when asked for; shut it down to end the input.
    pub stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    pub stdout: Chunks,
    /// Never blocks stdout: chunks nobody reads in time are dropped.
    pub stderr: Chunks,
    /// `Some` once the process ended.
    pub exit: watch::Receiver<Option<ProcessExit>>,
}

impl Process {
    /// Waits for the exit status.
    pub async fn wait(&mut self) -> ProcessExit {
        match self.exit.wait_for(Option::is_some).await {
            Ok(exit) => exit.clone().unwrap_or_else(ProcessExit::unsaid),
            Err(_) => ProcessExit::unsaid(),
        }
    }

    /// Takes the output receivers, so they can be read while the process
    /// is waited for.
    pub fn take_outputs(&mut self) -> (Chunks, Chunks) {
        let (_, no_stdout) = mpsc::channel(1);
        let (_, no_stderr) = mpsc::channel(1);
        (
            std::mem::replace(&mut self.stdout, no_stdout),
            std::mem::replace(&mut self.stderr, no_stderr),
        )
    }
}

/// A tar stream coming out of the sandbox, and how its making ended.
pub struct TarOut {
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
    /// Resolves once the whole stream was read; the sandbox's side of the
    /// copy may fail after it began (a path that vanished, a dead tar).
    pub done: BoxFuture<'static, Result<(), TransferError>>,
}

/// Why a copy out of the sandbox failed.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("no such path in the sandbox")]
    NoSuchPath,
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// How one sandbox is reached.
#[async_trait]
pub trait Transport: Send + Sync {
    /// The backend's id of the sandbox (the container id, the pod name).
    fn id(&self) -> &str;

    /// How the plain way of running a command is called in a log line
    /// ("docker exec", "a pod exec").
    fn plain_exec_name(&self) -> &'static str;

    /// Starts `argv` in the project folder as the sandbox's user. With
    /// `stdin`, its input is a stream the caller ends by shutting it down.
    async fn spawn(&self, argv: Vec<String>, stdin: bool) -> Result<Process, SandboxError>;

    /// Unpacks the tar read from `tar` into the folder `parent`.
    async fn put_tar(&self, parent: &str, tar: Pin<Box<dyn AsyncRead + Send>>) -> Result<(), SandboxError>;

    /// A tar of `path`, whose last component is its top entry.
    async fn get_tar(&self, path: &str) -> Result<TarOut, TransferError>;

    /// Removes the sandbox and everything in it. Removing twice is fine.
    async fn remove(&self) -> Result<(), SandboxError>;
}

/// What came back from a process run to its end.
pub struct Finished {
    pub stdout: CappedOutput,
    pub stderr: CappedOutput,
    /// `None`: it did not end within the deadline.
    pub exit: Option<ProcessExit>,
}

impl Finished {
    /// The process's exit code, when it ended with one.
    pub fn code(&self) -> Option<i64> {
        self.exit.as_ref().and_then(|e| e.code)
    }

    /// Why the process failed, for an error message.
    pub fn failure(self) -> String {
        let (stderr, _) = self.stderr.finish();
        let how = match self.exit {
            None => "it did not end in time".to_owned(),
            Some(ProcessExit { code: Some(code), .. }) => format!("exit code {code}"),
            Some(ProcessExit { message, .. }) => message.unwrap_or_else(|| "no exit status".into()),
        };
        format!("{how}: {}", stderr.trim())
    }
}

/// Runs `argv` to its end, feeding it `input` (then the end of input),
/// keeping at most `limit` bytes of each output, for at most `deadline`.
pub async fn run_to_end(
    transport: &dyn Transport,
    argv: Vec<String>,
    input: Option<&[u8]>,
    limit: usize,
    deadline: Duration,
) -> Result<Finished, SandboxError> {
    let mut process = transport.spawn(argv, input.is_some()).await?;
    let stdin = process.stdin.take();
    let (mut out_rx, mut err_rx) = process.take_outputs();
    let feed = async move {
        if let (Some(bytes), Some(mut stdin)) = (input, stdin) {
            stdin.write_all(bytes).await?;
            stdin.shutdown().await?;
        }
        Ok::<(), std::io::Error>(())
    };
    let mut stdout = CappedOutput::new(limit);
    let mut stderr = CappedOutput::new(limit);
    let collect = async {
        let (fed, ()) = tokio::join!(feed, async {
            loop {
                tokio::select! {
                    Some(chunk) = out_rx.recv() => {
                        if let Ok(bytes) = chunk {
                            stdout.push(&bytes);
                        }
                    }
                    Some(chunk) = err_rx.recv() => {
                        if let Ok(bytes) = chunk {
                            stderr.push(&bytes);
                        }
                    }
                    else => break,
                }
            }
        });
        fed
    };
    let exit = match tokio::time::timeout(deadline, collect).await {
        Ok(Ok(())) => Some(process.wait().await),
        Ok(Err(e)) => {
            return Err(SandboxError::InSandbox {
                action: "send input to a process".into(),
                detail: e.to_string(),
            })
        }
        Err(_) => None,
    };
    Ok(Finished { stdout, stderr, exit })
}

/// Drains `chunks` into a capped buffer (a process's stderr, for its error).
pub async fn drain(mut chunks: Chunks, limit: usize) -> CappedOutput {
    let mut out = CappedOutput::new(limit);
    while let Some(chunk) = chunks.recv().await {
        if let Ok(bytes) = chunk {
            out.push(&bytes);
        }
    }
    out
}
