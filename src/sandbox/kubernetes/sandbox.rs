//! One task's sandbox pod: commands, streamed processes, and tree copies
//! as tar over exec (the API has no archive endpoint).

use super::exec::{self, PodExit, PodProcess};
use super::pod_spec::CONTAINER;
use crate::config::SandboxConfig;
use crate::sandbox::egress::Egress;
use crate::sandbox::mux::Supervisor;
use crate::sandbox::{
    archive, command, copy_in_target, numeric_owner, split_parent, within_workspace, CappedOutput,
    ExecOutput, ExecStatus, ExecStream, Sandbox, SandboxError,
};
use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tokio_util::io::{StreamReader, SyncIoBridge};

/// What a streamed process, a tar or a file write may take at most when it
/// has no timeout of its own.
const TRANSFER_DEADLINE: Duration = Duration::from_secs(3600);

pub struct PodSandbox {
    pub(super) client: kube::Client,
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) config: Arc<SandboxConfig>,
    pub(super) editor_path: Option<String>,
    pub(super) supervisor: OnceLock<Supervisor>,
    pub(super) egress: Arc<Egress>,
    /// Whether the server takes the end-of-stdin frame (`v5.channel.k8s.io`);
    /// learnt from the first process.
    pub(super) v5: AtomicBool,
    processes: Mutex<HashMap<String, watch::Receiver<Option<PodExit>>>>,
    next_process: AtomicU64,
}

/// A failed API call as a sandbox error: the pod gone is its own error.
pub(super) fn api_error(pod: &str, action: &str, err: kube::Error) -> SandboxError {
    match err {
        kube::Error::Api(status) if status.is_not_found() => SandboxError::ContainerGone {
            container: pod.to_owned(),
            state: "removed (the pod no longer exists)".into(),
        },
        kube::Error::Api(status) => {
            let advice = if status.is_forbidden() {
                "; the daemon's service account needs the verbs of deploy/kubernetes/overlays/cluster/sandboxes/role.yaml in the sandbox namespace"
            } else {
                ""
            };
            SandboxError::Kubernetes {
                action: action.to_owned(),
                detail: format!("{} {}: {}{advice}", status.code, status.reason, status.message),
                retryable: matches!(status.code, 429 | 500 | 502 | 503 | 504),
            }
        }
        other => SandboxError::Kubernetes {
            action: action.to_owned(),
            detail: other.to_string(),
            retryable: true,
        },
    }
}

type Output = tokio::sync::mpsc::Receiver<std::io::Result<bytes::Bytes>>;

/// Takes a process's stdout and stderr receivers, so they can be read
/// while it is waited for.
fn take_outputs(process: &mut PodProcess) -> (Output, Output) {
    let (_, empty_out) = tokio::sync::mpsc::channel(1);
    let (_, empty_err) = tokio::sync::mpsc::channel(1);
    (
        std::mem::replace(&mut process.stdout, empty_out),
        std::mem::replace(&mut process.stderr, empty_err),
    )
}

/// What came back from a process run to its end.
struct Finished {
    stdout: CappedOutput,
    stderr: CappedOutput,
    exit: Option<PodExit>,
}

