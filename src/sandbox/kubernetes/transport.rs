//! One sandbox pod as a [`Transport`]: a process is an exec over the API
//! server's WebSocket, a copy in or out is `tar` over exec (the API has no
//! archive endpoint).

use super::exec;
use super::pod_spec::CONTAINER;
use crate::sandbox::transport::{self, drain, Process, TarOut, TransferError, Transport};
use crate::sandbox::{command, split_parent, SandboxError};
use async_trait::async_trait;
use futures_util::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::io::StreamReader;

/// What a tar or a file write may take at most.
const TRANSFER_DEADLINE: Duration = Duration::from_secs(3600);
/// How a refusal names the cluster.
pub(super) const ENGINE: &str = "the Kubernetes API";

pub struct PodTransport {
    pub(super) client: kube::Client,
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) project_dir: String,
    /// Whether the server takes the end-of-stdin frame (`v5.channel.k8s.io`);
    /// learnt from the first process.
    pub(super) v5: AtomicBool,
}

/// A failed API call as a sandbox error: the pod gone is its own error.
pub(super) fn api_error(pod: &str, action: &str, err: kube::Error) -> SandboxError {
    match err {
        kube::Error::Api(status) if status.is_not_found() => SandboxError::Gone {
            sandbox: pod.to_owned(),
            state: "removed (the pod no longer exists)".into(),
        },
        kube::Error::Api(status) => {
            let advice = if status.is_forbidden() {
                "; the daemon's service account needs the verbs of deploy/kubernetes/overlays/cluster/sandboxes/role.yaml in the sandbox namespace"
            } else {
                ""
            };
            SandboxError::Refused {
                engine: ENGINE,
                action: action.to_owned(),
                detail: format!("{} {}: {}{advice}", status.code, status.reason, status.message),
                retryable: matches!(status.code, 429 | 500 | 502 | 503 | 504),
            }
        }
        other => SandboxError::Refused {
            engine: ENGINE,
            action: action.to_owned(),
            detail: other.to_string(),
            retryable: true,
        },
    }
}

impl PodTransport {
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// A v4 server cannot say where stdin ends: the archive is read whole
    /// first, and `head -c` takes exactly its length.
    async fn put_tar_counted(
        &self,
        parent: &str,
        mut tar: Pin<Box<dyn AsyncRead + Send>>,
    ) -> Result<(), SandboxError> {
        let mut bytes = Vec::new();
        tar.read_to_end(&mut bytes).await.map_err(|e| SandboxError::Io {
            action: format!("read the archive for {parent}"),
            source: e,
        })?;
        let argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "head -c \"$1\" | tar -x -f - -C \"$2\"".to_owned(),
            "forgehand-copy-in".to_owned(),
            bytes.len().to_string(),
            parent.to_owned(),
        ];
        let finished = transport::run_to_end(self, argv, Some(&bytes), 64 * 1024, TRANSFER_DEADLINE).await?;
        match finished.code() {
            Some(0) => Ok(()),
            _ => Err(self.failed(format!("copy files into {parent}"), finished.failure())),
        }
    }

    fn failed(&self, action: String, detail: String) -> SandboxError {
        SandboxError::InSandbox { action, detail }
    }
}

#[async_trait]
impl Transport for PodTransport {
    fn id(&self) -> &str {
        &self.name
    }

    fn plain_exec_name(&self) -> &'static str {
        "a pod exec"
    }

    async fn spawn(&self, argv: Vec<String>, stdin: bool) -> Result<Process, SandboxError> {
        // In the project folder once it exists.
        let mut wrapped = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "cd \"$1\" 2>/dev/null; shift; exec \"$@\"".to_owned(),
            "forgehand-cd".to_owned(),
            self.project_dir.clone(),
        ];
        wrapped.extend(argv);
        let process = exec::start(
            &self.client,
            &self.namespace,
            &self.name,
            CONTAINER,
            wrapped,
            stdin,
        )
        .await
        .map_err(|e| api_error(&self.name, "start a process in the sandbox pod", e))?;
        self.v5.store(process.signals_end_of_input(), Ordering::Relaxed);
        Ok(process.into())
    }

    async fn put_tar(
        &self,
        parent: &str,
        mut tar: Pin<Box<dyn AsyncRead + Send>>,
    ) -> Result<(), SandboxError> {
        if !self.v5.load(Ordering::Relaxed) {
            return self.put_tar_counted(parent, tar).await;
        }
        let action = format!("copy files into {parent} of the sandbox pod");
        let argv = ["tar", "-x", "-f", "-", "-C", parent].map(str::to_owned).to_vec();
        let mut process = self.spawn(argv, true).await?;
        let Some(mut stdin) = process.stdin.take() else {
            return Err(self.failed(action, "the exec has no stdin".into()));
        };
        // The end of input must be sent explicitly (dropping the writer
        // does not end the stream).
        let feed = async move {
            tokio::io::copy(&mut tar, &mut stdin).await?;
            tokio::io::AsyncWriteExt::shutdown(&mut stdin).await
        };
        let (_, stderr) = process.take_outputs();
        let waited = tokio::time::timeout(TRANSFER_DEADLINE, async {
            tokio::join!(feed, drain(stderr, 64 * 1024), process.wait())
        })
        .await;
        let Ok((fed, stderr, exit)) = waited else {
            return Err(self.failed(action, "it did not end in time".into()));
        };
        let finished = transport::Finished {
            stdout: crate::sandbox::CappedOutput::new(0),
            stderr,
            exit: Some(exit),
        };
        match (fed, finished.code()) {
            (_, Some(0)) => Ok(()),
            (Err(e), _) => Err(self.failed(action, format!("{e}; {}", finished.failure()))),
            (Ok(_), _) => Err(self.failed(action, finished.failure())),
        }
    }

    async fn get_tar(&self, path: &str) -> Result<TarOut, TransferError> {
        let (parent, name) = split_parent(path).ok_or(TransferError::Failed(
            "not an absolute path in the sandbox".into(),
        ))?;
        let argv = ["tar", "-c", "-f", "-", "-C", parent, name]
            .map(str::to_owned)
            .to_vec();
        let mut process = self.spawn(argv, false).await?;
        let (stdout, stderr) = process.take_outputs();
        let done = async move {
            let waited = tokio::time::timeout(TRANSFER_DEADLINE, async {
                tokio::join!(drain(stderr, 64 * 1024), process.wait())
            })
            .await;
            let Ok((stderr, exit)) = waited else {
                return Err(TransferError::Failed("the copy did not end in time".into()));
            };
            if exit.code == Some(0) {
                return Ok(());
            }
            let (text, _) = stderr.finish();
            if text.contains("No such file") || text.contains("Cannot stat") {
                return Err(TransferError::NoSuchPath);
            }
            Err(TransferError::Failed(format!(
                "tar in the sandbox failed ({}): {}",
                exit.code
                    .map(|c| format!("exit code {c}"))
                    .or(exit.message)
                    .unwrap_or_default(),
                text.trim()
            )))
        };
        Ok(TarOut {
            reader: Box::pin(StreamReader::new(Box::pin(command::stream_from(stdout)))),
            done: done.boxed(),
        })
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
