//! Sandboxes as pods (`sandbox.backend: kubernetes`): one pod per task in
//! a namespace, passing the `restricted` Pod Security Standard, cut off
//! from the network by a deny-all NetworkPolicy, and reached only through
//! the API server's exec (tar copies, commands, the editor's MCP session
//! and the egress tunnel all ride on it). No privileged Docker engine is
//! needed anywhere.

pub mod exec;
pub mod pod_spec;
mod transport;

use self::pod_spec::{keys, OwnerPod, Ownership};
use self::transport::{api_error, PodTransport, ENGINE};
use super::egress::Egress;
use super::helper::{self, EditorBinary};
use super::supervised::SupervisedSandbox;
use super::{Sandbox, SandboxBackend, SandboxError, SandboxSpec};
use crate::config::{KubeSandboxConfig, SandboxConfig};
use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Reads of exec streams wait longer than a ping interval.
const EXEC_READ_TIMEOUT: Duration = Duration::from_secs(75);
/// How often a starting pod is looked at.
const POLL: Duration = Duration::from_millis(200);
/// Container states that will not get better by waiting.
const HOPELESS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// Makes sandbox pods for one daemon.
pub struct KubernetesBackend {
    client: kube::Client,
    namespace: String,
    config: Arc<SandboxConfig>,
    pods: KubeSandboxConfig,
    instance_id: String,
    daemon_id: Option<String>,
    owner: Option<OwnerPod>,
    editor: Option<EditorBinary>,
    policy: tokio::sync::OnceCell<()>,
    /// Where the sandboxes' egress decisions are counted.
    metrics: Arc<crate::metrics::Metrics>,
}

impl KubernetesBackend {
    /// A backend on the cluster found in the usual places (the pod's
    /// service account, `KUBECONFIG`).
    pub async fn connect(
        config: SandboxConfig,
        pods: KubeSandboxConfig,
        instance_id: impl Into<String>,
    ) -> Result<KubernetesBackend, SandboxError> {
        let client = crate::replicas::kube_leases::client_with_read_timeout(EXEC_READ_TIMEOUT)
            .await
            .map_err(|detail| SandboxError::Refused {
                engine: ENGINE,
                action: "connect".into(),
                detail,
                retryable: false,
            })?;
        Ok(KubernetesBackend::with_client(client, config, pods, instance_id))
    }

    pub fn with_client(
        client: kube::Client,
        config: SandboxConfig,
        pods: KubeSandboxConfig,
        instance_id: impl Into<String>,
    ) -> KubernetesBackend {
        let namespace = match pods.namespace.as_str() {
            "" => client.default_namespace().to_owned(),
            ns => ns.to_owned(),
        };
        KubernetesBackend {
            client,
            namespace,
            config: Arc::new(config),
            pods,
            instance_id: instance_id.into(),
            daemon_id: None,
            owner: None,
            editor: None,
            policy: tokio::sync::OnceCell::new(),
            metrics: Arc::default(),
        }
    }

    /// Counts the sandboxes' egress decisions in `metrics` (the daemon's).
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> KubernetesBackend {
        self.metrics = metrics;
        self
    }

    /// Pods are labelled with the daemon's state folder id, and only its
    /// own are reaped.
    pub fn owned_by(mut self, daemon_id: impl Into<String>) -> KubernetesBackend {
        self.daemon_id = Some(daemon_id.into());
        self
    }

    /// Sandbox pods get an owner reference to the daemon's pod, so
    /// Kubernetes deletes them with it. Only within one namespace (owner
    /// references cannot cross namespaces): otherwise ignored.
    pub fn owned_by_pod(mut self, owner: OwnerPod, owner_namespace: &str) -> KubernetesBackend {
        if owner_namespace == self.namespace {
            self.owner = Some(owner);
        } else {
            tracing::info!(daemon_namespace = %owner_namespace, sandbox_namespace = %self.namespace, "sandbox pods are in another namespace than the daemon: they carry no owner reference, and each daemon reaps its own");
        }
        self
    }

