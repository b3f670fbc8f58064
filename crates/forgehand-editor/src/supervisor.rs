//! The in-sandbox supervisor: `forgehand-editor supervise` runs as one
//! long-lived process whose stdin/stdout (the engine's exec stream) carry a
//! yamux session. forgehand opens a stream per command (no new `docker
//! exec`, so a round trip costs about a millisecond), and the supervisor
//! opens a stream per connection to its HTTP proxy port on the sandbox's
//! loopback: the egress tunnel, whose every decision forgehand makes on the
//! host. Nothing but yamux frames goes to stdout.
//!
//! A command stream: forgehand writes one [`Request`] (a u32 length, then
//! JSON); the supervisor answers with frames (`kind` byte, u32 length,
//! payload): [`STDOUT`], [`STDERR`], then one [`EXIT`] with an [`Exit`].

use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const EXIT: u8 = 3;
/// Longest request forgehand sends (a command line).
pub const MAX_REQUEST: usize = 1 << 20;
/// Bytes read from a command's pipe at a time.
const CHUNK: usize = 64 << 10;

/// What forgehand asks on a command stream.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// `sh -c command` in the project folder, in its own process group:
    /// SIGTERM to the group at `timeout_secs`, SIGKILL `kill_after_secs` later.
    /// With `stdin`, what forgehand writes on the stream after the request
    /// is the command's input, until it closes its side.
    Run {
        command: String,
        timeout_secs: u64,
        kill_after_secs: u64,
        #[serde(default)]
        stdin: bool,
    },
}

/// How a command ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Exit {
    /// `None`: ended by a signal.
    pub code: Option<i32>,
    pub timed_out: bool,
}

/// How far a stream's receive window may grow. yamux starts every stream
/// at 256 KiB; with one round trip per window over the exec stream that
/// caps a download near 90 MB/s. 4 MiB lets a download run at several
/// hundred MB/s while bounding what one stream can hold unread.
pub const STREAM_WINDOW: u32 = 4 << 20;

/// Each direction of a tunnelled connection is copied through a buffer of
/// this size at both ends: with tokio's default 8 KiB, every 8 KiB costs a
/// syscall and a yamux frame.
pub const TUNNEL_BUFFER: usize = 256 << 10;

/// The send buffer asked for on each end of the egress socket (the kernel
/// caps it at `net.core.wmem_max`): a Unix socket's default, about 200 KiB,
/// wakes the reader every few dozen KiB of a download.
pub const SOCKET_SEND_BUFFER: usize = 4 << 20;

/// yamux settings both ends use: no keepalive pings (the exec stream is
/// local and a stalled sandbox is found by the command timeouts), and
/// windows that grow to [`STREAM_WINDOW`].
pub fn yamux_config() -> tokio_yamux::Config {
    tokio_yamux::Config {
        enable_keepalive: false,
        max_stream_window_size: STREAM_WINDOW,
        ..tokio_yamux::Config::default()
    }
}

pub async fn write_request<W: AsyncWrite + Unpin>(out: &mut W, request: &Request) -> std::io::Result<()> {
    let body = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    out.write_u32(body.len() as u32).await?;
    out.write_all(&body).await?;
    out.flush().await
}

pub async fn read_request<R: AsyncRead + Unpin>(input: &mut R) -> std::io::Result<Request> {
    let len = input.read_u32().await? as usize;
    if len > MAX_REQUEST {
        return Err(std::io::Error::other(format!(
            "a request of {len} bytes is too long"
        )));
    }
    let mut body = vec![0; len];
    input.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(std::io::Error::other)
}

pub async fn write_frame<W: AsyncWrite + Unpin>(
    out: &mut W,
    kind: u8,
    payload: &[u8],
) -> std::io::Result<()> {
    out.write_u8(kind).await?;
    out.write_u32(payload.len() as u32).await?;
    out.write_all(payload).await?;
    out.flush().await
}

