//! A sandbox that is only a folder on this host, with its processes as
//! children of the test: the [`Transport`] the task's phases are tested
//! through without Docker. It isolates nothing, so it exists in test builds
//! alone and no configuration can choose it.

use super::egress::Egress;
use super::supervised::SupervisedSandbox;
use super::transport::{Process, ProcessExit, TarOut, TransferError, Transport};
use super::{check_copy_source, Sandbox, SandboxBackend, SandboxError, SandboxSpec};
use crate::config::SandboxConfig;
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::FutureExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

/// The processes and files of one folder.
pub struct LocalTransport {
    id: String,
    /// Every path the sandbox sees, on the host.
    root: PathBuf,
    project_dir: PathBuf,
    home_dir: PathBuf,
    /// Archives are unpacked only while this says `true`.
    copies_open: watch::Receiver<bool>,
}

fn io_error(action: &str, source: std::io::Error) -> SandboxError {
    SandboxError::Io {
        action: action.to_owned(),
        source,
    }
}

/// Sends what `reader` yields, a chunk at a time, until it ends.
fn forward(mut reader: impl AsyncRead + Unpin + Send + 'static, to: mpsc::Sender<std::io::Result<Bytes>>) {
    tokio::spawn(async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) => break,
                Ok(n) => {
                    if to.send(Ok(Bytes::copy_from_slice(&buffer[..n]))).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = to.send(Err(e)).await;
                    break;
                }
            }
        }
    });
}

#[async_trait]
impl Transport for LocalTransport {
    fn id(&self) -> &str {
        &self.id
    }

    fn plain_exec_name(&self) -> &'static str {
        "a child process"
    }

    async fn spawn(&self, argv: Vec<String>, stdin: bool) -> Result<Process, SandboxError> {
        let (program, args) = argv.split_first().ok_or_else(|| SandboxError::InSandbox {
            action: "start a process".into(),
            detail: "no command".into(),
        })?;
        // Ending a phase kills every process started after a mark: on this
        // host that would be the test runner's own and everyone else's.
        if argv.iter().any(|arg| arg.contains("/proc/[0-9]*")) {
            return Err(SandboxError::InSandbox {
                action: "end a phase's processes".into(),
                detail: "a local test sandbox shares the host's processes; test setup on a real sandbox"
                    .into(),
            });
        }
        let dir = if self.project_dir.is_dir() {
            &self.project_dir
        } else {
            &self.root
        };
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home_dir)
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io_error(&format!("start {program}"), e))?;
        let (stdout_tx, stdout) = mpsc::channel(64);
        let (stderr_tx, stderr) = mpsc::channel(256);
        if let Some(out) = child.stdout.take() {
            forward(out, stdout_tx);
        }
        if let Some(err) = child.stderr.take() {
            forward(err, stderr_tx);
        }
        let input = child
            .stdin
            .take()
            .map(|i| Box::pin(i) as Pin<Box<dyn tokio::io::AsyncWrite + Send>>);
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await;
            let _ = exit_tx.send(Some(match status {
                Ok(status) => ProcessExit {
                    code: status.code().map(i64::from),
                    message: None,
                },
                Err(e) => ProcessExit {
                    code: None,
                    message: Some(e.to_string()),
                },
            }));
        });
        Ok(Process {
            stdin: input,
            stdout,
            stderr,
            exit,
        })
    }

    async fn put_tar(
        &self,
        parent: &str,
        mut tar: Pin<Box<dyn AsyncRead + Send>>,
    ) -> Result<(), SandboxError> {
        let mut bytes = Vec::new();
        tar.read_to_end(&mut bytes)
            .await
            .map_err(|e| io_error("read the archive", e))?;
        let parent = PathBuf::from(parent);
        let mut open = self.copies_open.clone();
        let _ = open.wait_for(|open| *open).await;
        tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&parent)?;
            let mut archive = tar::Archive::new(std::io::Cursor::new(bytes));
            archive.set_preserve_permissions(true);
            archive.unpack(&parent)
        })
        .await
        .map_err(|e| io_error("unpack the archive", std::io::Error::other(e)))?
        .map_err(|e| io_error("unpack the archive", e))
    }

    async fn get_tar(&self, path: &str) -> Result<TarOut, TransferError> {
        let path = PathBuf::from(path);
        if !path.exists() {
            return Err(TransferError::NoSuchPath);
        }
        let packed = tokio::task::spawn_blocking(move || {
            let name = path.file_name().map(PathBuf::from).unwrap_or_default();
            let mut builder = tar::Builder::new(Vec::new());
            builder.follow_symlinks(false);
            builder.append_dir_all(&name, &path)?;
            builder.into_inner()
        })
        .await
        .map_err(|e| TransferError::Failed(e.to_string()))?
        .map_err(|e| TransferError::Failed(e.to_string()))?;
        Ok(TarOut {
            reader: Box::pin(std::io::Cursor::new(packed)),
            done: async { Ok(()) }.boxed(),
        })
    }

    async fn remove(&self) -> Result<(), SandboxError> {
        match std::fs::remove_dir_all(&self.root) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("remove the sandbox folder", e)),
        }
    }
}

/// Makes folder sandboxes where `config` says the workspace, the project
/// and the home folder are (paths on this host); one at a time.
pub struct LocalBackend {
    config: Arc<SandboxConfig>,
    /// The sandboxes made, for the test to look into.
    pub made: Mutex<Vec<SandboxSpec>>,
    copies_open: watch::Sender<bool>,
}

impl LocalBackend {
    pub fn new(config: SandboxConfig) -> LocalBackend {
        LocalBackend {
            config: Arc::new(config),
            made: Mutex::default(),
            copies_open: watch::channel(true).0,
        }
    }

    /// Holds every copy into its sandboxes (`false`) until let go (`true`).
    pub fn hold_copies(&self, held: bool) {
        self.copies_open.send_replace(!held);
    }

    /// The folder sandboxes live in on this host.
    pub fn root(&self) -> &Path {
        Path::new(&self.config.workspace_dir)
    }
}

#[async_trait]
impl SandboxBackend for LocalBackend {
    async fn prepare(
        &self,
        spec: &SandboxSpec,
        workspace: Option<&Path>,
    ) -> Result<Box<dyn Sandbox>, SandboxError> {
        if let Some(dir) = workspace {
            check_copy_source(dir)?;
        }
        let root = PathBuf::from(&self.config.workspace_dir);
        let home = PathBuf::from(&self.config.home_dir);
        for dir in [&root, &home] {
            std::fs::create_dir_all(dir).map_err(|e| io_error("make the sandbox folder", e))?;
        }
        let transport = LocalTransport {
            id: format!("local-{}", spec.task_id),
            project_dir: PathBuf::from(&self.config.project_dir),
            root,
            home_dir: home,
            copies_open: self.copies_open.subscribe(),
        };
        let sandbox = SupervisedSandbox::new(
            Box::new(transport),
            self.config.clone(),
            Egress::new(Default::default(), Default::default()),
        );
        if let Some(dir) = workspace {
            sandbox.copy_in(dir, &self.config.project_dir).await?;
        }
        self.made
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(spec.clone());
        Ok(Box::new(sandbox))
    }

    async fn reap(&self, _running: &[String]) -> Result<Vec<String>, SandboxError> {
        Ok(Vec::new())
    }

    async fn ping(&self) -> Result<(), SandboxError> {
        Ok(())
    }

    fn operator_advice(&self) -> &'static str {
        "Look at the test's folder."
    }
}
