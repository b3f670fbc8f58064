//! The Docker implementation of the sandbox traits, on bollard.
//!
//! A sandbox is one container: read-only root, `/workspace` an anonymous
//! volume (so the archive API can write to it), `/tmp` and the agent's home
//! as tmpfs, no network, no capabilities, no new privileges, a non-root user
//! and pids / memory / CPU limits, all from `sandbox.*` in the config.

use super::archive;
use super::egress::Egress;
use super::egress_socket::{self, EgressSocket};
use super::helper::{self, EditorBinary};
use super::mux::Supervisor;
use super::{
    check_copy_source, copy_in_target, labels, numeric_owner, within_workspace, ExecOutput, ExecStatus,
    ExecStream, Sandbox, SandboxBackend, SandboxError, SandboxSpec,
};
use crate::config::EgressTransport;
use crate::config::{DockerConfig, SandboxConfig};
use async_trait::async_trait;
use bollard::exec::CreateExecOptions;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    ContainerArchiveInfoOptionsBuilder, CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    RemoveContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use bollard::Docker;
use bytes::Bytes;
use futures_util::TryStreamExt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::io::{ReaderStream, StreamReader, SyncIoBridge};

/// Connects to the engine named in the config (or `DOCKER_HOST`, or the local
/// socket) and agrees on an API version it speaks.
pub async fn connect(config: &DockerConfig) -> Result<Docker, SandboxError> {
    let endpoint = config
        .host
        .clone()
        .or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_owned());
    let unreachable = |detail: String| SandboxError::DockerUnreachable {
        endpoint: endpoint.clone(),
        detail,
    };
    let docker = Docker::connect_with_host(&endpoint).map_err(|e| unreachable(e.to_string()))?;
    let docker = docker.with_timeout(config.api_timeout);
    docker
        .negotiate_version()
        .await
        .map_err(|e| unreachable(e.to_string()))
}

/// Turns a bollard error into a sandbox error that says what was attempted.
pub(super) fn docker_error(action: impl Into<String>, err: bollard::errors::Error) -> SandboxError {
    use bollard::errors::Error as E;
    let action = action.into();
    match err {
        E::DockerResponseServerError { status_code, message } => SandboxError::Docker {
            action,
            retryable: status_code >= 500 && !message.contains("is not running"),
            detail: format!("{message} (HTTP {status_code})"),
        },
        E::RequestTimeoutError => SandboxError::Docker {
            action,
            detail: "the Docker API did not answer in time (docker.api_timeout)".into(),
            retryable: true,
        },
        E::HyperResponseError { .. }
        | E::HttpClientError { .. }
        | E::IOError { .. }
        | E::SocketNotFoundError(_) => SandboxError::Docker {
            action,
            detail: format!("{err}; is the Docker engine still running?"),
            retryable: true,
        },
        other => SandboxError::Docker {
            action,
            detail: other.to_string(),
            retryable: false,
        },
    }
}

