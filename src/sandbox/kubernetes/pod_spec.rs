//! The objects a sandbox is made of on Kubernetes: its pod, which passes
//! the `restricted` Pod Security Standard, and the NetworkPolicy that
//! denies every sandbox pod all traffic in and out (its only way out is
//! forgehand's tunnel over the exec stream).

use crate::config::{KubeSandboxConfig, SandboxConfig};
use crate::sandbox::{egress, numeric_owner, SandboxSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, LocalObjectReference, Pod, PodSecurityContext,
    PodSpec, ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicySpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The container in every sandbox pod.
pub const CONTAINER: &str = "sandbox";
/// The deny-all policy, one per namespace, shared by all sandbox pods.
pub const NETWORK_POLICY: &str = "forgehand-sandbox-deny-all";

/// Labels and annotations on sandbox pods (label values are restricted, so
/// the task id itself is an annotation and a hash of it a label).
pub mod keys {
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    pub const ROLE: &str = "io.forgehand/role";
    pub const INSTANCE: &str = "io.forgehand/instance";
    pub const DAEMON: &str = "io.forgehand/daemon";
    pub const TASK_HASH: &str = "io.forgehand/task-hash";
    pub const TASK: &str = "io.forgehand/task";
    pub const FORGE: &str = "io.forgehand/forge";
    pub const REPOSITORY: &str = "io.forgehand/repository";
}

/// The pod's idle main process: it ends at once on SIGTERM, so a delete
/// is quick, and needs nothing but `sh` and `sleep`.
const IDLE: &str = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";

/// Who owns a sandbox pod: the daemon's own pod, so Kubernetes deletes
/// the sandboxes of a daemon pod that is gone for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerPod {
    pub name: String,
    pub uid: String,
}

/// Whom a sandbox pod belongs to, as labels say it.
pub struct Ownership<'a> {
    pub instance: &'a str,
    pub daemon: Option<&'a str>,
    pub owner: Option<&'a OwnerPod>,
}

/// The pod's name: readable, unique per daemon instance and task, and a
/// DNS label (it is also the pod's hostname).
pub fn pod_name(instance: &str, task_id: &str) -> String {
    let hash = short_hash(&format!("{instance}\n{task_id}"));
    let slug: String = task_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-');
    let slug: String = slug.chars().take(63 - "fh--".len() - hash.len()).collect();
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        format!("fh-{hash}")
    } else {
        format!("fh-{slug}-{hash}")
    }
}

/// The label that finds a task's pod.
pub fn task_hash(task_id: &str) -> String {
    short_hash(task_id)
}

fn short_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A label value: up to 63 of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
pub fn label_value(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// The selector of every sandbox pod of `ownership`'s daemon.
pub fn selector(ownership: &Ownership<'_>) -> String {
    let mut parts = vec![
        format!("{}=forgehand", keys::MANAGED_BY),
        format!("{}=sandbox", keys::ROLE),
        format!("{}={}", keys::INSTANCE, label_value(ownership.instance)),
    ];
    if let Some(daemon) = ownership.daemon {
        parts.push(format!("{}={}", keys::DAEMON, label_value(daemon)));
    }
    parts.join(",")
}

fn quantity(text: String) -> Quantity {
    Quantity(text)
}

fn empty_dir(name: &str, size: u64) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(quantity(size.to_string())),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..Default::default()
    }
}

/// The image a pod pulls: `spec.image` under `images.registry`.
pub fn image_ref(pods: &KubeSandboxConfig, image: &str) -> String {
    if pods.registry.is_empty() {
        image.to_owned()
    } else {
        format!("{}/{}", pods.registry, image.trim_start_matches('/'))
    }
}

/// The sandbox pod of `spec`. `with_proxy`: the pod's egress goes through
/// the relay; `trusts_relay`: the relay adds credentials, so its tools are
/// pointed at the sandbox's CA (written by [`egress::trust::install`]).
pub fn pod(
    sandbox: &SandboxConfig,
    pods: &KubeSandboxConfig,
    spec: &SandboxSpec,
    ownership: &Ownership<'_>,
    with_proxy: bool,
    trusts_relay: bool,
) -> Pod {
    let (uid, gid) = numeric_owner(&sandbox.user);
    let env = container_env(sandbox, spec, with_proxy, trusts_relay);
    Pod {
        metadata: pod_metadata(spec, ownership),
        spec: Some(PodSpec {
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            restart_policy: Some("Never".into()),
            active_deadline_seconds: Some(pods.active_deadline.as_secs() as i64),
            termination_grace_period_seconds: Some(5),
            runtime_class_name: pods.runtime_class.clone(),
            image_pull_secrets: (!pods.pull_secrets.is_empty()).then(|| {
                pods.pull_secrets
                    .iter()
                    .map(|name| LocalObjectReference { name: name.clone() })
                    .collect()
            }),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(uid as i64),
                run_as_group: Some(gid as i64),
                fs_group: Some(gid as i64),
                seccomp_profile: Some(runtime_default_seccomp()),
                ..Default::default()
            }),
            containers: vec![sandbox_container(sandbox, pods, spec, env)],
            volumes: Some(vec![
                empty_dir("workspace", pods.workspace_size),
                empty_dir("tmp", sandbox.tmp_size),
                empty_dir("home", sandbox.home_size),
            ]),
            ..Default::default()
        }),
        status: None,
    }
}

