//! `sandbox:` resolved: a sandbox's limits and folders, its egress tunnel,
//! its snapshots and the backend that runs it.

use super::raw::{RawImages, RawSandbox};
use super::{
    kube_sandbox, non_empty, positive_duration, ConfigError, EgressCredentials, SandboxBackendChoice,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    pub network_mode: String,
    pub drop_all_capabilities: bool,
    pub no_new_privileges: bool,
    /// `uid[:gid]` or a user name known to the image.
    pub user: String,
    pub pids_limit: i64,
    pub memory_bytes: u64,
    pub cpus: f64,
    pub read_only_root: bool,
    pub tmp_size: u64,
    pub home_dir: String,
    pub home_size: u64,
    pub workspace_dir: String,
    pub project_dir: String,
    pub exec_timeout: Duration,
    pub output_limit: usize,
    /// What may come out of a sandbox in one copy (its result), checked
    /// while the stream is read.
    pub copy_out: CopyOutLimits,
    /// Whether the egress tunnel may connect to private networks (a
    /// self-hosted registry there needs it); link-local never.
    pub egress_allow_private: bool,
    /// The daemon host's loopback may be reached (a registry beside it).
    pub egress_allow_loopback: bool,
    /// The port of the egress proxy on the sandbox's loopback.
    pub egress_proxy_port: u16,
    /// How tunnelled connections reach forgehand from the sandbox.
    pub egress_transport: EgressTransport,
    /// Where the per-sandbox egress sockets are (`<state_dir>/egress`).
    pub egress_socket_dir: PathBuf,
    /// The ports a CONNECT tunnel may reach; each tunnel must begin with a
    /// TLS ClientHello naming its host.
    pub egress_tls_ports: Vec<u16>,
    /// Credentials the relay adds on the host (`sandbox.egress.credentials`).
    pub egress_credentials: EgressCredentials,
    pub snapshots: SnapshotsConfig,
    /// Docker containers, or pods in a Kubernetes namespace.
    pub backend: SandboxBackendChoice,
}

/// `sandbox.egress.transport`: how the sandbox's proxy reaches forgehand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressTransport {
    /// A Unix socket bind-mounted into the sandbox when the engine can
    /// mount this host's folders; the exec stream otherwise.
    Auto,
    /// Always the socket: a sandbox that cannot have it is not started.
    Socket,
    /// Always the multiplexed exec stream (as on a remote engine).
    Exec,
}

/// `sandbox.snapshots`: what setup wrote, kept so the next task with the
/// same inputs skips setup.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotsConfig {
    pub enabled: bool,
    pub dir: PathBuf,
    /// Above this, the least recently used snapshots are removed.
    pub max_bytes: u64,
}

/// What may come out of a sandbox in one copy, checked while the stream
/// is read (`sandbox.copy_out_max_bytes`, `copy_out_max_entries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyOutLimits {
    /// Bytes of the tar stream (file contents and headers together).
    pub bytes: u64,
    /// Entries of the stream (files, folders, links, anything).
    pub entries: u64,
    /// Path components of one entry.
    pub depth: usize,
}

impl Default for CopyOutLimits {
    fn default() -> CopyOutLimits {
        CopyOutLimits {
            bytes: 4 << 30,
            entries: 1_000_000,
            depth: 128,
        }
    }
}

/// Resolves `sandbox:`. `images` names the registry sandbox pods pull from;
/// `state_dir` is the default home of egress sockets and snapshots. The
/// checks run in the order the keys are documented, so the first bad key
/// is the one reported.
pub(super) fn resolve_sandbox(
    mut s: RawSandbox,
    images: &RawImages,
    state_dir: &Path,
    resolve_path: &dyn Fn(&str) -> PathBuf,
) -> Result<SandboxConfig, ConfigError> {
    let backend = kube_sandbox::resolve_backend(
        &s.backend,
        std::mem::take(&mut s.kubernetes),
        kube_sandbox::RawRegistry {
            registry: &images.registry,
            pull_policy: &images.pull_policy,
            pull_secrets: &images.pull_secrets,
        },
    )?;
    if matches!(backend, SandboxBackendChoice::Kubernetes(_)) && s.egress.transport == "socket" {
        return Err(ConfigError::invalid(
            "sandbox.egress.transport",
            r#""socket" needs sandboxes on this host's Docker engine; with sandbox.backend: kubernetes the tunnel rides on exec (use "auto" or "exec")"#,
        ));
    }
    check_resources(&s)?;
    let output_limit = output_limit(&s)?;
    check_copy_out(&s)?;
    check_folders(&s)?;
    Ok(SandboxConfig {
        network_mode: non_empty("sandbox.network_mode", &s.network_mode)?,
        drop_all_capabilities: s.drop_all_capabilities,
        no_new_privileges: s.no_new_privileges,
        user: non_empty("sandbox.user", &s.user)?,
        pids_limit: s.pids_limit,
        memory_bytes: s.memory.bytes(),
        cpus: s.cpus,
        read_only_root: s.read_only_root,
        tmp_size: s.tmp_size.bytes(),
        home_dir: s.home_dir,
        home_size: s.home_size.bytes(),
        workspace_dir: s.workspace_dir,
        project_dir: s.project_dir,
        exec_timeout: positive_duration("sandbox.exec_timeout", s.exec_timeout)?,
        output_limit,
        copy_out: CopyOutLimits {
            bytes: s.copy_out_max_bytes.bytes(),
            entries: s.copy_out_max_entries,
            ..CopyOutLimits::default()
        },
        egress_allow_private: s.egress.allow_private,
        egress_allow_loopback: s.egress.allow_loopback,
        egress_proxy_port: proxy_port(s.egress.proxy_port)?,
        egress_transport: egress_transport(&s.egress.transport)?,
        egress_socket_dir: state_dir.join("egress"),
        egress_tls_ports: tls_ports(s.egress.tls_ports)?,
        egress_credentials: EgressCredentials::default(),
        snapshots: SnapshotsConfig {
            enabled: s.snapshots.enabled,
            dir: match s.snapshots.dir.trim() {
                "" => state_dir.join("snapshots"),
                dir => resolve_path(dir),
            },
            max_bytes: s.snapshots.max_bytes.bytes(),
        },
        backend,
    })
}