    /// The daemon's pod from the downward API (`FORGEHAND_POD_NAME`,
    /// `FORGEHAND_POD_UID`, `FORGEHAND_POD_NAMESPACE`), when it runs in one.
    pub fn owner_from_env() -> Option<(OwnerPod, String)> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Some((
            OwnerPod {
                name: var("FORGEHAND_POD_NAME")?,
                uid: var("FORGEHAND_POD_UID")?,
            },
            var("FORGEHAND_POD_NAMESPACE")?,
        ))
    }

    /// Gives every sandbox forgehand's editor (copied in unless the image
    /// carries this exact build): the editor MCP server and the supervisor.
    pub fn with_editor(mut self, editor: EditorBinary) -> KubernetesBackend {
        self.editor = Some(editor);
        self
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    fn api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn ownership(&self) -> Ownership<'_> {
        Ownership {
            instance: &self.instance_id,
            daemon: self.daemon_id.as_deref(),
            owner: self.owner.as_ref(),
        }
    }

    /// The namespace's deny-all policy for sandbox pods, made once.
    async fn ensure_policy(&self) -> Result<(), SandboxError> {
        self.policy
            .get_or_try_init(|| async {
                let api: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), &self.namespace);
                match api.create(&PostParams::default(), &pod_spec::deny_all_policy()).await {
                    Ok(_) => {
                        tracing::info!(namespace = %self.namespace, policy = pod_spec::NETWORK_POLICY, "sandbox pods denied all network traffic");
                        Ok(())
                    }
                    Err(kube::Error::Api(status)) if status.is_already_exists() => self.check_policy(&api).await,
                    Err(e) => Err(api_error(
                        pod_spec::NETWORK_POLICY,
                        &format!("create NetworkPolicy {} in {}", pod_spec::NETWORK_POLICY, self.namespace),
                        e,
                    )),
                }
            })
            .await
            .map(|_| ())
    }

    /// A policy of the expected name existed: it must deny what forgehand's own would.
    async fn check_policy(&self, api: &Api<NetworkPolicy>) -> Result<(), SandboxError> {
        let name = pod_spec::NETWORK_POLICY;
        let found = api.get(name).await.map_err(|e| {
            api_error(
                name,
                &format!("read NetworkPolicy {name} in {}", self.namespace),
                e,
            )
        })?;
        match pod_spec::why_not_deny_all(&found) {
            None => Ok(()),
            Some(why) => Err(SandboxError::Unsafe {
                detail: format!(
                    "the NetworkPolicy {name} in {} does not deny sandbox pods all traffic: {why}. Delete it (kubectl -n {} delete networkpolicy {name}) and forgehand makes its own",
                    self.namespace, self.namespace
                ),
            }),
        }
    }

    /// Creates the pod, replacing a leftover of the same task.
    async fn create_pod(&self, body: &Pod, name: &str) -> Result<(), SandboxError> {
        let api = self.api();
        let action = format!("create pod {name} in {}", self.namespace);
        match api.create(&PostParams::default(), body).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(e) => return Err(api_error(name, &action, e)),
        }
        // A sandbox of this task survived a crash: replace it, so a task
        // never has two.
        tracing::warn!(pod = %name, "replacing a leftover sandbox pod of this task");
        let delete = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        match api.delete(name, &delete).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(e) => return Err(api_error(name, &format!("delete leftover pod {name}"), e)),
        }
        let gone_by = Instant::now() + Duration::from_secs(60);
        while Instant::now() < gone_by {
            match api.get_opt(name).await {
                Ok(None) => break,
                Ok(Some(_)) => tokio::time::sleep(POLL).await,
                Err(e) => return Err(api_error(name, &format!("read pod {name}"), e)),
            }
        }
        api.create(&PostParams::default(), body)
            .await
            .map(|_| ())
            .map_err(|e| api_error(name, &action, e))
    }

    /// Waits until the pod's container runs, failing at once when it
    /// cannot (an image that cannot be pulled, a pod that ended).
    async fn wait_running(&self, name: &str, image: &str) -> Result<(), SandboxError> {
        let api = self.api();
        let started = Instant::now();
        loop {
            let pod = api
                .get(name)
                .await
                .map_err(|e| api_error(name, &format!("read pod {name}"), e))?;
            let status = pod.status.unwrap_or_default();
            let phase = status.phase.clone().unwrap_or_else(|| "Pending".into());
            let container = status
                .container_statuses
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.name == pod_spec::CONTAINER);
            let state = container.as_ref().and_then(|c| c.state.clone());
            if phase == "Running" && state.as_ref().is_some_and(|s| s.running.is_some()) {
                return Ok(());
            }
            let last = if let Some(waiting) = state.as_ref().and_then(|s| s.waiting.as_ref()) {
                let reason = waiting.reason.clone().unwrap_or_default();
                let message = waiting.message.clone().unwrap_or_default();
                if HOPELESS.contains(&reason.as_str()) {
                    let advice = if reason.contains("Image") {
                        format!("; push {image} to the registry named by images.registry, and give images.pull_secrets when it needs credentials")
                    } else {
                        String::new()
                    };
                    return Err(SandboxError::NotStarted {
                        sandbox: name.to_owned(),
                        detail: format!("{reason}: {message}{advice}"),
                    });
                }
                format!("{phase}, {reason} {message}")
            } else {
                match status.message.or(status.reason) {
                    Some(why) => format!("{phase}: {why}"),
                    None => phase.clone(),
                }
            };
            if phase == "Failed" || phase == "Succeeded" {
                return Err(SandboxError::NotStarted {
                    sandbox: name.to_owned(),
                    detail: format!("it ended before it was used ({last})"),
                });
            }
            if started.elapsed() >= self.pods.start_timeout {
                return Err(SandboxError::NotStarted {
                    sandbox: name.to_owned(),
                    detail: format!(
                        "not running after {} s ({last}); the cluster may lack room for its requests (sandbox.cpus, sandbox.memory, sandbox.kubernetes.ephemeral_storage) or sandbox.kubernetes.start_timeout is too short",
                        self.pods.start_timeout.as_secs()
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Puts the editor in place (unless the image carries this build) and
    /// starts the supervisor: commands and the egress tunnel over one exec.
    async fn equip(&self, sandbox: &mut SupervisedSandbox) -> Result<(), SandboxError> {
        let Some(editor) = &self.editor else {
            // The first exec also tells which channel protocol the server speaks.
            sandbox.exec("true", Some(Duration::from_secs(60))).await?;
            return Ok(());
        };
        let path = if sandbox
            .file_has_sha256(helper::IMAGE_PATH, editor.sha256())
            .await?
        {
            helper::IMAGE_PATH.to_owned()
        } else {
            let injected = format!(
                "{}/.forgehand/bin/{}",
                self.config.workspace_dir.trim_end_matches('/'),
                helper::FILE_NAME
            );
            sandbox.put_file(&injected, editor.bytes(), 0o755).await?;
            injected
        };
        sandbox.set_editor_path(path);
        sandbox.start_supervisor(&[]).await;
        Ok(())
    }

    async fn prepare_created(
        &self,
        name: &str,
        spec: &SandboxSpec,
        workspace: Option<&Path>,
        egress: Arc<Egress>,
    ) -> Result<SupervisedSandbox, SandboxError> {
        self.wait_running(name, &pod_spec::image_ref(&self.pods, &spec.image))
            .await?;
        let transport = PodTransport {
            client: self.client.clone(),
            namespace: self.namespace.clone(),
            name: name.to_owned(),
            project_dir: self.config.project_dir.clone(),
            v5: std::sync::atomic::AtomicBool::new(true),
        };
        let mut sandbox = SupervisedSandbox::new(Box::new(transport), self.config.clone(), egress);
        self.equip(&mut sandbox).await?;
        super::egress::trust::install(&sandbox).await?;
        if let Some(dir) = workspace {
            sandbox.copy_in(dir, &self.config.project_dir).await?;
        }
        Ok(sandbox)
    }
}

#[async_trait]
impl SandboxBackend for KubernetesBackend {
    fn operator_advice(&self) -> &'static str {
        "An operator should check the cluster: the sandbox namespace, the daemon's Role there, the NetworkPolicy and whether the nodes can pull the sandbox images (`forgehand doctor`); then add the trigger label again."
    }

    async fn prepare(
        &self,
        spec: &SandboxSpec,
        workspace: Option<&Path>,
    ) -> Result<Box<dyn Sandbox>, SandboxError> {
        self.ensure_policy().await?;
        let name = pod_spec::pod_name(&self.instance_id, &spec.task_id);
        // The relay's CA is made before the pod: its environment names it.
        let egress = Egress::for_sandbox(&self.config, self.metrics.clone(), Some(&spec.repository))
            .map_err(|err| SandboxError::NotStarted {
                sandbox: name.clone(),
                detail: format!("its egress relay's certificate authority: {err}"),
            })?;
        let body = pod_spec::pod(
            &self.config,
            &self.pods,
            spec,
            &self.ownership(),
            self.editor.is_some(),
            egress.ca_pem().is_some(),
        );
        let started = Instant::now();
        self.create_pod(&body, &name).await?;
        match self.prepare_created(&name, spec, workspace, egress).await {
            Ok(sandbox) => {
                tracing::info!(pod = %name, namespace = %self.namespace, task = %spec.task_id, image = %spec.image, ms = started.elapsed().as_millis() as u64, "sandbox pod ready");
                Ok(Box::new(sandbox))
            }
            Err(e) => {
                let delete = DeleteParams {
                    grace_period_seconds: Some(0),
                    ..DeleteParams::default()
                };
                if let Err(cleanup) = self.api().delete(&name, &delete).await {
                    tracing::warn!(pod = %name, "cannot delete a sandbox pod that failed to start: {cleanup}");
                }
                Err(e)
            }
        }
    }

    async fn reap(&self, running: &[String]) -> Result<Vec<String>, SandboxError> {
        let selector = pod_spec::selector(&self.ownership());
        let pods = self
            .api()
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| api_error("(list)", &format!("list sandbox pods in {}", self.namespace), e))?;
        let delete = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let mut reaped = Vec::new();
        for pod in pods.items {
            let Some(name) = pod.metadata.name.clone() else {
                continue;
            };
            let task = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::TASK).cloned())
                .unwrap_or_default();
            if running.contains(&task) {
                continue;
            }
            match self.api().delete(&name, &delete).await {
                Ok(_) => {
                    tracing::info!(pod = %name, task = %task, "removed a sandbox pod no task uses");
                    reaped.push(task);
                }
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(e) => tracing::warn!(pod = %name, "cannot remove a leftover sandbox pod: {e}"),
            }
        }
        Ok(reaped)
    }

    async fn ping(&self) -> Result<(), SandboxError> {
        self.api()
            .list(&ListParams::default().limit(1))
            .await
            .map(|_| ())
            .map_err(|e| api_error("(list)", &format!("list pods in {}", self.namespace), e))
    }
}
