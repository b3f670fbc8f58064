//! `forgehand doctor --probe-network`: whether the cluster enforces the
//! deny-all NetworkPolicy of sandbox pods. Kubernetes stores any policy,
//! but only a network plugin that implements them (Calico, Cilium, …)
//! applies it; a cluster whose plugin does not gives every sandbox the pod
//! network. The probe starts a real sandbox pod, has it try to open a TCP
//! connection to the API server, and removes it.

use super::{check, Check, Status};
use crate::sandbox::{SandboxBackend, SandboxSpec};
use std::time::Duration;

/// How long the pod tries to connect.
const CONNECT_SECONDS: u64 = 5;

/// The check's name.
pub const NAME: &str = "network policy";

/// Where the probe runs: a pod of `backend` from `image`, holding `project`
/// (an empty folder will do: commands need their folder).
pub struct ProbePod<'a> {
    pub backend: &'a dyn SandboxBackend,
    pub image: &'a str,
    pub project: &'a std::path::Path,
}

/// Runs the probe against `host:port`.
pub async fn probe(pod: ProbePod<'_>, host: &str, port: u16) -> Check {
    let ProbePod {
        backend,
        image,
        project,
    } = pod;
    let spec = SandboxSpec {
        task_id: format!("doctor-network-probe-{}", std::process::id()),
        forge: "doctor".into(),
        repository: "doctor/network-probe".into(),
        image: image.to_owned(),
        env: Vec::new(),
    };
    let sandbox = match backend.prepare(&spec, Some(project)).await {
        Ok(sandbox) => sandbox,
        Err(e) => return check(NAME, Status::Fail, format!("cannot start a probe pod: {e}")),
    };
    let command = format!(
        "if command -v bash >/dev/null 2>&1; then if timeout {CONNECT_SECONDS} bash -c 'exec 3<>/dev/tcp/{host}/{port}' 2>/dev/null; then echo reached; else echo blocked; fi; else echo no-bash; fi"
    );
    let ran = sandbox
        .exec(&command, Some(Duration::from_secs(CONNECT_SECONDS + 30)))
        .await;
    if let Err(e) = sandbox.remove().await {
        tracing::warn!("cannot remove the network probe's pod: {e}");
    }
    match ran {
        Ok(output) if !output.stdout.trim().is_empty() => verdict(output.stdout.trim(), host, port, image),
        Ok(output) => check(
            NAME,
            Status::Fail,
            format!(
                "the probe pod's test printed nothing (exit {:?}): {}",
                output.exit_code,
                output.stderr.trim()
            ),
        ),
        Err(e) => check(
            NAME,
            Status::Fail,
            format!("the probe pod could not run its test: {e}"),
        ),
    }
}

/// What the probe's one word means.
fn verdict(word: &str, host: &str, port: u16, image: &str) -> Check {
    match word {
        "blocked" => check(
            NAME,
            Status::Pass,
            format!("a sandbox pod could not reach the API server at {host}:{port}: the deny-all policy holds"),
        ),
        "reached" => check(
            NAME,
            Status::Fail,
            format!(
                "a sandbox pod reached the API server at {host}:{port}: this cluster does not enforce NetworkPolicy, so sandboxes have the pod network. Use a network plugin that enforces it (Calico, Cilium, …) before running tasks"
            ),
        ),
        other => check(
            NAME,
            Status::Warn,
            format!("cannot tell: the probe image {image} has no bash to try a connection with ({other:?})"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_that_gets_through_fails_the_check() {
        assert_eq!(verdict("blocked", "10.0.0.1", 443, "i").status, Status::Pass);
        let reached = verdict("reached", "10.0.0.1", 443, "i");
        assert_eq!(reached.status, Status::Fail);
        assert!(reached.detail.contains("does not enforce NetworkPolicy"));
        assert_eq!(verdict("no-bash", "h", 1, "i").status, Status::Warn);
    }
}