/// `pids_limit`, `cpus` and `memory`: enough for a shell and a build, and
/// what Docker accepts.
fn check_resources(s: &RawSandbox) -> Result<(), ConfigError> {
    if s.pids_limit < 16 {
        return Err(ConfigError::invalid(
            "sandbox.pids_limit",
            format!(
                "{} is too small for a shell and a build; use at least 16 (default 512)",
                s.pids_limit
            ),
        ));
    }
    if !(s.cpus.is_finite() && s.cpus > 0.0) {
        return Err(ConfigError::invalid(
            "sandbox.cpus",
            format!(
                "{} is not a CPU count; use a positive number such as 2 or 0.5",
                s.cpus
            ),
        ));
    }
    const MIN_MEMORY: u64 = 16 << 20;
    if s.memory.bytes() < MIN_MEMORY {
        return Err(ConfigError::invalid(
            "sandbox.memory",
            format!(
                r#""{}" is below Docker's minimum; use at least "16m" (default "4g")"#,
                s.memory
            ),
        ));
    }
    Ok(())
}

/// `output_limit`: a command's kept output, at least a kilobyte.
fn output_limit(s: &RawSandbox) -> Result<usize, ConfigError> {
    usize::try_from(s.output_limit.bytes())
        .ok()
        .filter(|n| *n >= 1024)
        .ok_or_else(|| {
            ConfigError::invalid(
                "sandbox.output_limit",
                format!(
                    r#""{}" is not usable; use a size of at least "1k" (default "1m")"#,
                    s.output_limit
                ),
            )
        })
}

/// `copy_out_max_*`: a result copied out must have room for a repository.
fn check_copy_out(s: &RawSandbox) -> Result<(), ConfigError> {
    if s.copy_out_max_bytes.bytes() < 1 << 20 {
        return Err(ConfigError::invalid(
            "sandbox.copy_out_max_bytes",
            format!(
                r#""{}" leaves no room for a repository; use at least "1m" (default "4g")"#,
                s.copy_out_max_bytes
            ),
        ));
    }
    if s.copy_out_max_entries < 100 {
        return Err(ConfigError::invalid(
            "sandbox.copy_out_max_entries",
            format!(
                "{} leaves no room for a repository; use at least 100 (default 1000000)",
                s.copy_out_max_entries
            ),
        ));
    }
    Ok(())
}

/// The container's folders are absolute, and the project lives on the
/// writable workspace volume.
fn check_folders(s: &RawSandbox) -> Result<(), ConfigError> {
    for (key, dir) in [
        ("sandbox.home_dir", &s.home_dir),
        ("sandbox.workspace_dir", &s.workspace_dir),
        ("sandbox.project_dir", &s.project_dir),
    ] {
        if !dir.starts_with('/') {
            return Err(ConfigError::invalid(
                key,
                format!(r#""{dir}" must be an absolute path inside the container"#),
            ));
        }
    }
    if !s
        .project_dir
        .starts_with(&format!("{}/", s.workspace_dir.trim_end_matches('/')))
    {
        return Err(ConfigError::invalid(
            "sandbox.project_dir",
            format!(
                r#""{}" must be inside sandbox.workspace_dir ("{}"), the writable volume"#,
                s.project_dir, s.workspace_dir
            ),
        ));
    }
    Ok(())
}

/// `egress.proxy_port`: port 0 cannot be listened on by name.
fn proxy_port(port: u16) -> Result<u16, ConfigError> {
    match port {
        0 => Err(ConfigError::invalid(
            "sandbox.egress.proxy_port",
            "must be a port from 1 to 65535 (default 3128)",
        )),
        port => Ok(port),
    }
}

fn egress_transport(value: &str) -> Result<EgressTransport, ConfigError> {
    match value {
        "auto" => Ok(EgressTransport::Auto),
        "socket" => Ok(EgressTransport::Socket),
        "exec" => Ok(EgressTransport::Exec),
        other => Err(ConfigError::invalid(
            "sandbox.egress.transport",
            format!("is `{other}`; use auto (default), socket or exec"),
        )),
    }
}

fn tls_ports(ports: Vec<u16>) -> Result<Vec<u16>, ConfigError> {
    if ports.contains(&0) {
        return Err(ConfigError::invalid(
            "sandbox.egress.tls_ports",
            "lists port 0; list ports from 1 to 65535 (default [443])",
        ));
    }
    Ok(ports)
}
