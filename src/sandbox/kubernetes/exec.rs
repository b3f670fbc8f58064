//! Processes in a sandbox pod, over the API server's exec WebSocket.
//!
//! Frames carry a channel byte: 0 stdin, 1 stdout, 2 stderr, 3 the final
//! `Status`. `v5.channel.k8s.io` adds 255 (`[255, 0]`: stdin is at its end),
//! which is how a `tar -x` learns that the archive is over. A `v4` server
//! has no such frame: closing the WebSocket would lose the exit status, so
//! there stdin stays open and callers bound their input themselves (see
//! [`PodProcess::signals_end_of_input`]).

use crate::sandbox::transport::{Process, ProcessExit};
use bytes::Bytes;
use futures_util::{FutureExt, SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::AttachParams;
use std::time::Duration;
use tokio::io::{AsyncReadExt, DuplexStream};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const STATUS: u8 = 3;
const CLOSE: u8 = 255;

/// Idle exec streams (an MCP session between turns) are pinged so proxies
/// and load balancers in front of the API server keep them.
const PING_EVERY: Duration = Duration::from_secs(30);
const STDIN_BUFFER: usize = 256 * 1024;

/// One process started over exec.
pub struct PodProcess {
    /// Its stdin (when asked for); shut it down to end the input.
    pub stdin: Option<DuplexStream>,
    pub stdout: mpsc::Receiver<std::io::Result<Bytes>>,
    pub stderr: mpsc::Receiver<std::io::Result<Bytes>>,
    /// `Some` once the process ended.
    pub exit: watch::Receiver<Option<ProcessExit>>,
    v5: bool,
}

impl PodProcess {
    /// Whether the server learns of the end of stdin (`v5.channel.k8s.io`).
    /// On `v4` the input must say its own length (for example `head -c`).
    pub fn signals_end_of_input(&self) -> bool {
        self.v5
    }

    /// Waits for the exit status.
    pub async fn wait(&mut self) -> ProcessExit {
        match self.exit.wait_for(Option::is_some).await {
            Ok(exit) => exit.clone().unwrap_or_else(unsaid),
            Err(_) => unsaid(),
        }
    }
}

impl From<PodProcess> for Process {
    fn from(process: PodProcess) -> Process {
        Process {
            stdin: process
                .stdin
                .map(|stdin| Box::pin(stdin) as std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>),
            stdout: process.stdout,
            stderr: process.stderr,
            exit: process.exit,
        }
    }
}

fn unsaid() -> ProcessExit {
    ProcessExit {
        code: None,
        message: Some("the exec stream ended before the process's exit status".into()),
    }
}

/// Starts `argv` in `container` of `pod`.
pub async fn start(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
    argv: Vec<String>,
    with_stdin: bool,
) -> Result<PodProcess, kube::Error> {
    let params = AttachParams::default()
        .container(container)
        .stdin(with_stdin)
        .stdout(true)
        .stderr(true);
    let request = kube::core::Request::new(<Pod as kube::Resource>::url_path(&(), Some(namespace)))
        .exec(pod, argv, &params)
        .map_err(kube::Error::BuildRequest)?;
    let connection = client.connect(request).await?;
    let v5 = connection.supports_stream_close();
    let (stdin_ours, stdin_theirs) = tokio::io::duplex(STDIN_BUFFER);
    let (stdout_tx, stdout) = mpsc::channel(64);
    let (stderr_tx, stderr) = mpsc::channel(256);
    let (exit_tx, exit) = watch::channel(None);
    tokio::spawn(pump(
        connection.into_stream(),
        v5,
        with_stdin.then_some(stdin_ours),
        stdout_tx,
        stderr_tx,
        exit_tx,
    ));
    Ok(PodProcess {
        stdin: with_stdin.then_some(stdin_theirs),
        stdout,
        stderr,
        exit,
        v5,
    })
}

/// Moves frames between the WebSocket and the process's pipes until the
/// final `Status` (or the end of the stream).
async fn pump<S>(
    socket: tokio_tungstenite::WebSocketStream<S>,
    v5: bool,
    mut stdin: Option<DuplexStream>,
    stdout: mpsc::Sender<std::io::Result<Bytes>>,
    stderr: mpsc::Sender<std::io::Result<Bytes>>,
    exit: watch::Sender<Option<ProcessExit>>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut source) = socket.split();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.reset();
    let mut outputs = Outputs {
        stdout,
        stderr,
        exit,
        stderr_dropped: 0,
    };
    loop {
        let read_stdin = async {
            match stdin.as_mut() {
                Some(input) => input.read(&mut buffer[1..]).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            frame = source.next() => {
                if !outputs.deliver(frame).await {
                    break;
                }
            }
            read = read_stdin => match read {
                Ok(0) | Err(_) => {
                    stdin = None;
                    if v5 && sink.send(Message::binary(vec![CLOSE, STDIN])).await.is_err() {
                        break;
                    }
                }
                Ok(n) => {
                    let len = gather_burst(stdin.as_mut(), &mut buffer, n);
                    buffer[0] = STDIN;
                    if sink.send(Message::binary(buffer[..=len].to_vec())).await.is_err() {
                        break;
                    }
                }
            },
            _ = ping.tick() => {
                if sink.send(Message::Ping(Bytes::new())).await.is_err() {
                    break;
                }
            }
        }
    }
    outputs.finish();
    let _ = sink.close().await;
}

/// After `n` bytes of stdin landed in `buffer[1..]`, reads whatever else is
/// ready now behind them, and returns the new length. What was written in
/// the same burst goes out in the same frame: two small TCP writes in a
/// row would wait on Nagle and a delayed ACK (tens of milliseconds).
fn gather_burst(input: Option<&mut DuplexStream>, buffer: &mut [u8], n: usize) -> usize {
    let mut len = n;
    if let Some(input) = input {
        while len + 1 < buffer.len() {
            match input.read(&mut buffer[len + 1..]).now_or_never() {
                Some(Ok(more)) if more > 0 => len += more,
                _ => break,
            }
        }
    }
    len
}

/// Where the server's frames go: the process's output pipes and its exit.
struct Outputs {
    stdout: mpsc::Sender<std::io::Result<Bytes>>,
    stderr: mpsc::Sender<std::io::Result<Bytes>>,
    exit: watch::Sender<Option<ProcessExit>>,
    /// Chunks of stderr nobody read.
    stderr_dropped: usize,
}

impl Outputs {
    /// Hands one frame on; `false` once the stream is over (the status
    /// came, the server closed, or the stream broke).
    async fn deliver(
        &mut self,
        frame: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    ) -> bool {
        match frame {
            Some(Ok(Message::Binary(bytes))) if bytes.len() > 1 => match bytes[0] {
                STDOUT => {
                    // A reader that went away still wants the status.
                    let _ = self.stdout.send(Ok(bytes.slice(1..))).await;
                }
                // Nobody may be reading stderr: never let it block stdout.
                STDERR if self.stderr.try_send(Ok(bytes.slice(1..))).is_err() => self.stderr_dropped += 1,
                STATUS => {
                    let _ = self.exit.send(Some(exit_of(&bytes[1..])));
                    return false;
                }
                _ => {}
            },
            Some(Ok(Message::Close(_))) | None => return false,
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                let _ = self
                    .stdout
                    .send(Err(std::io::Error::other(format!("the exec stream broke: {e}"))))
                    .await;
                return false;
            }
        }
        true
    }

    /// The stream is over: a process whose status never came still ends.
    fn finish(self) {
        if self.stderr_dropped > 0 {
            tracing::debug!(
                chunks = self.stderr_dropped,
                "stderr of a pod process was not read; chunks dropped"
            );
        }
        self.exit.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(unsaid());
                true
            } else {
                false
            }
        });
    }
}