impl PodSandbox {
    pub(super) fn new(
        client: kube::Client,
        namespace: String,
        name: String,
        config: Arc<SandboxConfig>,
        egress: Arc<Egress>,
    ) -> PodSandbox {
        PodSandbox {
            client,
            namespace,
            name,
            config,
            editor_path: None,
            supervisor: OnceLock::new(),
            egress,
            v5: AtomicBool::new(true),
            processes: Mutex::new(HashMap::new()),
            next_process: AtomicU64::new(1),
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Starts `argv` in the project folder (once it exists).
    async fn start(&self, argv: &[String], with_stdin: bool) -> Result<PodProcess, SandboxError> {
        let mut wrapped = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "cd \"$1\" 2>/dev/null; shift; exec \"$@\"".to_owned(),
            "forgehand-cd".to_owned(),
            self.config.project_dir.clone(),
        ];
        wrapped.extend(argv.iter().cloned());
        let process = exec::start(
            &self.client,
            &self.namespace,
            &self.name,
            CONTAINER,
            wrapped,
            with_stdin,
        )
        .await
        .map_err(|e| api_error(&self.name, "start a process in the sandbox pod", e))?;
        self.v5.store(process.signals_end_of_input(), Ordering::Relaxed);
        Ok(process)
    }

    /// Runs `argv` to its end, feeding it `input` (then the end of input),
    /// collecting at most `limit` bytes of each output.
    async fn run(
        &self,
        argv: &[String],
        input: Option<&[u8]>,
        limit: usize,
        deadline: Duration,
    ) -> Result<Finished, SandboxError> {
        let mut process = self.start(argv, input.is_some()).await?;
        let stdin = process.stdin.take();
        let (mut out_rx, mut err_rx) = take_outputs(&mut process);
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
                return Err(SandboxError::Kubernetes {
                    action: "send input to a process in the sandbox pod".into(),
                    detail: e.to_string(),
                    retryable: false,
                })
            }
            Err(_) => None,
        };
        Ok(Finished { stdout, stderr, exit })
    }

    /// A command with its own exec, bounded by the in-sandbox `timeout` and
    /// the host's deadline.
    async fn exec_plain(&self, command: &str, timeout: Duration) -> Result<ExecOutput, SandboxError> {
        let started = Instant::now();
        let argv = command::wrapped_argv(command, timeout);
        let finished = self
            .run(
                &argv,
                None,
                self.config.output_limit,
                command::host_deadline(timeout),
            )
            .await?;
        let host_timed_out = finished.exit.is_none();
        let exit_code = finished.exit.as_ref().and_then(|e| e.code);
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

    /// Whether the image carries this exact editor build at `path`.
    pub(super) async fn has_file_with_sha256(&self, path: &str, sha256: &str) -> Result<bool, SandboxError> {
        let argv = vec!["sha256sum".to_owned(), path.to_owned()];
        let finished = self.run(&argv, None, 4096, Duration::from_secs(60)).await?;
        let (stdout, _) = finished.stdout.finish();
        Ok(finished.exit.and_then(|e| e.code) == Some(0) && stdout.split_whitespace().next() == Some(sha256))
    }

    fn failed(&self, action: String, finished: Finished) -> SandboxError {
        let (stderr, _) = finished.stderr.finish();
        let how = match finished.exit {
            None => "it did not end in time".to_owned(),
            Some(PodExit { code: Some(code), .. }) => format!("exit code {code}"),
            Some(PodExit { message, .. }) => message.unwrap_or_else(|| "no exit status".into()),
        };
        SandboxError::Kubernetes {
            action,
            detail: format!("{how}: {}", stderr.trim()),
            retryable: false,
        }
    }
}

#[async_trait]
impl Sandbox for PodSandbox {
    fn id(&self) -> &str {
        &self.name
    }

    fn project_dir(&self) -> &str {
        &self.config.project_dir
    }

    fn editor_path(&self) -> Option<&str> {
        self.editor_path.as_deref()
    }

