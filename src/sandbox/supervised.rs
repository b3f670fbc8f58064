//! A sandbox over any [`Transport`], written once for every backend: the
//! in-sandbox supervisor carries commands and the egress tunnel over one
//! long-lived process (about a millisecond a command), and when it is
//! missing or dies, each command gets a process of its own. Copies are tar
//! streams, `put_file` a one-entry tar, both under the workspace folder.

use super::archive;
use super::command;
use super::egress::Egress;
use super::mux::{Ask, Supervisor};
use super::transport::{self, ProcessExit, TransferError, Transport};
use super::tree_out::TreeStream;
use super::{
    copy_in_target, numeric_owner, split_parent, within_workspace, ExecOutput, ExecStatus, ExecStream,
    Sandbox, SandboxError,
};
use crate::config::SandboxConfig;
use async_trait::async_trait;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::io::{ReaderStream, StreamReader, SyncIoBridge};

/// How long a copy into the sandbox may take.
const COPY_TIMEOUT: Duration = Duration::from_secs(3600);

pub struct SupervisedSandbox {
    transport: Box<dyn Transport>,
    config: Arc<SandboxConfig>,
    /// forgehand's editor in the sandbox, when it has one: the editor MCP
    /// server and the supervisor.
    editor_path: Option<String>,
    supervisor: OnceLock<Supervisor>,
    egress: Arc<Egress>,
    /// How each streamed process ended, by its id.
    processes: Mutex<HashMap<String, watch::Receiver<Option<ProcessExit>>>>,
    next_process: AtomicU64,
}

impl SupervisedSandbox {
    pub fn new(
        transport: Box<dyn Transport>,
        config: Arc<SandboxConfig>,
        egress: Arc<Egress>,
    ) -> SupervisedSandbox {
        SupervisedSandbox {
            transport,
            config,
            editor_path: None,
            supervisor: OnceLock::new(),
            egress,
            processes: Mutex::new(HashMap::new()),
            next_process: AtomicU64::new(1),
        }
    }

    /// Where forgehand's editor is in the sandbox.
    pub fn set_editor_path(&mut self, path: String) {
        self.editor_path = Some(path);
    }

    /// The backend's end of the sandbox.
    pub fn transport(&self) -> &dyn Transport {
        self.transport.as_ref()
    }

    /// Starts `forgehand-editor supervise` (when the sandbox has the
    /// editor), with `extra` arguments, for commands and the egress tunnel.
    /// Without it, commands get a process each and the sandbox has no way
    /// out at all.
    pub async fn start_supervisor(&self, extra: &[String]) {
        let Some(editor) = &self.editor_path else { return };
        let mut argv = Supervisor::argv(editor, &self.config);
        argv.extend(extra.iter().cloned());
        match self.exec_stream(&argv).await {
            Ok(stream) => {
                let _ = self
                    .supervisor
                    .set(Supervisor::start(stream, self.egress.clone()));
            }
            Err(e) => tracing::warn!(
                sandbox = %self.id(),
                "cannot start the sandbox supervisor ({e}); commands use {} and the sandbox has no egress",
                self.transport.plain_exec_name()
            ),
        }
    }

    /// Whether the file at `path` has the SHA-256 `sha256` (for example an
    /// image that carries this very build of the editor).
    pub async fn file_has_sha256(&self, path: &str, sha256: &str) -> Result<bool, SandboxError> {
        let argv = vec!["sha256sum".to_owned(), path.to_owned()];
        let finished =
            transport::run_to_end(self.transport(), argv, None, 4096, Duration::from_secs(60)).await?;
        let code = finished.code();
        let (stdout, _) = finished.stdout.finish();
        Ok(code == Some(0) && stdout.split_whitespace().next() == Some(sha256))
    }

