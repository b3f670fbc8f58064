//! The doctor's row for the credentials the egress relay adds on the host
//! (`sandbox.egress.credentials`): which, for which hosts, repositories and
//! phases, and whether their ports are open to CONNECT. Never a value.

use super::{check, Check, Status};
use crate::config::{Config, SandboxBackendChoice};

pub(super) fn credentials_check(config: &Config) -> Option<Check> {
    let sandbox = &config.sandbox;
    let credentials = &sandbox.egress_credentials.credentials;
    if credentials.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    let mut status = Status::Pass;
    for c in credentials {
        let phases = match (c.setup, c.agent) {
            (true, true) => "setup and agent",
            (false, true) => "agent",
            _ => "setup",
        };
        let repositories: Vec<&str> = c.repositories.iter().map(|p| p.as_str()).collect();
        let methods: Vec<&str> = c.methods.iter().map(http::Method::as_str).collect();
        lines.push(format!(
            "{} (set) for {} {}:{}{} in {phases}, repositories {}",
            c.name,
            methods.join("/"),
            c.host,
            c.port,
            c.path_prefix.as_deref().unwrap_or(""),
            repositories.join(", ")
        ));
        if !sandbox.egress_tls_ports.contains(&c.port) {
            status = Status::Warn;
            lines.push(format!(
                "port {} is not in sandbox.egress.tls_ports: add it, or HTTPS to {} is refused",
                c.port, c.host
            ));
        }
    }
    if matches!(sandbox.backend, SandboxBackendChoice::Kubernetes(_)) {
        status = Status::Warn;
        lines.push(
            "sandbox.backend is kubernetes: pods get the plain tunnel, without these credentials".into(),
        );
    }
    if !sandbox.egress_credentials.extra_roots.is_empty() {
        lines.push(format!(
            "{} extra root(s) from sandbox.egress.extra_ca_file",
            sandbox.egress_credentials.extra_roots.len()
        ));
    }
    Some(check("egress credentials", status, lines.join("; ")))
}