fn status_of(err: &bollard::errors::Error) -> Option<u16> {
    match err {
        bollard::errors::Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// Container names allow `[a-zA-Z0-9][a-zA-Z0-9_.-]`.
fn container_name(instance: &str, task_id: &str) -> String {
    let clean: String = task_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("forgehand-{instance}-{clean}")
}

/// Makes Docker sandboxes for one daemon instance.
#[derive(Clone)]
pub struct DockerBackend {
    pub(super) docker: Docker,
    config: Arc<SandboxConfig>,
    pub(super) instance_id: String,
    editor: Option<EditorBinary>,
    /// Set once the engine could not mount an egress socket (it is not on
    /// this host): later sandboxes tunnel over the exec stream at once.
    socket_unmountable: Arc<std::sync::atomic::AtomicBool>,
    /// The id of the state folder of the daemon this backend serves.
    pub(super) daemon_id: Option<String>,
    /// Where the sandboxes' egress decisions are counted.
    metrics: Arc<crate::metrics::Metrics>,
}

impl DockerBackend {
    pub fn new(docker: Docker, config: SandboxConfig, instance_id: impl Into<String>) -> DockerBackend {
        DockerBackend {
            docker,
            config: Arc::new(config),
            instance_id: instance_id.into(),
            editor: None,
            socket_unmountable: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            daemon_id: None,
            metrics: Arc::default(),
        }
    }

    /// Counts the sandboxes' egress decisions in `metrics` (the daemon's).
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> DockerBackend {
        self.metrics = metrics;
        self
    }

    /// Gives every sandbox forgehand's editor: it becomes the container's
    /// idle main process (so images need no `sleep`, not even a shell) and
    /// the text-editor MCP server. Without it, containers idle on `sleep`.
    pub fn with_editor(mut self, editor: EditorBinary) -> DockerBackend {
        self.editor = Some(editor);
        self
    }

    fn injected_editor_path(&self) -> String {
        format!(
            "{}/.forgehand/bin/{}",
            self.config.workspace_dir.trim_end_matches('/'),
            helper::FILE_NAME
        )
    }

    /// Where the editor will be in a container of `image`, and whether it
    /// must be copied in (the image does not carry this exact build).
    async fn editor_placement(&self, image: &str) -> Result<Option<(String, bool)>, SandboxError> {
        let info = self
            .docker
            .inspect_image(image)
            .await
            .map_err(|err| match status_of(&err) {
                Some(404) => SandboxError::ImageMissing {
                    image: image.to_owned(),
                },
                _ => docker_error(format!("inspect image {image}"), err),
            })?;
        let Some(editor) = &self.editor else {
            return Ok(None);
        };
        let carried = info
            .config
            .and_then(|c| c.labels)
            .and_then(|labels| labels.get(helper::IMAGE_LABEL).cloned());
        Ok(Some(if carried.as_deref() == Some(editor.sha256()) {
            (helper::IMAGE_PATH.to_owned(), false)
        } else {
            (self.injected_editor_path(), true)
        }))
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    fn container_body(
        &self,
        spec: &SandboxSpec,
        editor_path: Option<&str>,
        egress_socket: Option<&EgressSocket>,
    ) -> ContainerCreateBody {
        let c = &self.config;
        let (uid, gid) = numeric_owner(&c.user);
        let mut labels = HashMap::from([
            (labels::MANAGED.to_owned(), "true".to_owned()),
            (labels::INSTANCE.to_owned(), self.instance_id.clone()),
            (labels::TASK.to_owned(), spec.task_id.clone()),
            (labels::FORGE.to_owned(), spec.forge.clone()),
            (labels::REPOSITORY.to_owned(), spec.repository.clone()),
        ]);
        if let Some(daemon) = &self.daemon_id {
            labels.insert(labels::DAEMON.to_owned(), daemon.clone());
        }
        let tmpfs = HashMap::from([
            (
                "/tmp".to_owned(),
                format!("rw,nosuid,nodev,size={},mode=1777", c.tmp_size),
            ),
            (
                c.home_dir.clone(),
                format!(
                    "rw,nosuid,nodev,size={},mode=0755,uid={uid},gid={gid}",
                    c.home_size
                ),
            ),
        ]);
        let host_config = HostConfig {
            network_mode: Some(c.network_mode.clone()),
            cap_drop: c.drop_all_capabilities.then(|| vec!["ALL".to_owned()]),
            security_opt: c
                .no_new_privileges
                .then(|| vec!["no-new-privileges:true".to_owned()]),
            pids_limit: Some(c.pids_limit),
            memory: Some(c.memory_bytes as i64),
            // Equal to memory: no swap on top of the limit.
            memory_swap: Some(c.memory_bytes as i64),
            nano_cpus: Some((c.cpus * 1e9) as i64),
            readonly_rootfs: Some(c.read_only_root),
            tmpfs: Some(tmpfs),
            mounts: Some(
                std::iter::once(Mount {
                    target: Some(c.workspace_dir.clone()),
                    typ: Some(MountType::VOLUME),
                    ..Default::default()
                })
                .chain(egress_socket.map(|socket| Mount {
                    target: Some(egress_socket::SANDBOX_DIR.to_owned()),
                    source: Some(socket.host_dir().to_string_lossy().into_owned()),
                    typ: Some(MountType::BIND),
                    read_only: Some(true),
                    ..Default::default()
                }))
                .collect(),
            ),
            // A tiny init reaps the zombies that agent commands leave behind.
            init: Some(true),
            ..Default::default()
        };
        ContainerCreateBody {
            image: Some(spec.image.clone()),
            user: Some(c.user.clone()),
            working_dir: Some(c.workspace_dir.clone()),
            cmd: Some(match editor_path {
                Some(path) => vec![path.to_owned(), "idle".to_owned()],
                None => vec!["sleep".to_owned(), "infinity".to_owned()],
            }),
            entrypoint: Some(vec![]),
            env: Some(
                std::iter::once(format!("HOME={}", c.home_dir))
                    .chain(
                        editor_path
                            .is_some()
                            .then(|| super::egress::proxy_env(c.egress_proxy_port))
                            .into_iter()
                            .flatten(),
                    )
                    .chain(spec.env.iter().map(|(k, v)| format!("{k}={v}")))
                    .collect(),
            ),
            labels: Some(labels),
            network_disabled: Some(c.network_mode == "none"),
            host_config: Some(host_config),
            ..Default::default()
        }
    }

    async fn create_and_start(&self, spec: &SandboxSpec) -> Result<DockerSandbox, SandboxError> {
        let placement = self.editor_placement(&spec.image).await?;
        let editor_path = placement.as_ref().map(|(path, _)| path.clone());
        let name = container_name(&self.instance_id, &spec.task_id);
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let egress = Egress::new(
            crate::sandbox::egress::Reach {
                private: self.config.egress_allow_private,
                loopback: self.config.egress_allow_loopback,
            },
            self.metrics.clone(),
        );
        let unmountable = self.socket_unmountable.load(std::sync::atomic::Ordering::Relaxed);
        let mut socket =
            egress_socket::for_new_sandbox(&self.config, unmountable, editor_path.is_some(), &egress)?;
        let create = |socket: Option<&EgressSocket>| {
            self.docker.create_container(
                Some(options.clone()),
                self.container_body(spec, editor_path.as_deref(), socket),
            )
        };
        let mut created = create(socket.as_ref()).await;
        if let Err(err) = &created {
            if status_of(err) == Some(409) {
                // A sandbox of this task survived a crash: replace it, so a
                // task never has two.
                tracing::warn!(container = %name, task = %spec.task_id, "replacing a leftover sandbox of this task");
                remove_container(&self.docker, &name).await?;
                created = create(socket.as_ref()).await;
            }
        }
        if let Err(err) = &created {
            if socket.is_some()
                && self.config.egress_transport == EgressTransport::Auto
                && egress_socket::is_bind_source_missing(err)
            {
                // The engine is not on this host: it cannot see our folder.
                tracing::warn!(error = %err, "the Docker engine cannot mount forgehand's egress socket (is it on another host?); sandboxes tunnel egress over the exec stream, which is slower (sandbox.egress.transport: exec says so and skips this try)");
                self.socket_unmountable
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                socket = None;
                created = create(None).await;
            }
        }
        let created = created.map_err(|err| match status_of(&err) {
            Some(404) => SandboxError::ImageMissing {
                image: spec.image.clone(),
            },
            _ => docker_error(format!("create a container from {}", spec.image), err),
        })?;
        let sandbox = DockerSandbox {
            docker: self.docker.clone(),
            id: created.id,
            config: self.config.clone(),
            editor_path,
            supervisor: std::sync::OnceLock::new(),
            egress,
            egress_socket: socket,
        };
        // The editor is the main process, so it must be in place before start.
        if let (Some((path, true)), Some(editor)) = (&placement, &self.editor) {
            if let Err(err) = sandbox.put_file(path, editor.bytes(), 0o755).await {
                let _ = sandbox.remove().await;
                return Err(err);
            }
        }
        if let Err(err) = self.docker.start_container(&sandbox.id, None).await {
            let _ = sandbox.remove().await;
            return Err(docker_error(format!("start container {name}"), err));
        }
        tracing::info!(container = %sandbox.short_id(), task = %spec.task_id, image = %spec.image, "sandbox started");
        sandbox.start_supervisor().await;
        Ok(sandbox)
    }
}

pub(super) async fn remove_container(docker: &Docker, id: &str) -> Result<(), SandboxError> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => Ok(()),
        Err(err) if status_of(&err) == Some(404) => Ok(()),
        // 409: removal already in progress (a second remove, or the reaper).
        Err(err) if status_of(&err) == Some(409) => Ok(()),
        Err(err) => Err(docker_error(format!("remove container {id}"), err)),
    }
}

#[async_trait]
impl SandboxBackend for DockerBackend {
    fn operator_advice(&self) -> &'static str {
        "An operator should check the Docker engine and the sandbox images (`forgehand doctor`); then add the trigger label again."
    }

    async fn prepare(
        &self,
        spec: &SandboxSpec,
        workspace: Option<&Path>,
    ) -> Result<Box<dyn Sandbox>, SandboxError> {
        if let Some(dir) = workspace {
            // Checked before anything is created: nothing to clean up.
            check_copy_source(dir)?;
        }
        let sandbox = self.create_and_start(spec).await?;
        if let Some(dir) = workspace {
            if let Err(err) = sandbox.copy_in(dir, &self.config.project_dir).await {
                let _ = sandbox.remove().await;
                return Err(err);
            }
        }
        Ok(Box::new(sandbox))
    }

    async fn ping(&self) -> Result<(), SandboxError> {
        self.docker
            .ping()
            .await
            .map(drop)
            .map_err(|e| SandboxError::DockerUnreachable {
                endpoint: "the configured engine".into(),
                detail: e.to_string(),
            })
    }

    async fn image_id(&self, image: &str) -> Result<Option<String>, SandboxError> {
        match self.docker.inspect_image(image).await {
            Ok(inspect) => Ok(inspect.id),
            Err(err) if status_of(&err) == Some(404) => Err(SandboxError::ImageMissing {
                image: image.to_owned(),
            }),
            Err(err) => Err(docker_error(format!("inspect image {image}"), err)),
        }
    }

    async fn reap(&self, running: &[String]) -> Result<Vec<String>, SandboxError> {
        self.reap_orphans(running).await
    }
}

