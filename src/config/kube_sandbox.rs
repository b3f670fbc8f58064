//! `sandbox.backend` and `sandbox.kubernetes`: where sandboxes run (the
//! Docker engine, or pods in a Kubernetes namespace), and for pods, the
//! registry their images come from (`images.registry`, `images.pull_*`).

use super::units::{ByteSize, HumanDuration};
use super::ConfigError;
use serde::Deserialize;
use std::time::Duration;

/// Which engine runs the sandboxes.
#[derive(Debug, Clone, PartialEq)]
pub enum SandboxBackendChoice {
    Docker,
    Kubernetes(KubeSandboxConfig),
}

/// How sandbox pods are made.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeSandboxConfig {
    /// Where the pods live; empty: the pod's own namespace (or the
    /// kubeconfig context's).
    pub namespace: String,
    /// Prefix of every sandbox image (`registry.example/team`); empty: the
    /// image names are used as they are.
    pub registry: String,
    /// `Always`, `IfNotPresent` or `Never`.
    pub pull_policy: String,
    /// Names of Secrets in the namespace used to pull the images.
    pub pull_secrets: Vec<String>,
    /// A RuntimeClass (gVisor, Kata) for sandbox pods, when set.
    pub runtime_class: Option<String>,
    pub ephemeral_storage: u64,
    /// Size limit of the workspace `emptyDir`.
    pub workspace_size: u64,
    /// The pod's `activeDeadlineSeconds`: Kubernetes ends a pod that
    /// outlives any task, even when forgehand is gone.
    pub active_deadline: Duration,
    /// How long a pod may take to be scheduled, pull its image and start.
    pub start_timeout: Duration,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawKubeSandbox {
    pub namespace: String,
    pub runtime_class: String,
    pub ephemeral_storage: ByteSize,
    pub workspace_size: ByteSize,
    pub active_deadline: HumanDuration,
    pub start_timeout: HumanDuration,
}

impl Default for RawKubeSandbox {
    fn default() -> Self {
        RawKubeSandbox {
            namespace: String::new(),
            runtime_class: String::new(),
            ephemeral_storage: ByteSize(10 << 30),
            workspace_size: ByteSize(10 << 30),
            active_deadline: HumanDuration(Duration::from_secs(6 * 3600)),
            start_timeout: HumanDuration(Duration::from_secs(300)),
        }
    }
}

/// `images.registry`, `images.pull_policy`, `images.pull_secrets`.
pub struct RawRegistry<'a> {
    pub registry: &'a str,
    pub pull_policy: &'a str,
    pub pull_secrets: &'a [String],
}

pub fn resolve_backend(
    backend: &str,
    raw: RawKubeSandbox,
    images: RawRegistry<'_>,
) -> Result<SandboxBackendChoice, ConfigError> {
    match backend.trim() {
        "docker" | "" => return Ok(SandboxBackendChoice::Docker),
        "kubernetes" => {}
        other => {
            return Err(ConfigError::invalid(
                "sandbox.backend",
                format!(
                    r#""{other}" is not a backend; use "docker" (the default: a Docker engine) or "kubernetes" (a pod per task)"#
                ),
            ))
        }
    }
    if !raw.namespace.is_empty() && !super::cluster::is_dns_label(&raw.namespace) {
        return Err(ConfigError::invalid(
            "sandbox.kubernetes.namespace",
            format!(
                r#""{}" is not a namespace name; use lowercase letters, digits and '-', or leave it empty for the daemon's own"#,
                raw.namespace
            ),
        ));
    }
    let pull_policy = pull_policy(images.pull_policy)?;
    check_pull_secrets(images.pull_secrets)?;
    let runtime_class = runtime_class(&raw.runtime_class)?;
    check_storage(&raw)?;
    Ok(SandboxBackendChoice::Kubernetes(KubeSandboxConfig {
        namespace: raw.namespace,
        registry: images.registry.trim().trim_end_matches('/').to_owned(),
        pull_policy,
        pull_secrets: images.pull_secrets.to_vec(),
        runtime_class,
        ephemeral_storage: raw.ephemeral_storage.bytes(),
        workspace_size: raw.workspace_size.bytes(),
        active_deadline: at_least(
            "sandbox.kubernetes.active_deadline",
            raw.active_deadline.0,
            Duration::from_secs(60),
            "6h",
        )?,
        start_timeout: at_least(
            "sandbox.kubernetes.start_timeout",
            raw.start_timeout.0,
            Duration::from_secs(5),
            "5m",
        )?,
    }))
}

