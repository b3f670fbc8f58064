//! Where a task's code runs. The [`SandboxBackend`] trait starts sandboxes and
//! reaps leftovers; a [`Sandbox`] is one task's isolated environment with
//! exec, a long-lived stdio stream (for MCP servers) and tree copies in and
//! out. Docker ([`docker`]) and Kubernetes pods ([`kubernetes`]) are the
//! real backends. Each only makes its sandboxes and provides a
//! [`transport::Transport`] to them (a process with stdio streams, tar in
//! and out); the sandbox itself, with the supervisor, commands, copies and
//! the egress tunnel, is [`supervised::SupervisedSandbox`] for both. Core
//! logic depends on the traits only.

pub mod archive;
pub mod command;
pub mod docker;
pub mod egress;
pub mod egress_socket;
pub mod helper;
pub mod kubernetes;
#[cfg(test)]
pub mod local;
pub mod mux;
pub mod output;
pub mod phase_processes;
pub mod supervised;
pub mod transport;
pub mod tree_out;

use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

pub use output::CappedOutput;

/// Labels put on every container forgehand makes, so it can find its own.
pub mod labels {
    pub const MANAGED: &str = "io.forgehand.managed";
    pub const INSTANCE: &str = "io.forgehand.instance";
    /// The id of the state folder of the daemon that made it: a daemon
    /// reaps only its own, whatever the instance ids say.
    pub const DAEMON: &str = "io.forgehand.daemon";
    pub const TASK: &str = "io.forgehand.task";
    pub const FORGE: &str = "io.forgehand.forge";
    pub const REPOSITORY: &str = "io.forgehand.repository";
}

/// What a sandbox is made for: the task it serves and the image it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// Stable id of the task (the journal key); one sandbox per task.
    pub task_id: String,
    /// `github`, `gitlab`, or `local` for a task run by hand.
    pub forge: String,
    /// `owner/name` (GitLab: the full project path).
    pub repository: String,
    pub image: String,
    /// Plain variables for every process in the sandbox (a repository's
    /// `env`); never a secret.
    pub env: Vec<(String, String)>,
}

/// The result of one command run by the command executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// The command's exit code; `None` when it was killed on timeout.
    pub exit_code: Option<i64>,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
    pub timed_out: bool,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

impl ExecOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

/// A process inside the sandbox whose stdin/stdout are a byte stream (no TTY;
/// stderr kept apart). MCP stdio sessions run over this.
pub struct ExecStream {
    /// Backend id of the process, for [`Sandbox::exec_status`].
    pub id: String,
    pub stdin: Pin<Box<dyn AsyncWrite + Send>>,
    pub stdout: Pin<Box<dyn AsyncRead + Send>>,
    pub stderr: Pin<Box<dyn AsyncRead + Send>>,
}

/// Whether a streamed process still runs, and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecStatus {
    pub running: bool,
    pub exit_code: Option<i64>,
}

/// What went wrong with a sandbox, in words that fit every backend; the
/// backend fills in what it is called and what an operator can do.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The engine or cluster does not answer at all.
    #[error("cannot reach {engine}: {detail}. {advice}")]
    Unreachable {
        /// "Docker at unix:///var/run/docker.sock", "the Kubernetes API".
        engine: String,
        detail: String,
        advice: &'static str,
    },
    #[error("image {image} is not available: {advice}")]
    ImageMissing { image: String, advice: &'static str },
    #[error("the sandbox {sandbox} is no longer running ({state}); the task needs a new sandbox")]
    Gone { sandbox: String, state: String },
    #[error("cannot copy {path} into the sandbox: {detail}")]
    CopyInSource { path: PathBuf, detail: String },
    #[error("cannot copy {path} out of the sandbox: {detail}")]
    CopyOut { path: String, detail: String },
    /// The engine or cluster answered, with a refusal.
    #[error("{engine} refused to {action}: {detail}")]
    Refused {
        /// "Docker", "the Kubernetes API".
        engine: &'static str,
        action: String,
        detail: String,
        retryable: bool,
    },
    #[error("cannot write {path}: files can only be put under {workspace}/ (the writable volume); the rest of the sandbox is read-only or tmpfs")]
    OutsideWorkspace { path: String, workspace: String },
    #[error("sandbox {sandbox} cannot start: {detail}")]
    NotStarted { sandbox: String, detail: String },
    #[error("another forgehand daemon (state folder id {daemon}) uses daemon.instance_id `{instance}` on this {engine} (its sandbox {sandbox} is running): give each daemon its own daemon.instance_id, or leave it empty for one of its own")]
    InstanceInUse {
        engine: &'static str,
        instance: String,
        sandbox: String,
        daemon: String,
    },
    #[error("sandboxes cannot start safely here: {detail}")]
    Unsafe { detail: String },
    #[error("cannot {action} in the sandbox: {detail}")]
    InSandbox { action: String, detail: String },
    #[error("local I/O failed while trying to {action}: {source}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },
}