/// The next frame, or `None` at the end of the stream.
pub async fn read_frame<R: AsyncRead + Unpin>(input: &mut R) -> std::io::Result<Option<(u8, Vec<u8>)>> {
    let kind = match input.read_u8().await {
        Ok(kind) => kind,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = input.read_u32().await? as usize;
    if len > 16 << 20 {
        return Err(std::io::Error::other(format!(
            "a frame of {len} bytes is too long"
        )));
    }
    let mut payload = vec![0; len];
    input.read_exact(&mut payload).await?;
    Ok(Some((kind, payload)))
}

/// The in-sandbox end of the egress tunnel.
#[derive(Debug, Clone)]
pub struct Proxy {
    /// The loopback address whose connections are tunnelled out.
    pub listen: std::net::SocketAddr,
    /// forgehand's socket for them, when it mounted one; without it (or
    /// when it refuses) each connection is a stream of the session.
    pub socket: Option<std::path::PathBuf>,
}

/// Serves the yamux session on stdin/stdout until forgehand closes it.
pub async fn serve(project_dir: std::path::PathBuf, proxy: Option<Proxy>) -> Result<(), String> {
    use futures_util::StreamExt;
    // The engine hands its exec's stdio over as pipes: drive them directly
    // on the runtime rather than through tokio's blocking stdio threads.
    let io: Box<dyn Io> = match stdio_pipes() {
        Ok((input, output)) => Box::new(tokio::io::join(input, output)),
        Err(_) => Box::new(tokio::io::join(tokio::io::stdin(), tokio::io::stdout())),
    };
    let mut session = tokio_yamux::Session::new_server(io, yamux_config());
    if let Some(proxy) = proxy {
        let addr = proxy.listen;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen on {addr} for the egress proxy: {e}"))?;
        let control = session.control();
        let socket = proxy.socket.map(std::sync::Arc::new);
        tokio::spawn(async move {
            while let Ok((local, _)) = listener.accept().await {
                // Bytes go on as they come: with Nagle's algorithm a small
                // write after another (a TLS record the relay wrote apart)
                // waits for the client's delayed acknowledgement, 40 ms.
                let _ = local.set_nodelay(true);
                let (control, socket) = (control.clone(), socket.clone());
                tokio::spawn(tunnel(local, control, socket));
            }
        });
    }
    while let Some(stream) = session.next().await {
        match stream {
            Ok(stream) => {
                let dir = project_dir.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_command(stream, &dir).await {
                        tracing::debug!("a command stream ended early: {e}");
                    }
                });
            }
            Err(e) => return Err(format!("the session to forgehand failed: {e}")),
        }
    }
    Ok(())
}

/// Carries one proxy connection to forgehand: over its socket when there
/// is one, else as a new stream of the session.
async fn tunnel(
    local: tokio::net::TcpStream,
    mut control: tokio_yamux::Control,
    socket: Option<std::sync::Arc<std::path::PathBuf>>,
) {
    if let Some(path) = socket {
        match tokio::net::UnixStream::connect(path.as_ref()).await {
            Ok(remote) => {
                let _ = rustix::net::sockopt::set_socket_send_buffer_size(&remote, SOCKET_SEND_BUFFER);
                return relay(local, remote).await;
            }
            Err(e) => tracing::warn!(
                "the egress socket {} refused ({e}); using the session",
                path.display()
            ),
        }
    }
    match control.open_stream().await {
        Ok(remote) => relay(local, remote).await,
        Err(e) => tracing::warn!("cannot open a tunnel to forgehand: {e}"),
    }
}

async fn relay(mut local: tokio::net::TcpStream, mut remote: impl AsyncRead + AsyncWrite + Unpin) {
    let _ =
        tokio::io::copy_bidirectional_with_sizes(&mut local, &mut remote, TUNNEL_BUFFER, TUNNEL_BUFFER).await;
}

/// A byte stream both ways.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// stdin and stdout as non-blocking pipes, when they are pipes.
fn stdio_pipes() -> std::io::Result<(tokio::net::unix::pipe::Receiver, tokio::net::unix::pipe::Sender)> {
    use std::os::fd::AsFd;
    let input = std::io::stdin().as_fd().try_clone_to_owned()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned()?;
    Ok((
        tokio::net::unix::pipe::Receiver::from_owned_fd(input)?,
        tokio::net::unix::pipe::Sender::from_owned_fd(output)?,
    ))
}