/// `images.pull_policy`: one of the kubelet's policies; empty is its default.
fn pull_policy(value: &str) -> Result<String, ConfigError> {
    match value.trim() {
        "" => Ok("IfNotPresent".to_owned()),
        p @ ("Always" | "IfNotPresent" | "Never") => Ok(p.to_owned()),
        other => Err(ConfigError::invalid(
            "images.pull_policy",
            format!(r#""{other}" is not a pull policy; use "Always", "IfNotPresent" (default) or "Never""#),
        )),
    }
}

/// `images.pull_secrets`: names the API server would take for Secrets.
fn check_pull_secrets(secrets: &[String]) -> Result<(), ConfigError> {
    for secret in secrets {
        if !is_dns_subdomain(secret) {
            return Err(ConfigError::invalid(
                "images.pull_secrets",
                format!(
                    r#""{secret}" is not a Secret name; list the names of docker-registry Secrets in the sandbox namespace"#
                ),
            ));
        }
    }
    Ok(())
}

/// `sandbox.kubernetes.runtime_class`: empty leaves the cluster's default.
fn runtime_class(value: &str) -> Result<Option<String>, ConfigError> {
    match value.trim() {
        "" => Ok(None),
        name if is_dns_subdomain(name) => Ok(Some(name.to_owned())),
        other => Err(ConfigError::invalid(
            "sandbox.kubernetes.runtime_class",
            format!(
                r#""{other}" is not a RuntimeClass name (for example "gvisor"); leave it empty for the cluster's default"#
            ),
        )),
    }
}

/// The pod's scratch and workspace volumes must hold a checkout.
fn check_storage(raw: &RawKubeSandbox) -> Result<(), ConfigError> {
    const MIN_STORAGE: u64 = 64 << 20;
    for (key, size) in [
        ("sandbox.kubernetes.ephemeral_storage", raw.ephemeral_storage),
        ("sandbox.kubernetes.workspace_size", raw.workspace_size),
    ] {
        if size.bytes() < MIN_STORAGE {
            return Err(ConfigError::invalid(
                key,
                format!(r#""{size}" leaves no room for a checkout; use at least "64m" (default "10g")"#),
            ));
        }
    }
    Ok(())
}

/// A duration key with a floor below which pods could not start or work.
fn at_least(key: &str, value: Duration, least: Duration, default: &str) -> Result<Duration, ConfigError> {
    if value < least {
        return Err(ConfigError::invalid(
            key,
            format!(
                r#""{}" is too short; use at least "{}" (default "{default}")"#,
                humantime::format_duration(value),
                humantime::format_duration(least)
            ),
        ));
    }
    Ok(value)
}

/// An RFC 1123 subdomain: what names of Secrets and RuntimeClasses allow.
fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(super::cluster::is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn images<'a>(policy: &'a str, secrets: &'a [String]) -> RawRegistry<'a> {
        RawRegistry {
            registry: "registry.example/team/",
            pull_policy: policy,
            pull_secrets: secrets,
        }
    }

    #[test]
    fn docker_is_the_default_and_pods_are_checked_with_the_accepted_values_named() {
        assert_eq!(
            resolve_backend("", RawKubeSandbox::default(), images("", &[])).unwrap(),
            SandboxBackendChoice::Docker
        );
        let SandboxBackendChoice::Kubernetes(pods) = resolve_backend(
            "kubernetes",
            RawKubeSandbox::default(),
            images("", &["pull".into()]),
        )
        .unwrap() else {
            panic!("kubernetes asked for")
        };
        assert_eq!(pods.registry, "registry.example/team");
        assert_eq!(pods.pull_policy, "IfNotPresent");
        assert_eq!(pods.active_deadline, Duration::from_secs(6 * 3600));
        let err = |backend: &str, raw: RawKubeSandbox, policy: &str, secrets: &[String]| {
            resolve_backend(backend, raw, images(policy, secrets))
                .unwrap_err()
                .to_string()
        };
        assert!(err("podman", RawKubeSandbox::default(), "", &[])
            .contains(r#"sandbox.backend: "podman" is not a backend"#));
        assert!(err("kubernetes", RawKubeSandbox::default(), "Sometimes", &[]).contains("images.pull_policy"));
        assert!(
            err("kubernetes", RawKubeSandbox::default(), "", &["Bad_Name".into()])
                .contains("images.pull_secrets")
        );
        let short = RawKubeSandbox {
            start_timeout: HumanDuration(Duration::from_secs(1)),
            ..RawKubeSandbox::default()
        };
        assert!(err("kubernetes", short, "", &[])
            .contains(r#"sandbox.kubernetes.start_timeout: "1s" is too short"#));
        let tiny = RawKubeSandbox {
            workspace_size: ByteSize(1 << 20),
            ..RawKubeSandbox::default()
        };
        assert!(err("kubernetes", tiny, "", &[]).contains("sandbox.kubernetes.workspace_size"));
    }
}