/// One running sandbox container.
pub struct DockerSandbox {
    pub(super) docker: Docker,
    pub(super) id: String,
    pub(super) config: Arc<SandboxConfig>,
    editor_path: Option<String>,
    /// The in-sandbox supervisor's session, once started.
    pub(super) supervisor: std::sync::OnceLock<Supervisor>,
    egress: Arc<Egress>,
    /// The tunnel's short way in, when the engine could mount it.
    egress_socket: Option<EgressSocket>,
}

impl DockerSandbox {
    /// Starts `forgehand-editor supervise` (when the sandbox has the editor)
    /// for commands and the egress tunnel. Without it, commands use one
    /// `docker exec` each and the sandbox has no way out at all.
    async fn start_supervisor(&self) {
        let Some(editor) = &self.editor_path else { return };
        let mut argv = Supervisor::argv(editor, &self.config);
        if self.egress_socket.is_some() {
            argv.extend(["--egress-socket".into(), EgressSocket::sandbox_path()]);
        }
        match self.exec_stream_plain(&argv).await {
            Ok(stream) => {
                let _ = self
                    .supervisor
                    .set(Supervisor::start(stream, self.egress.clone()));
            }
            Err(e) => {
                tracing::warn!(container = %self.short_id(), "cannot start the sandbox supervisor ({e}); commands use docker exec and the sandbox has no egress")
            }
        }
    }

