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
use tokio::io::{AsyncRead, AsyncWriteExt};

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
        let ask = Ask {
            command,
            timeout,
            kill_after,
            limit,
            deadline,
        };
        self.run_with_input(ask, None).await
    }

    /// [`Supervisor::run`] with `input` as the command's stdin (ended when
    /// `input` ends).
    pub async fn run_with_input(
        &self,
        ask: Ask<'_>,
        input: Option<std::pin::Pin<Box<dyn AsyncRead + Send>>>,
    ) -> std::io::Result<RunOutput> {
        let Ask {
            command,
            timeout,
            kill_after,
            limit,
            deadline,
        } = ask;
        let mut control = self.control.clone();
        let mut stream = control
            .open_stream()
            .await
            .map_err(|e| std::io::Error::other(format!("cannot open a stream to the supervisor: {e}")))?;
        let request = Request::Run {
            command: command.to_owned(),
            timeout_secs: timeout.as_secs().max(1),
            kill_after_secs: kill_after.as_secs(),
            stdin: input.is_some(),
        };
        supervisor::write_request(&mut stream, &request).await?;
        let (mut stream, mut sending) = tokio::io::split(stream);
        let feed = async move {
            if let Some(mut input) = input {
                tokio::io::copy(&mut input, &mut sending).await?;
                sending.shutdown().await?;
            }
            Ok::<(), std::io::Error>(())
        };
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
        let exchange = async {
            let (fed, collected) = tokio::join!(feed, collect);
            collected.and(fed)
        };
        match tokio::time::timeout(deadline, exchange).await {
            Ok(result) => result?,
            Err(_) => tracing::warn!("a command outlived its timeout and the kill that should end it"),
        }
        Ok(out)
    }
}

/// What a command over the supervisor is, and its bounds.
pub struct Ask<'a> {
    pub command: &'a str,
    pub timeout: Duration,
    pub kill_after: Duration,
    /// Most bytes kept of each of stdout and stderr.
    pub limit: usize,
    /// How long the whole exchange may take.
    pub deadline: Duration,
}