impl SandboxError {
    /// Whether trying again later can help (the engine was briefly away or
    /// overloaded), as opposed to an error that needs a person.
    pub fn is_retryable(&self) -> bool {
        match self {
            SandboxError::Unreachable { .. } => true,
            SandboxError::Refused { retryable, .. } => *retryable,
            _ => false,
        }
    }
}

/// One task's isolated environment.
#[async_trait]
pub trait Sandbox: Send + Sync {
    /// Backend id (the Docker container id).
    fn id(&self) -> &str;

    /// The folder commands run in and the project is copied to.
    fn project_dir(&self) -> &str;

    /// Path of forgehand's editor executable inside the sandbox, when it has one.
    fn editor_path(&self) -> Option<&str>;

    /// Copies the contents of `host_dir` into `sandbox_dir` (created if
    /// missing; its parent must exist and be writable).
    async fn copy_in(&self, host_dir: &Path, sandbox_dir: &str) -> Result<(), SandboxError>;

    /// [`Sandbox::copy_in`], with `replaced` files (paths relative to
    /// `sandbox_dir`) written in the same copy in place of the folder's own.
    async fn copy_in_replacing(
        &self,
        host_dir: &Path,
        sandbox_dir: &str,
        replaced: &[(String, Vec<u8>)],
    ) -> Result<(), SandboxError> {
        self.copy_in(host_dir, sandbox_dir).await?;
        for (relative, contents) in replaced {
            self.put_file(
                &format!("{}/{relative}", sandbox_dir.trim_end_matches('/')),
                contents,
                0o644,
            )
            .await?;
        }
        Ok(())
    }

    /// `sandbox_dir` as a tar stream, to be read as data
    /// ([`tree_out::read_tree`]): the host never unpacks what a sandbox
    /// wrote, so nothing in it is ever reached through a host path.
    async fn read_out(&self, sandbox_dir: &str) -> Result<tree_out::TreeStream, SandboxError>;

    /// Writes one file (for example a helper executable) at an absolute path
    /// inside the workspace folder, the only place the archive API can write
    /// to under a read-only root. Missing parent folders are created.
    async fn put_file(&self, path: &str, contents: &[u8], mode: u32) -> Result<(), SandboxError>;

    /// The command executor: runs `command` with `sh -c` in the project folder.
    /// `timeout` defaults to the configured `sandbox.exec_timeout`.
    async fn exec(&self, command: &str, timeout: Option<Duration>) -> Result<ExecOutput, SandboxError>;

    /// Starts `argv` with its stdin/stdout as a byte stream.
    async fn exec_stream(&self, argv: &[String]) -> Result<ExecStream, SandboxError>;

    async fn exec_status(&self, exec_id: &str) -> Result<ExecStatus, SandboxError>;

    /// Removes the sandbox and everything in it. Removing twice is fine.
    async fn remove(&self) -> Result<(), SandboxError>;

    /// The host end of the sandbox's egress tunnel, when it has one: the
    /// task sets what each phase may reach and reads what it did.
    fn egress(&self) -> Option<std::sync::Arc<egress::Egress>> {
        None
    }
}

/// Parses `uid[:gid]`; a name (resolved by the image) owns files as 1000:1000.
pub(crate) fn numeric_owner(user: &str) -> (u64, u64) {
    let mut parts = user.splitn(2, ':');
    let uid = parts.next().and_then(|u| u.parse().ok());
    let gid = parts.next().and_then(|g| g.parse().ok());
    match (uid, gid) {
        (Some(uid), Some(gid)) => (uid, gid),
        (Some(uid), None) => (uid, uid),
        _ => (1000, 1000),
    }
}