/// The pod's name, the labels forgehand finds its pods by, the task it
/// serves, and the daemon pod that owns it (so it goes when that goes).
fn pod_metadata(spec: &SandboxSpec, ownership: &Ownership<'_>) -> ObjectMeta {
    let mut labels = BTreeMap::from([
        (keys::MANAGED_BY.to_owned(), "forgehand".to_owned()),
        (keys::ROLE.to_owned(), "sandbox".to_owned()),
        (keys::INSTANCE.to_owned(), label_value(ownership.instance)),
        (keys::TASK_HASH.to_owned(), task_hash(&spec.task_id)),
    ]);
    if let Some(daemon) = ownership.daemon {
        labels.insert(keys::DAEMON.to_owned(), label_value(daemon));
    }
    let annotations = BTreeMap::from([
        (keys::TASK.to_owned(), spec.task_id.clone()),
        (keys::FORGE.to_owned(), spec.forge.clone()),
        (keys::REPOSITORY.to_owned(), spec.repository.clone()),
    ]);
    ObjectMeta {
        name: Some(pod_name(ownership.instance, &spec.task_id)),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: ownership.owner.map(|owner| {
            vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: owner.name.clone(),
                uid: owner.uid.clone(),
                ..Default::default()
            }]
        }),
        ..Default::default()
    }
}

/// `HOME`, the proxy variables when egress goes through the relay (with
/// the CA paths when the relay adds credentials), then the spec's own.
fn container_env(
    sandbox: &SandboxConfig,
    spec: &SandboxSpec,
    with_proxy: bool,
    trusts_relay: bool,
) -> Vec<EnvVar> {
    std::iter::once(("HOME".to_owned(), sandbox.home_dir.clone()))
        .chain(
            with_proxy
                .then(|| {
                    let proxy = egress::proxy_env(sandbox.egress_proxy_port);
                    if trusts_relay {
                        egress::trust::with_trust(proxy)
                    } else {
                        proxy
                    }
                })
                .into_iter()
                .flatten()
                .filter_map(|pair| pair.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned()))),
        )
        .chain(spec.env.iter().cloned())
        .map(|(name, value)| EnvVar {
            name,
            value: Some(value),
            ..Default::default()
        })
        .collect()
}

/// The one container: idle until commands are exec'd, unprivileged, with
/// a read-only root and its writable folders on the pod's volumes.
fn sandbox_container(
    sandbox: &SandboxConfig,
    pods: &KubeSandboxConfig,
    spec: &SandboxSpec,
    env: Vec<EnvVar>,
) -> Container {
    let (uid, gid) = numeric_owner(&sandbox.user);
    // Requests equal limits: the pod gets what it may use, no more.
    let limits = BTreeMap::from([
        (
            "cpu".to_owned(),
            quantity(format!("{}m", (sandbox.cpus * 1000.0).round() as u64)),
        ),
        ("memory".to_owned(), quantity(sandbox.memory_bytes.to_string())),
        (
            "ephemeral-storage".to_owned(),
            quantity(pods.ephemeral_storage.to_string()),
        ),
    ]);
    Container {
        name: CONTAINER.into(),
        image: Some(image_ref(pods, &spec.image)),
        image_pull_policy: Some(pods.pull_policy.clone()),
        command: Some(vec!["sh".into(), "-c".into(), IDLE.into()]),
        working_dir: Some(sandbox.workspace_dir.clone()),
        env: Some(env),
        resources: Some(ResourceRequirements {
            requests: Some(limits.clone()),
            limits: Some(limits),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            run_as_user: Some(uid as i64),
            run_as_group: Some(gid as i64),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..Default::default()
        }),
        volume_mounts: Some(vec![
            mount("workspace", &sandbox.workspace_dir),
            mount("tmp", "/tmp"),
            mount("home", &sandbox.home_dir),
        ]),
        ..Default::default()
    }
}

