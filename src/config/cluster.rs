//! `cluster`: whether this daemon works alone or as one of several replicas
//! that share the forges, and how the replicas divide the tasks.

use super::units::HumanDuration;
use super::ConfigError;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterMode {
    /// One daemon: its journal alone decides what it works on.
    Single,
    /// Several replicas: each task is claimed with a Kubernetes Lease.
    Kubernetes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    pub mode: ClusterMode,
    /// Where the Leases live; empty: the pod's own namespace (or the
    /// kubeconfig context's).
    pub namespace: String,
    /// Replicas that work the same forges share it; it starts every Lease
    /// name and labels them.
    pub lease_group: String,
    /// How long a silent holder keeps a task (renewed every third of it).
    pub lease_duration: Duration,
    /// A folder every replica mounts (a ReadWriteMany volume) where the
    /// tasks' records (the plan, the agent's checkpoints) are kept, so a
    /// replica that takes a task over follows its plan and resumes its
    /// run; `None`: each replica keeps its own.
    pub checkpoint_dir: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawCluster {
    pub mode: String,
    pub namespace: String,
    pub lease_group: String,
    pub lease_duration: HumanDuration,
    pub checkpoint_dir: String,
}

impl Default for RawCluster {
    fn default() -> Self {
        RawCluster {
            mode: "single".into(),
            namespace: String::new(),
            lease_group: "forgehand".into(),
            lease_duration: HumanDuration(Duration::from_secs(30)),
            checkpoint_dir: String::new(),
        }
    }
}

/// The shortest lease: a renewal every third of it must fit a slow API call.
const SHORTEST_LEASE: Duration = Duration::from_secs(3);

/// `resolve_path` makes a relative folder the config file's.
pub fn resolve_cluster(
    raw: RawCluster,
    resolve_path: &dyn Fn(&str) -> PathBuf,
) -> Result<ClusterConfig, ConfigError> {
    let mode = match raw.mode.trim() {
        "single" | "" => ClusterMode::Single,
        "kubernetes" => ClusterMode::Kubernetes,
        other => {
            return Err(ConfigError::invalid(
                "cluster.mode",
                format!(
                    r#""{other}" is not a mode; use "single" (one daemon) or "kubernetes" (replicas that claim tasks with Leases)"#
                ),
            ))
        }
    };
    if !is_dns_label(&raw.lease_group) || raw.lease_group.len() > 40 {
        return Err(ConfigError::invalid(
            "cluster.lease_group",
            format!(
                r#""{}" cannot start a Lease name; use up to 40 lowercase letters, digits and '-', starting and ending with a letter or digit (default "forgehand")"#,
                raw.lease_group
            ),
        ));
    }
    if !raw.namespace.is_empty() && !is_dns_label(&raw.namespace) {
        return Err(ConfigError::invalid(
            "cluster.namespace",
            format!(
                r#""{}" is not a namespace name; use lowercase letters, digits and '-', or leave it empty for the pod's own"#,
                raw.namespace
            ),
        ));
    }
    let lease_duration = raw.lease_duration.0;
    if lease_duration < SHORTEST_LEASE {
        return Err(ConfigError::invalid(
            "cluster.lease_duration",
            format!(
                r#""{}" is too short; use at least "3s" (default "30s")"#,
                humantime::format_duration(lease_duration)
            ),
        ));
    }
    let checkpoint_dir = checkpoint_dir(&mode, raw.checkpoint_dir.trim(), resolve_path)?;
    Ok(ClusterConfig {
        mode,
        namespace: raw.namespace,
        lease_group: raw.lease_group,
        lease_duration,
        checkpoint_dir,
    })
}

/// `cluster.checkpoint_dir`: only among replicas, where it is what lets a
/// takeover resume a run.
fn checkpoint_dir(
    mode: &ClusterMode,
    dir: &str,
    resolve_path: &dyn Fn(&str) -> PathBuf,
) -> Result<Option<PathBuf>, ConfigError> {
    if dir.is_empty() {
        return Ok(None);
    }
    if *mode != ClusterMode::Kubernetes {
        return Err(ConfigError::invalid(
            "cluster.checkpoint_dir",
            format!(
                r#""{dir}" is set, but only replicas share checkpoints: a single daemon keeps them in daemon.state_dir. Set cluster.mode: "kubernetes" or remove the key"#
            ),
        ));
    }
    Ok(Some(resolve_path(dir)).filter(|p| p != Path::new("")))
}

/// An RFC 1123 label: what names of namespaces and Lease name parts allow.
pub(super) fn is_dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(mode: &str, group: &str, namespace: &str, seconds: u64) -> RawCluster {
        RawCluster {
            mode: mode.into(),
            namespace: namespace.into(),
            lease_group: group.into(),
            lease_duration: HumanDuration(Duration::from_secs(seconds)),
            checkpoint_dir: String::new(),
        }
    }

    fn resolve_cluster(raw: RawCluster) -> Result<ClusterConfig, ConfigError> {
        super::resolve_cluster(raw, &|p| Path::new("/etc/forgehand").join(p))
    }

    #[test]
    fn cluster_settings_are_checked_with_the_accepted_values_named() {
        let ok = resolve_cluster(raw("kubernetes", "fh-prod", "forgehand", 30)).unwrap();
        assert_eq!(ok.mode, ClusterMode::Kubernetes);
        assert_eq!(
            resolve_cluster(RawCluster::default()).unwrap().mode,
            ClusterMode::Single
        );
        let err = |r| resolve_cluster(r).unwrap_err().to_string();
        assert!(
            err(raw("swarm", "fh", "", 30)).contains(r#"cluster.mode: "swarm" is not a mode; use "single""#)
        );
        assert!(err(raw("kubernetes", "Prod_1", "", 30)).contains("cluster.lease_group"));
        assert!(err(raw("kubernetes", "fh", "My NS", 30)).contains("cluster.namespace"));
        assert!(err(raw("kubernetes", "fh", "", 1)).contains(r#"use at least "3s""#));
        let shared = |mode: &str| RawCluster {
            checkpoint_dir: "checkpoints".into(),
            ..raw(mode, "fh", "", 30)
        };
        assert_eq!(
            resolve_cluster(shared("kubernetes")).unwrap().checkpoint_dir,
            Some(PathBuf::from("/etc/forgehand/checkpoints"))
        );
        assert!(err(shared("single")).contains(
            r#"cluster.checkpoint_dir: "checkpoints" is set, but only replicas share checkpoints"#
        ));
    }
}