    pub(super) fn short_id(&self) -> &str {
        &self.id[..12.min(self.id.len())]
    }

    /// After a failed call, tells whether the container itself is gone, which
    /// is the error worth reporting.
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
                SandboxError::ContainerGone {
                    container: self.short_id().to_owned(),
                    state: how,
                }
            }
            Err(inspect) if status_of(&inspect) == Some(404) => SandboxError::ContainerGone {
                container: self.short_id().to_owned(),
                state: "removed".into(),
            },
            Err(_) => docker_error(action, err),
        }
    }

    pub(super) async fn create_exec(&self, argv: Vec<String>, stdin: bool) -> Result<String, SandboxError> {
        let options = CreateExecOptions {
            attach_stdin: Some(stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            cmd: Some(argv),
            user: Some(self.config.user.clone()),
            working_dir: Some(self.config.project_dir.clone()),
            ..Default::default()
        };
        match self.docker.create_exec(&self.id, options).await {
            Ok(created) => Ok(created.id),
            Err(err) => Err(self.explain("start a process in the sandbox", err).await),
        }
    }

    /// Maps the result of an archive upload into `parent` to a sandbox error.
    async fn upload_outcome(
        &self,
        result: Result<(), bollard::errors::Error>,
        parent: &str,
        what: &str,
    ) -> Result<(), SandboxError> {
        match result {
            Ok(()) => Ok(()),
            Err(err) => Err(self.explain(&format!("copy {what} into {parent}"), err).await),
        }
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn id(&self) -> &str {
        &self.id
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
        // Stream the tar: a blocking thread packs into one end of a pipe while
        // the upload reads the other, so memory stays flat for any size.
        let (reader, writer) = tokio::io::duplex(256 * 1024);
        let src = host_dir.to_owned();
        let top = name.to_owned();
        let packer = tokio::task::spawn_blocking(move || {
            let bridge = SyncIoBridge::new(writer);
            archive::pack_dir(&src, &top, uid, gid, bridge).map(|mut w| {
                use std::io::Write;
                w.flush()
            })
        });
        let body = bollard::body_try_stream(ReaderStream::new(reader));
        let options = UploadToContainerOptionsBuilder::default().path(parent).build();
        let result = self
            .docker
            .upload_to_container(&self.id, Some(options), body)
            .await;
        let uploaded = self
            .upload_outcome(result, parent, &host_dir.display().to_string())
            .await;
        let packed = packer.await.map_err(|e| SandboxError::Io {
            action: format!("pack {}", host_dir.display()),
            source: std::io::Error::other(e),
        })?;
        // A packing error explains a failed upload better than the upload's own.
        match packed {
            Ok(Ok(())) => uploaded,
            Ok(Err(source)) | Err(source) => Err(SandboxError::CopyInSource {
                path: host_dir.to_owned(),
                detail: source.to_string(),
            }),
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
        // Ask once up front so a missing path or a dead container gets its
        // own clear error rather than a broken stream.
        let info_options = ContainerArchiveInfoOptionsBuilder::default()
            .path(sandbox_dir)
            .build();
        if let Err(err) = self
            .docker
            .get_container_archive_info(&self.id, Some(info_options))
            .await
        {
            return Err(match status_of(&err) {
                Some(404) if self.docker.inspect_container(&self.id, None).await.is_ok() => {
                    copy_err("no such path in the sandbox".into())
                }
                _ => self.explain(&format!("read {sandbox_dir}"), err).await,
            });
        }
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(sandbox_dir)
            .build();
        let stream = self
            .docker
            .download_from_container(&self.id, Some(options))
            .map_err(std::io::Error::other);
        let reader = StreamReader::new(stream);
        let dest: PathBuf = host_dir.to_owned();
        let unpacked =
            tokio::task::spawn_blocking(move || archive::unpack_stripped(SyncIoBridge::new(reader), &dest))
                .await
                .map_err(|e| copy_err(e.to_string()))?;
        unpacked.map(|_| ()).map_err(|e| copy_err(e.to_string()))
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
        let options = UploadToContainerOptionsBuilder::default().path(workspace).build();
        let result = self
            .docker
            .upload_to_container(&self.id, Some(options), bollard::body_full(Bytes::from(tar)))
            .await;
        self.upload_outcome(result, workspace, path).await
    }

    async fn exec(&self, command: &str, timeout: Option<Duration>) -> Result<ExecOutput, SandboxError> {
        let timeout = timeout.unwrap_or(self.config.exec_timeout);
        match self.supervisor.get().filter(|s| s.is_alive()) {
            Some(supervisor) => self.exec_supervised(supervisor, command, timeout).await,
            None => self.exec_plain(command, timeout).await,
        }
    }

    async fn exec_stream(&self, argv: &[String]) -> Result<ExecStream, SandboxError> {
        self.exec_stream_plain(argv).await
    }

    async fn exec_status(&self, exec_id: &str) -> Result<ExecStatus, SandboxError> {
        let info = self
            .docker
            .inspect_exec(exec_id)
            .await
            .map_err(|e| docker_error("inspect a process in the sandbox", e))?;
        Ok(ExecStatus {
            running: info.running.unwrap_or(false),
            exit_code: info.exit_code,
        })
    }

    fn egress(&self) -> Option<Arc<Egress>> {
        self.supervisor.get().map(|_| self.egress.clone())
    }

    async fn remove(&self) -> Result<(), SandboxError> {
        remove_container(&self.docker, &self.id).await?;
        tracing::info!(container = %self.short_id(), "sandbox removed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_names_are_valid_for_docker() {
        assert_eq!(
            container_name("prod", "github/o/r#12"),
            "forgehand-prod-github-o-r-12"
        );
    }
}
