//! Whether a Docker sandbox gets the egress socket bind-mounted: the
//! engine must see this host's folders, which a remote engine cannot.
//! The socket itself knows nothing of Docker (see [`crate::sandbox::egress_socket`]).

use crate::config::{EgressTransport, SandboxConfig};
use crate::sandbox::egress::Egress;
use crate::sandbox::egress_socket::EgressSocket;
use crate::sandbox::SandboxError;
use std::sync::Arc;

/// The egress socket for a new sandbox, when it will have a supervisor to
/// use it and `sandbox.egress.transport` allows (`unmountable`: the engine
/// already failed to mount one).
pub fn for_new_sandbox(
    config: &SandboxConfig,
    unmountable: bool,
    supervised: bool,
    egress: &Arc<Egress>,
) -> Result<Option<EgressSocket>, SandboxError> {
    let transport = config.egress_transport;
    if !supervised
        || transport == EgressTransport::Exec
        || (transport == EgressTransport::Auto && unmountable)
    {
        return Ok(None);
    }
    match EgressSocket::open(&config.egress_socket_dir, egress.clone()) {
        Ok(socket) => Ok(Some(socket)),
        Err(err) if transport == EgressTransport::Auto => {
            tracing::warn!(error = %err, dir = %config.egress_socket_dir.display(), "no egress socket for this sandbox; its tunnel uses the exec stream");
            Ok(None)
        }
        Err(err) => Err(SandboxError::Refused {
            engine: super::ENGINE,
            action: format!(
                "open an egress socket in {} (sandbox.egress.transport: socket)",
                config.egress_socket_dir.display()
            ),
            retryable: false,
            detail: err.to_string(),
        }),
    }
}

/// The engine's answer to a bind mount whose folder it cannot see (it is
/// on another host).
pub fn is_bind_source_missing(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError { status_code: 400, message }
            if message.contains("bind source path does not exist")
    )
}
