//! The host end of the supervisor's session (see [`forgehand_editor::supervisor`]):
//! commands run over streams of one long-lived exec instead of a `docker
//! exec` each, and the sandbox's tunnelled connections are handed to
//! [`Egress`]. When the session ends (the supervisor died), callers fall
//! back to a plain exec.

use super::egress::Egress;
use super::{CappedOutput, ExecStream};
use crate::config::SandboxConfig;
use forgehand_editor::supervisor::{self, Exit, Request};
use futures_util::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct Supervisor {
    control: tokio_yamux::Control,
    alive: Arc<AtomicBool>,
    _driver: tokio_util::task::AbortOnDropHandle<()>,
}

/// What a command left: its output (capped) and how it ended (`None`: the
/// stream broke before it said).
pub struct RunOutput {
    pub stdout: CappedOutput,
    pub stderr: CappedOutput,
    pub exit: Option<Exit>,
}

impl Supervisor {
    /// The command line of `forgehand-editor supervise` at `editor`: commands
    /// run in the project folder, the in-sandbox proxy listens where the
    /// sandbox's proxy settings point.
    pub fn argv(editor: &str, config: &SandboxConfig) -> Vec<String> {
        vec![
            editor.to_owned(),
            "supervise".into(),
            "--dir".into(),
            config.project_dir.clone(),
            "--proxy".into(),
            format!("127.0.0.1:{}", config.egress_proxy_port),
        ]
    }

    /// Drives the session over `stream` (the supervisor's stdin/stdout).
    pub fn start(stream: ExecStream, egress: Arc<Egress>) -> Supervisor {
        let io = tokio::io::join(stream.stdout, stream.stdin);
        let mut session = tokio_yamux::Session::new_client(io, supervisor::yamux_config());
        let control = session.control();
        let alive = Arc::new(AtomicBool::new(true));
        let flag = alive.clone();
        let driver = tokio::spawn(async move {
            while let Some(inbound) = session.next().await {
                match inbound {
                    Ok(tunnel) => {
                        let egress = egress.clone();
                        tokio::spawn(async move { egress.handle(tunnel).await });
                    }
                    Err(e) => {
                        tracing::warn!("the sandbox supervisor's session failed: {e}");
                        break;
                    }
                }
            }
            flag.store(false, Ordering::SeqCst);
        });
        Supervisor {
            control,
            alive,
            _driver: tokio_util::task::AbortOnDropHandle::new(driver),
        }
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Runs `command` with `sh -c` in the project folder. `limit` caps each
    /// of stdout and stderr; `deadline` bounds the whole exchange.
    pub async fn run(
        &self,
        command: &str,
        timeout: Duration,
        kill_after: Duration,
        limit: usize,
        deadline: Duration,
    ) -> std::io::Result<RunOutput> {
        let mut control = self.control.clone();
        let mut stream = control
            .open_stream()
            .await
            .map_err(|e| std::io::Error::other(format!("cannot open a stream to the supervisor: {e}")))?;
        let request = Request::Run {
            command: command.to_owned(),
            timeout_secs: timeout.as_secs().max(1),
            kill_after_secs: kill_after.as_secs(),
        };
        supervisor::write_request(&mut stream, &request).await?;
        let mut out = RunOutput {
            stdout: CappedOutput::new(limit),
            stderr: CappedOutput::new(limit),
            exit: None,
        };
        let collect = async {
            while let Some((kind, payload)) = supervisor::read_frame(&mut stream).await? {
                match kind {
                    supervisor::STDOUT => out.stdout.push(&payload),
                    supervisor::STDERR => out.stderr.push(&payload),
                    supervisor::EXIT => {
                        out.exit = serde_json::from_slice(&payload).ok();
                        break;
                    }
                    _ => {}
                }
            }
            Ok::<(), std::io::Error>(())
        };
        match tokio::time::timeout(deadline, collect).await {
            Ok(result) => result?,
            Err(_) => tracing::warn!("a command outlived its timeout and the kill that should end it"),
        }
        Ok(out)
    }
}
