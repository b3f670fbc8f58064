//! Git LFS on the host. The sandbox never talks to an LFS server and never
//! holds the forge credential: the host fetches LFS objects into the work
//! tree before it is copied in ([`checkout`]), and on delivery turns the
//! LFS files of the task's commits back into pointers and uploads their
//! objects before the push ([`commit`], [`upload`]). The batch API speaks
//! only to the forge's host or hosts the operator allowed ([`remote`]).

pub mod attributes;
pub mod batch;
pub mod checkout;
pub mod commit;
pub mod pointer;
pub mod remote;
pub mod upload;

use std::path::PathBuf;

pub use attributes::LfsPaths;
pub use pointer::Pointer;
pub use remote::Access;

#[derive(Debug, thiserror::Error)]
pub enum LfsError {
    #[error("the LFS endpoint cannot be used: {detail}")]
    Endpoint { detail: String },
    #[error("{why}")]
    NotAllowed { why: String },
    #[error("cannot reach the LFS server at {url}: {detail}")]
    Network { url: String, detail: String },
    #[error("the LFS server at {url} answered {status}: {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    #[error("the LFS server's answer is not what the batch API specifies: {detail}")]
    Protocol { detail: String },
    #[error("the LFS server refused object {oid}: {code} {message}")]
    Object { oid: String, code: u16, message: String },
    #[error("the LFS object {oid} that arrived does not have the pointer's size and sha256")]
    Corrupt { oid: String },
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("git failed to {action}: {source}")]
    Git {
        action: &'static str,
        #[source]
        source: git2::Error,
    },
}

impl LfsError {
    /// Whether the same transfer may succeed later without a change.
    pub fn is_retryable(&self) -> bool {
        match self {
            LfsError::Network { .. } => true,
            LfsError::Refused { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

pub(crate) fn git(action: &'static str) -> impl Fn(git2::Error) -> LfsError {
    move |source| LfsError::Git { action, source }
}

/// Runs `future` to its end from a blocking thread (the git work runs on
/// tokio's blocking threads; outside a runtime, on one of its own).
pub(crate) fn block_on<T>(
    future: impl std::future::Future<Output = Result<T, LfsError>>,
) -> Result<T, LfsError> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.block_on(future),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| LfsError::Io {
                path: PathBuf::from("(a runtime for LFS transfers)"),
                source,
            })?
            .block_on(future),
    }
}