fn runtime_default_seccomp() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        ..Default::default()
    }
}

/// No traffic in or out for any sandbox pod of forgehand.
pub fn deny_all_policy() -> NetworkPolicy {
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(NETWORK_POLICY.into()),
            labels: Some(BTreeMap::from([(
                keys::MANAGED_BY.to_owned(),
                "forgehand".to_owned(),
            )])),
            ..Default::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([
                    (keys::MANAGED_BY.to_owned(), "forgehand".to_owned()),
                    (keys::ROLE.to_owned(), "sandbox".to_owned()),
                ])),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            // No rules: nothing is allowed.
            ingress: None,
            egress: None,
        }),
    }
}

/// Why an existing NetworkPolicy of [`NETWORK_POLICY`]'s name does not
/// deny every sandbox pod all traffic, or `None` when it does: it selects
/// every sandbox pod (no label but those all of them carry), names both
/// policy types, and allows nothing in either.
pub fn why_not_deny_all(policy: &NetworkPolicy) -> Option<String> {
    let Some(spec) = &policy.spec else {
        return Some("it has no spec".into());
    };
    let every_sandbox = deny_all_policy()
        .spec
        .and_then(|s| s.pod_selector)
        .and_then(|s| s.match_labels)
        .unwrap_or_default();
    let selector = spec.pod_selector.clone().unwrap_or_default();
    if selector.match_expressions.as_ref().is_some_and(|e| !e.is_empty()) {
        return Some("its podSelector has matchExpressions, so it may leave sandbox pods out".into());
    }
    for (key, value) in selector.match_labels.iter().flatten() {
        if every_sandbox.get(key) != Some(value) {
            return Some(format!(
                "its podSelector asks for {key}={value}, which not every sandbox pod carries"
            ));
        }
    }
    let types = spec.policy_types.clone().unwrap_or_default();
    for wanted in ["Ingress", "Egress"] {
        if !types.iter().any(|t| t == wanted) {
            return Some(format!(
                "its policyTypes lack {wanted}, so that direction is not restricted"
            ));
        }
    }
    if spec.ingress.as_ref().is_some_and(|rules| !rules.is_empty()) {
        return Some("it allows some ingress".into());
    }
    if spec.egress.as_ref().is_some_and(|rules| !rules.is_empty()) {
        return Some("it allows some egress".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names_are_dns_labels_unique_per_instance_and_task() {
        let a = pod_name("forgehand", "github:Acme/Widgets#12");
        assert!(a.starts_with("fh-github-acme-widgets-12-"), "{a}");
        assert!(a.len() <= 63);
        assert_ne!(a, pod_name("other", "github:Acme/Widgets#12"));
        let long = pod_name("fh", &format!("gitlab:{}#1", "group/".repeat(40)));
        assert!(long.len() <= 63 && !long.contains("--"), "{long}");
        assert!(long
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
        assert_eq!(label_value("-Acme/Widgets#12_"), "Acme-Widgets-12");
    }

    #[test]
    fn only_a_policy_that_denies_every_sandbox_pod_everything_is_accepted() {
        use k8s_openapi::api::networking::v1::{NetworkPolicyEgressRule, NetworkPolicyPort};
        assert_eq!(why_not_deny_all(&deny_all_policy()), None);
        let mut whole_namespace = deny_all_policy();
        whole_namespace.spec.as_mut().unwrap().pod_selector = Some(LabelSelector::default());
        assert_eq!(why_not_deny_all(&whole_namespace), None);
        let change = |edit: &dyn Fn(&mut NetworkPolicySpec)| {
            let mut policy = deny_all_policy();
            edit(policy.spec.as_mut().unwrap());
            why_not_deny_all(&policy).expect("refused")
        };
        let egress = change(&|s| {
            s.egress = Some(vec![NetworkPolicyEgressRule {
                ports: Some(vec![NetworkPolicyPort::default()]),
                to: None,
            }])
        });
        assert!(egress.contains("egress"), "{egress}");
        let one_type = change(&|s| s.policy_types = Some(vec!["Ingress".into()]));
        assert!(one_type.contains("Egress"), "{one_type}");
        let narrow = change(&|s| {
            s.pod_selector = Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(keys::INSTANCE.to_owned(), "other".to_owned())])),
                ..Default::default()
            })
        });
        assert!(narrow.contains("io.forgehand/instance=other"), "{narrow}");
        let mut empty = deny_all_policy();
        empty.spec = None;
        assert!(why_not_deny_all(&empty).is_some());
    }
}