    async fn copy_in(&self, host_dir: &Path, sandbox_dir: &str) -> Result<(), SandboxError> {
        let (parent, name) = copy_in_target(host_dir, sandbox_dir)?;
        let (uid, gid) = numeric_owner(&self.config.user);
        let pack_err = |source: std::io::Error| SandboxError::CopyInSource {
            path: host_dir.to_owned(),
            detail: source.to_string(),
        };
        let action = format!("copy {} into {parent} of the sandbox pod", host_dir.display());
        if !self.v5.load(Ordering::Relaxed) {
            // A v4 server cannot say where stdin ends: the archive is packed
            // first, and `head -c` reads exactly its length.
            let tar = archive::pack_dir(host_dir, name, uid, gid, Vec::new()).map_err(pack_err)?;
            let argv = vec![
                "sh".to_owned(),
                "-c".to_owned(),
                "head -c \"$1\" | tar -x -f - -C \"$2\"".to_owned(),
                "forgehand-copy-in".to_owned(),
                tar.len().to_string(),
                parent.to_owned(),
            ];
            let finished = self.run(&argv, Some(&tar), 64 * 1024, TRANSFER_DEADLINE).await?;
            return match finished.exit.as_ref().and_then(|e| e.code) {
                Some(0) => Ok(()),
                _ => Err(self.failed(action, finished)),
            };
        }
        let argv = vec![
            "tar".to_owned(),
            "-x".to_owned(),
            "-f".to_owned(),
            "-".to_owned(),
            "-C".to_owned(),
            parent.to_owned(),
        ];
        let mut process = self.start(&argv, true).await?;
        let Some(stdin) = process.stdin.take() else {
            return Err(SandboxError::Kubernetes {
                action,
                detail: "the exec has no stdin".into(),
                retryable: false,
            });
        };
        // A blocking thread packs into the exec's stdin while it streams out:
        // memory stays flat for any size. The end of input must be sent
        // explicitly (dropping the writer does not end the stream).
        let src = host_dir.to_owned();
        let top = name.to_owned();
        let packer = tokio::task::spawn_blocking(move || {
            let bridge = SyncIoBridge::new(stdin);
            let mut bridge = archive::pack_dir(&src, &top, uid, gid, bridge)?;
            std::io::Write::flush(&mut bridge)?;
            bridge.shutdown()?;
            Ok::<(), std::io::Error>(())
        });
        let (_, mut stderr_rx) = take_outputs(&mut process);
        let mut stderr = CappedOutput::new(64 * 1024);
        let drain = async {
            while let Some(chunk) = stderr_rx.recv().await {
                if let Ok(bytes) = chunk {
                    stderr.push(&bytes);
                }
            }
        };
        let waited = tokio::time::timeout(TRANSFER_DEADLINE, async {
            let (packed, (), exit) = tokio::join!(packer, drain, process.wait());
            (packed, exit)
        })
        .await;
        let Ok((packed, exit)) = waited else {
            return Err(self.failed(
                action,
                Finished {
                    stdout: CappedOutput::new(0),
                    stderr,
                    exit: None,
                },
            ));
        };
        match packed {
            Ok(Ok(())) => {}
            Ok(Err(source)) => return Err(pack_err(source)),
            Err(join) => return Err(pack_err(std::io::Error::other(join))),
        }
        match exit.code {
            Some(0) => Ok(()),
            _ => Err(self.failed(
                action,
                Finished {
                    stdout: CappedOutput::new(0),
                    stderr,
                    exit: Some(exit),
                },
            )),
        }
    }

    async fn copy_out(&self, sandbox_dir: &str, host_dir: &Path) -> Result<(), SandboxError> {
        let copy_err = |detail: String| SandboxError::CopyOut {
            path: sandbox_dir.to_owned(),
            dest: host_dir.to_owned(),
            detail,
        };
        if let Ok(mut entries) = std::fs::read_dir(host_dir) {
            if entries.next().is_some() {
                return Err(copy_err(
                    "the destination is not empty; pass a missing or empty folder".into(),
                ));
            }
        }
        let (parent, name) = split_parent(sandbox_dir)
            .ok_or_else(|| copy_err("not an absolute path in the sandbox".into()))?;
        let argv = vec![
            "tar".to_owned(),
            "-c".to_owned(),
            "-f".to_owned(),
            "-".to_owned(),
            "-C".to_owned(),
            parent.to_owned(),
            name.to_owned(),
        ];
        let mut process = self.start(&argv, false).await?;
        let (stdout, mut stderr_rx) = take_outputs(&mut process);
        let reader = StreamReader::new(Box::pin(command::stream_from(stdout)));
        let dest: PathBuf = host_dir.to_owned();
        let unpack =
            tokio::task::spawn_blocking(move || archive::unpack_stripped(SyncIoBridge::new(reader), &dest));
        let mut stderr = CappedOutput::new(64 * 1024);
        let drain = async {
            while let Some(chunk) = stderr_rx.recv().await {
                if let Ok(bytes) = chunk {
                    stderr.push(&bytes);
                }
            }
        };
        let Ok((unpacked, (), exit)) = tokio::time::timeout(TRANSFER_DEADLINE, async {
            tokio::join!(unpack, drain, process.wait())
        })
        .await
        else {
            return Err(copy_err("the copy did not end in time".into()));
        };
        if exit.code != Some(0) {
            let (text, _) = stderr.finish();
            if text.contains("No such file") || text.contains("Cannot stat") {
                return Err(copy_err("no such path in the sandbox".into()));
            }
            return Err(copy_err(format!(
                "tar in the sandbox failed ({}): {}",
                exit.code
                    .map(|c| format!("exit code {c}"))
                    .or(exit.message)
                    .unwrap_or_default(),
                text.trim()
            )));
        }
        match unpacked {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(copy_err(e.to_string())),
            Err(join) => Err(copy_err(join.to_string())),
        }
    }

