//! Which daemon owns what. One daemon at a time may use a state folder (its
//! journal, workspaces and snapshots): it holds an exclusive lock on
//! `<state_dir>/daemon.lock` for as long as it runs, released by the kernel
//! however it ends. Each state folder also has an id of its own, made once
//! and kept in `<state_dir>/daemon-id`: it labels every sandbox the daemon
//! makes, so a daemon never reaps another's sandboxes on a shared engine,
//! and it is the default `daemon.instance_id`, so two daemons are distinct
//! without anyone choosing names.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = "daemon.lock";
const ID_FILE: &str = "daemon-id";

#[derive(Debug, thiserror::Error)]
pub enum OwnershipError {
    #[error("another forgehand daemon{holder} is using the state folder {dir}: stop it, or give this one its own daemon.state_dir")]
    StateDirInUse { dir: PathBuf, holder: String },
    #[error("cannot use the state folder {path}: {detail}")]
    Io { path: PathBuf, detail: String },
}

/// The state folder held by this process, and its id.
#[derive(Debug)]
pub struct StateOwner {
    daemon_id: String,
    /// Kept open: the lock lives as long as the file.
    _lock: std::fs::File,
}

impl StateOwner {
    /// Locks `dir` for this process (creating it), then reads or makes its id.
    pub fn acquire(dir: &Path) -> Result<StateOwner, OwnershipError> {
        let io = |path: &Path, e: std::io::Error| OwnershipError::Io {
            path: path.to_owned(),
            detail: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let path = dir.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(OwnershipError::StateDirInUse {
                    dir: dir.to_owned(),
                    holder: if pid.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {pid})")
                    },
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(&path, e)),
        }
        // Whose lock it is, for the message a second daemon gets.
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .map_err(|e| io(&path, e))?;
        let daemon_id = read_or_make_id(&dir.join(ID_FILE)).map_err(|e| io(&dir.join(ID_FILE), e))?;
        Ok(StateOwner {
            daemon_id,
            _lock: file,
        })
    }

    /// This state folder's id: `fh-` and 10 hex digits.
    pub fn daemon_id(&self) -> &str {
        &self.daemon_id
    }

    /// `daemon.instance_id` as configured, or this folder's id when empty.
    pub fn instance_id(&self, configured: &str) -> String {
        if configured.is_empty() {
            self.daemon_id.clone()
        } else {
            configured.to_owned()
        }
    }
}

fn read_or_make_id(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) if is_id(text.trim()) => return Ok(text.trim().to_owned()),
        Ok(_) => {
            tracing::warn!(path = %path.display(), "the daemon id file holds no valid id; making a new one")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let id = new_id();
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, format!("{id}\n"))?;
    std::fs::rename(&temporary, path)?;
    Ok(id)
}

fn is_id(text: &str) -> bool {
    text.strip_prefix("fh-")
        .is_some_and(|hex| hex.len() == 10 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Unique enough among the daemons of one engine: the time, the process
/// and the folder, hashed.
fn new_id() -> String {
    use sha2::Digest;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut hash = sha2::Sha256::new();
    hash.update(nanos.to_le_bytes());
    hash.update(std::process::id().to_le_bytes());
    if let Ok(here) = std::env::current_dir() {
        hash.update(here.as_os_str().as_encoded_bytes());
    }
    let digest = hash.finalize();
    let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    format!("fh-{hex}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn one_owner_at_a_time_and_the_id_outlives_it() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let first = StateOwner::acquire(&state).unwrap();
        assert!(is_id(first.daemon_id()), "{}", first.daemon_id());
        let err = StateOwner::acquire(&state).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(&format!("pid {}", std::process::id())) && message.contains("daemon.state_dir"),
            "{message}"
        );
        let id = first.daemon_id().to_owned();
        drop(first);
        let again = StateOwner::acquire(&state).unwrap();
        assert_eq!(again.daemon_id(), id);
        assert_eq!(again.instance_id(""), id);
        assert_eq!(again.instance_id("prod"), "prod");
    }

    #[test]
    fn another_folder_is_another_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let a = StateOwner::acquire(&dir.path().join("a")).unwrap();
        let b = StateOwner::acquire(&dir.path().join("b")).unwrap();
        assert_ne!(a.daemon_id(), b.daemon_id());
    }
}