/// Splits `/a/b/c` into (`/a/b`, `c`).
pub(crate) fn split_parent(path: &str) -> Option<(&str, &str)> {
    let trimmed = path.trim_end_matches('/');
    let (parent, name) = trimmed.rsplit_once('/')?;
    if name.is_empty() || name == ".." || name == "." {
        return None;
    }
    Some((if parent.is_empty() { "/" } else { parent }, name))
}

/// The part of `path` under the workspace folder, the one place files can
/// be put under a read-only root.
pub(crate) fn within_workspace<'a>(workspace: &str, path: &'a str) -> Result<&'a str, SandboxError> {
    let workspace = workspace.trim_end_matches('/');
    path.strip_prefix(workspace)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| !rest.is_empty() && !rest.split('/').any(|part| part == ".." || part.is_empty()))
        .ok_or_else(|| SandboxError::OutsideWorkspace {
            path: path.to_owned(),
            workspace: workspace.to_owned(),
        })
}

/// A folder to copy into a sandbox must exist and be a folder.
pub(crate) fn check_copy_source(dir: &Path) -> Result<(), SandboxError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(SandboxError::CopyInSource {
            path: dir.to_owned(),
            detail: "it is not a folder; pass the workspace folder".into(),
        }),
        Err(e) => Err(SandboxError::CopyInSource {
            path: dir.to_owned(),
            detail: format!("{e}; check that the workspace was cloned"),
        }),
    }
}

/// Checks a copy-in's source folder and splits its destination into the
/// folder the archive is unpacked in and the name it unpacks as.
pub(crate) fn copy_in_target<'a>(
    host_dir: &Path,
    sandbox_dir: &'a str,
) -> Result<(&'a str, &'a str), SandboxError> {
    check_copy_source(host_dir)?;
    split_parent(sandbox_dir).ok_or_else(|| SandboxError::CopyInSource {
        path: host_dir.to_owned(),
        detail: format!("the destination {sandbox_dir:?} is not an absolute folder path"),
    })
}

/// Makes sandboxes and cleans up after crashes.
#[async_trait]
pub trait SandboxBackend: Send + Sync {
    /// Creates and starts a sandbox for `spec`, then copies `workspace` (when
    /// given) into its project folder. On any error nothing is left behind.
    /// A leftover sandbox of the same task is replaced, never duplicated.
    async fn prepare(
        &self,
        spec: &SandboxSpec,
        workspace: Option<&Path>,
    ) -> Result<Box<dyn Sandbox>, SandboxError>;

    /// Removes every sandbox of this daemon instance whose task id is not in
    /// `running`; returns the ids removed.
    async fn reap(&self, running: &[String]) -> Result<Vec<String>, SandboxError>;

    /// Whether the engine answers (for `/readyz`).
    async fn ping(&self) -> Result<(), SandboxError>;

    /// The engine's id of `image` (its config digest), which setup
    /// snapshots are keyed on. `None`: this backend keeps no snapshots.
    async fn image_id(&self, _image: &str) -> Result<Option<String>, SandboxError> {
        Ok(None)
    }

    /// What a maintainer is told when a task fails on a sandbox error:
    /// whom to ask, about what, in this backend's words.
    fn operator_advice(&self) -> &'static str;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_parse_from_the_user_setting() {
        assert_eq!(numeric_owner("1000:1000"), (1000, 1000));
        assert_eq!(numeric_owner("1001"), (1001, 1001));
        assert_eq!(numeric_owner("agent"), (1000, 1000));
    }

    #[test]
    fn parent_split_accepts_absolute_folders_only() {
        assert_eq!(
            split_parent("/workspace/project"),
            Some(("/workspace", "project"))
        );
        assert_eq!(
            split_parent("/workspace/project/"),
            Some(("/workspace", "project"))
        );
        assert_eq!(split_parent("/tmp"), Some(("/", "tmp")));
        assert_eq!(split_parent("relative"), None);
        assert_eq!(split_parent("/a/.."), None);
    }

    #[test]
    fn copy_in_targets_need_an_existing_folder_and_an_absolute_destination() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            copy_in_target(dir.path(), "/workspace/project").unwrap(),
            ("/workspace", "project")
        );
        let err = copy_in_target(dir.path(), "project").unwrap_err().to_string();
        assert!(
            err.contains("\"project\" is not an absolute folder path"),
            "{err}"
        );
        let missing = dir.path().join("missing");
        let err = copy_in_target(&missing, "/workspace/project")
            .unwrap_err()
            .to_string();
        assert!(err.contains("check that the workspace was cloned"), "{err}");
    }
}