/// Reads the exit code out of the exec's `Status`: `Success`, or
/// `NonZeroExitCode` with the code as the `ExitCode` cause's message.
pub fn exit_of(body: &[u8]) -> ProcessExit {
    let Ok(status) = serde_json::from_slice::<Status>(body) else {
        return ProcessExit {
            code: None,
            message: Some(format!(
                "the exec's status is not a Status object: {}",
                String::from_utf8_lossy(body)
            )),
        };
    };
    if status.status.as_deref() == Some("Success") {
        return ProcessExit {
            code: Some(0),
            message: None,
        };
    }
    let code = (status.reason.as_deref() == Some("NonZeroExitCode"))
        .then(|| {
            status
                .details
                .as_ref()?
                .causes
                .as_ref()?
                .iter()
                .find(|cause| cause.reason.as_deref() == Some("ExitCode"))?
                .message
                .as_deref()?
                .parse::<i64>()
                .ok()
        })
        .flatten();
    ProcessExit {
        code,
        message: if code.is_some() { None } else { status.message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_read_from_the_status_shapes_the_api_server_sends() {
        assert_eq!(exit_of(br#"{"metadata":{},"status":"Success"}"#).code, Some(0));
        let failed = br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        assert_eq!(
            exit_of(failed),
            ProcessExit {
                code: Some(3),
                message: None
            }
        );
        let not_started = br#"{"metadata":{},"status":"Failure","message":"exec: \"nope\": executable file not found in $PATH","reason":"InternalError"}"#;
        let exit = exit_of(not_started);
        assert_eq!(exit.code, None);
        assert!(exit.message.unwrap().contains("executable file not found"));
        assert!(exit_of(b"not json")
            .message
            .unwrap()
            .contains("not a Status object"));
    }
}
