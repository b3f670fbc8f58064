//! The Docker implementation of the sandbox traits, on bollard.
//!
//! A sandbox is one container: read-only root, `/workspace` an anonymous
//! volume (so the archive API can write to it), `/tmp` and the agent's home
//! as tmpfs, no network, no capabilities, no new privileges, a non-root user
//! and pids / memory / CPU limits, all from `sandbox.*` in the config.

mod egress_mount;
mod owner;
mod transport;

use super::egress::Egress;
use super::egress_socket::{self, EgressSocket};
use super::helper::{self, EditorBinary};
use super::supervised::SupervisedSandbox;
use super::{check_copy_source, labels, numeric_owner, Sandbox, SandboxBackend, SandboxError, SandboxSpec};
use crate::config::EgressTransport;
use crate::config::{DockerConfig, SandboxConfig};
use async_trait::async_trait;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use bollard::Docker;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use transport::DockerTransport;

/// How a refusal names the engine.
pub(crate) const ENGINE: &str = "Docker";

/// Connects to the engine named in the config (or `DOCKER_HOST`, or the local
/// socket) and agrees on an API version it speaks.
pub async fn connect(config: &DockerConfig) -> Result<Docker, SandboxError> {
    let endpoint = config
        .host
        .clone()
        .or_else(|| std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_owned());
    let unreachable = |detail: String| SandboxError::Unreachable {
        engine: format!("Docker at {endpoint}"),
        detail,
        advice: UNREACHABLE_ADVICE,
    };
    let docker = Docker::connect_with_host(&endpoint).map_err(|e| unreachable(e.to_string()))?;
    let docker = docker.with_timeout(config.api_timeout);
    docker
        .negotiate_version()
        .await
        .map_err(|e| unreachable(e.to_string()))
}

/// What an operator can do when the engine does not answer.
const UNREACHABLE_ADVICE: &str = "Is dockerd running and is its socket readable by this user? Set docker.host in config.yaml or DOCKER_HOST to point elsewhere";

/// What a maintainer or operator can do when an image is missing.
pub(crate) const IMAGE_ADVICE: &str = "it is not present in the Docker engine; build it with `forgehand images build`, or pin an existing image under images.pins";

/// Turns a bollard error into a sandbox error that says what was attempted.
pub(crate) fn docker_error(action: impl Into<String>, err: bollard::errors::Error) -> SandboxError {
    use bollard::errors::Error as E;
    let action = action.into();
    match err {
        E::DockerResponseServerError { status_code, message } => SandboxError::Refused {
            engine: ENGINE,
            action,
            retryable: status_code >= 500 && !message.contains("is not running"),
            detail: format!("{message} (HTTP {status_code})"),
        },
        E::RequestTimeoutError => SandboxError::Refused {
            engine: ENGINE,
            action,
            detail: "the Docker API did not answer in time (docker.api_timeout)".into(),
            retryable: true,
        },
        E::HyperResponseError { .. }
        | E::HttpClientError { .. }
        | E::IOError { .. }
        | E::SocketNotFoundError(_) => SandboxError::Refused {
            engine: ENGINE,
            action,
            detail: format!("{err}; is the Docker engine still running?"),
            retryable: true,
        },
        other => SandboxError::Refused {
            engine: ENGINE,
            action,
            detail: other.to_string(),
            retryable: false,
        },
    }
}

