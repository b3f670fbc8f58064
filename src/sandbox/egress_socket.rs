//! The egress tunnel's short way in, for an engine on this host: a Unix
//! socket that forgehand listens on, in a folder of its own per sandbox,
//! bind-mounted read-only into the sandbox. The in-sandbox proxy connects
//! there instead of opening a stream over the exec session, which the
//! engine copies through two more processes (about a quarter of loopback
//! speed). Every connection gets the same [`Egress`] checks either way;
//! the sandbox still has no network interface but loopback.

use super::egress::Egress;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the socket's folder is mounted in the sandbox.
pub const SANDBOX_DIR: &str = "/run/forgehand-egress";
const SOCKET_NAME: &str = "egress.sock";
/// A Unix socket's path must fit in `sun_path` (108 bytes with its NUL).
const MAX_PATH: usize = 100;

/// The listening socket of one sandbox; closed and removed when dropped.
pub struct EgressSocket {
    dir: PathBuf,
    _accepting: tokio_util::task::AbortOnDropHandle<()>,
}

impl EgressSocket {
    /// Listens in a new folder under `parent`; every connection is handed
    /// to `egress`.
    pub fn open(parent: &Path, egress: Arc<Egress>) -> std::io::Result<EgressSocket> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(parent)?;
        // No other user on the host gets to the sockets: the engine mounts
        // a sandbox's own folder as root, whatever the parent allows.
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700))?;
        let dir = parent.join(unique_name());
        let path = dir.join(SOCKET_NAME);
        if path.as_os_str().len() > MAX_PATH {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} is longer than a Unix socket's path may be; choose a shorter daemon.state_dir",
                    path.display()
                ),
            ));
        }
        std::fs::create_dir(&dir)?;
        let opened = (|| {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
            let listener = tokio::net::UnixListener::bind(&path)?;
            // The sandbox's user is not forgehand's: anyone who can see the
            // socket may connect, and only that sandbox can see it.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
            Ok::<_, std::io::Error>(listener)
        })();
        let listener = match opened {
            Ok(listener) => listener,
            Err(err) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(err);
            }
        };
        let accepting = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((connection, _)) => {
                        let _ = rustix::net::sockopt::set_socket_send_buffer_size(
                            &connection,
                            forgehand_editor::supervisor::SOCKET_SEND_BUFFER,
                        );
                        let egress = egress.clone();
                        tokio::spawn(async move { egress.handle(connection).await });
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "the egress socket stopped accepting");
                        return;
                    }
                }
            }
        });
        Ok(EgressSocket {
            dir,
            _accepting: tokio_util::task::AbortOnDropHandle::new(accepting),
        })
    }

    /// The host folder to mount at [`SANDBOX_DIR`].
    pub fn host_dir(&self) -> &Path {
        &self.dir
    }

    /// The socket's path inside the sandbox.
    pub fn sandbox_path() -> String {
        format!("{SANDBOX_DIR}/{SOCKET_NAME}")
    }
}

impl Drop for EgressSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Short (the path limit) and never reused within this host's uptime.
fn unique_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "{:x}-{:x}",
        nanos ^ u64::from(std::process::id()) << 40,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn connections_are_checked_by_the_egress_and_the_folder_goes_with_the_socket() {
        let parent = tempfile::tempdir().unwrap();
        let egress = Egress::new(crate::sandbox::egress::Reach::default(), Default::default());
        egress.set_phase("setup", vec![]);
        let socket = EgressSocket::open(parent.path(), egress.clone()).unwrap();
        let dir = socket.host_dir().to_owned();
        use std::os::unix::fs::PermissionsExt;
        let parent_mode = std::fs::metadata(parent.path()).unwrap().permissions().mode();
        assert_eq!(parent_mode & 0o777, 0o700);
        let mut client = tokio::net::UnixStream::connect(dir.join(SOCKET_NAME))
            .await
            .unwrap();
        client
            .write_all(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert_eq!(egress.decisions().len(), 1);
        drop(socket);
        assert!(!dir.exists());
    }

    #[test]
    fn a_path_too_long_for_a_socket_is_refused_with_what_to_do() {
        let parent = tempfile::tempdir().unwrap();
        let deep = parent.path().join("d".repeat(120));
        let err = match EgressSocket::open(
            &deep,
            Egress::new(crate::sandbox::egress::Reach::default(), Default::default()),
        ) {
            Err(err) => err,
            Ok(_) => panic!("a socket path over the limit was accepted"),
        };
        assert!(err.to_string().contains("daemon.state_dir"), "{err}");
    }
}