    async fn put_file(&self, path: &str, contents: &[u8], mode: u32) -> Result<(), SandboxError> {
        within_workspace(&self.config.workspace_dir, path)?;
        // `head -c` reads exactly the file, so no end-of-input is needed
        // (a v4 server cannot send one).
        let argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "mkdir -p \"$(dirname \"$1\")\" && head -c \"$2\" > \"$1\" && chmod \"$3\" \"$1\"".to_owned(),
            "forgehand-put".to_owned(),
            path.to_owned(),
            contents.len().to_string(),
            format!("{mode:o}"),
        ];
        let finished = self
            .run(&argv, Some(contents), 64 * 1024, TRANSFER_DEADLINE)
            .await?;
        match finished.exit.as_ref().and_then(|e| e.code) {
            Some(0) => Ok(()),
            _ => Err(self.failed(format!("write {path} in the sandbox pod"), finished)),
        }
    }

    async fn exec(&self, command: &str, timeout: Option<Duration>) -> Result<ExecOutput, SandboxError> {
        let timeout = timeout.unwrap_or(self.config.exec_timeout);
        if let Some(supervisor) = self.supervisor.get().filter(|s| s.is_alive()) {
            match command::run_supervised(supervisor, command, timeout, self.config.output_limit).await {
                Ok(output) => return Ok(output),
                Err(e) => {
                    tracing::warn!(pod = %self.name, "the supervisor did not take a command ({e}); using a plain exec")
                }
            }
        }
        self.exec_plain(command, timeout).await
    }

    async fn exec_stream(&self, argv: &[String]) -> Result<ExecStream, SandboxError> {
        let mut process = self.start(argv, true).await?;
        let id = format!(
            "{}/{}",
            self.name,
            self.next_process.fetch_add(1, Ordering::Relaxed)
        );
        if let Ok(mut processes) = self.processes.lock() {
            processes.insert(id.clone(), process.exit.clone());
        }
        let stdin = process.stdin.take().ok_or_else(|| SandboxError::Kubernetes {
            action: "start a streamed process".into(),
            detail: "the exec has no stdin".into(),
            retryable: false,
        })?;
        let (stdout, stderr) = take_outputs(&mut process);
        Ok(ExecStream {
            id,
            stdin: Box::pin(stdin),
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
            None => Err(SandboxError::Kubernetes {
                action: format!("look up process {exec_id}"),
                detail: "no such process was started in this sandbox".into(),
                retryable: false,
            }),
        }
    }

    fn egress(&self) -> Option<Arc<Egress>> {
        self.supervisor.get().map(|_| self.egress.clone())
    }

    async fn remove(&self) -> Result<(), SandboxError> {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        match self.pods().delete(&self.name, &params).await {
            Ok(_) => {
                tracing::info!(pod = %self.name, "sandbox pod removed");
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(e) => Err(api_error(&self.name, &format!("delete pod {}", self.name), e)),
        }
    }
}