    /// Copies `host_dir` into `parent` as `name` over the supervisor's
    /// session: the tar streams into `forgehand-editor untar` in the
    /// sandbox, a few times faster than the engine's archive API or a tar
    /// over a pod exec. `Err`: the supervisor did not take it (the caller
    /// copies the plain way); `Ok(Err)`: the checkout could not be packed.
    async fn copy_in_supervised(
        &self,
        supervisor: &Supervisor,
        editor: &str,
        (host_dir, replaced): (&Path, &[(String, Vec<u8>)]),
        (parent, name): (&str, &str),
    ) -> Result<Result<(), SandboxError>, String> {
        let owner = numeric_owner(&self.config.user);
        let (reader, writer) = tokio::io::duplex(256 * 1024);
        let (src, top, replaced) = (host_dir.to_owned(), name.to_owned(), replaced.to_vec());
        let packer = tokio::task::spawn_blocking(move || {
            let mut bridge = archive::pack_dir_with(&src, &top, owner, &replaced, SyncIoBridge::new(writer))?;
            std::io::Write::flush(&mut bridge)?;
            bridge.shutdown()
        });
        let command = format!(
            "{} untar {}",
            command::shell_quote(editor),
            command::shell_quote(parent)
        );
        let ask = Ask {
            command: &command,
            timeout: COPY_TIMEOUT,
            kill_after: Duration::from_secs(command::KILL_AFTER_SECS),
            limit: 64 * 1024,
            deadline: command::host_deadline(COPY_TIMEOUT),
        };
        let ran = supervisor.run_with_input(ask, Some(Box::pin(reader))).await;
        // A session that failed explains a broken pipe on the packing side.
        let ran = ran.map_err(|e| e.to_string())?;
        match packer.await {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                return Ok(Err(SandboxError::CopyInSource {
                    path: host_dir.to_owned(),
                    detail: source.to_string(),
                }))
            }
            Err(e) => return Err(format!("packing stopped: {e}")),
        }
        match ran.exit {
            Some(exit) if exit.code == Some(0) => Ok(Ok(())),
            exit => {
                let (stderr, _) = ran.stderr.finish();
                Err(format!("untar ended with {exit:?}: {}", stderr.trim()))
            }
        }
    }

    /// A command with a process of its own, bounded by the in-sandbox
    /// `timeout` and the host's deadline.
    async fn exec_plain(&self, command: &str, timeout: Duration) -> Result<ExecOutput, SandboxError> {
        let started = Instant::now();
        let argv = command::wrapped_argv(command, timeout);
        let finished = transport::run_to_end(
            self.transport(),
            argv,
            None,
            self.config.output_limit,
            command::host_deadline(timeout),
        )
        .await?;
        let host_timed_out = finished.exit.is_none();
        let exit_code = finished.code();
        let mut stderr = finished.stderr;
        if let Some(message) = finished.exit.and_then(|e| e.message) {
            stderr.push(format!("\n[forgehand: {message}]\n").as_bytes());
        }
        Ok(command::plain_output(
            finished.stdout,
            stderr,
            exit_code,
            host_timed_out,
            timeout,
            started,
        ))
    }
}

#[async_trait]
impl Sandbox for SupervisedSandbox {
    fn id(&self) -> &str {
        self.transport.id()
    }

    fn project_dir(&self) -> &str {
        &self.config.project_dir
    }

    fn editor_path(&self) -> Option<&str> {
        self.editor_path.as_deref()
    }

    async fn copy_in(&self, host_dir: &Path, sandbox_dir: &str) -> Result<(), SandboxError> {
        self.copy_in_replacing(host_dir, sandbox_dir, &[]).await
    }

    async fn copy_in_replacing(
        &self,
        host_dir: &Path,
        sandbox_dir: &str,
        replaced: &[(String, Vec<u8>)],
    ) -> Result<(), SandboxError> {
        let (parent, name) = copy_in_target(host_dir, sandbox_dir)?;
        if let (Some(supervisor), Some(editor)) =
            (self.supervisor.get().filter(|s| s.is_alive()), &self.editor_path)
        {
            match self
                .copy_in_supervised(supervisor, editor, (host_dir, replaced), (parent, name))
                .await
            {
                Ok(copied) => return copied,
                Err(why) => tracing::warn!(
                    sandbox = %self.id(),
                    "the supervisor did not take a copy into {parent} ({why}); using {}",
                    self.transport.plain_exec_name()
                ),
            }
        }
        let owner = numeric_owner(&self.config.user);
        // Stream the tar: a blocking thread packs into one end of a pipe while
        // the transport reads the other, so memory stays flat for any size.
        let (reader, writer) = tokio::io::duplex(256 * 1024);
        let (src, top, replaced) = (host_dir.to_owned(), name.to_owned(), replaced.to_vec());
        let packer = tokio::task::spawn_blocking(move || {
            let mut bridge = archive::pack_dir_with(&src, &top, owner, &replaced, SyncIoBridge::new(writer))?;
            std::io::Write::flush(&mut bridge)?;
            bridge.shutdown()
        });
        let uploaded = self.transport.put_tar(parent, Box::pin(reader)).await;
        let packed = packer.await.map_err(|e| SandboxError::Io {
            action: format!("pack {}", host_dir.display()),
            source: std::io::Error::other(e),
        })?;
        // A packing error explains a failed upload better than the upload's own.
        match packed {
            Ok(()) => uploaded,
            Err(source) => Err(SandboxError::CopyInSource {
                path: host_dir.to_owned(),
                detail: source.to_string(),
            }),
        }
    }