async fn serve_command<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut stream: S,
    dir: &std::path::Path,
) -> std::io::Result<()> {
    let Request::Run {
        command,
        timeout_secs,
        kill_after_secs,
        stdin,
    } = read_request(&mut stream).await?;
    // The stream is read for as long as the command runs: yamux delivers
    // the peer's window updates to a writer only through its reads, so a
    // stream that is only written to stalls after one window.
    let (mut incoming, mut stream) = tokio::io::split(stream);
    // Until the project is copied in, its folder may not exist yet: a
    // command (the `mkdir` that makes it among them) runs in the nearest
    // folder above it that does.
    let cwd = dir
        .ancestors()
        .find(|d| d.is_dir())
        .unwrap_or(std::path::Path::new("/"));
    let spawned = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .current_dir(cwd)
        .stdin(if stdin {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            write_frame(&mut stream, STDERR, format!("cannot start sh: {e}\n").as_bytes()).await?;
            let exit = Exit {
                code: Some(127),
                timed_out: false,
            };
            write_frame(
                &mut stream,
                EXIT,
                &serde_json::to_vec(&exit).map_err(std::io::Error::other)?,
            )
            .await?;
            return stream.shutdown().await;
        }
    };
    // What forgehand sends goes to the command's input (closed at its
    // end), or nowhere.
    let input = child.stdin.take();
    let feed = tokio::spawn(async move {
        match input {
            Some(mut input) => {
                let _ = tokio::io::copy(&mut incoming, &mut input).await;
            }
            None => {
                let _ = tokio::io::copy(&mut incoming, &mut tokio::io::sink()).await;
            }
        }
    });
    let _feed = AbortOnDrop(feed);
    let group = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32));
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let (mut out_buf, mut err_buf) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let deadline = tokio::time::sleep(Duration::from_secs(timeout_secs.max(1)));
    tokio::pin!(deadline);
    let mut timed_out = false;
    let mut kill_at: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    let mut status = None;
    // Output is forwarded as it comes; yamux's window holds a command back
    // when forgehand reads slowly, so nothing piles up here.
    loop {
        if out.is_none() && err.is_none() && status.is_some() {
            break;
        }
        tokio::select! {
            read = read_pipe(&mut out, &mut out_buf), if out.is_some() => {
                match read {
                    Ok(0) | Err(_) => out = None,
                    Ok(n) => write_frame(&mut stream, STDOUT, &out_buf[..n]).await?,
                }
            }
            read = read_pipe(&mut err, &mut err_buf), if err.is_some() => {
                match read {
                    Ok(0) | Err(_) => err = None,
                    Ok(n) => write_frame(&mut stream, STDERR, &err_buf[..n]).await?,
                }
            }
            waited = child.wait(), if status.is_none() => {
                status = Some(waited?);
                // Stray children may hold the pipes open: give them a moment.
                if out.is_some() || err.is_some() {
                    kill_at.get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(500))));
                }
            }
            () = &mut deadline, if !timed_out => {
                timed_out = true;
                signal(group, rustix::process::Signal::TERM);
                kill_at = Some(Box::pin(tokio::time::sleep(Duration::from_secs(kill_after_secs))));
            }
            () = sleep_until(&mut kill_at), if kill_at.is_some() => {
                kill_at = None;
                signal(group, rustix::process::Signal::KILL);
                if status.is_some() {
                    out = None;
                    err = None;
                }
            }
        }
    }
    let code = status.and_then(|s| s.code());
    let exit = Exit { code, timed_out };
    write_frame(
        &mut stream,
        EXIT,
        &serde_json::to_vec(&exit).map_err(std::io::Error::other)?,
    )
    .await?;
    stream.shutdown().await
}

async fn read_pipe<R: AsyncRead + Unpin>(pipe: &mut Option<R>, buf: &mut [u8]) -> std::io::Result<usize> {
    match pipe {
        Some(pipe) => pipe.read(buf).await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(timer: &mut Option<std::pin::Pin<Box<tokio::time::Sleep>>>) {
    match timer {
        Some(timer) => timer.await,
        None => std::future::pending().await,
    }
}

/// Stops a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn signal(group: Option<rustix::process::Pid>, sig: rustix::process::Signal) {
    if let Some(group) = group {
        let _ = rustix::process::kill_process_group(group, sig);
    }
}