pub(crate) fn status_of(err: &bollard::errors::Error) -> Option<u16> {
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
                    advice: IMAGE_ADVICE,
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
        trusts_relay: bool,
    ) -> ContainerCreateBody {
        let c = &self.config;
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
        ContainerCreateBody {
            image: Some(spec.image.clone()),
            user: Some(c.user.clone()),
            working_dir: Some(c.workspace_dir.clone()),
            cmd: Some(match editor_path {
                Some(path) => vec![path.to_owned(), "idle".to_owned()],
                None => vec!["sleep".to_owned(), "infinity".to_owned()],
            }),
            entrypoint: Some(vec![]),
            // The proxy variables only with a supervisor (the editor), which
            // runs the proxy they point at.
            env: Some(container_env(c, spec, editor_path.is_some(), trusts_relay)),
            labels: Some(labels),
            network_disabled: Some(c.network_mode == "none"),
            host_config: Some(host_config(c, egress_socket)),
            ..Default::default()
        }
    }

    async fn create_and_start(&self, spec: &SandboxSpec) -> Result<SupervisedSandbox, SandboxError> {
        let placement = self.editor_placement(&spec.image).await?;
        let editor_path = placement.as_ref().map(|(path, _)| path.clone());
        let name = container_name(&self.instance_id, &spec.task_id);
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let egress = Egress::for_sandbox(&self.config, self.metrics.clone(), Some(&spec.repository))
            .map_err(|err| SandboxError::NotStarted {
                sandbox: name.clone(),
                detail: format!("its egress relay's certificate authority: {err}"),
            })?;
        let trusts_relay = egress.ca_pem().is_some();
        let unmountable = self.socket_unmountable.load(std::sync::atomic::Ordering::Relaxed);
        let mut socket =
            egress_mount::for_new_sandbox(&self.config, unmountable, editor_path.is_some(), &egress)?;
        let create = |socket: Option<&EgressSocket>| {
            self.docker.create_container(
                Some(options.clone()),
                self.container_body(spec, editor_path.as_deref(), socket, trusts_relay),
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
                && egress_mount::is_bind_source_missing(err)
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
                advice: IMAGE_ADVICE,
            },
            _ => docker_error(format!("create a container from {}", spec.image), err),
        })?;
        let transport = DockerTransport {
            docker: self.docker.clone(),
            id: created.id,
            user: self.config.user.clone(),
            project_dir: self.config.project_dir.clone(),
            _egress_socket: socket,
        };
        self.start_created(transport, egress, placement, spec).await
    }

    /// Puts the editor in place (the container's main process, so before
    /// it starts), starts the container and the supervisor. On an error
    /// the container is removed.
    async fn start_created(
        &self,
        transport: DockerTransport,
        egress: Arc<Egress>,
        placement: Option<(String, bool)>,
        spec: &SandboxSpec,
    ) -> Result<SupervisedSandbox, SandboxError> {
        let mounted_socket = transport._egress_socket.is_some();
        let mut sandbox = SupervisedSandbox::new(Box::new(transport), self.config.clone(), egress);
        if let Some((path, copy)) = placement {
            if let (true, Some(editor)) = (copy, &self.editor) {
                if let Err(err) = sandbox.put_file(&path, editor.bytes(), 0o755).await {
                    let _ = sandbox.remove().await;
                    return Err(err);
                }
            }
            sandbox.set_editor_path(path);
        }
        if let Err(err) = self.docker.start_container(sandbox.id(), None).await {
            let _ = sandbox.remove().await;
            let name = container_name(&self.instance_id, &spec.task_id);
            return Err(docker_error(format!("start container {name}"), err));
        }
        tracing::info!(container = %short(sandbox.id()), task = %spec.task_id, image = %spec.image, "sandbox started");
        let extra = if mounted_socket {
            vec!["--egress-socket".to_owned(), EgressSocket::sandbox_path()]
        } else {
            Vec::new()
        };
        sandbox.start_supervisor(&extra).await;
        if let Err(err) = super::egress::trust::install(&sandbox).await {
            let _ = sandbox.remove().await;
            return Err(err);
        }
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
            .map_err(|e| SandboxError::Unreachable {
                engine: "the configured Docker engine".into(),
                detail: e.to_string(),
                advice: UNREACHABLE_ADVICE,
            })
    }

    async fn image_id(&self, image: &str) -> Result<Option<String>, SandboxError> {
        match self.docker.inspect_image(image).await {
            Ok(inspect) => Ok(inspect.id),
            Err(err) if status_of(&err) == Some(404) => Err(SandboxError::ImageMissing {
                image: image.to_owned(),
                advice: IMAGE_ADVICE,
            }),
            Err(err) => Err(docker_error(format!("inspect image {image}"), err)),
        }
    }

    async fn reap(&self, running: &[String]) -> Result<Vec<String>, SandboxError> {
        self.reap_orphans(running).await
    }
}

/// The first 12 characters of a container id, as `docker ps` shows it.
fn short(id: &str) -> &str {
    &id[..12.min(id.len())]
}

/// `HOME`, the proxy variables when `proxied` (with the CA paths when the
/// relay adds credentials), then the spec's own variables.
fn container_env(c: &SandboxConfig, spec: &SandboxSpec, proxied: bool, trusts_relay: bool) -> Vec<String> {
    std::iter::once(format!("HOME={}", c.home_dir))
        .chain(
            proxied
                .then(|| {
                    let proxy = super::egress::proxy_env(c.egress_proxy_port);
                    if trusts_relay {
                        super::egress::trust::with_trust(proxy)
                    } else {
                        proxy
                    }
                })
                .into_iter()
                .flatten(),
        )
        .chain(spec.env.iter().map(|(k, v)| format!("{k}={v}")))
        .collect()
}

/// The container's confinement from `sandbox.*`: network, capabilities,
/// limits, a read-only root with tmpfs and a workspace volume, and the
/// egress socket's folder when there is one.
fn host_config(c: &SandboxConfig, egress_socket: Option<&EgressSocket>) -> HostConfig {
    let (uid, gid) = numeric_owner(&c.user);
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
    HostConfig {
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