    async fn read_out(&self, sandbox_dir: &str) -> Result<TreeStream, SandboxError> {
        if split_parent(sandbox_dir).is_none() {
            return Err(copy_out_error(
                sandbox_dir,
                TransferError::Failed("not an absolute path in the sandbox".into()),
            ));
        }
        let out = self
            .transport
            .get_tar(sandbox_dir)
            .await
            .map_err(|err| copy_out_error(sandbox_dir, err))?;
        let path = sandbox_dir.to_owned();
        let done = out.done;
        Ok(TreeStream {
            tar: out.reader,
            done: Box::pin(async move { done.await.map_err(|err| copy_out_error(&path, err)) }),
        })
    }

    async fn put_file(&self, path: &str, contents: &[u8], mode: u32) -> Result<(), SandboxError> {
        let workspace = self.config.workspace_dir.trim_end_matches('/');
        let relative = within_workspace(&self.config.workspace_dir, path)?;
        let (uid, gid) = numeric_owner(&self.config.user);
        let tar = archive::file_with_parents(relative, contents, mode, uid, gid).map_err(|source| {
            SandboxError::Io {
                action: format!("pack {path}"),
                source,
            }
        })?;
        let reader = StreamReader::new(ReaderStream::new(std::io::Cursor::new(tar)));
        self.transport.put_tar(workspace, Box::pin(reader)).await
    }

    async fn exec(&self, command: &str, timeout: Option<Duration>) -> Result<ExecOutput, SandboxError> {
        let timeout = timeout.unwrap_or(self.config.exec_timeout);
        if let Some(supervisor) = self.supervisor.get().filter(|s| s.is_alive()) {
            match command::run_supervised(supervisor, command, timeout, self.config.output_limit).await {
                Ok(output) => return Ok(output),
                Err(e) => tracing::warn!(
                    sandbox = %self.id(),
                    "the supervisor did not take a command ({e}); using {}",
                    self.transport.plain_exec_name()
                ),
            }
        }
        self.exec_plain(command, timeout).await
    }

    async fn exec_stream(&self, argv: &[String]) -> Result<ExecStream, SandboxError> {
        let mut process = self.transport.spawn(argv.to_vec(), true).await?;
        let id = format!(
            "{}/{}",
            self.id(),
            self.next_process.fetch_add(1, Ordering::Relaxed)
        );
        if let Ok(mut processes) = self.processes.lock() {
            processes.insert(id.clone(), process.exit.clone());
        }
        let stdin = process.stdin.take().ok_or_else(|| SandboxError::InSandbox {
            action: "start a streamed process".into(),
            detail: "the process has no stdin".into(),
        })?;
        let (stdout, stderr) = process.take_outputs();
        Ok(ExecStream {
            id,
            stdin,
            stdout: Box::pin(StreamReader::new(command::stream_from(stdout))),
            stderr: Box::pin(StreamReader::new(command::stream_from(stderr))),
        })
    }

    async fn exec_status(&self, exec_id: &str) -> Result<ExecStatus, SandboxError> {
        let exit = self
            .processes
            .lock()
            .ok()
            .and_then(|processes| processes.get(exec_id).map(|rx| rx.borrow().clone()));
        match exit {
            Some(None) => Ok(ExecStatus {
                running: true,
                exit_code: None,
            }),
            Some(Some(exit)) => Ok(ExecStatus {
                running: false,
                exit_code: exit.code,
            }),
            None => Err(SandboxError::InSandbox {
                action: format!("look up process {exec_id}"),
                detail: "no such process was started in this sandbox".into(),
            }),
        }
    }

    async fn remove(&self) -> Result<(), SandboxError> {
        self.transport.remove().await
    }

    fn egress(&self) -> Option<Arc<Egress>> {
        self.supervisor.get().map(|_| self.egress.clone())
    }
}

/// A failed copy of `path` out of the sandbox, in the sandbox's own terms
/// when it has them.
fn copy_out_error(path: &str, err: TransferError) -> SandboxError {
    match err {
        TransferError::Sandbox(err) => err,
        other => SandboxError::CopyOut {
            path: path.to_owned(),
            detail: other.to_string(),
        },
    }
}
